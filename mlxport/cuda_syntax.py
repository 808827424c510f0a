"""Parsing CUDA with tree-sitter: the parser and small helpers over its nodes, shared by the reader,
the translator and the CPU executor."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

# One parser a thread: tree-sitter does not promise a Parser is safe to share, and a batch ports
# in threads.
_PARSERS = threading.local()

# The source of the tree being read. Trees parsed through a read callback keep no text, and
# Node.text would call the callback again, so `source_text` slices it from here.
_SOURCE: ContextVar[bytes] = ContextVar("_SOURCE", default=b"")


def parser() -> Parser:
    if getattr(_PARSERS, "parser", None) is None:
        _PARSERS.parser = Parser(Language(tree_sitter_cuda.language()))
    return _PARSERS.parser


def parse(src: bytes) -> Tree:
    return parser().parse(src)


def text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


@contextmanager
def reading_source(source: bytes) -> Iterator[None]:
    """Make `source_text` slice from `source` (the bytes a callback-parsed tree was read from)."""
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(token)


def current_source() -> bytes:
    """The bytes set by `reading_source`."""
    return _SOURCE.get()


def source_text(node: Node | None) -> str:
    """`text` for a tree parsed through a read callback, inside `reading_source`."""
    if node is None:
        return ""
    return _SOURCE.get()[node.start_byte : node.end_byte].decode("utf-8", "replace")


def collapse_spaces(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def line(node: Node) -> int:
    return node.start_point[0] + 1


def walk(node: Node, limit: int = 4000, stop: frozenset[str] = frozenset()) -> Iterator[Node]:
    """Pre-order walk with an explicit stack, `limit` levels deep; does not enter node types in
    `stop`."""
    # A tree cursor: no list of children built at each node (a third of the time of a stack).
    cursor, depth = node.walk(), 0
    while True:
        cur = cursor.node
        yield cur
        if depth < limit and (depth == 0 or cur.type not in stop) and cursor.goto_first_child():
            depth += 1
            continue
        while not cursor.goto_next_sibling():
            if depth == 0 or not cursor.goto_parent():
                return
            depth -= 1
        if depth == 0:  # the cursor moved past ``node`` itself
            return


def identifiers(node: Node | None) -> set[str]:
    """The names (identifiers, not fields or types) anywhere under ``node``."""
    return {text(n) for n in walk(node) if n.type == "identifier"} if node is not None else set()


def ancestors(node: Node) -> Iterator[Node]:
    cur = node.parent
    while cur is not None:
        yield cur
        cur = cur.parent


def parse_expr(src: str) -> Node | None:
    """The expression node of `src` parsed as an initializer (None if it does not parse)."""
    tree = parse(f"auto __mlxport_e = ({src});".encode())
    if tree.root_node.has_error:
        return None
    for n in walk(tree.root_node):
        if n.type == "init_declarator":
            value = n.child_by_field_name("value")
            return (
                value.named_children[0]
                if value is not None
                and value.type == "parenthesized_expression"
                and value.named_children
                else value
            )
    return None


def _called(call: Node) -> Node | None:
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return fn


def callee(call: Node) -> str:
    """The called name as written, spaces removed; a template call drops its arguments
    (`f<T>(x)`: `f`)."""
    return text(_called(call)).replace(" ", "")


def bare_callee(call: Node) -> str:
    """The called function's own name, read with `source_text`: `Store` for `obj.Store(...)` and for
    `cub::BlockStore<T>::Store(...)`; other callees as written, spaces collapsed."""
    fn = _called(call)
    if fn is not None and fn.type == "field_expression":
        fn = fn.child_by_field_name("field")
    if fn is not None and fn.type == "qualified_identifier":
        # the innermost name: `ns::store<pwise::granularity>` is `store`, whatever its arguments
        while fn.type == "qualified_identifier" and fn.child_by_field_name("name") is not None:
            fn = fn.child_by_field_name("name")
        return collapse_spaces(source_text(fn)).split("<")[0].strip()
    return collapse_spaces(source_text(fn))


def function_declarator(fn: Node) -> tuple[Node | None, Node | None]:
    """The name node and function_declarator of a function_definition (or declaration)."""
    decl = fn.child_by_field_name("declarator")
    for _ in range(16):
        if decl is None or decl.type == "function_declarator":
            break
        decl = inner_declarator(decl)
    if decl is None:
        return None, None
    name = decl.child_by_field_name("declarator")
    if name is not None and name.type == "template_function":
        name = name.child_by_field_name("name")
    return name, decl


def inner_declarator(decl: Node) -> Node | None:
    """The declarator inside a pointer, reference or parenthesized one (a reference declarator's has
    no field name: `float& at(int i)`)."""
    inner = decl.child_by_field_name("declarator")
    if inner is None and decl.type in ("reference_declarator", "parenthesized_declarator"):
        inner = next(
            (
                c
                for c in decl.named_children
                if c.type.endswith("declarator") or c.type == "identifier"
            ),
            None,
        )
    return inner


# The name at a declarator's core; a qualified or template one is read whole.
_DECLARED_NAMES = frozenset(
    {"identifier", "field_identifier", "type_identifier", "operator_name", "destructor_name"}
)
_WHOLE_NAMES = frozenset({"qualified_identifier", "template_function"})
# Declarators holding the one they wrap without a field name: `&r`, `(*fp)`, `...args`, `x [[a]]`.
_WRAPPING = frozenset(
    {
        "reference_declarator",
        "parenthesized_declarator",
        "variadic_declarator",
        "attributed_declarator",
    }
)


def declared_name(declarator: Node | None) -> str:
    """The name a declarator declares, through pointers, references, arrays, parentheses, an
    initializer and a function's parameters (`p` of `*p`, `a[N]`, `&r`, `x = 3`, `f(int n)`,
    `(*fp)(int)`, and of a parameter declaration `const float* p`); a qualified or template name
    whole (`Foo::bar`, `f<float>`); "" where nothing is named (`const float*`, `int`).

    Read with `source_text` inside `reading_source` (a callback-parsed tree), else with `text`."""
    cur = declarator
    for _ in range(64):
        if cur is None:
            return ""
        if cur.type in _DECLARED_NAMES:
            return _name_text(cur)
        if cur.type in _WHOLE_NAMES:
            return collapse_spaces(_name_text(cur))
        if cur.type in _WRAPPING:
            cur = next((c for c in cur.named_children if _declares_through(c)), None)
        else:
            cur = cur.child_by_field_name("declarator") or cur.child_by_field_name("name")
    return ""


def _declares_through(node: Node) -> bool:
    return (
        node.type in _DECLARED_NAMES
        or node.type in _WHOLE_NAMES
        or node.type.endswith("_declarator")
    )


def _name_text(node: Node) -> str:
    return source_text(node) if current_source() else text(node)


def function_name(fn: Node) -> tuple[str, Node | None]:
    """Name and function_declarator of a function_definition (or declaration)."""
    name, decl = function_declarator(fn)
    return (text(name).replace(" ", ""), decl) if decl is not None else ("", None)


def source_function_name(fn: Node) -> tuple[str, Node | None]:
    """`function_name` read with `source_text`, spaces collapsed rather than removed."""
    name, decl = function_declarator(fn)
    return (collapse_spaces(source_text(name)), decl) if decl is not None else ("", None)


def enclosing(node: Node, types: tuple[str, ...]) -> Node | None:
    return next((a for a in ancestors(node) if a.type in types), None)
