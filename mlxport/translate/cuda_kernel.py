"""The CUDA-body candidate for ``mx.fast.cuda_kernel``: the kernel body as written (only
read-write pointers are split), preceded by aliases and constants, and a header with the file's
device functions, types and CUDA includes."""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

from mlxport.cuda_syntax import text, walk
from mlxport.translate.job import KernelJob
from mlxport.translate.ports import Ports, alias_lines
from mlxport.translate.render_base import FnCtx, KernelFacts, TreeRender, float_limit_guards, splice
from mlxport.translate.scalars import Scalars, prologue_consts

_CUDA_OK_INCLUDES = ("cuda_fp16", "cuda_bf16", "cooperative_groups", "mma.h", "cuda/")


def render_cuda(job: KernelJob, facts: KernelFacts, scalars: Scalars, ports: Ports) -> tuple[str, str]:
    """(header, body)."""
    r = TreeRender(job.src, facts, job.notes)
    body = r.render(job.node.child_by_field_name("body"), FnCtx("kernel", name=job.info.name))
    outer, inner = prologue_consts(job, scalars, cuda=True)
    lines = alias_lines(ports) + outer
    if inner:
        body = "{\n" + "\n".join(inner) + "\n" + body + "\n}"
    header = _header(job)
    if r.reads_back:
        header = r.READ_BACK["cuda"] + header
    job.notes.append("CUDA body: the kernel body runs as written; scalars come from shapes (x_shape) or 0-d "
                     "inputs (name[0]); template arguments are body-local constants")
    return header, "\n".join(lines) + "\n" + body + "\n"


def _header(job: KernelJob) -> str:
    def top(n: Node) -> str:
        t = n.type
        if t == "preproc_include":
            path = text(n.child_by_field_name("path")).strip('<>"')
            return text(n) if path.startswith(_CUDA_OK_INCLUDES) else ""
        if t == "template_instantiation":
            return ""
        if t in ("function_definition", "template_declaration"):
            return _top_function(n, job.node, top)
        if t == "declaration":
            fdecl = next((c for c in walk(n) if c.type == "function_declarator"), None)
            quals = {c.type for c in walk(n)}
            if fdecl is not None and "__device__" not in quals and "__global__" not in quals:
                return ""
            if fdecl is not None and "__global__" in quals:
                return ""
            return text(n)
        if t in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "namespace_definition",
                 "declaration_list", "linkage_specification"):
            return _copy(job.src, n, top)
        return text(n)

    out = _copy(job.src, job.root, top)
    out = re.sub(r"\n{3,}", "\n\n", out).strip()
    return float_limit_guards(out + text(job.node)) + out + "\n"


def _top_function(n: Node, kernel: Node, top: Callable[[Node], str]) -> str:
    """A file-scope (template) function: device functions stay, kernels and host code go."""
    fn = n if n.type == "function_definition" else next((c for c in n.named_children
                                                         if c.type == "function_definition"), None)
    if fn is None:
        inner = next((c for c in n.named_children if c.type == "template_declaration"), None)
        return top(inner) if inner is not None else text(n)
    quals = {c.type for c in fn.children}
    if "__global__" in quals or fn.id == kernel.id or "__device__" not in quals:
        return ""
    return text(n)


def _copy(src: bytes, node: Node, top: Callable[[Node], str]) -> str:
    return splice(src, node, top) if node.children else text(node)
