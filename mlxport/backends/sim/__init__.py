"""The Metal simulator backend: MSL kernel bodies checked for correctness on any machine.

The body is wrapped in the signature MLX generates, rewritten into C++ against headers that
implement MSL, compiled into a shared library (cached) and launched in a worker process:
threadgroups spread over the cores, their lanes run as fibers so barriers and SIMD-group
functions behave, and every buffer access is bounds checked. It never times kernels.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from mlxport.backends.base import (
    ORDERS,
    Arg,
    ArgInfo,
    Availability,
    BackendUnavailable,
    RunResult,
)
from mlxport.backends.sim.build import BuildResult, build_kernel
from mlxport.backends.sim.cache import cache_dir
from mlxport.backends.sim.compiler import (
    BuildError,
    CompilerMissing,
    LimitError,
    find_compiler,
)
from mlxport.backends.sim.counters import counts_of
from mlxport.backends.sim.host import (
    STORAGE,
    HostArray,
    bfloat16_to_float32,
    from_value,
    output_fill,
)
from mlxport.backends.sim.signature import (
    Signature,
    SignatureError,
    SimSource,
    build_signature,
    mlx_source,
    sim_text,
)
from mlxport.backends.worker import MalformedReply, Worker, WorkerError, malformed, shown
from mlxport.expr import ITEMSIZE, ArrayInfo, ExprError
from mlxport.spec import CompileResult, Datasheet, Diagnostic, KernelCandidate, KernelTask, Launch

__all__ = ["SimBackend", "mlx_source"]

MAX_THREADS_PER_THREADGROUP = 1024
STACK_BYTES = int(os.environ.get("MLXPORT_SIM_STACK", str(64 << 10)))
# The most a launch's outputs may take where the caller names no budget (base.output_budget, the
# task's): the worker holds each output twice (the values and what
# they were), a 4-byte written mask per element and the inputs, within its address space
# (WORKER_MEMORY, unless MLXPORT_WORKER_MEMORY says otherwise). An MSL kernel the simulator can
# run in reasonable time writes far less.
OUTPUT_BYTES = 1 << 30
WORKER_MEMORY = 8 << 30


def sim_threads() -> int:
    env = os.environ.get("MLXPORT_SIM_THREADS")
    if env and env.strip().isdigit() and int(env) > 0:
        return int(env)
    return os.cpu_count() or 1


class SimBackend:
    """Backend protocol implementation (see mlxport.backends.base)."""

    name = "sim"
    language = "msl"
    timing = False

    def __init__(self, *, threads: int | None = None, memory_bytes: int | None = None):
        self.threads = threads or sim_threads()
        if not memory_bytes and "MLXPORT_WORKER_MEMORY" not in os.environ:
            memory_bytes = WORKER_MEMORY
        self._worker = Worker(
            "mlxport.backends.sim.runner:handle",
            **({"memory_bytes": memory_bytes} if memory_bytes else {}),
        )
        self._builds: dict[str, BuildResult] = {}
        # candidate text (header, source) -> the limit its compile ran past: its other dtypes and
        # launches would run past it too, so they are not compiled again
        self._over_limit: dict[tuple[str, str], str] = {}

    # ------------------------------------------------------------ protocol

    def available(self) -> Availability:
        try:
            find_compiler()
        except CompilerMissing as e:
            return Availability(False, str(e))
        return Availability(True)

    def device_info(self, datasheet: Datasheet | None = None) -> dict[str, Any]:
        info: dict[str, Any] = {
            "name": "Metal simulator",
            "backend": "sim",
            "threads": self.threads,
            "simd_width": 32,
            "max_threads_per_threadgroup": MAX_THREADS_PER_THREADGROUP,
            "threadgroup_memory_bytes": 32768,
            "cache": str(cache_dir()),
        }
        try:
            cc = find_compiler()
            info.update(
                compiler=" ".join(cc.command),
                compiler_version=cc.version,
                flags=" ".join(cc.flags()),
            )
        except CompilerMissing as e:
            info["compiler_error"] = str(e)
        return info

    def compile(self, candidate: KernelCandidate, args: dict[str, ArgInfo]) -> CompileResult:
        t0 = time.perf_counter()
        try:
            args = {
                k: v if isinstance(v, ArrayInfo | bool | int | float) else from_value(v, True).info
                for k, v in args.items()
            }
            sig = self._signature(candidate, args)
            result = self._compile(sim_text(sig))
        except (ExprError, SignatureError, CompilerMissing, BuildError) as e:
            return CompileResult(
                backend=self.name,
                ok=False,
                candidate_id=candidate.id,
                diagnostics=[Diagnostic(message=str(e), where="generated")],
                seconds=time.perf_counter() - t0,
            )
        return CompileResult(
            backend=self.name,
            ok=result.ok,
            candidate_id=candidate.id,
            diagnostics=result.diagnostics,
            seconds=time.perf_counter() - t0,
            cached=result.cached,
        )

    # run(order="reversed" or "shuffled") runs threads and threadgroups in that order
    reorders = True
    overlaps = False  # simulated calls run one after another
    counts = True  # run(count=...) counts what the kernel does (counters.py)

    def run_op(self, folder, arrays, dtypes, params) -> RunResult:
        from mlxport.backends import op_call

        return op_call.call(folder, "sim", arrays, dtypes, params)

    def run_together(
        self, candidate: KernelCandidate, input_sets: list[dict[str, Arg]], *, timeout: float = 60.0
    ) -> list[RunResult]:
        return [self.run(candidate, inputs, timeout=timeout) for inputs in input_sets]

    def run(
        self,
        candidate: KernelCandidate,
        inputs: dict[str, Arg],
        *,
        timeout: float = 60.0,
        order: str = "forward",
        poison: str = "nan",
        count: dict[str, int] | None = None,
        output_bytes: int | None = None,
    ) -> RunResult:
        t0 = time.perf_counter()
        # the runtime's order (0 forward, 1 reversed, 2 shuffled); the runner draws the poison
        options = {"reverse": ORDERS.index(order), "poison": poison} | (
            {"count": count} if count else {}
        )
        try:
            return self._run(candidate, inputs, timeout, t0, options, output_bytes or OUTPUT_BYTES)
        except (ExprError, SignatureError, CompilerMissing, BuildError) as e:
            return RunResult(error=str(e), seconds=time.perf_counter() - t0)

    def measure(
        self,
        task: KernelTask,
        candidate: KernelCandidate,
        case: dict[str, Any],
        dtype: str,
        *,
        seed: int,
        warmup: int,
        iters: int,
        baselines: bool = True,
    ) -> dict[str, list[float]]:
        raise BackendUnavailable("the simulator checks correctness only; it never times")

    def close(self) -> None:
        self._worker.close()

    # ------------------------------------------------------------ internals

    def _signature(
        self, candidate: KernelCandidate, args: dict[str, ArgInfo], launch: Launch | None = None
    ) -> Signature:
        if candidate.language != self.language:
            raise SignatureError(
                f"the simulator runs MSL kernels only; this candidate is {candidate.language}"
            )
        return build_signature(candidate, args, launch)

    def _compile(self, src: SimSource) -> BuildResult:
        text = (src.header.original, src.body.original)
        if text in self._over_limit:
            raise LimitError(self._over_limit[text])
        try:
            return self._build(src)
        except LimitError as e:
            self._over_limit[text] = str(e)
            raise

    def _build(self, src: SimSource) -> BuildResult:
        key = src.text
        if key in self._builds:
            old = self._builds[key]
            return BuildResult(
                old.ok,
                old.library,
                old.diagnostics,
                cached=True,
                log=old.log,
                refused=old.refused,
                sha256=old.sha256,
            )
        result = build_kernel(src)
        self._builds[key] = result
        return result

    def _run(
        self,
        candidate: KernelCandidate,
        inputs: dict[str, Arg],
        timeout: float,
        t0: float,
        options: dict[str, Any],
        output_bytes: int,
    ) -> RunResult:
        missing = [n for n in candidate.input_names if n not in inputs]
        if missing:
            raise SignatureError(f"missing input(s) {', '.join(missing)}")
        # here, not at import: the worker processes never load MLX
        from mlxport.tasks import MLX_LOCK

        with MLX_LOCK:  # from_value evaluates MLX arrays
            hosts = {
                n: from_value(inputs[n], candidate.ensure_row_contiguous)
                for n in candidate.input_names
            }
        # Launch expressions see arrays as ArrayInfo and scalars as their values, as in MLX's call.
        infos: dict[str, ArgInfo] = {
            k: v if isinstance(v, bool | int | float) else hosts[k].info if k in hosts else v
            for k, v in inputs.items()
        }
        launch = candidate.launch(infos)
        if problem := launch_problem(launch) or outputs_problem(launch, output_bytes):
            return RunResult(error=problem, seconds=time.perf_counter() - t0)
        sig = self._signature(candidate, infos, launch)
        src = sim_text(sig)
        built = self._compile(src)
        if not built.ok and built.refused:  # not kernel code: its one sentence says why and where
            return RunResult(error=built.refused, seconds=time.perf_counter() - t0)
        if not built.ok:
            first = built.diagnostics[0] if built.diagnostics else None
            where = f" ({first.where} line {first.line})" if first and first.line else ""
            return RunResult(
                error=f"compile failed{where}: {first.message if first else 'unknown error'}",
                seconds=time.perf_counter() - t0,
            )
        header, arrays = self._request(
            sig, src, built, hosts, launch, candidate.init_value, set(candidate.inout)
        )
        header.update(options)
        try:
            reply, out = self._worker.call(
                header, arrays, timeout=timeout, files={"library": (built.sha256, built.library)}
            )
        except WorkerError as e:
            return RunResult(error=str(e), seconds=time.perf_counter() - t0)
        try:
            outputs, unwritten = _results(launch, out)
            error, counts = _reply_fields(reply)
        except MalformedReply as e:
            self._worker.kill()  # what replied so is no worker to send the next run to
            return RunResult(error=str(malformed(str(e))), seconds=time.perf_counter() - t0)
        if candidate.init_value is not None and not math.isnan(candidate.init_value):
            # MLX filled them with init_value: defined
            unwritten = [np.zeros_like(u) for u in unwritten]
        for name, src in candidate.inout.items():
            k = candidate.output_names.index(name)
            start = hosts[src]
            values = _as_float(
                start.data[start.offset :].view(STORAGE[start.dtype])[: outputs[k].size],
                start.dtype,
            )
            outputs[k] = np.where(unwritten[k], values.reshape(outputs[k].shape), outputs[k])
            # what the kernel did not write is the input's
            unwritten[k] = np.zeros_like(unwritten[k])
        return RunResult(
            outputs=outputs,
            unwritten=unwritten,
            error=error,
            seconds=time.perf_counter() - t0,
            counts=counts,
        )

    def _request(
        self,
        sig: Signature,
        src: SimSource,
        built: BuildResult,
        hosts: dict[str, HostArray],
        launch: Launch,
        init_value: float | None,
        inout: set[str],
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        slots, arrays = [], []
        for role, name, dtype in sig.buffer_slots():
            if role == "output":
                i = [n for n, _ in sig.outputs].index(name)
                slots.append(
                    {
                        "role": role,
                        "name": name,
                        "space": "device",
                        "elem_size": ITEMSIZE[dtype],
                        "storage": STORAGE[dtype],
                        "dtype": dtype,
                        "shape": list(launch.output_shapes[i]),
                        "fill": output_fill(dtype, init_value),
                        # filled from its input where still NaN after the call, as MLX's is: it
                        # starts as NaN in every run
                        "inout": name in inout,
                    }
                )
                continue
            owner = name if role == "input" else name[: -len(role) - 1]
            h = hosts[owner]
            data, offset, elem = _slot_bytes(role, h)
            space = "device" if role == "input" and h.info.size >= 8 else "constant"
            slots.append(
                {"role": role, "name": name, "space": space, "elem_size": elem, "offset": offset}
            )
            arrays.append(data)
        header = {
            "op": "run",  # the worker sets "library" to its checked copy of built.library
            "slots": slots,
            "grid": list(launch.grid),
            "threadgroup": list(launch.threadgroup),
            "fibers": src.needs_fibers,
            "threads": self.threads,
            "stack_bytes": STACK_BYTES,
        }
        return header, arrays


def _slot_bytes(role: str, h: HostArray) -> tuple[np.ndarray, int, int]:
    if role == "input":
        return h.data, h.offset, ITEMSIZE[h.dtype]
    if role == "shape":
        return np.array(h.shape, dtype=np.int32).view(np.uint8), 0, 4
    if role == "strides":
        return np.array(h.strides, dtype=np.int64).view(np.uint8), 0, 8
    return np.array([len(h.shape)], dtype=np.int32).view(np.uint8), 0, 4


def _as_float(values: np.ndarray, dtype: str) -> np.ndarray:
    return bfloat16_to_float32(values) if dtype == "bfloat16" else values


def launch_problem(launch: Launch) -> str | None:
    """Launches MLX itself refuses, in MLX's words."""
    n = launch.threadgroup[0] * launch.threadgroup[1] * launch.threadgroup[2]
    if n > MAX_THREADS_PER_THREADGROUP:
        return (
            f"Thread group size ({n}) is greater than  the maximum allowed threads per threadgroup "
            f"({MAX_THREADS_PER_THREADGROUP})."
        )
    if any(g >= 2**31 for g in launch.grid):
        return f"grid {launch.grid} exceeds the 2^31-1 threads per dimension MLX can dispatch"
    return None


def outputs_problem(launch: Launch, limit: int = OUTPUT_BYTES) -> str | None:
    """The sentence refusing outputs over ``limit`` bytes, before anything is allocated for them
    (a shape such as ``a.size * 1000000`` would take the worker's memory)."""
    total = sum(
        math.prod(shape) * ITEMSIZE[dtype]
        for shape, dtype in zip(launch.output_shapes, launch.output_dtypes, strict=True)
    )
    if total <= limit:
        return None
    return (
        f"the outputs' shapes {[list(s) for s in launch.output_shapes]} come to {total:,} bytes, "
        f"over the {limit:,} bytes a launch's outputs may take here; give each output the shape "
        "of the task's"
    )


def _results(
    launch: Launch, out: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    n = len(launch.output_dtypes)
    if len(out) != 2 * n:
        raise MalformedReply(f"{len(out)} arrays for {n} outputs and their written masks")
    outputs, unwritten = [], []
    for i, (shape, dtype) in enumerate(
        zip(launch.output_shapes, launch.output_dtypes, strict=True)
    ):
        size = math.prod(shape)
        if out[i].size != size or out[n + i].size != size:
            raise MalformedReply(f"output {i} or its mask is not of {size} elements")
        data = out[i].reshape(shape)
        outputs.append(bfloat16_to_float32(data) if dtype == "bfloat16" else np.array(data))
        unwritten.append((out[n + i] == 0).reshape(shape))
    return outputs, unwritten


def _reply_fields(reply: dict[str, Any]) -> tuple[str | None, dict[str, int] | None]:
    """The error (shown without control characters) and counts a run's reply carries."""
    error = reply.get("error")
    if error is not None and not isinstance(error, str):
        raise MalformedReply("its error is not text")
    try:
        counts = counts_of(reply)
    except (TypeError, ValueError, KeyError, OverflowError):
        raise MalformedReply("its counts are not a list of integers per counter") from None
    return (shown(error) if error is not None else None), counts
