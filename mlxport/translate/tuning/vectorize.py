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
        const mlxport_chunk<T, 8> mlxport_r0 =
            *reinterpret_cast<const mlxport_chunk<T, 8>*>(xr + mlxport_c0);
        mlxport_chunk<T, 8> mlxport_w0;
    #pragma unroll
        for (int mlxport_k = 0; mlxport_k < 8; ++mlxport_k) {
            int c = mlxport_c0 + mlxport_k;
            { float v = mlxport_elem_load_f(mlxport_r0.v[mlxport_k]);
              mlxport_w0.v[mlxport_k] = ...; }
        }
        *reinterpret_cast<mlxport_chunk<T, 8>*>(out + mlxport_c0) = mlxport_w0;
    }
    for (int c = (OK ? (int)((n) / 8 * 8) : (int)0) + (threadIdx.x); c < n; c += BLOCK) {
        as written
    }

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

With ``keep=K``, a later stride loop that reads a chunk an earlier one read or wrote (the same
buffer at the same offset, the loops' start, bound and step the same text, and no statement between
them changing a name those or the offset name) takes it from registers rather than memory: the
earlier loop keeps its chunks for up to K steps in ``mlxport_keepI_r0[K]`` (``mlxport_keptI``:
every thread has at most K steps and its chunks are aligned), and the later one reads them at the
same steps where ``mlxport_keptI`` holds and its own chunks are aligned; the chunk steps as above
otherwise. Where they run from registers, both loops load every chunk they read for all their steps
before the first. A thread takes the same elements at the same steps either way, and the registers
hold what memory holds: a chunk both loops read is device memory no statement of the kernel writes
(``alone``); one the earlier loop writes (layernorm's row staged in shared memory) is memory nothing
but that loop writes (``written_only_in``), each element by the one thread that later reads it.

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
from dataclasses import dataclass, field, replace

from tree_sitter import Node

from mlxport.cuda_syntax import ancestors, function_declarator, parse, reading_source, text, walk
from mlxport.errors import UserError
from mlxport.translate.bind.kernel_scope import kernel_node, pick_kernel
from mlxport.translate.reading.cudafile import CudaFile
from mlxport.translate.reading.macros import normalize
from mlxport.translate.tuning.kernel_tree import holder_of, params_of, pointer_params, spliced
from mlxport.translate.tuning.vector_accesses import changed_names
from mlxport.translate.tuning.vector_checks import written_only_in
from mlxport.translate.tuning.vector_code import HELPERS, Keep, StrideLoop, ThreadRun
from mlxport.translate.tuning.vector_facts import KernelFacts
from mlxport.translate.tuning.vector_loops import stride_loop, thread_run

VECTOR = (8, 4)  # elements a thread moves a step: 16 and 8 bytes in bfloat16


@dataclass
class VectorPlan:
    """The kernel's loops that take vector loads, and what they need before the kernel."""

    loops: list[StrideLoop | ThreadRun]
    insert_at: int  # the kernel's definition (its template line) starts here
    preamble: str  # the chunk helpers and the element accessors' copies
    lines: list[int]  # the loops' lines in the source
    keeps: dict[int, Keep] = field(default_factory=dict)  # by loop: chunks held in registers

    def edits(self, v: int, keep: int = 0) -> list[tuple[int, int, bytes]]:
        """With ``keep``, the chunks a later loop reads again are held for up to ``keep`` chunk
        steps a thread (``Keep``)."""
        out = [(self.insert_at, self.insert_at, self.preamble.encode())]
        return out + [
            (
                lp.start,
                lp.end,
                (
                    lp.rewrite(v, replace(self.keeps[i], steps=keep))
                    if keep and i in self.keeps
                    else lp.rewrite(v)
                ).encode(),
            )
            for i, lp in enumerate(self.loops)
        ]


def vector_plan(source: str, cf: CudaFile, kernel: str) -> VectorPlan | None:
    """The kernel's stride loops and runs that can move V elements at a time, or None if none
    can."""
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
        found = (
            stride_loop(raw, node, facts) if node.parent == facts.body else None
        ) or thread_run(raw, node, facts)
        if found is not None:
            loops.append(found)
            used |= found.accessors
            lines.append(node.start_point[0] + 1)
    if not loops:
        return None
    keeps = _keeps(loops, facts)
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
    return VectorPlan(loops, holder.start_byte, preamble + "\n", lines, keeps)


def _keeps(loops: list[StrideLoop | ThreadRun], facts: KernelFacts) -> dict[int, Keep]:
    """Stride loops that read a chunk an earlier one read or wrote (the same buffer at the same
    offset, over the same start, bound and step, none of their names changed in between): the
    earlier keeps it, the later takes it. What both read is device memory no statement of the
    kernel writes; what the earlier writes, memory nothing else writes (``written_only_in``)."""
    keeps: dict[int, Keep] = {}
    for j, later in enumerate(loops):
        if not isinstance(later, StrideLoop):
            continue
        for i, first in enumerate(loops[:j]):
            if not isinstance(first, StrideLoop) or (i in keeps and keeps[i].uses):
                continue
            pairs = {
                b.name: a
                for b in later.chunks
                if not b.write
                for a in first.chunks
                if (a.root, _bare(a.offset)) == (b.root, _bare(b.offset))
                and (
                    written_only_in(first.start, first.end, a.root, facts)
                    if a.write
                    else not facts.buffers[b.root].shared
                )
            }
            if not pairs or not _same_steps(first, later, facts):
                continue
            saver = keeps.setdefault(i, Keep(0, f"mlxport_kept{i}", {}, {}, {}))
            uses = {}
            for name, a in pairs.items():
                cache = saver.saves.setdefault(
                    a.name, f"mlxport_keep{i}_{a.name[len('mlxport_') :]}"
                )
                saver.elems[cache] = a.elem
                uses[name] = cache
            keeps[j] = Keep(0, saver.flag, {}, uses, dict(saver.elems))
            break
    return keeps


def _same_steps(first: StrideLoop, later: StrideLoop, facts: KernelFacts) -> bool:
    """Whether both loops give each thread the same elements at the same steps: the same type,
    start, bound and step, and nothing between them changes a name those or the chunks' offsets
    name."""
    if (first.type, _bare(first.init), _bare(first.bound), _bare(first.step)) != (
        later.type,
        _bare(later.init),
        _bare(later.bound),
        _bare(later.step),
    ):
        return False
    names = set(
        re.findall(
            r"[A-Za-z_]\w*",
            " ".join([first.init, first.bound, first.step] + [c.offset for c in first.chunks]),
        )
    )
    between = [
        st
        for st in facts.body.named_children
        if first.end <= st.start_byte and st.end_byte <= later.start
    ]
    return not any(changed_names(st, facts) & names for st in between)


def _bare(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _elem_copy(raw: bytes, holder: Node, name: str, roles: dict[int, str]) -> str:
    """The definition renamed ``mlxport_elem_<name>``, its element pointers turned into references
    (``const T* p`` to ``const T& p``; ``*p``, ``p[0]`` and ``__ldg(p)`` to ``p``): the call passes
    the element in a chunk, which lives in registers, where the read-only path does not reach."""
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
            # __ldg(p), *p, p[0]
            top = n.parent.parent if n.parent.type == "argument_list" else n.parent
            edits.append((top.start_byte, top.end_byte, text(n)))
    return spliced(raw, holder, edits) + "\n"
