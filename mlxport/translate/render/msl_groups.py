"""Cooperative groups in MSL: a thread block is the threadgroup, a tile of 32 the SIMD-group and a
tile of 4 the quad; group objects vanish, their members become attributes and simd_/quad_
functions, and ``cg::reduce``/``cg::*_scan`` over a tile become SIMD-group reductions and scans."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import line, text
from mlxport.translate.render.base import FnCtx, RenderError

BLOCK = 0  # the width recorded for a thread_block
_TILE = re.compile(
    r"(?:(?:cooperative_groups|cg)::)?(?:thread_block_tile|tiled_partition)\s*<\s*(\d+)\s*>"
)
_BLOCK_TYPE = re.compile(r"^(?:const\s+)?(?:(?:cooperative_groups|cg)::)?thread_block$")
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


def group_width(type_text: str, value_text: str) -> int | None:
    """BLOCK for a thread block, the tile width for a tile, None for anything else."""
    t = re.sub(r"\s+", " ", type_text).strip()
    if _BLOCK_TYPE.match(t) or re.search(r"this_thread_block\s*\(", value_text) and t == "auto":
        return BLOCK
    m = _TILE.search(t) or (_TILE.search(value_text) if t == "auto" else None)
    return int(m.group(1)) if m else None


# tree-sitter reads `cg::thread_block_tile<32> warp = ...;` as comparisons when it cannot tell the
# template from a value; the statement's text still says what it declares
_MISREAD = re.compile(r"^\s*([\w:]+\s*<\s*\d+\s*>)\s+(\w+)\s*=\s*(.*?);?\s*$", re.S)


def group_declaration(node: Node, ctx: FnCtx) -> str | None:
    """``cg::thread_block b = cg::this_thread_block();`` and tiles: remembered, and dropped."""
    if node.type == "expression_statement":
        m = _MISREAD.match(text(node))
        if m is None or _TILE.search(m.group(1)) is None:
            return None
        return _remember(node, m.group(2), group_width(m.group(1), m.group(3)), ctx)
    type_node = node.child_by_field_name("type")
    decls = node.children_by_field_name("declarator")
    if type_node is None or len(decls) != 1:
        return None
    d = decls[0]
    value = d.child_by_field_name("value") if d.type == "init_declarator" else None
    width = group_width(text(type_node), text(value) if value is not None else "")
    name = text(d.child_by_field_name("declarator") if d.type == "init_declarator" else d)
    return _remember(node, name, width, ctx)


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
    return f"/* {name}: {'the threadgroup' if width == BLOCK else f'{_PREFIX[width]}-group'} */"


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
            if op is None:
                raise RenderError(
                    f"cg::reduce with `{text(args[2]) if len(args) > 2 else ''}`",
                    line(node),
                    "only cg::plus, less, greater and bit_* operations have simd_ forms",
                )
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


def _member(r, node: Node, width: int, member: str, args: list[Node], ctx: FnCtx) -> str:
    a = [r.render(x, ctx) for x in args]
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
