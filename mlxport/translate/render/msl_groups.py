"""Cooperative groups in MSL: a thread block is the threadgroup, a tile of 32 the SIMD-group and a
tile of 4 the quad; group objects vanish, their members become attributes and simd_/quad_
functions, and ``cg::reduce``/``cg::*_scan`` over a tile become SIMD-group reductions and scans."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import line, text, walk
from mlxport.translate.render.base import FnCtx, RenderError, declared_type

BLOCK = 0  # the width recorded for a thread_block
_TILE = re.compile(
    r"(?:(?:cooperative_groups|cg)::)?(?:thread_block_tile|tiled_partition)\s*<\s*(\w+)\s*>"
)
_BLOCK_TYPE = re.compile(r"^(?:const\s+)?(?:(?:cooperative_groups|cg)::)?thread_block\s*&?$")
_GENERIC = re.compile(r"^(?:const\s+)?(?:(?:cooperative_groups|cg)::)?thread_group\s*&?$")
_RUNTIME_TILE = re.compile(r"tiled_partition\s*\(\s*\w+\s*,\s*(\d+)\s*\)")
_PREFIX = {32: "simd", 4: "quad"}
_OPS = {
    "plus": "sum",
    "greater": "max",
    "less": "min",
    "bit_and": "and",
    "bit_or": "or",
    "bit_xor": "xor",
}
_BLOCK_SIZE = "(threads_per_threadgroup.x * threads_per_threadgroup.y * threads_per_threadgroup.z)"


def group_width(type_text: str, value_text: str, anywhere: Node | None = None) -> int | None:
    """BLOCK for a thread block, the tile width for a tile (a number, or a constant of the file
    that ``anywhere`` is in), None for anything else."""
    t = re.sub(r"\s+", " ", type_text).strip()
    generic = t == "auto" or _GENERIC.match(t) is not None
    if _BLOCK_TYPE.match(t) or re.search(r"this_thread_block\s*\(", value_text) and generic:
        return BLOCK
    m = _TILE.search(t) or (_TILE.search(value_text) if generic else None)
    if m is None and generic:
        m = _RUNTIME_TILE.search(value_text)  # cg::tiled_partition(block, 32)
    if m is None:
        return None
    return int(m.group(1)) if m.group(1).isdigit() else _constant(m.group(1), anywhere)


def _constant(name: str, anywhere: Node | None) -> int | None:
    """The number the file's ``constexpr``/``const`` integer ``name`` is declared with, where the
    declarations giving a number agree (DeepSpeed's ``hw_warp_size`` is 32 but for HIP, where
    another constant gives it)."""
    root = anywhere
    while root is not None and root.parent is not None:
        root = root.parent
    found = set()
    for n in walk(root) if root is not None else []:
        if n.type == "init_declarator" and text(n.child_by_field_name("declarator")) == name:
            value = n.child_by_field_name("value")
            if value is not None and value.type == "number_literal" and text(value).isdigit():
                found.add(int(text(value)))
        value = n.child_by_field_name("value") if n.type == "preproc_def" else None
        if (  # #define WARP_SIZE 32
            value is not None
            and text(n.child_by_field_name("name")) == name
            and text(value).strip().isdigit()
        ):
            found.add(int(text(value).strip()))
    return found.pop() if len(found) == 1 else None


# tree-sitter reads `cg::thread_block_tile<32> warp = ...;` as comparisons when it cannot tell the
# template from a value; the statement's text still says what it declares
_MISREAD = re.compile(r"^\s*([\w:]+\s*<\s*\w+\s*>)\s+(\w+)\s*=\s*(.*?);?\s*$", re.S)


def group_declaration(node: Node, ctx: FnCtx) -> str | None:
    """``cg::thread_block b = cg::this_thread_block();`` and tiles: remembered, and dropped."""
    if node.type == "expression_statement":
        m = _MISREAD.match(text(node))
        if m is None or _TILE.search(m.group(1)) is None:
            return None
        width = group_width(m.group(1), m.group(3), node)
        return _remember(node, m.group(2), _known(width, m.group(1), node), ctx)
    type_node = node.child_by_field_name("type")
    decls = node.children_by_field_name("declarator")
    if type_node is None or len(decls) != 1:
        return None
    d = decls[0]
    value = d.child_by_field_name("value") if d.type == "init_declarator" else None
    width = group_width(text(type_node), text(value) if value is not None else "", node)
    width = _known(width, text(type_node), node)
    name = text(d.child_by_field_name("declarator") if d.type == "init_declarator" else d)
    return _remember(node, name, width, ctx)


def _known(width: int | None, type_text: str, node: Node) -> int | None:
    """The width, or a refusal naming it where a tile's width is no number the file gives (a
    template parameter: `thread_block_tile<threadsPerHead>`)."""
    m = _TILE.search(type_text)
    if width is None and m is not None and not m.group(1).isdigit():
        raise RenderError(
            f"cg::thread_block_tile<{m.group(1)}>",
            line(node),
            f"its width {m.group(1)} is no number or constant of the file (Metal groups threads "
            "in SIMD-groups of 32 and quads of 4 only): write the width as 32 or 4",
        )
    return width


def _remember(node: Node, name: str, width: int | None, ctx: FnCtx) -> str | None:
    if width is None:
        return None
    if width not in (BLOCK, 32, 4):
        raise RenderError(
            f"a tile of {width} threads",
            line(node),
            "Metal groups threads in SIMD-groups of 32 and quads of 4 only",
        )
    ctx.groups[name] = width
    what = "the threadgroup" if width == BLOCK else f"{_PREFIX[width]}-group"
    return f"const ushort {name} = {width}; /* {what} */"  # passed to helpers as it is


def group_parameter(p: Node, ctx: FnCtx, passed: int | None = None) -> str | None:
    """A helper's group parameter (`cg::thread_block_tile<32>& warp`, or a `group_t` its calls
    pass a group of width `passed`): remembered, and passed as the number its declaration
    became."""
    d = p.child_by_field_name("declarator")
    while d is not None and d.type in ("reference_declarator", "pointer_declarator"):
        d = next((c for c in d.named_children if c.type == "identifier"), None)
    width = group_width(text(p.child_by_field_name("type")), "", p)
    if width is None and passed is not None and d is not None:
        ctx.groups[text(d)] = passed
        return text(p)  # `group_t group`: the template parameter is deduced as the number
    if width is None or d is None:
        return None
    if width not in (BLOCK, 32, 4):
        raise RenderError(
            f"a tile of {width} threads",
            line(p),
            "Metal groups threads in SIMD-groups of 32 and quads of 4 only",
        )
    ctx.groups[text(d)] = width
    return f"const ushort {text(d)}"


def group_call(r, node: Node, name: str, args: list[Node], ctx: FnCtx) -> str | None:
    """A member of a group object, or cg::reduce / cg::inclusive_scan / cg::exclusive_scan on a
    tile."""
    owner, _, member = name.partition(".")
    if member and owner in ctx.groups:
        return _member(r, node, ctx.groups[owner], member, args, ctx)
    base = name.split("<")[0].split("::")[-1]
    if base == "sync" and len(args) == 1 and text(args[0]) in ctx.groups:  # cg::sync(block)
        return _member(r, node, ctx.groups[text(args[0])], "sync", [], ctx)
    if (
        base in ("reduce", "inclusive_scan", "exclusive_scan")
        and args
        and text(args[0]) in ctx.groups
    ):
        width = ctx.groups[text(args[0])]
        if width == BLOCK:
            raise RenderError(
                f"cg::{base} over a thread block", line(node), "reduce over a tile of 32 instead"
            )
        value = r.render(args[1], ctx)
        if base == "reduce":
            op = next((v for k, v in _OPS.items() if len(args) > 2 and k in text(args[2])), None)
            if op is None and len(args) > 2:
                return _custom_reduce(r, node, args[2], args[1], width, ctx)
            if op is None:
                raise RenderError("cg::reduce without an operation", line(node), "pass one")
            return f"{_PREFIX[width]}_{op}({value})"
        if len(args) > 2 and "plus" not in text(args[2]):
            raise RenderError(
                f"cg::{base} with `{text(args[2])}`", line(node), "only sums have simd_ scans"
            )
        return f"{_PREFIX[width]}_prefix_{base.split('_')[0]}_sum({value})"
    if base in ("this_thread_block", "tiled_partition"):
        raise RenderError(
            f"cg::{base}() outside a declaration", line(node), "declare the group as a variable"
        )
    return None


# a helper reads the thread's place from the built-ins passed to it (attributes are the kernel's)
LINEAR = "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"
HELPER_BLOCK_SIZE = "(blockDim.x * blockDim.y * blockDim.z)"
_IN_HELPER = {
    "thread_rank": LINEAR,
    "size": HELPER_BLOCK_SIZE,
    "num_threads": HELPER_BLOCK_SIZE,
    "group_index": "blockIdx",
    "thread_index": "threadIdx",
    "group_dim": "blockDim",
    "dim_threads": "blockDim",
}


def _member(r, node: Node, width: int, member: str, args: list[Node], ctx: FnCtx) -> str:
    a = [r.render(x, ctx) for x in args]
    if ctx.kind == "helper" and member in ("thread_rank", "meta_group_rank", "meta_group_size"):
        if width == BLOCK:
            return _IN_HELPER[member]
        return {
            "thread_rank": f"({LINEAR} % {width}u)",
            "meta_group_rank": f"({LINEAR} / {width}u)",
            "meta_group_size": f"(({HELPER_BLOCK_SIZE} + {width - 1}u) / {width}u)",
        }[member]
    if ctx.kind == "helper" and width == BLOCK and member in _IN_HELPER:
        return _IN_HELPER[member]
    if width == BLOCK:
        block = {
            "sync": "threadgroup_barrier(mem_flags::mem_threadgroup)",
            "thread_rank": "thread_index_in_threadgroup",
            "size": _BLOCK_SIZE,
            "num_threads": _BLOCK_SIZE,
            "group_index": "threadgroup_position_in_grid",
            "thread_index": "thread_position_in_threadgroup",
            "group_dim": "threads_per_threadgroup",
            "dim_threads": "threads_per_threadgroup",
        }
        if member in block:
            return block[member]
    else:
        p = _PREFIX[width]
        lane = "thread_index_in_simdgroup" if width == 32 else "thread_index_in_quadgroup"
        rank = "simdgroup_index_in_threadgroup" if width == 32 else "quadgroup_index_in_threadgroup"
        count = "simdgroups_per_threadgroup" if width == 32 else "quadgroups_per_threadgroup"
        simple = {
            "thread_rank": lane,
            "size": str(width),
            "num_threads": str(width),
            "meta_group_rank": rank,
            "meta_group_size": count,
            "sync": "simdgroup_barrier(mem_flags::mem_threadgroup)",
        }
        if member in simple:
            return simple[member]
        moves = {
            "shfl": "shuffle",
            "shfl_down": "shuffle_down",
            "shfl_up": "shuffle_up",
            "shfl_xor": "shuffle_xor",
        }
        if member in moves and len(a) == 2:
            return f"{p}_{moves[member]}({a[0]}, ushort({a[1]}))"
        if member in ("any", "all") and len(a) == 1:
            return f"{p}_{member}({a[0]})"
        if member == "ballot" and len(a) == 1:
            return f"((uint)({p}_vote::vote_t){p}_ballot({a[0]}))"
    raise RenderError(f"`{text(node)}`", line(node), f"no Metal form of this group's {member}()")


SHUFFLE_XOR = (
    "#ifndef MLXPORT_SHUFFLE_XOR\n#define MLXPORT_SHUFFLE_XOR\n"
    + "".join(
        f"inline {t} mlxport_shuffle_xor({t} v, ushort m) {{ return simd_shuffle_xor(v, m); }}\n"
        for t in ("float", "half", "bfloat", "int", "uint", "short", "ushort", "char", "uchar")
        + tuple(f"{b}{n}" for b in ("float", "half", "int", "uint") for n in (2, 3, 4))
    )
    + "#endif\n"
)


def _custom_reduce(r, node: Node, op: Node, value: Node, width: int, ctx: FnCtx) -> str:
    """``cg::reduce(tile, v, op)`` with the file's own operation."""
    return f"{butterfly(r, op, value, width, ctx)}({r.render(value, ctx)})"


def butterfly(r, op: Node, value: Node, width: int, ctx: FnCtx) -> str:
    """The name of a reduction with the file's own operation over ``width`` lanes: a butterfly
    of shuffles, each lane combining its value with its partner's (a struct shuffled field by
    field), as a helper defined before the code that first uses it."""
    if op.type == "lambda_expression":
        raise RenderError(
            "a reduction with a lambda", line(op), "name the operation as a __device__ function"
        )
    rendered = r.render(op, ctx)
    stem = re.sub(r"\W+", "_", rendered).strip("_")
    name = f"mlxport_reduce_{stem}_{width}"
    r.generated[name] = (
        SHUFFLE_XOR
        + _struct_shuffle(value)
        + f"#ifndef {name.upper()}\n#define {name.upper()}\n"
        + f"template <typename T> T {name}(T v) {{\n"
        + f"  for (ushort o = {width // 2}; o > 0; o >>= 1)\n"
        + f"    v = {rendered}(v, mlxport_shuffle_xor(v, o));\n"
        + "  return v;\n}\n#endif\n"
    )
    r.emitted.append(name)
    return name


def _struct_shuffle(value: Node) -> str:
    """`mlxport_shuffle_xor` of the struct the reduced variable is, field by field ("" for a
    number)."""
    type_name = declared_type(value)
    fields = _struct_fields(value, type_name) if type_name else None
    if not fields:
        return ""
    body = " ".join(f"v.{f} = mlxport_shuffle_xor(v.{f}, m);" for f in fields)
    guard = f"MLXPORT_SHUFFLE_XOR_{type_name.upper()}"
    return (
        f"#ifndef {guard}\n#define {guard}\n"
        f"inline {type_name} mlxport_shuffle_xor({type_name} v, ushort m) {{ {body} return v; }}\n"
        "#endif\n"
    )


def _struct_fields(anywhere: Node, type_name: str) -> list[str] | None:
    """The fields of the file's struct `type_name`, each an element (`a`, `b[0]`, `b[1]`)."""
    root = anywhere
    while root.parent is not None:
        root = root.parent
    for n in walk(root):
        if n.type != "struct_specifier" or text(n.child_by_field_name("name")) != type_name:
            continue
        body = n.child_by_field_name("body")
        if body is None:
            continue
        out = []
        for f in body.named_children:
            if f.type != "field_declaration":
                continue
            for d in f.children_by_field_name("declarator"):
                if d.type == "field_identifier":
                    out.append(text(d))
                elif d.type == "array_declarator" and (size := d.child_by_field_name("size")):
                    if not text(size).isdigit():
                        return None
                    base = text(d.child_by_field_name("declarator"))
                    out += [f"{base}[{i}]" for i in range(int(text(size)))]
                else:
                    return None
        return out
    return None
