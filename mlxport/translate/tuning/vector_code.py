"""The code the ``vector=V`` rewrite writes (vectorize.py): a stride loop's chunk steps followed by
the loop as written for what is left, and a thread's run in chunks where a test at run time
allows, with the loads of each chunk before its V iterations and its stores after them."""

from __future__ import annotations

from dataclasses import dataclass

HELPERS = """template <typename T, int N> struct alignas(N * sizeof(T)) mlxport_chunk { T v[N]; };
template <int N> __device__ __forceinline__ bool mlxport_apart(long long a, long long b) {
    return a - b >= N || b - a >= N;
}
"""


@dataclass
class Chunk:
    name: str
    root: str
    offset: str  # "" when the element is at c itself
    write: bool
    elem: str  # the buffer's element type as declared (an output chunk's type)

    def pointer(self, at: str = "") -> str:
        return " + ".join([self.root] + [f"({self.offset})"] * bool(self.offset) + [at] * bool(at))


@dataclass
class StrideLoop:
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
    chunks: list[Chunk]
    accessors: set[str]  # the element accessors the body calls

    def rewrite(self, v: int, keep: Keep | None = None) -> str:
        """The chunk steps, then the loop as written for the rest; with ``keep``, where every
        thread's chunk steps fit in ``keep.steps``, the kept chunks' steps unrolled instead, the
        first loop keeping its chunks in registers and a later one taking them from there."""
        t, c0 = self.type, "mlxport_c0"
        ok = "(" + " && ".join(self._tests(v)) + ")"
        step = _chunk_step(self.chunks, v, c0, t, self.var, self.vector_body)
        rest = f"({ok} ? ({t})(({self.bound}) / {v} * {v}) : ({t})0) + ({self.init})"
        chunked = ok
        kept = ""
        if keep is not None:
            chunked = f"({ok} && !({keep.held(ok, v, self)}))"
            kept = keep.code(ok, v, self)
        return (
            f"for ({t} {c0} = {chunked} ? ({t})({self.init}) * {v} : ({t})({self.bound}); "
            f"{c0} + {v} <= ({self.bound}); {c0} += ({self.step}) * {v}) {{\n{step}}}\n{kept}"
            f"for ({t} {self.var} = {rest}; "
            f"{self.var} < {self.bound}; {self.var} += {self.step}) {self.body}"
        )

    def _tests(self, v: int) -> list[str]:
        return [
            *_chunk_tests(self.chunks, v),
            f"(long long)({self.step}) == (long long)({self.span})",
            f"(long long)({self.bound}) >= (long long)({self.step}) * {v}",
        ]


@dataclass
class Keep:
    """Chunks a stride loop reads or writes that a later loop over the same elements reads, held in
    registers between them: the first loop (``saves``) loads each it reads into
    ``mlxport_keepI_rN[q]`` for its q-th step, all before the first step, and copies each it writes
    there as it stores it, where every thread has at most ``steps`` steps (``mlxport_keptI`` says
    so); a later one (``uses``) takes them from there at the same steps, where that holds and its
    own chunks are aligned."""

    steps: int
    flag: str  # mlxport_keptI
    saves: dict[str, str]  # a chunk's name in the first loop -> its registers
    uses: dict[str, str]  # a chunk's name in a later loop -> the registers it takes
    elems: dict[str, str]  # registers -> the chunk's element type

    def held(self, ok: str, v: int, loop: StrideLoop) -> str:
        if self.saves:
            return (
                f"{ok} && (long long)({loop.bound}) <= (long long)({loop.step}) * {v * self.steps}"
            )
        return self.flag

    def code(self, ok: str, v: int, loop: StrideLoop) -> str:
        """The kept steps: every chunk a step reads from memory loaded for all steps first (the
        loads in flight together), then the steps."""
        t, c0 = loop.type, "mlxport_c0"
        head = ""
        if self.saves:
            head = f"const bool {self.flag} = {self.held(ok, v, loop)};\n" + "".join(
                f"mlxport_chunk<{self.elems[r]}, {v}> {r}[{self.steps}];\n"
                for r in self.saves.values()
            )
        regs = {**self.saves, **self.uses}
        ahead = {  # read from memory here: into registers of this loop's own
            ch.name: f"{ch.name}_q"
            for ch in loop.chunks
            if not ch.write and ch.name not in self.uses
        }
        regs.update({c: r for c, r in ahead.items() if c not in self.saves})
        chunks = {ch.name: ch for ch in loop.chunks}
        loads = "".join(
            f"{regs[c]}[mlxport_q] = "
            f"*reinterpret_cast<const mlxport_chunk<{chunks[c].elem}, {v}>*>"
            f"({chunks[c].pointer(c0)}); "
            for c in ahead
        )
        slots = "".join(
            f"mlxport_chunk<{chunks[c].elem}, {v}> {r}[{self.steps}];\n"
            for c, r in ahead.items()
            if c not in self.saves
        )
        kept = {c: f"{r}[mlxport_q]" for c, r in regs.items()}
        step = _chunk_step(loop.chunks, v, c0, t, loop.var, loop.vector_body, kept)
        when = self.flag if self.saves else f"{ok} && {self.flag}"
        first = self._steps(loop, v, f"{{ {loads}}}") if loads else ""
        body = self._steps(loop, v, "{\n" + step + "}")
        return f"{head}if ({when}) {{\n{slots}{first}{body}}}\n"

    def _steps(self, loop: StrideLoop, v: int, code: str) -> str:
        """``code`` for each of a thread's chunk steps, unrolled, where its chunk is whole."""
        t, c0 = loop.type, "mlxport_c0"
        return (
            f"#pragma unroll\nfor (int mlxport_q = 0; mlxport_q < {self.steps}; ++mlxport_q) {{\n"
            f"const {t} {c0} = (({t})({loop.init}) + ({t})mlxport_q * ({t})({loop.step})) * {v};\n"
            f"if ({c0} + {v} <= ({loop.bound})) {code}\n}}\n"
        )


@dataclass
class ThreadRun:
    start: int  # its #pragma unroll, if it has one
    end: int
    var: str
    type: str
    count: str
    pragma: str  # "#pragma unroll" as written, or ""
    loop: str  # as written
    vector_body: str
    chunks: list[Chunk]
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
        step = _chunk_step(self.chunks, v, k0, t, self.var, self.vector_body)
        return (
            f"{{\nbool mlxport_in = {ok};\n{every}if (mlxport_in) {{\n"
            f"{pragma}for ({t} {k0} = 0; {k0} < ({self.count}); {k0} += {v}) {{\n"
            f"{step}}}\n}} else {{\n{pragma}{self.loop}\n}}\n}}\n"
        )


def _chunk_tests(chunks: list[Chunk], v: int) -> list[str]:
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


def _chunk_step(
    chunks: list[Chunk],
    v: int,
    at: str,
    t: str,
    var: str,
    body: str,
    kept: dict[str, str] | None = None,
) -> str:
    """One chunk's loads (one held in registers taken from there, ``kept``), the V iterations of
    the body on them, and its stores (one to hold also copied to its registers)."""
    kept = kept or {}
    loads = "".join(
        f"    const mlxport_chunk<{ch.elem}, {v}> {ch.name} = "
        + (
            kept[ch.name]
            if ch.name in kept
            else f"*reinterpret_cast<const mlxport_chunk<{ch.elem}, {v}>*>({ch.pointer(at)})"
        )
        + ";\n"
        for ch in chunks
        if not ch.write
    )
    slots = "".join(f"    mlxport_chunk<{ch.elem}, {v}> {ch.name};\n" for ch in chunks if ch.write)
    stores = "".join(
        f"    *reinterpret_cast<mlxport_chunk<{ch.elem}, {v}>*>({ch.pointer(at)}) = {ch.name};\n"
        + (f"    {kept[ch.name]} = {ch.name};\n" if ch.name in kept else "")
        for ch in chunks
        if ch.write
    )
    return (
        f"{loads}{slots}#pragma unroll\n"
        f"    for (int mlxport_k = 0; mlxport_k < {v}; ++mlxport_k) {{\n"
        f"        {t} {var} = {at} + mlxport_k;\n        {body}\n    }}\n{stores}"
    )
