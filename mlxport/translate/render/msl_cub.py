"""cub's BlockReduce and WarpReduce in MSL. A WarpReduce of 32 lanes is a SIMD-group reduction
(``simd_sum``, ``simd_max``, ``simd_min``, or a butterfly of shuffles with the file's own
operation); a BlockReduce reduces each SIMD-group so, stores each group's value in its
TempStorage (threadgroup memory, one value per SIMD-group) and combines those. cub gives the
aggregate to thread 0 only; here every thread has it, which is the same wherever the original
reads it. The aliases (``using BlockReduce = cub::BlockReduce<float, 1024>``) vanish."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from mlxport.cuda_syntax import line, text, walk
from mlxport.translate.render.base import FnCtx, RenderError, call_args
from mlxport.translate.render.msl_groups import HELPER_BLOCK_SIZE, LINEAR, butterfly

_REDUCER = re.compile(r"^(?:typename\s+)?cub::(Block|Warp)Reduce\s*<(.+)>$", re.S)
_STORAGE = re.compile(r"^(?:typename\s+)?(.+?)\s*::\s*TempStorage$", re.S)
_OPS = {"Sum": "sum", "Max": "max", "Min": "min"}
_COMBINE = {"sum": "v + s.part[i]", "max": "max(v, T(s.part[i]))", "min": "min(v, T(s.part[i]))"}
_STORAGE_DEF = (
    "#ifndef MLXPORT_CUB_STORAGE\n#define MLXPORT_CUB_STORAGE\n"
    "template <typename T> struct mlxport_cub_storage { T part[32]; };  // one per SIMD-group\n"
    "#endif\n"
)


@dataclass(frozen=True)
class Reducer:
    kind: str  # Block | Warp
    type: str  # the element type, as written
    width: int  # a WarpReduce's lanes (0 where they are not a number)


def cub_item(r, node: Node, ctx: FnCtx) -> str | None:
    """An alias of a reducer (dropped), or a reducer's TempStorage type; None for anything
    else."""
    t = node.type
    if t == "alias_declaration" and _resolve(r, node, node.child_by_field_name("type")):
        return ""
    if t == "type_definition" and _resolve(r, node, node.child_by_field_name("type")):
        return ""
    if t in ("dependent_type", "qualified_identifier"):
        m = _STORAGE.match(text(node).strip())
        reducer = _reducer_named(r, node, m.group(1)) if m else None
        if reducer is not None:
            r.generated["mlxport_cub_storage"] = _STORAGE_DEF
            r.emitted.append("mlxport_cub_storage")
            return f"mlxport_cub_storage<{r.type_name(reducer.type, node)}>"
    return None


def cub_call(r, node: Node, ctx: FnCtx) -> str | None:
    """``R(temp).Sum(v)`` or ``R(temp).Reduce(v, op)`` for a reducer R; None for any other
    call."""
    fn = node.child_by_field_name("function")
    inner = fn.child_by_field_name("argument") if fn is not None else None
    if fn is None or fn.type != "field_expression" or inner is None:
        return None
    if inner.type != "call_expression":
        return None
    reducer = _resolve(r, node, inner.child_by_field_name("function"))
    if reducer is None:
        return None
    method, args, storage = text(fn.child_by_field_name("field")), call_args(node), call_args(inner)
    what = f"cub::{reducer.kind}Reduce::{method}"
    if (method, len(args)) not in (("Sum", 1), ("Reduce", 2)) or len(storage) != 1:
        raise RenderError(
            f"{what} with {len(args)} arguments",
            line(node),
            "only Sum(value) and Reduce(value, op) over every thread translate",
        )
    if reducer.kind == "Warp" and reducer.width != 32:
        raise RenderError(
            f"cub::WarpReduce over {reducer.width or 'a run-time number of'} lanes",
            line(node),
            "Metal's SIMD-group functions reduce 32 lanes: reduce with shuffles of that width",
        )
    value = r.render(args[0], ctx)
    op = "sum" if method == "Sum" else _named_op(args[1])
    if reducer.kind == "Warp":
        if op is not None:
            return f"simd_{op}({value})"
        return f"{butterfly(r, args[1], args[0], 32, ctx)}({value})"
    name = _block_reduce(r, op, args, ctx)
    return f"{name}({value}, {r.render(storage[0], ctx)}, {_place(ctx)})"


def _named_op(op: Node) -> str | None:
    m = re.fullmatch(r"(?:cub::)?(Sum|Max|Min)\s*(?:<[^>]*>)?\s*\(\s*\)", text(op).strip())
    return _OPS[m.group(1)] if m else None


def _block_reduce(r, op: str | None, args: list[Node], ctx: FnCtx) -> str:
    """The generated function reducing over the threadgroup with ``op`` (a simd_ one's name, or
    None for the file's own operation, ``args[1]``)."""
    if op is not None:
        name, simd, combine = f"mlxport_block_{op}", f"simd_{op}(v)", _COMBINE[op]
    else:
        lanes = butterfly(r, args[1], args[0], 32, ctx)
        rendered = r.render(args[1], ctx)
        name = "mlxport_block_" + lanes[len("mlxport_") :]
        simd, combine = f"{lanes}(v)", f"{rendered}(v, T(s.part[i]))"
    r.generated[name] = (
        f"#ifndef {name.upper()}\n#define {name.upper()}\n"
        f"template <typename T, typename S> T {name}(T v, threadgroup S& s, uint lane, "
        "uint group, uint groups) {\n"
        "  threadgroup_barrier(mem_flags::mem_threadgroup);  // the storage's last use is done\n"
        f"  v = {simd};\n"
        "  if (lane == 0) s.part[group] = v;\n"
        "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "  v = s.part[0];\n"
        f"  for (uint i = 1; i < groups; ++i) v = {combine};\n"
        "  return v;\n}\n#endif\n"
    )
    r.emitted.append(name)
    return name


def _place(ctx: FnCtx) -> str:
    """The thread's lane, its SIMD-group and the SIMD-groups of its threadgroup."""
    if ctx.kind == "kernel":
        return (
            "thread_index_in_simdgroup, simdgroup_index_in_threadgroup, simdgroups_per_threadgroup"
        )
    return f"({LINEAR} & 31u), ({LINEAR} >> 5), (({HELPER_BLOCK_SIZE} + 31u) >> 5)"


def _resolve(r, anywhere: Node, name: Node | None) -> Reducer | None:
    return _reducer_named(r, anywhere, text(name).strip()) if name is not None else None


def _reducer_named(r, anywhere: Node, name: str) -> Reducer | None:
    """The reducer ``name`` is: cub's template itself, or an alias the file declares of it."""
    return _reducer_of(name) or _aliases(r, anywhere).get(name)


def _reducer_of(spec: str) -> Reducer | None:
    m = _REDUCER.match(re.sub(r"\s+", " ", spec).strip())
    if m is None:
        return None
    args = [a.strip() for a in _top_level(m.group(2))]
    width = 32
    if m.group(1) == "Warp" and len(args) > 1:
        width = int(args[1]) if args[1].isdigit() else 0
    return Reducer(m.group(1), args[0], width)


def _top_level(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        depth += (ch in "<(") - (ch in ">)")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def _aliases(r, anywhere: Node) -> dict[str, Reducer]:
    """The file's aliases of reducers (``using R = cub::BlockReduce<float, 256>;``,
    ``typedef``), read once."""
    if r.cub_aliases is None:
        root = anywhere
        while root.parent is not None:
            root = root.parent
        r.cub_aliases = {}
        for n in walk(root):
            field = {"alias_declaration": "name", "type_definition": "declarator"}.get(n.type)
            if field is None or n.child_by_field_name(field) is None:
                continue
            reducer = _reducer_of(text(n.child_by_field_name("type") or n))
            if reducer is not None:
                r.cub_aliases[text(n.child_by_field_name(field))] = reducer
    return r.cub_aliases
