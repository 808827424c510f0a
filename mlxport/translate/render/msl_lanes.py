"""A SIMD-group's value stored by one lane: CUDA code often lets every lane of a warp store a
warp reduction's result (`s[warp_id] = warp_sum;`, "a lane_id == 0 guard is not needed"), so
the lanes write one element with one value. That is a race all the same (a GPU's memory model
promises nothing for it, and the simulator reports it), so the translation lets the first lane
of those storing one element store it, which is what the original leaves in memory."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import ancestors, callee, declared_name, text, walk
from mlxport.translate.host.cexpr import Macros
from mlxport.translate.render.base import FnCtx, call_args
from mlxport.translate.render.msl_spaces import spaces_of
from mlxport.translate.render.msl_warp import full_mask, warp_reduction

# Calls whose result every lane of the warp holds.
_SIMD_UNIFORM = re.compile(
    r"(?:cg|cooperative_groups)::reduce|__reduce_(?:add|min|max|and|or|xor)_sync"
)
_FUNCTIONS = ("function_definition", "lambda_expression")
_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")


def one_lane_store(r, stmt: Node, ctx: FnCtx) -> str | None:
    """`s[i] = v;` into threadgroup memory, outside any branch, where `v` is a SIMD-group
    reduction's result: the first lane storing each element stores it (None where the statement
    is anything else)."""
    e = stmt.named_children[0] if stmt.named_children else None
    if e is None or e.type != "assignment_expression" or text(e.children[1]) != "=":
        return None
    left, value = e.child_by_field_name("left"), e.child_by_field_name("right")
    if left.type != "subscript_expression" or not _simd_value(r, value, stmt):
        return None
    array = left.child_by_field_name("argument")
    indices = left.child_by_field_name("indices")
    if array.type != "identifier" or indices is None or len(indices.named_children) != 1:
        return None
    index = indices.named_children[0]
    if (
        spaces_of(array, ctx) != frozenset({"threadgroup"})
        or any(n.type in ("assignment_expression", "update_expression") for n in walk(index))
        or _branched(stmt)
    ):
        return None
    note = (
        f"line {stmt.start_point[0] + 1}: every lane stores one SIMD-group value to "
        f"{text(array)}[{text(index)}]; the first lane storing each element stores it (lanes "
        "writing one element race, even with one value)"
    )
    if note not in r.notes:
        r.notes.append(note)
    return (
        f"{{ const auto mlxport_value = {r.render(value, ctx)}; "
        f"const int mlxport_at = int({r.render(index, ctx)}); "
        "const int mlxport_first_at = simd_broadcast_first(mlxport_at); "
        "const bool mlxport_first = simd_is_first(); "
        "if (mlxport_first || mlxport_at != mlxport_first_at) "
        f"{r.render(array, ctx)}[mlxport_at] = mlxport_value; }}"
    )


def _simd_value(r, value: Node, stmt: Node) -> bool:
    """Every lane holds the value: a variable a SIMD-group reduction defined, or such a call."""
    if value.type == "identifier":
        return _simd_uniform(r, text(value), stmt)
    return value.type == "call_expression" and _uniform_call(r, callee(value))


def _uniform_call(r, name: str) -> bool:
    return bool(_SIMD_UNIFORM.fullmatch(name)) or _reducing_helper(r, name)


def _branched(stmt: Node) -> bool:
    """The statement runs under a condition within its function."""
    for a in ancestors(stmt):
        if a.type in _FUNCTIONS:
            return False
        if a.type in ("if_statement", "switch_statement"):
            return True
    return True


def _simd_uniform(r, name: str, stmt: Node) -> bool:
    """The value `name` holds at `stmt` is a SIMD-group reduction's: its last definition before
    the statement is one, and no definition after it in a loop around the statement."""
    fn = next((a for a in ancestors(stmt) if a.type in _FUNCTIONS), None)
    if fn is None:
        return False
    defs = [d for d in walk(fn, limit=20000) if _defines(d, name)]
    before = [d for d in defs if d.start_byte < stmt.start_byte]
    loops = [a for a in ancestors(stmt) if a.type in _LOOPS]
    if not before or any(
        d.start_byte > stmt.start_byte and any(_inside(d, lp) for lp in loops) for d in defs
    ):
        return False
    return _reduces(r, before[-1], name)


def _defines(n: Node, name: str) -> bool:
    if n.type == "init_declarator":
        return declared_name(n) == name
    if n.type in ("assignment_expression", "update_expression"):
        target = n.child_by_field_name("left") or n.child_by_field_name("argument")
        return target is not None and text(target) == name
    return False


def _inside(n: Node, outer: Node) -> bool:
    return outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte


def _reduces(r, d: Node, name: str) -> bool:
    """The definition gives every lane one value: a uniform call, a helper that returns a
    butterfly reduction, or the step of a butterfly loop."""
    if d.type == "init_declarator" or (
        d.type == "assignment_expression" and text(d.children[1]) == "="
    ):
        v = d.child_by_field_name("value") or d.child_by_field_name("right")
        if v is not None and v.type == "call_expression":
            return _uniform_call(r, callee(v))
    loop = next((a for a in ancestors(d) if a.type == "for_statement"), None)
    return loop is not None and _xor_butterfly(loop, r.macros, name)


def _xor_butterfly(loop: Node, macros: Macros, name: str | None = None) -> bool:
    """A butterfly over the whole warp (of `name`, where given): every lane ends with the
    result."""
    got = warp_reduction(loop, macros)
    return (
        got is not None
        and (name is None or got[0] == name)
        and callee(got[2]) == "__shfl_xor_sync"
        and full_mask(call_args(got[2])[0], macros)
    )


def _reducing_helper(r, name: str) -> bool:
    """The file's function `name` is `for (...) v = op(v, __shfl_xor_sync(...)); return v;`."""
    for d in r.helpers.nodes.get(name, []):
        body = next((c for c in walk(d) if c.type == "compound_statement"), None)
        items = [c for c in body.named_children if c.type != "comment"] if body else []
        if (
            len(items) == 2
            and items[0].type == "for_statement"
            and items[1].type == "return_statement"
            and _xor_butterfly(items[0], r.macros)
            and re.fullmatch(
                rf"return\s*\(?\s*{warp_reduction(items[0], r.macros)[0]}\s*\)?\s*;",
                text(items[1]),
            )
        ):
            return True
    return False
