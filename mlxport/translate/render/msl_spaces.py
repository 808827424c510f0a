"""Metal address spaces of pointer expressions: where a pointer can point (device, constant,
threadgroup, thread), inferred from the variables it is based on."""

from __future__ import annotations

from tree_sitter import Node

from mlxport.cuda_syntax import callee, text
from mlxport.translate.render.base import FnCtx, call_args


def spaces_of(node: Node | None, ctx: FnCtx) -> frozenset[str] | None:
    """Address spaces a pointer/lvalue expression can point into (None when unknown)."""
    for _ in range(64):
        if node is None:
            return None
        t = node.type
        if t == "identifier":
            return ctx.spaces.get(text(node))
        if t in ("parenthesized_expression", "cast_expression"):
            node = (
                node.child_by_field_name("value")
                if t == "cast_expression"
                else node.named_children[-1]
            )
        elif t == "pointer_expression" or t == "subscript_expression" or t == "field_expression":
            node = node.child_by_field_name("argument")
        elif t == "binary_expression":
            left = spaces_of(node.child_by_field_name("left"), ctx)
            return left if left is not None else spaces_of(node.child_by_field_name("right"), ctx)
        elif t == "conditional_expression":
            a = spaces_of(node.child_by_field_name("consequence"), ctx)
            b = spaces_of(node.child_by_field_name("alternative"), ctx)
            return (a or frozenset()) | (b or frozenset()) or None
        elif t == "call_expression" and callee(node) in (
            "reinterpret_cast",
            "static_cast",
            "const_cast",
            "__ldg",
        ):
            args = call_args(node)
            node = args[0] if args else None
        elif t == "update_expression":
            node = node.child_by_field_name("argument")
        elif t == "assignment_expression":
            node = node.child_by_field_name("left")
        else:
            return None
    return None
