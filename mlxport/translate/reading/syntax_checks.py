"""Parse errors that make a file's structure unusable (raised as CudaReadError), and the local
ones inside function bodies (kept as warnings)."""

from __future__ import annotations

from tree_sitter import Node, Tree

from mlxport.cuda_syntax import (
    ancestors,
    collapse_spaces,
    current_source,
    line,
    source_function_name,
    source_text,
)
from mlxport.translate.reading.cudafile import CudaReadError
from mlxport.translate.reading.parsing import timed_walk


def check_function(fn: Node, name: str, kind: str, file: str) -> list[str]:
    """Raise for a broken signature or unclosed body; return warnings for local body errors."""
    _, decl = source_function_name(fn)
    label = f"{'kernel' if kind == 'global' else 'device function'} {name or '?'}"
    if decl is None or decl.has_error:
        raise CudaReadError(
            f"{file}: parse error at line {line(decl or fn)}: the signature of {label} does not "
            "parse: fix the parameter list (or expand the macro it uses)"
        )
    body = fn.child_by_field_name("body")
    last = body.children[-1] if body is not None and body.children else None
    if body is None or last is None or last.type != "}" or last.is_missing:
        raise CudaReadError(
            f"{file}: parse error at line {line(fn)}: the body of {label} is not closed "
            "(the file looks truncated): pass the complete file"
        )
    return _body_warnings(body, label) if body.has_error else []


def _body_warnings(body: Node, label: str) -> list[str]:
    warnings = []
    for node in timed_walk(body):
        if node.is_error or node.is_missing:
            what = (
                f"missing {node.type!r}"
                if node.is_missing
                else f"cannot parse {collapse_spaces(source_text(node))[:40]!r}"
            )
            warnings.append(f"line {line(node)}: {what} in {label} (unexpanded macro?)")
            if len(warnings) >= 3:
                break
    return warnings


def check_stray_globals(root: Node, file: str) -> None:
    """A `__global__` token that is not part of a parsed definition means a kernel was lost."""
    for node in timed_walk(
        root, frozenset({"compound_statement", "preproc_def", "preproc_function_def"})
    ):
        if node.type != "__global__":
            continue
        parent = node.parent
        if parent is not None and parent.type in (
            "function_definition",
            "declaration",
            "template_instantiation",
            "field_declaration",
        ):
            continue
        if any(
            a.type == "ERROR" and a.end_byte >= len(current_source().rstrip())
            for a in ancestors(node)
        ):
            raise CudaReadError(
                f"{file}: parse error at line {line(node)}: the __global__ kernel here is not "
                "closed (the file looks truncated): pass the complete file"
            )
        raise CudaReadError(
            f"{file}: parse error at line {line(node)}: a __global__ kernel here does not parse: "
            "fix the syntax (or define the macros it uses in the file)"
        )


def no_kernel_error(tree: Tree, file: str) -> CudaReadError:
    """The error for a file without kernels, saying whether it looks like CUDA at all."""
    root = tree.root_node
    errors = [n for n in root.children if n.is_error or n.has_error]
    covered = sum(n.end_byte - n.start_byte for n in errors)
    if root.end_byte and covered / root.end_byte > 0.5:
        return CudaReadError(
            f"{file} does not look like CUDA source (parse errors from line {line(errors[0])}) "
            "and has no __global__ kernel: pass a .cu file that defines one"
        )
    return CudaReadError(f"{file} has no __global__ kernel: pass a file that defines one")
