"""Threads that do the work of two, their 2-byte accesses paired: the tuning search's ``lanes=2``
knob (CUDA).

A kernel whose threads each move one 2-byte element a step (transpose_tiled's tile loads and stores
in bfloat16: ``tile[ty + j][tx] = x[(row + j) * cols + col]``) leaves the memory system serving
64 bytes where a warp could ask for 128. The block is launched with half the threads along x, and
each thread runs threads ``2 * threadIdx.x`` and ``2 * threadIdx.x + 1`` of the block as written
(``blockDim.x`` is the block as launched, passed as ``mlxport_bdx``), statement by statement as
coarsen.py's blocks are (coarsen_jam.py), from the first statement naming ``threadIdx.x`` or
``blockDim.x`` on; a barrier of the block is waited at once for both. Where the two copies of a
statement ``if (C) a = BUF[I];`` (or ``if (C) BUF[I] = v;``) touch elements ``I`` and ``I + 1`` of
device memory, both run and the pair is aligned (tested at run time), they move as one access::

    if (mlxport_live0 && mlxport_live1 && (C0) && (C1) && (long long)(I1) == (long long)(I0) + 1
        && reinterpret_cast<size_t>(&(x)[I0]) % (2 * sizeof(T)) == 0) {
        const mlxport_chunk<T, 2> mlxport_p =
            *reinterpret_cast<const mlxport_chunk<T, 2>*>(&(x)[I0]);
        a0 = mlxport_p.v[0]; a1 = mlxport_p.v[1];
    } else { <each copy as written> }

Two threads of a block see each other's work only through memory, ordered by the block's barriers,
which the copies keep in place; so the rewrite keeps the kernel's meaning where (checked on the
syntax tree): ``threadIdx`` and ``blockDim`` are named only as fields, ``.x`` by the kernel alone
(no function it calls, no macro); threads exchange nothing but through memory and
``__syncthreads()`` as a statement of its own, which every copy reaches (no shuffle, vote or warp
barrier, no ``volatile``: code relying on a warp in step; no cooperative groups); no atomics or asm;
after the copies start, no shared or static declaration (one per copy would be two arrays), no
return but ``if (COND) return;`` as a statement of the kernel, and the names and local arrays
written are the copy's own. A pair reads a buffer the kernel never writes through (a pointer to
const) or writes an output, its elements of a template type parameter of the kernel (the translation
makes a buffer of a named type, ``float``, one of the task's dtype); its conditions and indices are
arithmetic on names (no memory, no call but CUDA's math).
"""

from __future__ import annotations

from tree_sitter import Node

from mlxport.cuda_syntax import bare_callee, text, walk
from mlxport.translate.reading.cudafile import CudaFile
from mlxport.translate.tuning.coarsen import (
    Coarsened,
    Mode,
    check_handed,
    launch_edits,
    memory_root,
    only_x,
    outputs_of,
    rewritten,
    top_guard,
    unparenthesized,
)
from mlxport.translate.tuning.coarsen_jam import Jam, Refused, Scopes, pure
from mlxport.translate.tuning.vector_facts import COLLECTIVE, KernelFacts

LANES = (2,)  # threads of the block as written that a thread runs


def laned(source: str, cf: CudaFile, kernel: str, factor: int) -> Coarsened | None:
    """The source with each thread running ``factor`` of the block's threads as written and
    adjacent accesses paired, or None where the kernel fails a check or nothing pairs."""
    return rewritten(source, cf, kernel, factor, LANE_MODE)


class Lanes:
    """Pairs the copies' adjacent accesses (the module's ``if (C) a = BUF[I];``)."""

    def __init__(self, facts: KernelFacts) -> None:
        self.facts = facts

    def pair(self, jam: Jam, st: Node) -> str | None:
        found = _assignment(st)
        if jam.factor != 2 or found is None:
            return None
        cond, left, right = found
        load = self._buffer(right, jam.scopes, write=False)
        store = self._buffer(left, jam.scopes, write=True)
        access = load or store
        if access is None or (load and store) or cond is not None and not _plain(cond):
            return None
        buf, index = access
        elem = self.facts.buffers[buf].elem
        # the translation gives a buffer of a named type (float) the task's dtype: T only
        if not _plain(index) or elem not in jam.types:
            return None
        ok = " && ".join(
            ["mlxport_live0", "mlxport_live1"]
            + ([f"({jam.copy(cond, 0)})", f"({jam.copy(cond, 1)})"] if cond is not None else [])
            + [
                f"(long long)({jam.copy(index, 1)}) == (long long)({jam.copy(index, 0)}) + 1",
                f"reinterpret_cast<size_t>(&({buf})[{jam.copy(index, 0)}]) % "
                f"(2 * sizeof({elem})) == 0",
            ]
        )
        at = f"*reinterpret_cast<{'' if store else 'const '}mlxport_chunk<{elem}, 2>*>"
        at += f"(&({buf})[{jam.copy(index, 0)}])"
        if load:
            moved = f"const mlxport_chunk<{elem}, 2> mlxport_p = {at}; " + "".join(
                f"{jam.copy(left, j)} = mlxport_p.v[{j}]; " for j in (0, 1)
            )
        else:
            moved = (
                f"mlxport_chunk<{elem}, 2> mlxport_p; "
                + "".join(f"mlxport_p.v[{j}] = {jam.copy(right, j)}; " for j in (0, 1))
                + f"{at} = mlxport_p; "
            )
        each = "".join(f"if (mlxport_live{j}) {{\n{jam.copy(st, j)}\n}}\n" for j in (0, 1))
        return f"if ({ok}) {{ {moved}}} else {{\n{each}}}\n"

    def _buffer(self, access: Node, scopes: Scopes, write: bool) -> tuple[str, Node] | None:
        """(buffer, index) of ``BUF[I]`` on device memory the kernel only reads (``write``
        False: a pointer to const) or an output (True)."""
        access = unparenthesized(access)
        if access is None or access.type != "subscript_expression":
            return None
        root = access.child_by_field_name("argument")
        index = access.child_by_field_name("indices") or access.child_by_field_name("index")
        if index is not None and index.type == "subscript_argument_list":
            index = index.named_children[0] if len(index.named_children) == 1 else None
        name = text(root)
        buffer = self.facts.buffers.get(name)
        if (
            root.type != "identifier"
            or index is None
            or scopes.binding(root) is not None
            or buffer is None
            or buffer.shared
            or (name in outputs_of(self.facts)) != write
        ):
            return None
        return name, index

    def refuse_per_copy(self, st: Node) -> None:
        """A statement run per copy must not wait for the block: one copy would wait alone."""
        if any(n.type == "call_expression" and _waits(n, self.facts) for n in walk(st)):
            raise Refused("a barrier under a copy's test")


def _assignment(st: Node) -> tuple[Node | None, Node, Node] | None:
    """(C, a, b) of ``if (C) a = b;`` (or ``{ a = b; }``), or (None, a, b) of ``a = b;``."""
    cond = None
    if st.type == "if_statement" and st.child_by_field_name("alternative") is None:
        clause = st.child_by_field_name("condition")
        if clause is None or any(c.type == "declaration" for c in clause.named_children):
            return None
        cond = clause.named_children[0] if clause.type == "condition_clause" else clause
        st = st.child_by_field_name("consequence")
        if st is not None and st.type == "compound_statement" and len(st.named_children) == 1:
            st = st.named_children[0]
    if st is None or st.type != "expression_statement" or len(st.named_children) != 1:
        return None
    a = st.named_children[0]
    if a.type != "assignment_expression" or text(a.child_by_field_name("operator")) != "=":
        return None
    return cond, a.child_by_field_name("left"), a.child_by_field_name("right")


def _plain(expr: Node) -> bool:
    """Arithmetic on names and CUDA's math: nothing read from memory."""
    return pure(expr) and not any(
        n.type in ("subscript_expression", "pointer_expression", "field_expression")
        and not (
            n.type == "field_expression" and text(n.child_by_field_name("argument")) in _BUILTINS
        )
        for n in walk(expr)
    )


_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})


def _waits(call: Node, facts: KernelFacts) -> bool:
    def collective(n: Node) -> bool:
        return n.type == "call_expression" and COLLECTIVE.match(bare_callee(n)) is not None

    return collective(call) or facts.reaches(call, collective)


def _check(root: Node, kn: Node, cf: CudaFile, facts: KernelFacts, helpers) -> None:
    only_x(kn, cf, helpers, ("threadIdx", "blockDim"), (), ("x", "y", "z"))
    if any(n.type == "type_qualifier" and text(n) == "volatile" for n in walk(kn)):
        raise Refused("volatile: code relying on a warp in step")


def _check_tail(tail: list[Node], scopes: Scopes, facts: KernelFacts) -> None:
    """Only block barriers as statements of their own; names and local memory written are the
    copy's own; no return but a guard."""
    for st in tail:
        for n in walk(st):
            if n.type == "call_expression" and _waits(n, facts) and not _own_barrier(n):
                raise Refused("an exchange between threads other than a barrier")
            if (
                n.type in ("identifier", "type_identifier")
                and text(n) in facts.macros
                and not facts.constant_macro(text(n))
            ):
                raise Refused("a macro")
            if n.type in ("goto_statement", "labeled_statement", "throw_statement"):
                raise Refused("a jump")
            if n.type == "declaration" and any(
                text(c) in ("__shared__", "static", "extern", "register") for c in n.children
            ):
                raise Refused("shared or static memory declared per thread")
            if n.type == "return_statement" and not top_guard(n, tail):
                raise Refused("a return")
            if n.type in ("assignment_expression", "update_expression"):
                target = n.child_by_field_name(
                    "left" if n.type == "assignment_expression" else "argument"
                )
                _own(target, scopes, facts)
            elif n.type == "pointer_expression" and text(n.child_by_field_name("operator")) == "&":
                _own(n.child_by_field_name("argument"), scopes, facts)
            elif n.type == "call_expression":
                args = [
                    a
                    for a in n.child_by_field_name("arguments").named_children
                    if a.type != "comment"
                ]
                for i, a in enumerate(args):
                    if facts.modifies_argument(n, i):
                        _own(a, scopes, facts)
                    check_handed(a, scopes, facts)
            if n.type in ("init_declarator", "assignment_expression"):
                value = n.child_by_field_name("value" if n.type == "init_declarator" else "right")
                if value is not None:
                    check_handed(value, scopes, facts)


def _own(target: Node | None, scopes: Scopes, facts: KernelFacts) -> None:
    """A name written must be the copy's own; memory written, the kernel's buffers (every
    thread's, as they were) or the copy's own arrays, not a local from before the copies."""
    target = unparenthesized(target)
    if target is not None and target.type == "identifier":
        if scopes.binding(target) is None:
            raise Refused(f"a write to {text(target)}, which every copy shares")
        return
    root = memory_root(target)
    if root is None:
        raise Refused("a write through an expression")
    if scopes.binding(root) is None and text(root) not in set(facts.buffers) | facts.shared:
        raise Refused(f"a write into {text(root)}, which every copy shares")


def _own_barrier(call: Node) -> bool:
    st = call.parent
    return (
        bare_callee(call) == "__syncthreads"
        and st is not None
        and st.type == "expression_statement"
        and not call.child_by_field_name("arguments").named_children
    )


def _launches(root: Node, cf: CudaFile, kernel: str, factor: int):
    return launch_edits(root, cf, kernel, factor, 1)


LANE_MODE = Mode(("threadIdx", "blockDim"), "mlxport_bdx", _check, _check_tail, _launches, Lanes)
