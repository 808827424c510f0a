"""Metal address spaces of pointer expressions: where a pointer can point (device, constant,
threadgroup, thread), inferred from the variables it is based on."""

from __future__ import annotations

from tree_sitter import Node

from mlxport.cuda_syntax import ancestors, callee, declared_name, text
from mlxport.translate.render.base import FnCtx, call_args
from mlxport.translate.render.msl_declarators import declarator_kind


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
        elif t == "pointer_expression" and _own_field(node.child_by_field_name("argument"), ctx):
            return frozenset({"thread"})
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


def _own_field(node: Node | None, ctx: FnCtx) -> bool:
    """`&offset` in a method of the struct that has the field `offset` (no local of that name):
    a member of the object the method is called on, in thread memory as Metal's `this` is."""
    if node is None or node.type != "identifier" or text(node) in ctx.spaces:
        return False
    for a in ancestors(node):
        if a.type in ("struct_specifier", "class_specifier"):
            body = a.child_by_field_name("body")
            return body is not None and any(
                declared_name(d) == text(node)
                for f in body.named_children
                if f.type == "field_declaration"
                for d in f.children_by_field_name("declarator")
            )
    return False


def method_pointer_param(r, p: Node, ctx: FnCtx) -> str | None:
    """A pointer parameter of a struct's method (rendered with its struct, not as a helper with
    address-space variants): in device memory, where the buffers a kernel hands its objects'
    load and store methods are."""
    fn = p.parent.parent if p.parent is not None and p.parent.parent is not None else None
    fn = fn.parent if fn is not None else None
    owner = fn.parent if fn is not None and fn.type == "function_definition" else None
    if owner is not None and owner.type == "template_declaration":
        owner = owner.parent
    d = p.child_by_field_name("declarator")
    if owner is None or owner.type != "field_declaration_list" or declarator_kind(d) != "pointer":
        return None
    ctx.spaces[declared_name(d)] = frozenset({"device"})
    return f"device {r.copy(p, ctx)}"
