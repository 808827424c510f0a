"""The memory a kernel's loops may move in chunks, for the ``vector=V`` rewrite: its buffers
(pointer parameters, one-dimensional ``__shared__`` arrays and local pointers into them) and the
device functions that touch a pointer argument only as its one element (an element accessor,
which the rewrite hands the element in a chunk)."""

from __future__ import annotations

import re
from typing import NamedTuple

from tree_sitter import Node

from mlxport.cuda_syntax import bare_callee, declared_name, text, walk
from mlxport.translate.tuning.kernel_tree import (
    assigned_names,
    conditional,
    file_scope,
    holder_of,
    index_of,
    params_of,
    pointer_params,
)

LOADS = frozenset({"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"})


class Buffer(NamedTuple):
    elem: str  # the element type as declared
    base: str  # the memory it points into: a parameter, a shared array, or all extern shared arrays
    shared: bool


def kernel_buffers(kn: Node, body: Node, counts: dict[str, int]) -> dict[str, Buffer]:
    """Pointer parameters, one-dimensional __shared__ arrays, and local pointers declared once
    from one of them (``const T* xr = x + row * n``) and never assigned; none volatile."""
    out: dict[str, Buffer] = {}
    for p in params_of(kn):
        decl = p.child_by_field_name("declarator")
        if (
            _single_pointer(decl)
            and "volatile" not in text(p)
            and declared_name(decl) not in counts
            and _named_type(p)
        ):
            out[declared_name(decl)] = Buffer(
                text(p.child_by_field_name("type")), declared_name(decl), False
            )
    for d in walk(body):
        if (
            d.type == "declaration"
            and any(text(c) == "__shared__" for c in d.children)
            and "volatile" not in text(d)
        ):
            for a in d.children_by_field_name("declarator"):
                inner = (
                    a.child_by_field_name("declarator") if a.type == "array_declarator" else None
                )
                if (
                    inner is not None
                    and inner.type == "identifier"
                    and counts.get(text(inner)) == 1
                ):
                    extern = any(text(c) == "extern" for c in d.children)
                    out[text(inner)] = Buffer(
                        text(d.child_by_field_name("type")),
                        "extern __shared__" if extern else text(inner),
                        True,
                    )
        elif (
            d.type == "init_declarator"
            and d.parent is not None
            and "volatile" not in text(d.parent)
        ):
            target = d.child_by_field_name("declarator")
            base = _base(d.child_by_field_name("value"))
            if (
                _single_pointer(target)
                and base in out
                and counts.get(declared_name(target)) == 1
                and _named_type(d.parent)
            ):
                out.setdefault(
                    declared_name(target),
                    Buffer(
                        text(d.parent.child_by_field_name("type")),
                        out[base].base,
                        out[base].shared,
                    ),
                )
    assigned = assigned_names(body)
    return {n: b for n, b in out.items() if n not in assigned}


def element_accessors(
    functions: dict[str, list[Node]],
) -> dict[str, tuple[list[Node], dict[int, str]]]:
    """File-scope device functions by name: (their definitions, {argument: "read" or "write"}
    for each pointer argument that every definition touches only as its one element)."""
    out = {}
    for name, fns in functions.items():
        if not all(
            file_scope(fn) and any(c.type == "__device__" for c in fn.children) for fn in fns
        ):
            continue
        kinds: dict[int, set[str]] = {}
        for fn in fns:
            for i, p in pointer_params(fn):
                kinds.setdefault(i, set()).add(_element_use(fn, p, functions))
        roles = {i: k.pop() for i, k in kinds.items() if len(k) == 1 and k <= {"read", "write"}}
        if len({len(params_of(fn)) for fn in fns}) == 1 and all(
            all(i in dict(pointer_params(fn)) for i in roles) for fn in fns
        ):
            out[name] = ([holder_of(fn) for fn in fns], roles)
    return out


def _element_use(fn: Node, p: str, functions: dict[str, list[Node]]) -> str:
    """ "read" when the function only reads ``*p`` (``*p``, ``p[0]``, ``__ldg(p)``) and does so on
    every call, "write" when it only assigns it, as a statement of its own body; else ""."""
    body = fn.child_by_field_name("body")
    uses = set()
    for n in walk(body) if body is not None else []:
        if n.type != "identifier" or text(n) != p:
            continue
        top = n.parent
        if (
            top is not None
            and top.type == "argument_list"
            and len(top.named_children) == 1
            and top.parent is not None
            and text(top.parent.child_by_field_name("function")) in LOADS
        ):
            top = top.parent
        elif not (
            top is not None
            and (
                top.type == "subscript_expression"
                and text(index_of(top)) == "0"
                or top.type == "pointer_expression"
                and text(top.child_by_field_name("operator")) == "*"
            )
        ):
            return ""
        while top.parent is not None and top.parent.type == "parenthesized_expression":
            top = top.parent
        parent = top.parent
        if (
            parent is not None
            and parent.type == "assignment_expression"
            and parent.child_by_field_name("left") == top
        ):
            statement = parent.parent
            if (
                text(parent.child_by_field_name("operator")) != "="
                or statement is None
                or statement.type != "expression_statement"
                or statement.parent != body
            ):
                return ""
            uses.add("write")
        elif (
            parent is None
            or parent.type in ("update_expression", "init_declarator")
            or parent.type == "pointer_expression"
            or conditional(top, body)
            or parent.type == "argument_list"
            and _by_reference(parent, functions)
        ):
            return ""
        else:
            uses.add("read")
    return uses.pop() if len(uses) == 1 else ""


def _by_reference(args: Node, functions: dict[str, list[Node]]) -> bool:
    """Whether a call may take an argument by reference (a function of this file, or unknown)."""
    call = args.parent
    if call is None or call.type != "call_expression":
        return True
    fn = call.child_by_field_name("function")
    if (
        fn is not None
        and fn.type == "template_function"
        and text(fn.child_by_field_name("name")).endswith("_cast")
    ):
        return False
    return bare_callee(call) in functions


def _base(value: Node | None) -> str | None:
    """The pointer a declaration's value offsets (``x + off``, ``off + x``, ``&x[i]``, ``x``)."""
    while value is not None and value.type == "parenthesized_expression" and value.named_children:
        value = value.named_children[0]
    if value is None:
        return None
    if value.type == "identifier":
        return text(value)
    if value.type == "binary_expression" and text(value.child_by_field_name("operator")) == "+":
        left, right = value.child_by_field_name("left"), value.child_by_field_name("right")
        return (
            _base(left)
            if left is not None and left.type != "number_literal" and _base(left)
            else _base(right)
        )
    if value.type == "pointer_expression" and text(value.child_by_field_name("operator")) == "&":
        arg = value.child_by_field_name("argument")
        if arg is not None and arg.type == "subscript_expression":
            return _base(arg.child_by_field_name("argument"))
    return None


def _single_pointer(decl: Node | None) -> bool:
    inner = (
        decl.child_by_field_name("declarator")
        if decl is not None and decl.type == "pointer_declarator"
        else None
    )
    return inner is not None and inner.type == "identifier"


def _named_type(declaration: Node) -> bool:
    """Whether a declaration names its element type (not ``auto`` or ``decltype``)."""
    kind = declaration.child_by_field_name("type")
    return kind is not None and not re.search(r"\b(auto|decltype)\b", text(kind))
