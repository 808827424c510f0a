"""The metal and cuda backends: candidates run through MLX itself, in a worker process.

Both go through ``backends/mlx_kernel.py``; they differ in the MLX API they call and in how
availability is detected. A kernel that faults the GPU or hangs takes down only the worker,
which is restarted for the next candidate.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends import op_call
from mlxport.backends.base import ArgInfo, Availability, BackendUnavailable, RunResult, timing_lock
from mlxport.errors import UserError
from mlxport.spec import CompileResult, Datasheet, KernelCandidate, KernelTask


class GpuBackend:
    name = ""
    language = ""
    timing = True
    reorders = False  # the GPU schedules threads; run(order=...) has no effect here
    overlaps = True  # MLX may run independent kernels of one evaluation at once (run_together)
    counts = False  # a GPU runs the kernel; what it does is not counted

    def __init__(self) -> None:
        self._worker = None
        self._timer = None
        # (candidate, arguments) the timing worker compiled
        self._timer_compiled: set[tuple[str, str]] = set()
        self._info: dict[str, dict[str, Any]] = {}  # per datasheet sent

    # -- the workers: processes per backend object, restarted after a crash or timeout. No memory
    # cap: GPU runtimes reserve far more address space than they use. Timing has its own worker
    # with CUDA graphs off. MLX's graphs order kernels only by the buffers they share, so the
    # independent calls of a timed batch would overlap on the device (selective_scan's port at
    # B=1 measured 65-170 us per call grouped in graphs, 162 us one after another); in a model,
    # ops mostly depend on each other. Without graphs, calls run in order on one stream, so the
    # profiler's kernel durations (backends/timer.py) are each call's own. Metal ignores the
    # variable.
    TIMING_ENV = {"MLX_USE_CUDA_GRAPHS": "0"}

    def _call(
        self,
        op: str,
        header: dict[str, Any],
        arrays: list[np.ndarray] | None = None,
        timeout: float = 120.0,
        *,
        timing: bool = False,
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        from mlxport.backends.worker import Worker

        if timing and self._timer is None:
            self._timer = Worker(
                "mlxport.backends.gpu_worker:handle", memory_bytes=0, env=self.TIMING_ENV
            )
        elif not timing and self._worker is None:
            self._worker = Worker("mlxport.backends.gpu_worker:handle", memory_bytes=0)
        worker = self._timer if timing else self._worker
        return worker.call(
            {"op": op, "backend": self.name, **header}, arrays or [], timeout=timeout
        )

    def available(self) -> Availability:
        if importlib.util.find_spec("mlx") is None:
            return Availability(False, "MLX is not installed")
        return _probe(self.name)

    def device_info(self, datasheet: Datasheet | None = None) -> dict[str, Any]:
        key = datasheet.model_dump_json() if datasheet else ""
        if key not in self._info:
            payload = {"datasheet": datasheet.model_dump()} if datasheet else {}
            self._info[key] = self._call("device_info", payload, timeout=120)[0]
        return self._info[key]

    def compile(self, candidate: KernelCandidate, args: dict[str, ArgInfo]) -> CompileResult:
        t0 = time.monotonic()
        if candidate.language != self.language:
            wrong = (
                f"the {self.name} backend runs {self.language} candidates, not {candidate.language}"
            )
            return CompileResult(
                backend=self.name,
                ok=False,
                candidate_id=candidate.id,
                diagnostics=[{"message": wrong, "where": "generated"}],
            )
        if problem := _state_problem(candidate):
            return CompileResult(
                backend=self.name,
                ok=False,
                candidate_id=candidate.id,
                diagnostics=[{"message": problem, "where": "source"}],
                seconds=time.monotonic() - t0,
            )
        result = self._safe_call(
            "compile",
            {"candidate": candidate.model_dump(mode="json"), "args": _infos(args)},
            [],
            300,
        )
        if isinstance(result, str):
            return CompileResult(
                backend=self.name,
                ok=False,
                candidate_id=candidate.id,
                diagnostics=[{"message": result, "where": "generated"}],
                seconds=time.monotonic() - t0,
            )
        return CompileResult(
            backend=self.name, candidate_id=candidate.id, seconds=time.monotonic() - t0, **result[0]
        )

    def run(
        self,
        candidate: KernelCandidate,
        inputs: dict[str, Any],
        *,
        timeout: float = 60.0,
        order: str = "forward",
        poison: str = "nan",
        output_bytes: int | None = None,  # MLX allocates outputs: device memory bounds them
    ) -> RunResult:
        return self.run_together(candidate, [inputs], timeout=timeout, poison=poison)[0]

    def run_together(
        self,
        candidate: KernelCandidate,
        input_sets: list[dict[str, Any]],
        *,
        timeout: float = 60.0,
        poison: str = "nan",
    ) -> list[RunResult]:
        t0 = time.monotonic()
        if problem := _state_problem(candidate):
            return [RunResult(error=problem, seconds=time.monotonic() - t0) for _ in input_sets]
        specs, arrays = _pack_sets(input_sets)
        result = self._safe_call(
            "run",
            {"candidate": candidate.model_dump(mode="json"), "input_sets": specs, "poison": poison},
            arrays,
            timeout,
        )
        if isinstance(result, str):
            return [RunResult(error=result, seconds=time.monotonic() - t0)] * len(input_sets)
        reply, out = result
        if reply.get("error"):
            # A device fault (an illegal address, say) is sticky for the whole process on CUDA:
            # start a fresh worker so the next candidate is not blamed for this one.
            self._worker.restart()
            return [RunResult(error=reply["error"], seconds=time.monotonic() - t0)] * len(
                input_sets
            )
        results, data = [], iter(out)
        for s in reply["sets"]:
            outputs = [_as_float(next(data), d) for d in s["dtypes"]]
            masks = [next(data).astype(bool) if has else None for has in s["unwritten"]]
            results.append(
                RunResult(outputs=outputs, unwritten=masks, seconds=time.monotonic() - t0)
            )
        return results

    def run_op(self, folder, arrays, dtypes, params) -> RunResult:
        t0 = time.monotonic()
        # The worker sees none of mlxport's folders: the op's files travel with the request.
        files = {n: (Path(folder) / n).read_text() for n in op_call.OP_TEXT}
        header = {"files": files, "dtypes": dtypes, "params": params}
        result = self._safe_call("call_op", header, arrays, 600.0)
        if isinstance(result, str):
            return RunResult(error=result, seconds=time.monotonic() - t0)
        reply, out = result
        if reply.get("error"):
            self._worker.restart()  # a device fault is sticky for the process on CUDA
            return RunResult(error=reply["error"], seconds=time.monotonic() - t0)
        return RunResult(outputs=list(out), seconds=time.monotonic() - t0)

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
        from mlxport.tasks import case_infos

        payload = {
            "task_dir": str(task.folder),
            "candidate": candidate.model_dump(mode="json"),
            "case": case,
            "dtype": dtype,
            "seed": seed,
            "warmup": warmup,
            "iters": iters,
            "baselines": baselines,
        }
        # Inputs drawn and the candidate compiled in the timing worker before the timing lock is
        # taken: other processes' timings wait for timings, not for compiles or random numbers. A
        # failure is left for the measurement to report.
        args = _infos(case_infos(task, case, dtype))
        key = (candidate.id, json.dumps(args, sort_keys=True))
        prepared = self._safe_call(
            "prepare",
            {**payload, **({} if key in self._timer_compiled else {"args": args})},
            [],
            300,
            timing=True,
        )
        if isinstance(prepared, str):  # a crash or timeout: the restarted worker compiles afresh
            self._timer_compiled.clear()
        else:
            self._timer_compiled.add(key)
        reply = self._time("measure", payload)
        if reply.get("wrote_inputs"):
            raise WrongWhileTimed(
                f"candidate {candidate.id} wrote into its inputs while it was timed; a kernel may "
                "only write its outputs, so no timing is reported"
            )
        if reply.get("timed_outputs"):
            raise WrongWhileTimed(
                f"candidate {candidate.id} is right when checked but wrong as it is timed: "
                f"{reply['timed_outputs']}; a kernel may not rely on what its outputs held "
                "before the call, so no timing is reported"
            )
        return reply["samples"]

    def calibrate(self) -> dict[str, Any]:
        """Measure copy bandwidth and matmul rate with the benchmark's timer and store them for this
        device (see backends/calibration.py)."""
        self._info = {}  # device_info reports the calibration
        return self._time("calibrate", {})

    def copy_seconds(self, nbytes: int) -> float:
        """Seconds for the calibration's copy kernel to move ``nbytes`` (read + written), timed as
        ports are: for comparing a port with a copy of its own size."""
        return self._time("copy_seconds", {"nbytes": nbytes})["seconds"]

    def _time(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        from mlxport.backends.worker import WorkerError

        try:
            with timing_lock(self.name):
                return self._call(op, payload, timeout=600, timing=True)[0]
        except WorkerError as e:
            # A device fault is sticky for the whole process on CUDA: the next timing starts fresh.
            if self._timer is not None:
                self._timer.restart()
                self._timer_compiled.clear()
            raise BackendUnavailable(f"timing failed on {self.name}: {e}") from e

    def _safe_call(
        self,
        op: str,
        header: dict[str, Any],
        arrays: list[np.ndarray],
        timeout: float,
        *,
        timing: bool = False,
    ) -> Any:
        """The worker's answer, or one sentence saying why there is none (crash, timeout)."""
        from mlxport.backends.worker import WorkerError

        try:
            return self._call(op, header, arrays, timeout, timing=timing)
        except WorkerError as e:
            return str(e)


def _probe(name: str) -> Availability:
    """Ask a short-lived interpreter, so a broken GPU stack cannot take this process down."""
    import subprocess
    import sys

    code = (
        "import mlx.core as mx; import sys; "
        f"sys.exit(0 if mx.{'metal' if name == 'metal' else 'cuda'}.is_available() else 3)"
    )
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return Availability(False, "probing MLX timed out")
    if r.returncode == 0:
        return Availability(True)
    if name == "metal":
        why = (
            "not Apple silicon" if platform.system() != "Darwin" else "MLX reports no Metal device"
        )
    elif _installed("mlx-cuda-13") and _installed("mlx-cpu"):
        # Both wheels ship mlx/lib/libmlx.so; whichever pip installed last wins.
        why = (
            "mlx-cpu's libmlx.so replaced mlx-cuda-13's: pip install --force-reinstall --no-deps "
            f"mlx-cuda-13=={_installed('mlx-cuda-13')}"
        )
    else:
        why = (
            "MLX's CUDA backend is not installed or sees no NVIDIA GPU "
            "(pip install 'mlxport[cuda]')"
        )
    return Availability(
        False, why if r.returncode == 3 else f"{why}; probe said: {r.stderr.strip()[-200:]}"
    )


def _installed(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _infos(args: dict[str, ArgInfo]) -> dict[str, Any]:
    out = {}
    for k, v in args.items():
        out[k] = {"shape": list(v.shape), "dtype": v.dtype.name} if hasattr(v, "shape") else v
    return out


class WrongWhileTimed(UserError):
    """The candidate's outputs were wrong in the calls that were timed: its timing means nothing."""


def _state_problem(candidate: KernelCandidate) -> str | None:
    if candidate.language != "cuda":
        # an MSL candidate's program-scope data is refused by Metal's own rule (sim/source_checks)
        return None
    return _cuda_state_problem(candidate.header, candidate.source)


@functools.lru_cache(maxsize=256)  # parsed once per candidate, not per run
def _cuda_state_problem(header: str, source: str) -> str | None:
    from mlxport.backends.sim.source_checks import cuda_state_problem

    return cuda_state_problem(header, source)


def _pack_sets(
    input_sets: list[dict[str, Any]],
) -> tuple[list[list[dict[str, Any]]], list[np.ndarray]]:
    """Arrays travel as raw numpy data (bfloat16 as its uint16 bits); scalars in the header."""
    import mlx.core as mx

    from mlxport.tasks import MLX_LOCK, dtype_name

    sets, arrays = [], []
    for inputs in input_sets:
        specs = []
        for name, value in inputs.items():
            if isinstance(value, np.ndarray):
                value = mx.array(value)
            if isinstance(value, mx.array):
                with MLX_LOCK:
                    raw = np.array(value.view(mx.uint16) if value.dtype == mx.bfloat16 else value)
                specs.append({"name": name, "dtype": dtype_name(value.dtype), "array": len(arrays)})
                arrays.append(raw)
            else:
                specs.append({"name": name, "value": value})
        sets.append(specs)
    return sets, arrays


def _as_float(a: np.ndarray, dtype: str) -> np.ndarray:
    from mlxport.backends.sim.host import bfloat16_to_float32

    return bfloat16_to_float32(a) if dtype == "bfloat16" else a  # numpy has no bfloat16


class MetalBackend(GpuBackend):
    name = "metal"
    language = "msl"


class CudaBackend(GpuBackend):
    name = "cuda"
    language = "cuda"
