"""Declarator and definition helpers for rendering: what a declarator declares (value, pointer,
reference, array) and its array sizes, and the function and parameters of a definition (the name
a declarator declares is `cuda_syntax.declared_name`)."""

from __future__ import annotations

from tree_sitter import Node

from mlxport.cuda_syntax import function_name, text


def is_pointer_type(td: Node) -> bool:
    """Whether a type descriptor (`float*` in a cast) is a pointer type."""
    return any(c.type == "abstract_pointer_declarator" for c in td.children)


def is_reference_type(td: Node) -> bool:
    """Whether a type descriptor (`float4&` in a cast) is an lvalue reference type."""
    return any(
        c.type == "abstract_reference_declarator" and text(c).strip() == "&" for c in td.children
    )


def declarator_kind(d: Node | None) -> str:
    """ "pointer", "reference", "array" or "value"."""
    cur = d
    for _ in range(32):
        if cur is None:
            return "value"
        t = cur.type
        if t == "init_declarator":
            cur = cur.child_by_field_name("declarator")
        elif t in ("pointer_declarator", "abstract_pointer_declarator"):
            return "pointer"
        elif t in ("reference_declarator", "abstract_reference_declarator"):
            return "reference"
        elif t == "array_declarator":
            return "array"
        else:
            return "value"
    return "value"


def array_size_nodes(d: Node) -> list[Node]:
    """The size expressions of an array declarator, outermost first."""
    dims = []
    cur = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
    while cur is not None and cur.type == "array_declarator":
        size = cur.child_by_field_name("size")
        if size is not None:
            dims.insert(0, size)
        cur = cur.child_by_field_name("declarator")
    return dims


def function_node(d: Node) -> Node | None:
    """The function_definition of a definition, possibly inside template declarations."""
    if d.type == "function_definition":
        return d
    for c in d.named_children:
        if c.type == "function_definition":
            return c
        if c.type == "template_declaration":
            return function_node(c)
    return None


def param_nodes(d: Node) -> list[Node]:
    """The parameter declarations of a (template) function definition."""
    fn = function_node(d)
    if fn is None:
        return []
    _, decl = function_name(fn)
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    return (
        [
            p
            for p in plist.named_children
            if p.type in ("parameter_declaration", "optional_parameter_declaration")
        ]
        if plist is not None
        else []
    )
