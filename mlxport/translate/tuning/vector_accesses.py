"""The element accesses of a loop body that the ``vector=V`` rewrite moves through chunks: every
use of a buffer as an element at the index plus an offset (``p[c + off]``, or ``f(p + c + off)``
through an element accessor), whether an expression is plain arithmetic, and the names a body may
change."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import bare_callee, text, walk
from mlxport.translate.tuning.kernel_tree import assigned_names, guarded, index_of
from mlxport.translate.tuning.vector_facts import KernelFacts

_CALL = re.compile(r"\w\s*\(")
_PLAIN = frozenset(
    {
        "identifier",
        "number_literal",
        "true",
        "false",
        "char_literal",
        "binary_expression",
        "parenthesized_expression",
        "unary_expression",
        "conditional_expression",
    }
)

_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})


def element_accesses(body: Node, var: str, facts: KernelFacts, changing: set[str], guard=None):
    """(node to replace, buffer, offset, write, (accessor call, its argument) or None) for every use
    of a buffer in the body; None when any use is not an element access the rewrite keeps: one that
    runs only on some iterations (under conditions other than those ``guard`` accepts), a write
    that is not a statement of its own."""
    out = []
    for n in walk(body):
        if n.type != "identifier" or text(n) not in facts.buffers:
            continue
        if text(n) in changing:
            return None
        parent = n.parent
        if (
            parent is not None
            and parent.type == "subscript_expression"
            and parent.child_by_field_name("argument") == n
        ):
            offset = _offset(index_of(parent), var, changing)
            holder = parent.parent
            if (
                offset is None
                or not is_plain(index_of(parent), facts)
                or holder is None
                or holder.type
                in ("field_expression", "parenthesized_expression", "subscript_expression")
                or holder.type == "argument_list"
                and (
                    holder.parent is None
                    or holder.parent.type != "call_expression"
                    or facts.modifies_argument(holder.parent, arguments(holder).index(parent))
                )
            ):
                # a field, or an element a call may change, is not the element as a value
                return None
            if (
                holder is not None
                and holder.type == "pointer_expression"
                and text(holder.child_by_field_name("operator")) == "&"
            ):
                found = through_accessor(holder, facts.accessors)
                if found is None:
                    return None
                out.append((None, text(n), offset, found[1], found[0]))
                continue
            write = is_written(parent)
            if write and (
                text(holder.child_by_field_name("operator")) != "="
                or not _own_statement(holder, body, guard)
            ):
                return None
            if not write and (
                not guarded(parent, body, guard)
                or holder is not None
                and holder.type == "update_expression"
            ):
                return None
            out.append((parent, text(n), offset, write, None))
            continue
        chain = plus_chain(n)
        terms = _plus_terms(chain)
        if terms.count(text(n)) != 1 or terms.count(var) != 1 or not is_plain(chain, facts):
            return None
        rest = [t for t in terms if t not in (text(n), var)]
        if any(var in _names_of(t) or _names_of(t) & changing or _CALL.search(t) for t in rest):
            return None
        found = through_accessor(chain, facts.accessors)
        if found is None:
            return None
        out.append((None, text(n), " + ".join(rest), found[1], found[0]))
    for _, _, _, write, via in out:
        if via is not None and not (
            _own_statement(via[0], body, guard) if write else guarded(via[0], body, guard)
        ):
            return None
    return out


def is_plain(node: Node, facts: KernelFacts) -> bool:
    """Whether an expression is arithmetic on names, literals and the thread's built-in indices:
    nothing it reads can change but the names themselves (no element, field, call or assignment),
    and every macro it names stands for a constant."""
    if node.type == "cast_expression":
        return is_plain(node.child_by_field_name("value"), facts)
    if node.type == "field_expression":
        return text(node.child_by_field_name("argument")) in _BUILTINS and text(
            node.child_by_field_name("field")
        ) in ("x", "y", "z")
    if (
        node.type not in _PLAIN
        or node.type == "unary_expression"
        and text(node.child_by_field_name("operator")) not in ("-", "+", "!", "~")
    ):
        return False
    if node.type == "identifier" and text(node) in facts.macros:
        return facts.constant_macro(text(node))
    if node.type == "identifier" and text(node) in facts.globals:
        return False  # a variable of the file: a function the body calls could change it
    return all(is_plain(c, facts) for c in node.named_children if c.type != "comment")


def changed_names(body: Node, facts: KernelFacts) -> set[str]:
    """Names the body may change: assigned, incremented, address-taken, declared, or handed to a
    function of this file that takes them by reference."""
    out = assigned_names(body) | declared_in(body)
    for n in walk(body):
        if (
            n.type == "function_declarator"
            and n.parent is not None
            and n.parent.type == "declaration"
        ):
            # Dec d(lim);
            out |= {text(t) for t in walk(n) if t.type in ("identifier", "type_identifier")}
        if n.type != "identifier":
            continue
        arg = n
        while arg.parent is not None and arg.parent.type in (
            "parenthesized_expression",
            "cast_expression",
        ):
            arg = arg.parent
        args = arg.parent
        if (
            args is not None
            and args.type in ("argument_list", "initializer_list")
            and (
                args.parent is None
                or args.parent.type != "call_expression"
                or facts.modifies_argument(args.parent, arguments(args).index(arg))
            )
        ):
            out.add(text(n))  # a constructor's argument, or a reference parameter's
    return out


def arguments(args: Node) -> list[Node]:
    return [c for c in args.named_children if c.type != "comment"]


def is_written(sub: Node) -> bool:
    holder = sub.parent
    return (
        holder is not None
        and holder.type == "assignment_expression"
        and holder.child_by_field_name("left") == sub
    )


def through_accessor(arg: Node, accessors: dict):
    """((call, argument node), write) when ``arg`` is an argument of a call to an element
    accessor."""
    args = arg.parent
    call = args.parent if args is not None and args.type == "argument_list" else None
    if call is None or call.type != "call_expression":
        return None
    name = bare_callee(call)
    if name not in accessors:
        return None
    index = next(i for i, c in enumerate(args.named_children) if c == arg)
    role = accessors[name][1].get(index)
    return ((call, arg), role == "write") if role else None


def plus_chain(n: Node) -> Node:
    top = n
    while (
        top.parent is not None
        and top.parent.type in ("binary_expression", "parenthesized_expression")
        and (
            top.parent.type == "parenthesized_expression"
            or text(top.parent.child_by_field_name("operator")) == "+"
        )
    ):
        top = top.parent
    return top


def _plus_terms(node: Node) -> list[str]:
    if node.type == "parenthesized_expression" and node.named_children:
        return _plus_terms(node.named_children[0])
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) == "+":
        return _plus_terms(node.child_by_field_name("left")) + _plus_terms(
            node.child_by_field_name("right")
        )
    return [text(node)]


def _offset(index: Node | None, var: str, changing: set[str]) -> str | None:
    """The offset of ``var + off`` (or ``var``: ""), None for any other index."""
    if index is None:
        return None
    terms = _plus_terms(index)
    if terms.count(var) != 1:
        return None
    rest = [t for t in terms if t != var]
    if any(var in _names_of(t) or _names_of(t) & changing or _CALL.search(t) for t in rest):
        return None
    return " + ".join(rest)


def _own_statement(expr: Node, body: Node, guard=None) -> bool:
    """Whether the expression is a statement of its own that runs every iteration (or whenever the
    conditions ``guard`` accepts hold)."""
    stmt = expr.parent
    return stmt is not None and stmt.type == "expression_statement" and guarded(stmt, body, guard)


def declares(n: Node) -> bool:
    parent = n.parent
    if parent is not None and parent.type == "declaration":  # float s, c;
        return n in parent.children_by_field_name("declarator")
    return (
        parent is not None
        and parent.type
        in (
            "array_declarator",
            "pointer_declarator",
            "init_declarator",
            "parameter_declaration",
            "reference_declarator",
        )
        and parent.child_by_field_name("value") != n
        and parent.child_by_field_name("size") != n
    )


def declared_in(node: Node) -> set[str]:
    return {text(n) for n in walk(node) if n.type == "identifier" and declares(n)}


def _names_of(expr: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", expr))
