"""A helper's ``__shared__`` array hoisted into the kernel (threadgroup memory is declared in kernel
scope): its type and size as the kernel's call instantiates the helper, through the helpers the
call goes through (`block<Add>` calls `_block<float, warp_bound, Add>`, whose buffer has
``sizeof...(Ops)`` rows)."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import (
    ancestors,
    declared_name,
    line,
    text,
    walk,
)
from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.reading.names import TYPE_MAP
from mlxport.translate.render.base import FnCtx, call_args, declared_type
from mlxport.translate.render.msl_helpers import args_toward, bind_template, params_of, substituted
from mlxport.translate.render.msl_render import MslRender

_PACK_SIZE = re.compile(r"sizeof\s*\.\.\.\s*\(\s*(\w+)\s*\)")


def hoisted_decl(job: KernelJob, r: MslRender, owner: str, var: str, decl: Node, call: Node) -> str:
    """The kernel-scope declaration of a helper's __shared__ array, sized by the kernel's call."""
    ctx = FnCtx("helper", name=owner)
    ty = r.render(decl.child_by_field_name("type"), ctx)
    tparams = params_of(job.src, decl)
    subst, packs = bind_template(tparams, args_toward(r, call, owner) or [])
    deduced = _deduced(job, owner, call) | {
        t.name: TYPE_MAP.get(v, v)
        for t in tparams
        if t.kind == "typename" and (v := re.sub(r"^\((\w+)\)$", r"\1", subst.get(t.name, "")))
    }
    ty = deduced.get(ty.strip(), ty)  # `static __shared__ T shared[32]` where the call makes T
    d = next(x for x in decl.children_by_field_name("declarator") if declared_name(x) == var)
    dims = []
    x = d
    while x is not None and x.type == "array_declarator":
        size = x.child_by_field_name("size")
        # extern __shared__ T buf[]: as many elements as the launch's dynamic bytes hold
        dims.insert(0, r.render(size, ctx) if size is not None else r.facts.dynamic.get(var, ""))
        x = x.child_by_field_name("declarator")
    dims = [_expand(dim, _local_constants(r, decl, ctx)) for dim in dims]
    subst = deduced | subst
    out_dims = []
    for dim in dims:
        dim = _PACK_SIZE.sub(lambda m: str(packs.get(m.group(1), m.group())), dim)
        for k in (t.name for t in tparams):
            if re.search(rf"\b{k}\b", dim) and k not in subst:
                raise Untranslatable(
                    f"__shared__ {var} in {owner}()",
                    line(decl),
                    f"its size uses template parameter {k} that the kernel's call does not set",
                )
        out_dims.append(substituted(dim, subst))
    job.notes.append(
        f"__shared__ {var} of {owner}() hoisted into the kernel (threadgroup memory is declared in "
        "kernel scope) and passed to it"
    )
    return f"threadgroup {ty} {owner}_{var}{''.join(f'[{x}]' for x in out_dims)};"


def _local_constants(r: MslRender, decl: Node, ctx: FnCtx) -> dict[str, str]:
    """The helper's constants declared before ``decl`` (``constexpr int NUM_WARPS = BLOCK / 32;``),
    rendered: a hoisted array sized by one is sized by its value in the kernel."""
    body = next((a for a in ancestors(decl) if a.type == "function_definition"), None)
    out: dict[str, str] = {}
    for n in walk(body) if body is not None else []:
        if n.type != "declaration" or n.start_byte >= decl.start_byte:
            continue
        if not {"const", "constexpr"} & {text(c) for c in n.children if c.type == "type_qualifier"}:
            continue
        for d in n.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            if value is not None and value.type not in ("initializer_list", "argument_list"):
                out[declared_name(d)] = r.render(value, ctx)
    return out


def _expand(dim: str, constants: dict[str, str]) -> str:
    """``dim`` with each constant replaced by its value, through constants defined by others."""
    for _ in range(len(constants) + 1):
        expanded = re.sub(
            r"\b\w+\b",
            lambda m: f"({constants[m.group()]})" if m.group() in constants else m.group(),
            dim,
        )
        if expanded == dim:
            break
        dim = expanded
    return dim


def _deduced(job: KernelJob, owner: str, call: Node) -> dict[str, str]:
    """The helper's template types the call sets: explicit (`f<float>(x)`), or deduced from an
    argument a `T` parameter takes whose declared type the kernel states (`float v; f(v)`)."""
    helper = next((d for d in job.cf.device_functions if d.name == owner), None)
    if helper is None:
        return {}
    tparams = [t.name for t in helper.template_params if t.kind == "typename"]
    fn = call.child_by_field_name("function")
    targs = fn.child_by_field_name("arguments") if fn.type == "template_function" else None
    out = dict(zip(tparams, [text(a) for a in targs.named_children], strict=False)) if targs else {}
    for p, a in zip(helper.params, call_args(call), strict=False):
        base = re.sub(r"\bconst\b|&", "", p.base_type).strip()
        if base in tparams and base not in out and (t := declared_type(a)) is not None:
            out[base] = re.sub(r"\bconst\b", "", t).strip()
    return {k: TYPE_MAP.get(v, v) for k, v in out.items()}
