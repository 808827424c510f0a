"""Vector loads and stores for a kernel's block- and grid-stride loops, and for each thread's run of
consecutive elements: the tuning search's ``vector=V`` knob (CUDA).

A stride loop moves one element a thread per iteration (a 2-byte load in bfloat16, where the
memory system serves 16 bytes for the same instruction). The rewrite gives each thread V consecutive
elements a step: chunk j covers elements [jV, jV + V), a thread takes chunks INIT, INIT + STEP, ...
Each buffer's V elements are read as one aligned load before the step's V iterations and each
output's V elements written as one store after them; the last elements (fewer than V), and every
element when OK fails, run the loop as written::

    for (int mlxport_c0 = OK ? (int)(threadIdx.x) * 8 : (int)(n); mlxport_c0 + 8 <= (n);
         mlxport_c0 += (BLOCK) * 8) {
        const mlxport_chunk<T, 8> mlxport_r0 = *reinterpret_cast<const mlxport_chunk<T, 8>*>(xr + mlxport_c0);
        mlxport_chunk<T, 8> mlxport_w0;
    #pragma unroll
        for (int mlxport_k = 0; mlxport_k < 8; ++mlxport_k) {
            int c = mlxport_c0 + mlxport_k;
            { float v = mlxport_elem_load_f(mlxport_r0.v[mlxport_k]); mlxport_w0.v[mlxport_k] = ...; }
        }
        *reinterpret_cast<mlxport_chunk<T, 8>*>(out + mlxport_c0) = mlxport_w0;
    }
    for (int c = (OK ? (int)((n) / 8 * 8) : (int)0) + (threadIdx.x); c < n; c += BLOCK) { as written }

where OK tests at run time that the stride is the number of threads the start runs over
(``BLOCK == blockDim.x``), that every chunk's pointer is aligned to the chunk, that an output's
offsets lie a chunk apart, and that every thread gets a whole chunk (n >= BLOCK * 8: with fewer
elements a thread, chunks would leave threads idle, as in rope's 64-element rows over 64 threads).

Every element gets the body's operations on the same values; what changes is which thread takes
which elements. So what a thread carries across iterations (a running sum, a max) covers other
elements: combined across the threads afterwards (a block reduction) it is the same within
rounding, and an elementwise loop matches the translation bit for bit; a kernel that used each
thread's partial on its own would compute something else, which the checks against the reference
catch.

What keeps the meaning, checked on the syntax tree (a loop that fails any check is left as it is):
- the loop is ``for (TYPE c = INIT; c < BOUND; c += STEP)``, a statement of the kernel's own body
  (every thread reaches it), with integer INIT, BOUND and STEP free of calls and of names the body
  assigns or declares; INIT is a thread's index: ``threadIdx.x``, ``threadIdx.y * blockDim.x +
  threadIdx.x`` or ``blockIdx.x * blockDim.x + threadIdx.x`` (or a local declared so), and no thread
  returns before the loop on a test of those indices (under an if, a loop or a switch), nor jumps
  (no goto in the kernel);
- the body has no break, continue, return, goto, nested loop, switch, asm, preprocessor line or
  function-like macro, exchanges nothing with other threads (no barrier, shuffle or vote, in a
  function it calls either), does not depend on the indices INIT is built of (other than through c;
  a name depends on what every assignment reaching the loop gives it and on the conditions it is
  assigned under; what a function leaves after waiting for the whole block counts as the same for
  every thread), stores nothing computed from a value carried from the iteration before (the
  thread's previous element is another one), neither assigns c nor declares it again, and names no
  pointer that is not a known buffer;
- every use in the body of a buffer (a pointer parameter, a one-dimensional __shared__ array, or a
  local pointer declared once from one and never assigned; none volatile) is an element at c plus
  an offset: ``p[c + off]``, or ``f(p + c + off)`` / ``f(&p[c + off])`` where every definition of
  ``f`` in the file touches its pointer only as ``*p``, ``p[0]`` or ``__ldg(p)`` (and the like), all
  reading it on every call or all assigning it as statements of its own;
- reads happen on every iteration (not under ``if``, ``?:``, ``&&`` or ``||``), so the chunk load
  reads only what the V iterations read; writes are statements of the body itself, so each output
  chunk is written whole;
- no buffer is both read and written in the loop, nor written through two names (MLX's outputs are
  fresh buffers, its inputs never written; all extern __shared__ arrays are one buffer);
- the rest of the kernel cannot tell which thread took which element: a buffer the loop writes is
  touched nowhere else, and one it reads is written nowhere else, except a __shared__ one across a
  statement that waits for the whole block; no macro the kernel names may name it.

A run is ``for (int k = 0; k < K; ++k)`` anywhere in the kernel over a thread's own consecutive
elements (CUB's blocked arrangement: ``xr[first + k]`` with ``first = tile + threadIdx.x * ITEMS``).
Its V-element chunks stay with the thread that had them, so nothing outside the loop can tell; only
the order within the loop changes (a chunk's loads before its V iterations, its stores after them)::

    bool mlxport_in = (K) % 4 == 0 && <pointers aligned>;
    for (int k = 0; k < (K); ++k) mlxport_in = mlxport_in && (first + k < cols);
    if (mlxport_in) {
        for (int mlxport_k0 = 0; mlxport_k0 < (K); mlxport_k0 += 4) { <a chunk step, as above> }
    } else {
        <the loop as written>
    }

The body's checks are the stride loop's but for the thread's identity (the thread keeps its
elements) and conditions: an access may sit under the first branch of an ``if`` or ``?:`` whose
condition is arithmetic on names the loop does not change (``first + k < cols``). The test
evaluates every such condition for every k beforehand, as the loop would (its types, outer
conditions first), so the chunks run only where the loop reads and writes every element of them.
Throughout, offsets, bounds and conditions are plain arithmetic on the kernel's names, literals and
the built-in indices (no element, field, call or variable of the file), and a name counts as
changing when the body assigns it, takes its address, or hands it to a constructor or to a function
of the file by non-const reference; only macros that stand for constants may appear, each one
operand as it stands (``(1 << 2)``, not ``1 << 2``, which ``c + OFF`` would split). A body that
names shared memory the rewrite does not track (an array declared twice), or that calls a function
declaring shared memory while a chunk moves shared memory, is left as written, as is any kernel
naming ``mlxport_*`` (the rewrite's own names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from mlxport.cuda_syntax import (
    ancestors,
    bare_callee,
    declared_name,
    function_declarator,
    identifiers,
    parse,
    reading_source,
    text,
    walk,
)
from mlxport.errors import UserError
from mlxport.translate.bind.kernel_scope import kernel_node, pick_kernel
from mlxport.translate.reading.cudafile import CudaFile
from mlxport.translate.reading.macros import normalize
from mlxport.translate.tuning.vector_facts import (
    LOADS,
    KernelFacts,
    assigned_names,
    conditions,
    guarded,
    holder_of,
    index_of,
    params_of,
    pointer_params,
    root_name,
)

VECTOR = (8, 4)  # elements a thread moves a step: 16 and 8 bytes in bfloat16

HELPERS = """template <typename T, int N> struct alignas(N * sizeof(T)) mlxport_chunk { T v[N]; };
template <int N> __device__ __forceinline__ bool mlxport_apart(long long a, long long b) {
    return a - b >= N || b - a >= N;
}
"""

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
_LOOPS = frozenset(
    {"for_statement", "for_range_loop", "while_statement", "do_statement", "switch_statement"}
)
_INDEX_TYPES = re.compile(
    r"((unsigned|signed)\s+)?(int|long|long\s+long|short|unsigned|size_t|ptrdiff_t|"
    r"u?int(32|64)_t|long\s+int)"
)
_NOT_INTEGER = re.compile(r"\d\.|\.\d|\d[eE][-+]?\d|\d[fF]\b|\b(float|double)\b")
_CALL = re.compile(r"\w\s*\(")
# A thread's index in a stride, as the sum of its terms (factors sorted), and the stride it spans.
_SPANS = {
    ("threadIdx.x",): "blockDim.x",
    ("blockDim.x*threadIdx.y", "threadIdx.x"): "blockDim.x * blockDim.y",
    ("blockDim.x*blockIdx.x", "threadIdx.x"): "blockDim.x * gridDim.x",
}


@dataclass
class _Chunk:
    name: str
    root: str
    offset: str  # "" when the element is at c itself
    write: bool
    elem: str  # the buffer's element type as declared (an output chunk's type)

    def pointer(self, at: str = "") -> str:
        return " + ".join([self.root] + [f"({self.offset})"] * bool(self.offset) + [at] * bool(at))


@dataclass
class _Loop:
    start: int
    end: int
    var: str
    type: str
    init: str
    bound: str
    step: str
    span: str  # the threads the start runs over (blockDim.x): the stride must equal it
    body: str  # as written
    vector_body: str  # element accesses through the chunks
    chunks: list[_Chunk]
    accessors: set[str]  # the element accessors the body calls

    def rewrite(self, v: int) -> str:
        t, c0 = self.type, "mlxport_c0"
        tests = _chunk_tests(self.chunks, v)
        tests.append(f"(long long)({self.step}) == (long long)({self.span})")
        tests.append(f"(long long)({self.bound}) >= (long long)({self.step}) * {v}")
        ok = "(" + " && ".join(tests) + ")"
        return (
            f"for ({t} {c0} = {ok} ? ({t})({self.init}) * {v} : ({t})({self.bound}); {c0} + {v} <= ({self.bound}); "
            f"{c0} += ({self.step}) * {v}) {{\n{_chunk_step(self.chunks, v, c0, t, self.var, self.vector_body)}}}\n"
            f"for ({t} {self.var} = ({ok} ? ({t})(({self.bound}) / {v} * {v}) : ({t})0) + ({self.init}); "
            f"{self.var} < {self.bound}; {self.var} += {self.step}) {self.body}"
        )


@dataclass
class _Run:
    start: int  # its #pragma unroll, if it has one
    end: int
    var: str
    type: str
    count: str
    pragma: str  # "#pragma unroll" as written, or ""
    loop: str  # as written
    vector_body: str
    chunks: list[_Chunk]
    accessors: set[str]
    guards: list[str]  # the conditions an access sits under, as written, outer ones first: the test
    # evaluates an inner one only where those before it hold, as the loop does

    def rewrite(self, v: int) -> str:
        """Chunks when V divides the count, every pointer is aligned and every guard holds on every
        iteration (each evaluated as the loop would, its names fixed through it); the loop as
        written otherwise."""
        t, k0, pragma = self.type, "mlxport_k0", self.pragma + "\n" if self.pragma else ""
        ok = " && ".join([f"({self.count}) % {v} == 0"] + _chunk_tests(self.chunks, v))
        every = (
            ""
            if not self.guards
            else (
                f"{pragma}for ({t} {self.var} = 0; {self.var} < ({self.count}); ++{self.var}) "
                f"mlxport_in = mlxport_in && {' && '.join(f'({g})' for g in self.guards)};\n"
            )
        )
        return (
            f"{{\nbool mlxport_in = {ok};\n{every}if (mlxport_in) {{\n"
            f"{pragma}for ({t} {k0} = 0; {k0} < ({self.count}); {k0} += {v}) {{\n"
            f"{_chunk_step(self.chunks, v, k0, t, self.var, self.vector_body)}}}\n}} else {{\n{pragma}{self.loop}\n}}\n}}\n"
        )


def _chunk_tests(chunks: list[_Chunk], v: int) -> list[str]:
    """Every chunk's pointer aligned to the chunk, an output's offsets a chunk apart."""
    tests = [
        f"reinterpret_cast<size_t>({ch.pointer()}) % ({v} * sizeof({ch.elem})) == 0"
        for ch in chunks
    ]
    by_root: dict[str, list[str]] = {}
    for ch in chunks:
        if ch.write:
            by_root.setdefault(ch.root, []).append(ch.offset or "0")
    return tests + [
        f"mlxport_apart<{v}>({a}, {b})"
        for offs in by_root.values()
        for i, a in enumerate(offs)
        for b in offs[i + 1 :]
    ]


def _chunk_step(chunks: list[_Chunk], v: int, at: str, t: str, var: str, body: str) -> str:
    """One chunk's loads, the V iterations of the body on them, and its stores."""
    loads = "".join(
        f"    const mlxport_chunk<{ch.elem}, {v}> {ch.name} = "
        f"*reinterpret_cast<const mlxport_chunk<{ch.elem}, {v}>*>({ch.pointer(at)});\n"
        for ch in chunks
        if not ch.write
    )
    slots = "".join(f"    mlxport_chunk<{ch.elem}, {v}> {ch.name};\n" for ch in chunks if ch.write)
    stores = "".join(
        f"    *reinterpret_cast<mlxport_chunk<{ch.elem}, {v}>*>({ch.pointer(at)}) = {ch.name};\n"
        for ch in chunks
        if ch.write
    )
    return (
        f"{loads}{slots}#pragma unroll\n    for (int mlxport_k = 0; mlxport_k < {v}; ++mlxport_k) {{\n"
        f"        {t} {var} = {at} + mlxport_k;\n        {body}\n    }}\n{stores}"
    )


@dataclass
class VectorPlan:
    """The kernel's loops that take vector loads, and what they need before the kernel."""

    loops: list[_Loop | _Run]
    insert_at: int  # the kernel's definition (its template line) starts here
    preamble: str  # the chunk helpers and the element accessors' copies
    lines: list[int]  # the loops' lines in the source

    def edits(self, v: int) -> list[tuple[int, int, bytes]]:
        out = [(self.insert_at, self.insert_at, self.preamble.encode())]
        return out + [(lp.start, lp.end, lp.rewrite(v).encode()) for lp in self.loops]


def vector_plan(source: str, cf: CudaFile, kernel: str) -> VectorPlan | None:
    """The kernel's stride loops and runs that can move V elements at a time, or None if none can."""
    raw = source.encode("utf-8", "replace")
    data = normalize(raw)  # what the translator parses, offsets kept
    with reading_source(data):
        try:
            return _plan(raw, parse(data).root_node, cf, kernel)
        except RecursionError:  # expressions nested past Python's stack: left as written
            return None


def _plan(raw: bytes, root: Node, cf: CudaFile, kernel: str) -> VectorPlan | None:
    try:
        kn = kernel_node(root, pick_kernel(cf, kernel))
    except UserError:  # a kernel defined by a macro
        return None
    if kn.child_by_field_name("body") is None:
        return None
    if any(n.type == "identifier" and text(n).startswith("mlxport_") for n in walk(root)):
        return None  # the rewrite's own names
    facts = KernelFacts(root, kn, cf)
    loops, used, lines = [], set(), []
    for node in walk(facts.body):
        if node.type != "for_statement":
            continue
        # a stride loop must be a statement of the kernel itself (every thread reaches it); a run
        # keeps each element with its thread, wherever it is
        found = (_loop(raw, node, facts) if node.parent == facts.body else None) or _run(
            raw, node, facts
        )
        if found is not None:
            loops.append(found)
            used |= found.accessors
            lines.append(node.start_point[0] + 1)
    if not loops:
        return None
    holder = holder_of(kn)
    preamble = HELPERS + "".join(
        _elem_copy(raw, d, name, facts.accessors[name][1])
        for name in sorted(used)
        for d in facts.accessors[name][0]
    )
    linkage = next((a for a in ancestors(kn) if a.type == "linkage_specification"), None)
    if linkage is not None and linkage.child_by_field_name("body") == holder:
        holder = linkage  # extern "C" __global__ void k(...): the helpers go before the extern
    elif linkage is not None:  # inside extern "C" { ... }: templates need C++ linkage
        preamble = 'extern "C++" {\n' + preamble + "}\n"
    return VectorPlan(loops, holder.start_byte, preamble + "\n", lines)


def _elem_copy(raw: bytes, holder: Node, name: str, roles: dict[int, str]) -> str:
    """The definition renamed ``mlxport_elem_<name>``, its element pointers turned into references
    (``const T* p`` to ``const T& p``; ``*p``, ``p[0]`` and ``__ldg(p)`` to ``p``): the call passes the
    element in a chunk, which lives in registers, where the read-only path does not reach."""
    fn = (
        holder
        if holder.type == "function_definition"
        else next(c for c in holder.named_children if c.type == "function_definition")
    )
    ident, _ = function_declarator(fn)
    edits = [(ident.start_byte, ident.end_byte, f"mlxport_elem_{name}")]
    params = dict(pointer_params(fn))
    elements = {params[i] for i in roles}
    for i, p in enumerate(params_of(fn)):
        if i in roles:
            decl = p.child_by_field_name("declarator")
            edits.append((decl.start_byte, decl.end_byte, f"& {params[i]}"))
    for n in walk(fn.child_by_field_name("body")):
        if n.type == "identifier" and text(n) in elements:
            top = (
                n.parent.parent if n.parent.type == "argument_list" else n.parent
            )  # __ldg(p), *p, p[0]
            edits.append((top.start_byte, top.end_byte, text(n)))
    return _splice(raw, holder, edits) + "\n"


# ------------------------------------------------------------------ loops


def _for_parts(raw: bytes, node: Node) -> tuple[str, str, Node, Node, Node, Node] | None:
    """(index name, its type, start, bound, update, body) of ``for (TYPE c = START; c < BOUND; UPDATE)``
    with an integer index of its own, or None for any other loop."""
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
    ctype = _slice(raw, init_decl.child_by_field_name("type"))
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


def _loop(raw: bytes, node: Node, facts: KernelFacts) -> _Loop | None:
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
    span, fields = _thread_index(init, facts)
    if span is None or _NOT_INTEGER.search(text(step)):
        return None
    # each element on its own, whoever runs it, on every iteration
    if (
        any(
            facts.identity(part, skip=frozenset({var})) & (fields | {"*"})
            for part in (body, bound, step)
        )
        or _exits_before(node, facts, fields)
        or _carried_into_stores(body, var, facts)
    ):
        return None
    found = _chunked(raw, body, var, [init, bound, step], facts, _changing(body, facts))
    if found is None or any(
        not _alone(node, facts.buffers[ch.root].base, ch.write, facts) for ch in found[0]
    ):
        return None
    return _Loop(
        node.start_byte,
        node.end_byte,
        var,
        ctype,
        _slice(raw, init),
        _slice(raw, bound),
        _slice(raw, step),
        span,
        _slice(raw, body),
        found[1],
        found[0],
        found[2],
    )


def _run(raw: bytes, node: Node, facts: KernelFacts) -> _Run | None:
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
    changing = _changing(body, facts)
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
    return _Run(
        start,
        node.end_byte,
        var,
        ctype,
        _slice(raw, count),
        text(pragma).strip() if unroll else "",
        _slice(raw, node),
        found[1],
        found[0],
        found[2],
        sorted(guards, key=guards.get),
    )


def _chunked(
    raw: bytes,
    body: Node,
    var: str,
    invariant: list[Node],
    facts: KernelFacts,
    changing: set[str],
    guard=None,
) -> tuple[list[_Chunk], str, set[str]] | None:
    """(the chunks, the body with each element access through its chunk, the accessors it calls)
    when every use of a buffer in the body is an element at ``var`` plus an offset, the body has no
    exits, loops or exchanges with other threads, and the ``invariant`` expressions stay fixed
    through the loop (``changing``: what the body may change, ``_changing``); ``guard``: whether a
    condition may guard an access (None: none may)."""
    if any(
        n.type in _STOPS or n.type.startswith("preproc") for n in walk(body)
    ) or facts.collective(body):
        return None
    if var in changing or any(not _plain(e, facts) or identifiers(e) & changing for e in invariant):
        return None
    if identifiers(body) & ((facts.pointers | facts.shared) - set(facts.buffers) - {var}):
        return None  # an address held under another name, or shared memory declared twice, could alias a buffer
    accesses = _accesses(body, var, facts, changing, guard)
    if not accesses:
        return None
    if any(facts.buffers[r].shared for _, r, _, _, _ in accesses) and any(
        n.type == "call_expression" and facts.reaches(n, _shared) for n in walk(body)
    ):
        return None  # a function the body calls could touch the shared memory a chunk moves early or late
    kinds = _element_types(facts)
    if any(
        facts.buffers[r].elem not in kinds and not _SCALAR.fullmatch(facts.buffers[r].elem)
        for _, r, _, _, _ in accesses
    ):
        return None  # a chunk's alignment is its size: only for elements of a power-of-two size
    chunks: dict[tuple[str, str, bool], _Chunk] = {}
    edits, used = [], set()
    for node_, buffer, offset, write, accessor in accesses:
        key = (buffer, offset, write)
        if key not in chunks:
            chunks[key] = _Chunk(
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
    return list(chunks.values()), _splice(raw, body, edits), used


def _guard(cond: Node, changing: set[str], facts: KernelFacts, seen: dict[str, int]) -> bool:
    """Whether a condition may guard a run's access: arithmetic on names fixed through the loop
    (and the loop's index), which the chunked path evaluates for every iteration beforehand; each
    one accepted is kept in ``seen`` with where it starts."""
    while cond.type == "condition_clause" and len(cond.named_children) == 1:
        cond = cond.named_children[0]
    if not _plain(cond, facts) or identifiers(cond) & changing:
        return False
    seen[text(cond)] = min(seen.get(text(cond), cond.start_byte), cond.start_byte)
    return True


def _changing(body: Node, facts: KernelFacts) -> set[str]:
    """Names the body may change: assigned, incremented, address-taken, declared, or handed to a
    function of this file that takes them by reference."""
    out = assigned_names(body) | _declared_in(body)
    for n in walk(body):
        if (
            n.type == "function_declarator"
            and n.parent is not None
            and n.parent.type == "declaration"
        ):
            out |= {
                text(t) for t in walk(n) if t.type in ("identifier", "type_identifier")
            }  # Dec d(lim);
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
                or facts.modifies_argument(args.parent, _arguments(args).index(arg))
            )
        ):
            out.add(text(n))  # a constructor's argument, or a reference parameter's
    return out


def _arguments(args: Node) -> list[Node]:
    return [c for c in args.named_children if c.type != "comment"]


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
_SCALAR = re.compile(
    r"((unsigned|signed)\s+)?(char|short|int|long|long\s+long|float|double)|__half|half|"
    r"__nv_bfloat16|nv_bfloat16|bfloat16_t|float16_t|u?int(8|16|32|64)_t|size_t|bool"
)


def _plain(node: Node, facts: KernelFacts) -> bool:
    """Whether an expression is arithmetic on names, literals and the thread's built-in indices:
    nothing it reads can change but the names themselves (no element, field, call or assignment),
    and every macro it names stands for a constant."""
    if node.type == "cast_expression":
        return _plain(node.child_by_field_name("value"), facts)
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
    return all(_plain(c, facts) for c in node.named_children if c.type != "comment")


def _shared(n: Node) -> bool:
    return n.type == "declaration" and any(text(c) == "__shared__" for c in n.children)


def _element_types(facts: KernelFacts) -> set[str]:
    """The kernel's template type parameters (MLX instantiates them with its dtypes)."""
    holder = holder_of(facts.kn)
    if holder.type != "template_declaration":
        return set()
    params = holder.child_by_field_name("parameters")
    return {
        text(c)
        for p in (params.named_children if params is not None else [])
        if p.type == "type_parameter_declaration"
        for c in p.named_children
        if c.type == "type_identifier"
    }


def _thread_index(init: Node, facts: KernelFacts) -> tuple[str | None, set[str]]:
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


def _carried_into_stores(body: Node, var: str, facts: KernelFacts) -> bool:
    """Whether a value carried from one iteration to the next (``prev = x[c]``) may reach what an
    iteration stores: a thread's previous element would be another one. A running sum or max that
    only leaves the loop is what the block combines afterwards."""
    declared = [text(d) for d in walk(facts.body) if d.type == "identifier" and _declares(d)]
    own = {n for n in _declared_in(body) if declared.count(n) == 1}  # declared in the body alone
    carried = _changing(body, facts) | {
        text(r)
        for a in walk(body)
        if a.type in ("assignment_expression", "update_expression")
        if (r := root_name(a.child_by_field_name("left") or a.child_by_field_name("argument")))
    }
    carried -= (
        own | {var} | set(facts.buffers) | facts.pointers | facts.shared
    )  # memory's elements are not values
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
            | {
                text(arg)
                for call in walk(body)
                if call.type == "call_expression" and identifiers(call) & carried
                for i, arg in enumerate(_arguments(call.child_by_field_name("arguments")))
                if arg.type == "identifier" and facts.modifies_argument(call, i)
            }
        )  # cpy(v, s)
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
        return _written(parent)
    found = _through_accessor(_plus_chain(n), facts.accessors)
    return found is not None and found[1]


def _statement_of(n: Node, body: Node) -> Node:
    while (
        n.parent is not None
        and n.parent != body
        and n.type not in ("expression_statement", "declaration")
    ):
        n = n.parent
    return n


def _exits_before(loop: Node, facts: KernelFacts, fields: set[str]) -> bool:
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
                any(
                    a.type in _LOOPS for a in ancestors(r) if facts.body.start_byte < a.start_byte
                )  # break, continue
                or any(facts.identity(t) & (fields | {"*"}) for t in conditions(r, facts.body))
            )
        ):
            return True
    return False


def _alone(loop: Node, base: str, written: bool, facts: KernelFacts) -> bool:
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
        if _declares(n) or decl is not None and declared_name(decl) in facts.buffers:
            continue  # a buffer's own declaration, or a local pointer taken from it
        if (written or not _only_reads(n, facts)) and not (
            facts.buffers[text(n)].shared and _barrier_between(n, loop, facts)
        ):
            return False
    return True


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
            return not _written(parent) and not (
                parent.parent is not None and parent.parent.type == "update_expression"
            )
        arg = parent.parent
    else:
        arg = _plus_chain(n)
    call = (
        arg.parent.parent if arg.parent is not None and arg.parent.type == "argument_list" else None
    )
    if call is None or call.type != "call_expression":
        return False
    if bare_callee(call) in LOADS:
        return True
    found = _through_accessor(arg, facts.accessors)
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


def _accesses(body: Node, var: str, facts: KernelFacts, changing: set[str], guard=None):
    """(node to replace, buffer, offset, write, (accessor call, its argument) or None) for every use of
    a buffer in the body; None when any use is not an element access the rewrite keeps: one that
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
                or not _plain(index_of(parent), facts)
                or holder is None
                or holder.type
                in ("field_expression", "parenthesized_expression", "subscript_expression")
                or holder.type == "argument_list"
                and (
                    holder.parent is None
                    or holder.parent.type != "call_expression"
                    or facts.modifies_argument(holder.parent, _arguments(holder).index(parent))
                )
            ):
                return (
                    None  # a field, or an element a call may change, is not the element as a value
                )
            if (
                holder is not None
                and holder.type == "pointer_expression"
                and text(holder.child_by_field_name("operator")) == "&"
            ):
                found = _through_accessor(holder, facts.accessors)
                if found is None:
                    return None
                out.append((None, text(n), offset, found[1], found[0]))
                continue
            write = _written(parent)
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
        chain = _plus_chain(n)
        terms = _plus_terms(chain)
        if terms.count(text(n)) != 1 or terms.count(var) != 1 or not _plain(chain, facts):
            return None
        rest = [t for t in terms if t not in (text(n), var)]
        if any(var in _names_of(t) or _names_of(t) & changing or _CALL.search(t) for t in rest):
            return None
        found = _through_accessor(chain, facts.accessors)
        if found is None:
            return None
        out.append((None, text(n), " + ".join(rest), found[1], found[0]))
    for _, _, _, write, via in out:
        if via is not None and not (
            _own_statement(via[0], body, guard) if write else guarded(via[0], body, guard)
        ):
            return None
    return out


def _written(sub: Node) -> bool:
    holder = sub.parent
    return (
        holder is not None
        and holder.type == "assignment_expression"
        and holder.child_by_field_name("left") == sub
    )


def _through_accessor(arg: Node, accessors: dict):
    """((call, argument node), write) when ``arg`` is an argument of a call to an element accessor."""
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


def _plus_chain(n: Node) -> Node:
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


def _declares(n: Node) -> bool:
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


def _declared_in(node: Node) -> set[str]:
    return {text(n) for n in walk(node) if n.type == "identifier" and _declares(n)}


def _names_of(expr: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", expr))


def _slice(raw: bytes, node: Node | None) -> str:
    return (
        raw[node.start_byte : node.end_byte].decode("utf-8", "replace") if node is not None else ""
    )


def _splice(raw: bytes, node: Node, edits: list[tuple[int, int, str]]) -> str:
    out, at = [], node.start_byte
    for s, e, new in sorted(edits):
        out += [raw[at:s].decode("utf-8", "replace"), new]
        at = e
    return "".join(out) + raw[at : node.end_byte].decode("utf-8", "replace")
