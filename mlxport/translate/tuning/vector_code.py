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

    def rewrite(self, v: int) -> str:
        t, c0 = self.type, "mlxport_c0"
        tests = _chunk_tests(self.chunks, v)
        tests.append(f"(long long)({self.step}) == (long long)({self.span})")
        tests.append(f"(long long)({self.bound}) >= (long long)({self.step}) * {v}")
        ok = "(" + " && ".join(tests) + ")"
        step = _chunk_step(self.chunks, v, c0, t, self.var, self.vector_body)
        rest = f"({ok} ? ({t})(({self.bound}) / {v} * {v}) : ({t})0) + ({self.init})"
        return (
            f"for ({t} {c0} = {ok} ? ({t})({self.init}) * {v} : ({t})({self.bound}); "
            f"{c0} + {v} <= ({self.bound}); {c0} += ({self.step}) * {v}) {{\n{step}}}\n"
            f"for ({t} {self.var} = {rest}; "
            f"{self.var} < {self.bound}; {self.var} += {self.step}) {self.body}"
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


def _chunk_step(chunks: list[Chunk], v: int, at: str, t: str, var: str, body: str) -> str:
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
        f"{loads}{slots}#pragma unroll\n"
        f"    for (int mlxport_k = 0; mlxport_k < {v}; ++mlxport_k) {{\n"
        f"        {t} {var} = {at} + mlxport_k;\n        {body}\n    }}\n{stores}"
    )
