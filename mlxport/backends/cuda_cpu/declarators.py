"""Facts about a tree-sitter node of CUDA device code: whether a function is device code, what a
file-scope declaration is, how many pointer levels a declarator has and what is under them."""

from __future__ import annotations

from tree_sitter import Node

from mlxport.cuda_syntax import inner_declarator

DEVICE = ("__device__", "__global__")


def struct_name(spec: Node, template: Node | None = None) -> str | None:
    """A struct or class defined at file or namespace scope (a host context struct, say), by name:
    kept only where the kernel's code names it."""
    outer = (template or spec).parent
    if (
        outer is None
        or spec.child_by_field_name("body") is None
        or (name := spec.child_by_field_name("name")) is None
    ):
        return None
    if outer.type == "declaration_list" and (
        outer.parent is None or outer.parent.type != "namespace_definition"
    ):
        return None
    if outer.type not in ("translation_unit", "declaration_list") or name.type != "type_identifier":
        return None  # a specialization (SharedMemory<double>) goes with its primary template's name
    return name.text.decode()


def helper_name(fn: Node) -> str | None:
    """A device function at file or namespace scope, by its plain name (None for operators, members
    and others the kernel may call without naming them)."""
    outer = (
        fn.parent.parent
        if fn.parent is not None and fn.parent.type == "template_declaration"
        else fn.parent
    )
    if outer is None or outer.type not in ("translation_unit", "declaration_list"):
        return None
    if outer.type == "declaration_list" and (
        outer.parent is None or outer.parent.type != "namespace_definition"
    ):
        return None
    decl = function_declarator(fn)
    name = decl.child_by_field_name("declarator") if decl is not None else None
    if name is None or name.type != "identifier":
        return None
    return name.text.decode()


def is_device(fn: Node) -> bool:
    return any(c.type in DEVICE for c in fn.children)


def is_constexpr(fn: Node) -> bool:
    return any(c.type == "type_qualifier" and c.text == b"constexpr" for c in fn.children) or any(
        c.type == "storage_class_specifier" and c.text == b"constexpr" for c in fn.children
    )


def has_qualifier(node: Node, word: str) -> bool:
    return any(c.text == word.encode() for c in node.children if c.type in ("type_qualifier", word))


def keeps_global(node: Node) -> bool:
    """File-scope declarations device code may use: device variables, constants, prototypes,
    types."""
    words = {
        c.text.decode()
        for c in node.children
        if c.type
        in (
            "type_qualifier",
            "storage_class_specifier",
            "__device__",
            "__constant__",
            "__managed__",
        )
    }
    prototype = any(
        c.type == "function_declarator"
        or (c.type == "pointer_declarator" and function_declarator(c) is not None)
        for c in node.children
    )
    if prototype:  # a device function's prototype; a host function's is host code
        return bool(words & {"__device__", "__global__"}) or any(
            c.type in DEVICE for c in node.children
        )
    if words & {"__device__", "__constant__", "__managed__"}:
        return True
    # a const host global device code may read is a value; a pointer (`const char* name = "x"`,
    # the pointee const) points into host memory, which device code cannot read
    values = [d for d in node.children_by_field_name("declarator") if not _points(d)]
    return bool(words & {"const", "constexpr"}) and bool(values)


def _points(d: Node) -> bool:
    """Whether the declarator declares a pointer (``*p``, ``*p = ...``)."""
    if d.type == "init_declarator":
        d = d.child_by_field_name("declarator")
    return d is not None and d.type == "pointer_declarator"


def function_declarator(node: Node) -> Node | None:
    decl = node.child_by_field_name("declarator") if node.type != "function_declarator" else node
    for _ in range(16):
        if decl is None or decl.type == "function_declarator":
            return decl
        decl = inner_declarator(decl)
    return None


def pointer_depth(d: Node) -> int:
    target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
    return unwrap(target)[0]


def unwrap(d: Node | None) -> tuple[int, bool, Node | None]:
    """(pointer levels, whether the outermost pointer itself is const, the declarator under
    them)."""
    depth, const_ptr = 0, False
    while d is not None and d.type in ("pointer_declarator", "abstract_pointer_declarator"):
        depth += 1
        if depth == 1:
            const_ptr = any(c.type == "type_qualifier" and c.text == b"const" for c in d.children)
        d = d.child_by_field_name("declarator")
    return depth, const_ptr, d


def has_pointer(node: Node) -> bool:
    return any(c.type == "abstract_pointer_declarator" for c in node.children)


def ptr_type(base: str, depth: int) -> str:
    t = base.strip()
    for _ in range(depth):
        t = f"::cusim::ptr<{t}>"
    return t
