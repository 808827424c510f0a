"""Whether moving a loop's elements between threads keeps the kernel's meaning, for the ``vector=V``
rewrite: the loop starts at a thread's index and no thread leaves before it, nothing carried
across iterations reaches a store, and the rest of the kernel cannot tell which thread took which
element (what the loop writes is touched nowhere else, what it reads written nowhere else)."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import ancestors, bare_callee, declared_name, identifiers, text, walk
from mlxport.translate.tuning.kernel_tree import assigned_names, conditions, root_name
from mlxport.translate.tuning.vector_accesses import (
    arguments,
    changed_names,
    declared_in,
    declares,
    is_written,
    plus_chain,
    through_accessor,
)
from mlxport.translate.tuning.vector_buffers import LOADS
from mlxport.translate.tuning.vector_facts import KernelFacts

_LOOPS = frozenset(
    {"for_statement", "for_range_loop", "while_statement", "do_statement", "switch_statement"}
)
# A thread's index in a stride, as the sum of its terms (factors sorted), and the stride it spans.
_SPANS = {
    ("threadIdx.x",): "blockDim.x",
    ("blockDim.x*threadIdx.y", "threadIdx.x"): "blockDim.x * blockDim.y",
    ("blockDim.x*blockIdx.x", "threadIdx.x"): "blockDim.x * gridDim.x",
}


def thread_index(init: Node, facts: KernelFacts) -> tuple[str | None, set[str]]:
    """(the stride a thread index spans, the indices it is built of) when the loop starts at a
    thread's index (``threadIdx.x``, ``blockIdx.x * blockDim.x + threadIdx.x``, ``threadIdx.y *
    blockDim.x + threadIdx.x``, or a local declared so); (None, {}) otherwise."""
    if (
        init.type == "identifier"
        and text(init) in facts.locals
        and text(init) not in assigned_names(facts.body)
    ):
        init = facts.locals[text(init)]
    terms = tuple(sorted(_canonical_terms(init)))
    span = _SPANS.get(terms)
    return (
        (span, {f for t in terms for f in t.split("*") if f.startswith(("threadIdx", "blockIdx"))})
        if span
        else (None, set())
    )


def _canonical_terms(n: Node) -> list[str]:
    while n.type in ("parenthesized_expression", "cast_expression"):
        n = n.child_by_field_name("value") if n.type == "cast_expression" else n.named_children[0]
    op = text(n.child_by_field_name("operator")) if n.type == "binary_expression" else ""
    if op == "+":
        return _canonical_terms(n.child_by_field_name("left")) + _canonical_terms(
            n.child_by_field_name("right")
        )
    if op == "*":
        factors = _canonical_terms(n.child_by_field_name("left")) + _canonical_terms(
            n.child_by_field_name("right")
        )
        return ["*".join(sorted(factors))]
    return [re.sub(r"\s+", "", text(n))]


def exits_before(loop: Node, facts: KernelFacts, fields: set[str]) -> bool:
    """Whether a thread may leave the kernel before the loop, or jump past it, on a test of the
    indices its stride is built of (``if (i >= n) return;``, ``switch (threadIdx.x) { case 1:
    return; }``): the others' chunks would then go undone."""
    for r in walk(facts.body):
        if r.type in ("goto_statement", "labeled_statement"):
            return True
        if (
            r.type == "return_statement"
            and r.start_byte < loop.start_byte
            and (
                # break, continue
                any(a.type in _LOOPS for a in ancestors(r) if facts.body.start_byte < a.start_byte)
                or any(facts.identity(t) & (fields | {"*"}) for t in conditions(r, facts.body))
            )
        ):
            return True
    return False


def carried_into_stores(body: Node, var: str, facts: KernelFacts) -> bool:
    """Whether a value carried from one iteration to the next (``prev = x[c]``) may reach what an
    iteration stores: a thread's previous element would be another one. A running sum or max that
    only leaves the loop is what the block combines afterwards."""
    declared = [text(d) for d in walk(facts.body) if d.type == "identifier" and declares(d)]
    own = {n for n in declared_in(body) if declared.count(n) == 1}  # declared in the body alone
    carried = changed_names(body, facts) | {
        text(r)
        for a in walk(body)
        if a.type in ("assignment_expression", "update_expression")
        if (r := root_name(a.child_by_field_name("left") or a.child_by_field_name("argument")))
    }
    # memory's elements are not values
    carried -= own | {var} | set(facts.buffers) | facts.pointers | facts.shared
    while True:  # and what is computed from it in the body, or decided by it
        more = (
            {
                declared_name(d)
                for d in walk(body)
                if d.type == "init_declarator"
                and identifiers(d.child_by_field_name("value")) & carried
            }
            | {
                text(r)
                for a in walk(body)
                if a.type in ("assignment_expression", "update_expression")
                if (
                    r := root_name(
                        a.child_by_field_name("left") or a.child_by_field_name("argument")
                    )
                )
                and (identifiers(a) | {n for c in conditions(a, body) for n in identifiers(c)})
                & carried
            }
            # cpy(v, s)
            | {
                text(arg)
                for call in walk(body)
                if call.type == "call_expression" and identifiers(call) & carried
                for i, arg in enumerate(arguments(call.child_by_field_name("arguments")))
                if arg.type == "identifier" and facts.modifies_argument(call, i)
            }
        )
        if more <= carried:
            break
        carried |= more
    return any(
        _stores(n, facts) and identifiers(_statement_of(n, body)) & carried
        for n in walk(body)
        if n.type == "identifier" and text(n) in facts.buffers
    )


def _stores(n: Node, facts: KernelFacts) -> bool:
    """Whether this use of a buffer writes it: ``p[i] = ...`` or an accessor's store."""
    parent = n.parent
    if (
        parent is not None
        and parent.type == "subscript_expression"
        and parent.child_by_field_name("argument") == n
    ):
        return is_written(parent)
    found = through_accessor(plus_chain(n), facts.accessors)
    return found is not None and found[1]


def _statement_of(n: Node, body: Node) -> Node:
    while (
        n.parent is not None
        and n.parent != body
        and n.type not in ("expression_statement", "declaration")
    ):
        n = n.parent
    return n


def alone(loop: Node, base: str, written: bool, facts: KernelFacts) -> bool:
    """Whether the loop's new assignment of elements to threads is invisible to the rest of the
    kernel: a buffer it writes is touched nowhere else, and a buffer it reads is written nowhere
    else, except across a barrier of the block for shared memory (other blocks' accesses to device
    memory have no barrier to wait at)."""
    names = {n for n, b in facts.buffers.items() if b.base == base}
    if any(n.type == "identifier" and facts.expands_to(text(n)) & names for n in walk(facts.body)):
        return False  # a macro naming the buffer: what it does there is not parsed
    for n in walk(facts.body):
        if (
            n.type != "identifier"
            or text(n) not in names
            or loop.start_byte <= n.start_byte < loop.end_byte
        ):
            continue
        decl = next((a for a in ancestors(n) if a.type == "init_declarator"), None)
        if declares(n) or decl is not None and declared_name(decl) in facts.buffers:
            continue  # a buffer's own declaration, or a local pointer taken from it
        if (written or not _only_reads(n, facts)) and not (
            facts.buffers[text(n)].shared and _barrier_between(n, loop, facts)
        ):
            return False
    return True


def written_only_in(start: int, end: int, root: str, facts: KernelFacts) -> bool:
    """Whether the memory a buffer points into is written by the kernel's code in [start, end)
    alone: every use elsewhere of a name for it only reads, no macro names it, and no function the
    kernel calls declares shared memory (an ``extern __shared__`` array of its own is the same
    memory)."""
    base = facts.buffers[root].base
    names = {n for n, b in facts.buffers.items() if b.base == base}
    for n in walk(facts.body):
        if n.type == "identifier" and facts.expands_to(text(n)) & names:
            return False
        if n.type == "call_expression" and facts.reaches(n, _declares_shared):
            return False
        if n.type != "identifier" or text(n) not in names or start <= n.start_byte < end:
            continue
        decl = next((a for a in ancestors(n) if a.type == "init_declarator"), None)
        if declares(n) or decl is not None and declared_name(decl) in facts.buffers:
            continue
        if not _only_reads(n, facts):
            return False
    return True


def _declares_shared(n: Node) -> bool:
    return n.type == "declaration" and any(text(c) == "__shared__" for c in n.children)


def _only_reads(n: Node, facts: KernelFacts) -> bool:
    """Whether this use of a buffer only reads it: ``p[i]`` as a value, or ``p + i`` / ``&p[i]``
    handed to a load or to an accessor that reads its element."""
    parent = n.parent
    if (
        parent is not None
        and parent.type == "subscript_expression"
        and parent.child_by_field_name("argument") == n
    ):
        if not (parent.parent is not None and parent.parent.type == "pointer_expression"):
            return not is_written(parent) and not (
                parent.parent is not None and parent.parent.type == "update_expression"
            )
        arg = parent.parent
    else:
        arg = plus_chain(n)
    call = (
        arg.parent.parent if arg.parent is not None and arg.parent.type == "argument_list" else None
    )
    if call is None or call.type != "call_expression":
        return False
    if bare_callee(call) in LOADS:
        return True
    found = through_accessor(arg, facts.accessors)
    return found is not None and not found[1]


def _barrier_between(n: Node, loop: Node, facts: KernelFacts) -> bool:
    """Whether a statement of the kernel between ``n`` and the loop waits for the whole block."""
    lo, hi = sorted((n.start_byte, loop.start_byte))
    return any(
        lo < s.start_byte and s.end_byte <= hi and facts.barrier(s)
        for s in facts.body.named_children
    ) and not any(
        s.start_byte <= lo < s.end_byte and s.start_byte <= hi < s.end_byte
        for s in facts.body.named_children
    )
