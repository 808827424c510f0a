"""Which loops of a kernel the ``vector=V`` rewrite takes: a block- or grid-stride loop that is a
statement of the kernel (``for (int c = threadIdx.x; c < n; c += blockDim.x)``) and a thread's run
of consecutive elements (``for (int k = 0; k < K; ++k)`` over ``xr[first + k]``), each with the
chunks its body moves and the body rewritten to read and write them."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import bare_callee, identifiers, text, walk
from mlxport.translate.tuning.kernel_tree import source_slice, spliced, template_types
from mlxport.translate.tuning.vector_accesses import changed_names, element_accesses, is_plain
from mlxport.translate.tuning.vector_checks import (
    alone,
    carried_into_stores,
    exits_before,
    thread_index,
)
from mlxport.translate.tuning.vector_code import Chunk, StrideLoop, ThreadRun
from mlxport.translate.tuning.vector_facts import KernelFacts

_STOPS = frozenset(
    {
        "break_statement",
        "continue_statement",
        "return_statement",
        "goto_statement",
        "for_statement",
        "for_range_loop",
        "while_statement",
        "do_statement",
        "switch_statement",
        "labeled_statement",
        "gnu_asm_expression",
        "asm_statement",
        "lambda_expression",
    }
)
_INDEX_TYPES = re.compile(
    r"((unsigned|signed)\s+)?(int|long|long\s+long|short|unsigned|size_t|ptrdiff_t|"
    r"u?int(32|64)_t|long\s+int)"
)
_NOT_INTEGER = re.compile(r"\d\.|\.\d|\d[eE][-+]?\d|\d[fF]\b|\b(float|double)\b")
_SCALAR = re.compile(
    r"((unsigned|signed)\s+)?(char|short|int|long|long\s+long|float|double)|__half|half|"
    r"__nv_bfloat16|nv_bfloat16|bfloat16_t|float16_t|u?int(8|16|32|64)_t|size_t|bool"
)


def stride_loop(raw: bytes, node: Node, facts: KernelFacts) -> StrideLoop | None:
    parts = _for_parts(raw, node)
    if parts is None:
        return None
    var, ctype, init, bound, update, body = parts
    if (
        update.type != "assignment_expression"
        or text(update.child_by_field_name("operator")) != "+="
        or text(update.child_by_field_name("left")) != var
    ):
        return None
    step = update.child_by_field_name("right")
    span, fields = thread_index(init, facts)
    if span is None or _NOT_INTEGER.search(text(step)):
        return None
    # each element on its own, whoever runs it, on every iteration
    if (
        any(
            facts.identity(part, skip=frozenset({var})) & (fields | {"*"})
            for part in (body, bound, step)
        )
        or exits_before(node, facts, fields)
        or carried_into_stores(body, var, facts)
    ):
        return None
    found = _chunked(raw, body, var, [init, bound, step], facts, changed_names(body, facts))
    if found is None or any(
        not alone(node, facts.buffers[ch.root].base, ch.write, facts) for ch in found[0]
    ):
        return None
    return StrideLoop(
        node.start_byte,
        node.end_byte,
        var,
        ctype,
        source_slice(raw, init),
        source_slice(raw, bound),
        source_slice(raw, step),
        span,
        source_slice(raw, body),
        found[1],
        found[0],
        found[2],
    )


def thread_run(raw: bytes, node: Node, facts: KernelFacts) -> ThreadRun | None:
    """``for (int k = 0; k < K; ++k)`` whose every buffer use is an element at k plus an offset
    fixed for the loop, on every iteration or under conditions on names the loop does not change
    (a thread's run of K consecutive elements, as CUB's blocked arrangement loads them)."""
    parts = _for_parts(raw, node)
    if parts is None:
        return None
    var, ctype, init, count, update, body = parts
    if text(init).strip() != "0" or re.sub(r"\s+", "", text(update)) not in (
        f"++{var}",
        f"{var}++",
        f"{var}+=1",
    ):
        return None
    guards: dict[str, int] = {}
    changing = changed_names(body, facts)
    found = _chunked(
        raw, body, var, [count], facts, changing, lambda c: _guard(c, changing, facts, guards)
    )
    if found is None:
        return None
    pragma = node.prev_named_sibling
    while pragma is not None and pragma.type == "comment":
        pragma = pragma.prev_named_sibling
    unroll = (
        pragma is not None
        and pragma.type == "preproc_call"
        and text(pragma).strip().startswith("#pragma unroll")
    )
    start = pragma.start_byte if unroll else node.start_byte
    return ThreadRun(
        start,
        node.end_byte,
        var,
        ctype,
        source_slice(raw, count),
        text(pragma).strip() if unroll else "",
        source_slice(raw, node),
        found[1],
        found[0],
        found[2],
        sorted(guards, key=guards.get),
    )


def _for_parts(raw: bytes, node: Node) -> tuple[str, str, Node, Node, Node, Node] | None:
    """(index name, its type, start, bound, update, body) of
    ``for (TYPE c = START; c < BOUND; UPDATE)`` with an integer index of its own, or None for any
    other loop."""
    init_decl, cond, update = (
        node.child_by_field_name(f) for f in ("initializer", "condition", "update")
    )
    body = node.child_by_field_name("body")
    if (
        init_decl is None
        or init_decl.type != "declaration"
        or cond is None
        or update is None
        or body is None
    ):
        return None
    decls = init_decl.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    var_node, init = (
        decls[0].child_by_field_name("declarator"),
        decls[0].child_by_field_name("value"),
    )
    ctype = source_slice(raw, init_decl.child_by_field_name("type"))
    if (
        var_node is None
        or var_node.type != "identifier"
        or init is None
        or not _INDEX_TYPES.fullmatch(ctype)
    ):
        return None
    var, bound = text(var_node), cond.child_by_field_name("right")
    if (
        cond.type != "binary_expression"
        or text(cond.child_by_field_name("operator")) != "<"
        or text(cond.child_by_field_name("left")) != var
        or bound is None
        or _NOT_INTEGER.search(text(bound))
    ):
        return None
    return var, ctype, init, bound, update, body


def _chunked(
    raw: bytes,
    body: Node,
    var: str,
    invariant: list[Node],
    facts: KernelFacts,
    changing: set[str],
    guard=None,
) -> tuple[list[Chunk], str, set[str]] | None:
    """(the chunks, the body with each element access through its chunk, the accessors it calls)
    when every use of a buffer in the body is an element at ``var`` plus an offset, the body has no
    exits, loops or exchanges with other threads, and the ``invariant`` expressions stay fixed
    through the loop (``changing``: what the body may change, ``changed_names``); ``guard``:
    whether a condition may guard an access (None: none may)."""
    if any(
        n.type in _STOPS or n.type.startswith("preproc") for n in walk(body)
    ) or facts.collective(body):
        return None
    if var in changing or any(
        not is_plain(e, facts) or identifiers(e) & changing for e in invariant
    ):
        return None
    if identifiers(body) & ((facts.pointers | facts.shared) - set(facts.buffers) - {var}):
        # an address held under another name, or shared memory declared twice, could alias a buffer
        return None
    accesses = element_accesses(body, var, facts, changing, guard)
    if not accesses:
        return None
    if any(facts.buffers[r].shared for _, r, _, _, _ in accesses) and any(
        n.type == "call_expression" and facts.reaches(n, _shared) for n in walk(body)
    ):
        # a function the body calls could touch the shared memory a chunk moves early or late
        return None
    kinds = template_types(facts.kn)
    if any(
        facts.buffers[r].elem not in kinds and not _SCALAR.fullmatch(facts.buffers[r].elem)
        for _, r, _, _, _ in accesses
    ):
        return None  # a chunk's alignment is its size: only for elements of a power-of-two size
    chunks: dict[tuple[str, str, bool], Chunk] = {}
    edits, used = [], set()
    for node_, buffer, offset, write, accessor in accesses:
        key = (buffer, offset, write)
        if key not in chunks:
            chunks[key] = Chunk(
                f"mlxport_{'w' if write else 'r'}{len(chunks)}",
                buffer,
                offset,
                write,
                facts.buffers[buffer].elem,
            )
        slot = f"{chunks[key].name}.v[mlxport_k]"
        if accessor is None:
            edits.append((node_.start_byte, node_.end_byte, slot))
        else:
            call, arg = accessor
            used.add(bare_callee(call))
            fn = call.child_by_field_name("function")
            name = fn.child_by_field_name("name") if fn.type == "template_function" else fn
            edits.append((name.start_byte, name.end_byte, f"mlxport_elem_{bare_callee(call)}"))
            edits.append((arg.start_byte, arg.end_byte, slot))
    written = {facts.buffers[r].base: r for r, _, w in chunks if w}
    if set(written) & {facts.buffers[r].base for r, _, w in chunks if not w} or len(
        {(facts.buffers[r].base, r) for r, _, w in chunks if w}
    ) != len(written):
        return None  # a buffer read and written, or written through two names, could overlap itself
    return list(chunks.values()), spliced(raw, body, edits), used


def _guard(cond: Node, changing: set[str], facts: KernelFacts, seen: dict[str, int]) -> bool:
    """Whether a condition may guard a run's access: arithmetic on names fixed through the loop
    (and the loop's index), which the chunked path evaluates for every iteration beforehand; each
    one accepted is kept in ``seen`` with where it starts."""
    while cond.type == "condition_clause" and len(cond.named_children) == 1:
        cond = cond.named_children[0]
    if not is_plain(cond, facts) or identifiers(cond) & changing:
        return False
    seen[text(cond)] = min(seen.get(text(cond), cond.start_byte), cond.start_byte)
    return True


def _shared(n: Node) -> bool:
    return n.type == "declaration" and any(text(c) == "__shared__" for c in n.children)
