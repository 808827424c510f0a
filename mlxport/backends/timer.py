"""Seconds per call of functions on the GPU: how every benchmark and calibration number is taken.

On CUDA, with torch installed, calls are timed by their device time: torch's profiler records
every kernel in the process through CUPTI, MLX's included, with its start and end on the GPU.
The timing worker runs with CUDA graphs off, so calls run in order on one stream and kernels never
overlap; a one-thread marker kernel separates functions and rounds, and a call's time is the sum of
its kernels' durations (a port with ``init_value`` also pays MLX's fill kernels). That is what
the call costs inside a CUDA graph, where MLX puts a model's ops. The wall clock around calls in
order also counts launching them from the CPU, which a busy host makes slow: on the lent H200,
softmax_rows bf16 4096x4096 took 33.1 us a call by the wall clock and 18.4 us of device time,
against 35.2 and 31.9 us for mx.softmax, so 1.06x by one and 1.73x by the other (BENCHMARKS.md,
session 4).

Without torch, with CUDA graphs on, and on Metal, the wall clock is the timer: batches of calls
that synchronise once. Every report names its basis.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import mlx.core as mx

from mlxport.backends import mlx_kernel
from mlxport.spec import KernelCandidate

DEVICE = "device time (CUDA profiler), calls in order"
WALL_IN_ORDER = "wall clock, calls in order"
WALL = "wall clock"
MARKER = "mlxport_marker"
MAX_ROUNDS = 10  # a naive loop launches thousands of kernels a call: every round is in the trace
_GPU_EVENTS = {"kernel", "gpu_memset", "gpu_memcpy"}


@cache
def profiler_available() -> bool:
    """Whether the CUDA profiler sees MLX's kernels here: torch built with CUDA, and a probe kernel
    found in its trace."""
    if not mx.cuda.is_available():
        return False
    try:
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    marker = _marker()
    try:
        return any(MARKER in e["name"] for e in _gpu_events(lambda: mx.eval(marker())))
    except Exception:  # a profiler that cannot start (no CUPTI) is no profiler
        return False


def basis(*, calls_in_order: bool | None = None) -> str:
    """What ``samples`` reads in this process, or (``calls_in_order=True``) in the timing worker,
    which runs with CUDA graphs off."""
    ordered = (
        mlx_kernel.calls_in_order()
        if calls_in_order is None
        else calls_in_order and mx.cuda.is_available()
    )
    if ordered:
        return DEVICE if profiler_available() else WALL_IN_ORDER
    return WALL


def samples(
    fns: dict[str, Callable[[dict[str, Any]], Any]],
    sets: list[dict[str, Any]],
    *,
    warmup: int,
    iters: int,
) -> dict[str, list[float]]:
    """Seconds per call of each function, interleaved in rounds on the same inputs so that drift
    hits all alike, rotating over ``sets`` so no cache or reused result helps. Functions fast enough
    to be grouped share one group size; a call too slow to group (a naive loop) runs alone. By
    device time: one sample per round, ``iters // 3`` rounds (5 to MAX_ROUNDS); by the wall clock:
    3 rounds of ``iters // 3`` samples."""
    natural = {name: mlx_kernel.group_size(fn, sets) for name, fn in fns.items()}
    common = min((g for g in natural.values() if g > 1), default=1)
    groups = {name: common if g > 1 else 1 for name, g in natural.items()}
    if basis() == DEVICE:
        traces = profile(
            {name: (lambda j, fn=fn: fn(sets[j % len(sets)])) for name, fn in fns.items()},
            calls=groups,
            rounds=min(MAX_ROUNDS, max(5, iters // 3)),
            warmup=warmup,
        )
        return {name: t.device for name, t in traces.items()}
    out: dict[str, list[float]] = {name: [] for name in fns}
    rounds = 3
    for r in range(rounds):
        for name, fn in fns.items():
            out[name] += mlx_kernel.time_calls(
                fn,
                sets,
                warmup=warmup if r == 0 else 1,
                iters=max(1, iters // rounds),
                group=groups[name],
            )
    return out


@dataclass
class Trace:
    device: list[float]  # per round: summed kernel durations per call, seconds
    span: list[float]  # per round: first kernel start to last kernel end, per call, seconds
    kernels: dict[str, float]  # kernel name -> launches per call, in the first round


def profile(
    fns: dict[str, Callable[[int], Any]],
    *,
    calls: dict[str, int] | int,
    rounds: int,
    warmup: int = 3,
) -> dict[str, Trace]:
    """Run each function (of the call's index, counting on across rounds) ``calls`` times per
    round, ``rounds`` rounds interleaved, under the CUDA profiler, and read back each call's
    kernels. Needs calls in order (``MLX_USE_CUDA_GRAPHS=0`` before MLX starts)."""
    if not mlx_kernel.calls_in_order():
        raise RuntimeError(
            "device time needs calls in order: set MLX_USE_CUDA_GRAPHS=0 before MLX starts"
        )
    calls = calls if isinstance(calls, dict) else dict.fromkeys(fns, calls)
    marker = _marker()
    for fn in fns.values():  # compile and allocate outside the trace
        mx.eval(*[o for j in range(max(1, warmup)) for o in mlx_kernel.as_list(fn(j))])
    mx.eval(marker())
    mx.synchronize()

    def timed() -> None:
        for r in range(rounds):
            for name, fn in fns.items():
                mx.eval(marker())
                pending: list[mx.array] = []
                for j in range(calls[name]):
                    pending += mlx_kernel.as_list(fn(r * calls[name] + j))
                    if (j + 1) % 10 == 0:
                        mx.async_eval(pending)
                        pending = []
                mx.eval(pending)
        mx.eval(marker())

    segments = split_at_markers(_gpu_events(timed))
    if len(segments) != rounds * len(fns):
        raise RuntimeError(
            f"the CUDA profiler saw {len(segments) + 1} marker kernels, not {rounds * len(fns) + 1}"
        )
    out = {}
    for i, name in enumerate(fns):
        n = calls[name]
        mine = [segments[r * len(fns) + i] for r in range(rounds)]
        if not all(mine):
            raise RuntimeError(f"{name} launched no GPU kernel: device time has nothing to measure")
        out[name] = Trace(
            device=[sum(k["dur"] for k in seg) * 1e-6 / n for seg in mine],
            span=[
                (max(k["ts"] + k["dur"] for k in seg) - min(k["ts"] for k in seg)) * 1e-6 / n
                for seg in mine
            ],
            kernels={k: v / n for k, v in Counter(e["name"] for e in mine[0]).items()},
        )
    return out


def _gpu_events(work: Callable[[], None]) -> list[dict[str, Any]]:
    """Run ``work`` under torch's CUDA profiler: the GPU events of its Chrome trace."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    torch.cuda.init()  # the primary context, which MLX uses too
    with warnings.catch_warnings(), torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        warnings.simplefilter("ignore")  # torch's notes on its own profiling cycles
        work()
        mx.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in _GPU_EVENTS]


def split_at_markers(gpu_events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """GPU events in start order, as the stretches between consecutive marker kernels (empty ones
    kept, so stretches stay aligned with what ran); work before the first marker and after the
    last is dropped."""
    gpu = sorted(gpu_events, key=lambda e: e["ts"])
    segments: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] | None = None
    for e in gpu:
        if MARKER in e["name"]:
            if current is not None:
                segments.append(current)
            current = []
        elif current is not None:
            current.append(e)
    return segments


def _marker():
    cand = KernelCandidate(
        language="cuda",
        name=MARKER,
        input_names=["x"],
        output_names=["out"],
        output_shapes=[[64]],
        output_dtypes=["float32"],
        grid=[1, 1, 1],
        threadgroup=[1, 1, 1],
        source="out[0] = x[0];",
    )
    x = mx.ones((64,))
    fn = mlx_kernel.caller(cand, {"x": x})
    return lambda: fn({"x": x})
