"""Small tree-sitter helpers shared by the translator modules."""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

_PARSER: Parser | None = None


def parser() -> Parser:
    global _PARSER
    if _PARSER is None:
        _PARSER = Parser(Language(tree_sitter_cuda.language()))
    return _PARSER


def parse(src: bytes) -> Tree:
    return parser().parse(src)


def text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def line(node: Node) -> int:
    return node.start_point[0] + 1


def walk(node: Node, limit: int = 4000) -> Iterator[Node]:
    stack = [(node, 0)]
    while stack:
        cur, depth = stack.pop()
        yield cur
        if depth < limit:
            stack.extend((c, depth + 1) for c in reversed(cur.children))


def parse_expr(src: str) -> Node | None:
    """The expression node of `src` parsed as an initializer (None if it does not parse)."""
    tree = parse(f"auto __mlxport_e = ({src});".encode())
    if tree.root_node.has_error:
        return None
    for n in walk(tree.root_node):
        if n.type == "init_declarator":
            value = n.child_by_field_name("value")
            return value.named_children[0] if value is not None and value.type == "parenthesized_expression" \
                and value.named_children else value
    return None


def callee(call: Node) -> str:
    fn = call.child_by_field_name("function")
    if fn is None:
        return ""
    if fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return text(fn).replace(" ", "")


def function_declarator(fn: Node) -> tuple[Node | None, Node | None]:
    """The name node and function_declarator of a function_definition (or declaration)."""
    decl = fn.child_by_field_name("declarator")
    for _ in range(16):
        if decl is None or decl.type == "function_declarator":
            break
        decl = decl.child_by_field_name("declarator")
    if decl is None:
        return None, None
    name = decl.child_by_field_name("declarator")
    if name is not None and name.type == "template_function":
        name = name.child_by_field_name("name")
    return name, decl


def function_name(fn: Node) -> tuple[str, Node | None]:
    """Name and function_declarator of a function_definition (or declaration)."""
    name, decl = function_declarator(fn)
    return (text(name).replace(" ", ""), decl) if decl is not None else ("", None)


def enclosing(node: Node, types: tuple[str, ...]) -> Node | None:
    cur = node.parent
    while cur is not None:
        if cur.type in types:
            return cur
        cur = cur.parent
    return None
