"""The CPU executor of CUDA: the original kernel of a .cu file, as written, run on the Metal
simulator's runtime on any machine.

A block is a threadgroup whose threads run as fibers (switching at ``__syncthreads``, warp
shuffles and votes), a warp is a 32-lane SIMD group, and every pointer is checked against the
buffer it points into, so an out-of-bounds access is reported with the thread and the element,
an element two blocks write without atomics is reported as a race, and a measuring run tells how
far the kernel reaches into each buffer. The host code is never executed: the launch (grid,
block, dynamic shared memory) and the arguments come from the caller. It runs in the
simulator's worker process, so a crash or a hang fails the launch, never the caller.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends.cuda_cpu.preprocess import STANDARD
from mlxport.backends.cuda_cpu.reach import only
from mlxport.backends.cuda_cpu.rewrite import device_source
from mlxport.backends.cuda_cpu.source import DeviceSource, KernelParam, KernelSig, SourceError
from mlxport.backends.sim import sim_threads
from mlxport.backends.sim.build import compile_library
from mlxport.backends.sim.cache import cache_dir
from mlxport.backends.sim.compiler import INCLUDE as SIM_INCLUDE
from mlxport.backends.sim.compiler import find_compiler, syntax_log
from mlxport.backends.worker import MalformedReply, Worker, WorkerError, malformed, shown
from mlxport.errors import UserError

INCLUDE = Path(__file__).resolve().parent / "include"
SHARED_MEMORY_LIMIT = 227 * 1024  # what a block of an sm_90 GPU may opt in to
MAX_THREADS_PER_BLOCK = 1024
STACK_BYTES = int(os.environ.get("MLXPORT_SIM_STACK", str(64 << 10)))

__all__ = [
    "CudaExecutor",
    "ExecResult",
    "ExecError",
    "Launch",
    "SourceError",
    "packed",
    "unpacked",
]


class ExecError(UserError):
    """The kernel cannot run on the executor: it does not compile, or its launch is invalid."""


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    def problem(self) -> str | None:
        threads = self.block[0] * self.block[1] * self.block[2]
        if min(self.grid + self.block) < 1:
            return f"grid {self.grid} and block {self.block} must be positive in every dimension"
        if threads > MAX_THREADS_PER_BLOCK:
            return f"a block of {threads} threads is over the {MAX_THREADS_PER_BLOCK} CUDA allows"
        if any(g * b >= 2**32 for g, b in zip(self.grid, self.block, strict=True)):
            return (
                f"grid {self.grid} of blocks {self.block} is too large for the executor "
                "(2^32 threads a dimension)"
            )
        if self.shared_bytes > SHARED_MEMORY_LIMIT:
            return (
                f"{self.shared_bytes} bytes of dynamic shared memory is over the "
                f"{SHARED_MEMORY_LIMIT} a block may have"
            )
        return None


@dataclass
class ExecResult:
    """Every pointer argument after the launch, which elements the kernel wrote, how far it reached
    into each buffer (measuring runs only) and the races it ran into; or why it stopped."""

    buffers: dict[str, np.ndarray] = field(default_factory=dict)
    written: dict[str, np.ndarray] = field(default_factory=dict)
    # elements, from the first to the furthest reached
    touched: dict[str, int] = field(default_factory=dict)
    races: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Compiled:
    library: Path
    kernel: KernelSig
    source: DeviceSource
    sha256: str = ""  # the library's content hash, recorded when it was built
    # structs of buffers passed by value: parameter -> (its type, its data members)
    structs: dict[str, tuple[str, tuple[KernelParam, ...]]] = field(default_factory=dict)
    # __constant__ arrays the host fills at run time, filled from the launch's buffers
    constants: tuple[str, ...] = ()

    def bindings(self, args: list) -> list[tuple[str, KernelParam, np.ndarray | np.generic]]:
        """Each launch buffer: a parameter, or a data member of a struct of buffers (``p.x``),
        with what it is bound to. A struct's argument is a dict of its members; anything else
        (the zero bytes of a struct the caller cannot fill) binds every member to nothing: an empty
        buffer, a zero value."""
        out = []
        for p, a in zip(self.kernel.params, args, strict=True):
            if p.name not in self.structs:
                out.append((p.name, p, a))
                continue
            members = self.structs[p.name][1]
            if isinstance(a, dict) and set(a) != {m.name for m in members}:
                raise ExecError(
                    f"{p.name} is a struct of buffers passed by value: bind each of its members "
                    f"({', '.join(m.name for m in members)}), got {', '.join(a) or 'none'}"
                )
            for m in members:
                value = a[m.name] if isinstance(a, dict) else np.zeros(0, np.uint8)
                out.append((f"{p.name}.{m.name}", m, value))
        return out


class CudaExecutor:
    """Compile kernels of .cu files for the CPU and launch them, one launch at a time."""

    def __init__(self, *, threads: int | None = None, memory_bytes: int | None = None):
        self.threads = threads or sim_threads()
        self._worker = Worker(
            "mlxport.backends.sim.runner:handle",
            **({"memory_bytes": memory_bytes} if memory_bytes else {}),
        )
        self._sources: dict[tuple, DeviceSource] = {}

    def source(self, path: str | Path, includes: tuple[Path, ...] = ()) -> DeviceSource:
        """The device code of ``path`` prepared for the executor (kept while the file is
        unchanged)."""
        path = Path(path).resolve()
        includes = tuple(Path(i).resolve() for i in includes)  # the preprocessor runs elsewhere
        key = (path, path.stat().st_mtime_ns, includes)
        if key not in self._sources:
            cc = find_compiler()
            self._sources[key] = device_source(
                path, cc.command, cache_dir() / "cuda-stubs", list(includes)
            )
        return self._sources[key]

    def compile(
        self,
        source: DeviceSource,
        kernel: str,
        template_args: list[str] | None = None,
        constants: tuple[str, ...] = (),
    ) -> Compiled:
        """The kernel built for the executor; ``constants``: file-scope ``__constant__`` arrays
        the host fills at run time (cudaMemcpyToSymbol), which every launch fills first."""
        sig = source.kernels.get(kernel)
        if sig is None:
            raise ExecError(
                f"{Path(source.path).name} defines no __global__ kernel {kernel!r}; it has "
                f"{', '.join(source.kernels) or 'none'}: pass one of them with --kernel"
            )
        args = list(template_args or [])
        if len(args) != len(sig.template_params):
            names = ", ".join(n for n, _ in sig.template_params)
            raise ExecError(
                f"kernel {kernel} takes template arguments <{names}>; {len(args)} given"
            )
        std = "".join(f"#include <{h}>\n" for h in source.dropped_includes if h in STANDARD)
        template = {n: a for (n, _), a in zip(sig.template_params, args, strict=True)}
        structs = {p.name: s for p in sig.params if (s := source.buffers_in(p, template))}
        text = (
            std
            + '#include "cuda_exec.h"\n'
            + only(source, kernel, " ".join(args))
            + "\n"
            + launcher(sig, args, structs, constants)
        )
        result = compile_library(text, (INCLUDE, SIM_INCLUDE))
        if not result.ok:
            why = first_error(result.log, source.path)
            library = [f"<{h}>" for h in source.dropped_includes if h in STANDARD]
            if library and re.search(r"std::|\b_ZN?K?S[tabsiod]", why):  # mangled std names too
                why += (
                    f" (the C++ library reached through {', '.join(library)}, which "
                    f"{Path(source.path).name} includes)"
                )
            raise ExecError(f"{kernel} does not compile for the executor: {why}")
        return Compiled(result.library, sig, source, result.sha256 or "", structs, constants)

    def constant(self, source: DeviceSource, kernel: str, expr: str) -> int | None:
        """An integer constant expression of the device code (``x128::size``, ``sizeof(floatX)``),
        read off the compiler's diagnostics for an undefined template named by its value: the
        value is found at compile time and nothing is run. None where it is not one."""
        std = "".join(f"#include <{h}>\n" for h in source.dropped_includes if h in STANDARD)
        text = (
            std
            + '#include "cuda_exec.h"\n'
            + only(source, kernel, expr)
            + "\ntemplate <long long V> struct mlxport_value;\n"
            + f"mlxport_value<(long long)({expr})> mlxport_probe;\n"
        )
        m = re.search(r"mlxport_value<(-?\d+)(?:LL)?>", syntax_log(text, (INCLUDE, SIM_INCLUDE)))
        return int(m.group(1)) if m else None

    def run(
        self,
        compiled: Compiled,
        launch: Launch,
        args: list[np.ndarray | np.generic | dict],
        *,
        measure: bool = False,
        reverse: bool = False,
        timeout: float = 120.0,
        constants: dict[str, np.ndarray] | None = None,
    ) -> ExecResult:
        """Launch once. ``args`` follow the kernel's parameters: an array for each pointer (its
        dtype the element type's storage: bfloat16 as uint16), a numpy scalar of the parameter's
        type for each value, a dict by member for a struct of buffers passed by value (whose
        buffers the result names ``p.x``). ``constants``: the values of each ``__constant__``
        array it was compiled to fill (converted to its element type; zeros past them).
        ``measure``: record how far the kernel reaches into each buffer."""
        t0 = time.perf_counter()
        sig = compiled.kernel
        if problem := launch.problem():
            return ExecResult(error=problem, seconds=time.perf_counter() - t0)
        if len(args) != len(sig.params):
            raise ExecError(
                f"kernel {sig.name} takes {len(sig.params)} arguments; {len(args)} given"
            )
        slots, arrays = [], []
        bindings = compiled.bindings(args)
        for name, p, a in bindings:
            data = np.ascontiguousarray(a).reshape(-1) if p.pointer else np.asarray(a).reshape(-1)
            slots.append(
                {
                    "role": "buffer" if p.pointer else "input",
                    "name": name,
                    "space": "generic",
                    "elem_size": data.dtype.itemsize,
                    "writable": p.pointer and not p.const,
                }
            )
            arrays.append(data)
        for name, data in _constant_values(compiled, constants or {}):
            slots.append({"role": "input", "name": name, "space": "generic", "elem_size": 8})
            arrays.append(data)
        header = {
            "op": "run",  # the worker sets "library" to its checked copy of compiled.library
            "slots": slots,
            "grid": [g * b for g, b in zip(launch.grid, launch.block, strict=True)],
            "threadgroup": list(launch.block),
            "fibers": compiled.source.needs_fibers,
            "threads": self.threads,
            "stack_bytes": STACK_BYTES,
            "shared_bytes": launch.shared_bytes,
            "tg_memory_limit": SHARED_MEMORY_LIMIT,
            "races_after": 1,
            "cuda": 1,
            "measure": measure,
            "reverse": int(reverse),
        }
        try:
            reply, out = self._worker.call(
                header,
                arrays,
                timeout=timeout,
                files={"library": (compiled.sha256, compiled.library)},
            )
        except WorkerError as e:
            return ExecResult(error=str(e), seconds=time.perf_counter() - t0)
        try:
            return _result(bindings, reply, out, time.perf_counter() - t0)
        except MalformedReply as e:
            self._worker.kill()  # what replied so is no worker to send the next run to
            return ExecResult(error=str(malformed(str(e))), seconds=time.perf_counter() - t0)

    def close(self) -> None:
        self._worker.close()


def _constant_values(
    compiled: Compiled, given: dict[str, np.ndarray]
) -> list[tuple[str, np.ndarray]]:
    """Each ``__constant__`` array's values as doubles, in the order the launcher reads them."""
    if set(given) != set(compiled.constants):
        raise ExecError(
            f"{compiled.kernel.name} was built to fill the __constant__ arrays "
            f"{', '.join(compiled.constants) or '(none)'}; given values for "
            f"{', '.join(given) or 'none'}: pass one array for each"
        )
    return [(n, np.asarray(given[n], np.float64).reshape(-1)) for n in compiled.constants]


def _result(bindings: list, reply: dict, out: list[np.ndarray], seconds: float) -> ExecResult:
    pointers = [(name, p, a) for name, p, a in bindings if p.pointer]
    _check_reply(pointers, reply, out)
    data = iter(out[: len(pointers)])
    masks = iter(out[len(pointers) :])
    result = ExecResult(error=reply.get("error") and shown(reply["error"]), seconds=seconds)
    conflicts = iter(reply.get("conflicts", []))
    touches = reply.get("touched", [-1] * len(pointers))
    for (name, p, a), touched in zip(pointers, touches, strict=True):
        result.buffers[name] = next(data).reshape(np.shape(a))
        if not p.const:
            result.written[name] = next(masks).astype(bool).reshape(np.shape(a))
            first = next(conflicts)
            if first >= 0:
                result.races.append(
                    f"{name}[{first}] is written by two blocks without atomics (and perhaps more "
                    "elements): blocks run concurrently on a GPU, so the result depends on their "
                    "order"
                )
        if touched >= 0:
            result.touched[name] = -(-touched // np.asarray(a).dtype.itemsize)
    return result


def _check_reply(pointers: list, reply: dict, out: list[np.ndarray]) -> None:
    """A run's reply holds each buffer, a written mask and a conflict per buffer the kernel may
    write, and a touched extent per buffer, all of their sizes; else MalformedReply."""
    writable = [a for _, p, a in pointers if not p.const]
    sizes = [np.size(a) for _, _, a in pointers] + [np.size(a) for a in writable]
    if [a.size for a in out] != sizes:
        raise MalformedReply(f"{len(out)} arrays, not the {len(sizes)} buffers and masks sent")
    error = reply.get("error")
    if error is not None and not isinstance(error, str):
        raise MalformedReply("its error is not text")
    for key, n in (("conflicts", len(writable)), ("touched", len(pointers))):
        values = reply.get(key, [-1] * n)
        if not (
            isinstance(values, list) and len(values) == n and all(type(v) is int for v in values)
        ):
            raise MalformedReply(f"its {key} are not {n} integers")


def packed(sig: KernelSig, members: dict[str, str], values: dict[str, Any]) -> list:
    """The kernel's arguments from values by a task's names (``members``: those of the members of
    structs of buffers -> ``p.x``, source.members): each struct's members gathered into the dict
    its parameter takes."""
    out = []
    for p in sig.params:
        own = {
            s.partition(".")[2]: values[n] for n, s in members.items() if s.startswith(p.name + ".")
        }
        out.append(own or values[p.name])
    return out


def unpacked(result: ExecResult, members: dict[str, str]) -> ExecResult:
    """The result with each member's buffer under the task's name for it."""
    for name, slot in members.items():
        for found in (result.buffers, result.written, result.touched):
            if slot in found:
                found[name] = found.pop(slot)
    return result


def launcher(
    sig: KernelSig,
    template_args: list[str],
    structs: dict | None = None,
    constants: tuple[str, ...] = (),
) -> str:
    """The C entry the runtime calls for every thread: the kernel, its arguments bound to
    buffers (a struct of buffers member by member, from a buffer each); and the launch, which
    first fills each of ``constants`` from a buffer after the arguments'."""
    targs = f"<{', '.join(template_args)}>" if template_args else ""
    structs = structs or {}
    lines, binds, k = [], [], 0
    for i, p in enumerate(sig.params):
        if p.name in structs:
            kind, members = structs[p.name]
            lines.append(f"  {kind} a{i}{{}};")
            for m in members:
                lines.append(f"  ::cusim::bind(a{i}.{m.name}, &b[{k}]);")
                k += 1
            binds.append(f"a{i}")
        else:
            binds.append(f"::cusim::Arg{{&b[{k}]}}")
            k += 1
    export = 'extern "C" __attribute__((visibility("default")))'
    body = "".join(line + "\n" for line in lines)
    fills = "".join(
        f"  ::cusim::fill_constant({c}, &p->buffers[{k + i}]);\n" for i, c in enumerate(constants)
    )
    return (
        f"{export} void mlxsim_lane(const ::mlxsim::Buffer* b, const ::mlxsim::ThreadAttrs*) {{\n"
        f"  (void)b;\n{body}  {sig.name}{targs}({', '.join(binds)});\n}}\n"
        f"{export} int mlxsim_run(const ::mlxsim::LaunchParams* p, char* err, int errlen) {{\n"
        f"{fills}  return ::mlxsim::launch(p, &mlxsim_lane, err, errlen);\n}}\n"
    )


# What a compile error means when it comes from a library or construct the executor has no CPU
# form of.
UNSUPPORTED = [
    (
        re.compile(r"undeclared identifier 'cub'|namespace 'cub'|'cub::|member of 'cub'"),
        "cub (CUDA's template library)",
    ),
    (re.compile(r"in asm|inline asm|asm statement"), "inline PTX (asm)"),
    (re.compile(r"nvcuda|wmma"), "wmma (tensor-core fragments)"),
    (re.compile(r"'cutlass|cute::|namespace 'cute'"), "CUTLASS/CuTe"),
    (re.compile(r"thrust::|'thrust'"), "thrust"),
]


def first_error(log: str, path: str) -> str:
    """The compiler's first error, placed in the user's file where it points there."""
    name = Path(path).name
    for line in log.splitlines():
        if " error: " not in line:
            continue
        where, _, message = line.partition(" error: ")
        parts = where.rstrip(":").split(":")
        at = (
            f" (line {parts[1]} of {name})"
            if len(parts) >= 3 and Path(parts[0]).name == name
            else ""
        )
        for pattern, what in UNSUPPORTED:
            if pattern.search(message):
                return f"it uses {what}, which the CPU executor does not run{at}"
        return f"{message.strip()}{at}"
    return log.strip().splitlines()[-1][:400] if log.strip() else "unknown compiler error"
