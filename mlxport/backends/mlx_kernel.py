"""Running candidates through MLX itself: ``mx.fast.metal_kernel`` and ``mx.fast.cuda_kernel``.

Everything here runs inside a worker process (see ``backends/metal.py`` and ``backends/cuda.py``)
so a kernel that faults or hangs the GPU fails that candidate, never the session.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from mlxport.expr import ArrayInfo, Dtype
from mlxport.spec import Diagnostic, KernelCandidate
from mlxport.tasks import DTYPE_NAMES, MX_DTYPES

BODY_PROBE = "mlxport_body_starts_here"
HEADER_PROBE = "mlxport_header_starts_here"

_kernels: dict[str, Any] = {}


def make_kernel(candidate: KernelCandidate, *, probe: bool = False):
    """The MLX kernel object, built once per candidate and process (MLX caches compiles too)."""
    key = candidate.id + (":probe" if probe else "")
    if key not in _kernels:
        source, header = candidate.source, candidate.header
        if probe:
            source = f"#error {BODY_PROBE}\n{source}"
            header = f"#error {HEADER_PROBE}\n{header}" if header else header
        kwargs = dict(
            name=candidate.name,
            input_names=candidate.input_names,
            output_names=candidate.output_names,
            source=source,
            header=header,
            ensure_row_contiguous=candidate.ensure_row_contiguous,
        )
        if candidate.language == "msl":
            _kernels[key] = mx.fast.metal_kernel(**kwargs, atomic_outputs=candidate.atomic_outputs)
        else:
            _kernels[key] = mx.fast.cuda_kernel(**kwargs, shared_memory=0)
    return _kernels[key]


def arg_info(value: Any) -> ArrayInfo | int | float | bool:
    if isinstance(value, mx.array):
        return ArrayInfo(tuple(value.shape), Dtype(DTYPE_NAMES[value.dtype]))
    return value


def drawn_poison(poison: str | None, dtypes: list[str]) -> float | None:
    """What outputs without an init_value start as on the GPU, drawn for this run from the
    system's randomness (MLX fills every output with one value, so one value a run, not one an
    element as on the simulator): ``nan`` where every output is a float (unwritten elements show),
    else, and for ``finite``, a number such as data holds, an integer every output dtype holds
    where one is not a float. None: no fill (``poison`` None, as a user's call)."""
    if not poison:
        return None
    floats = all(d.startswith(("float", "bfloat")) for d in dtypes)
    if poison == "nan" and floats:
        return float("nan")
    rng = np.random.default_rng()
    if poison == "finite" and rng.random() < 0.5:
        return 0.0  # fresh GPU memory is often zeros: a kernel telling them apart is found out
    if floats:
        return float(rng.standard_normal() * 10 ** rng.uniform(-1, 1))
    low, high = -(1 << 24), 1 << 24  # exact in float32, which MLX's init_value passes through
    for d in dtypes:
        if d == "bool":
            low, high = 0, 2
        elif not d.startswith(("float", "bfloat")):
            info = np.iinfo(d)
            low, high = max(low, int(info.min)), min(high, int(info.max) + 1)
    return float(rng.integers(low, high))


def launch_kwargs(
    candidate: KernelCandidate, inputs: dict[str, Any], *, poison: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of the kernel call for inputs of these shapes and dtypes; ``poison``
    (``nan`` or ``finite``) fills outputs without an init_value with a value drawn for this call
    (drawn_poison), so unwritten elements, or reads before writes, show."""
    spec = candidate.launch({n: arg_info(v) for n, v in inputs.items()})
    init = candidate.init_value
    if init is None:
        init = drawn_poison(poison, list(spec.output_dtypes))
    template = [(k, MX_DTYPES[v] if isinstance(v, str) else v) for k, v in spec.template]
    return {
        "output_shapes": spec.output_shapes,
        "output_dtypes": [MX_DTYPES[d] for d in spec.output_dtypes],
        "grid": spec.grid,
        "threadgroup": spec.threadgroup,
        "template": template or None,
        "init_value": init,
        "shared_memory": spec.shared_memory,
    }


def scalar_input(value: bool | int | float, language: str) -> mx.array:
    """A scalar param as a kernel input. Metal takes a 0-d array by reference (``eps``). On CUDA,
    MLX serves every buffer of 8 bytes or less from managed memory that the host writes, so a 0-d
    input read by every block crosses the bus each time: on an H200 that cost rmsnorm (eps) and
    rope (offset, base) 4-54% of their time (``benchmarks/timing_method.py --stages scalars``).
    A 16-element array the GPU writes lives in device memory; the kernel reads ``eps[0]`` alike."""
    if language == "msl":
        return mx.array(value)
    return mx.full((16,), value, dtype=mx.array(value).dtype)  # MLX's own dtype for a Python scalar


def kernel_inputs(candidate: KernelCandidate, inputs: dict[str, Any]) -> list[mx.array]:
    """The kernel's inputs in order, scalar params made arrays by ``scalar_input``."""
    return [
        v if isinstance(v, mx.array) else scalar_input(v, candidate.language)
        for v in (inputs[n] for n in candidate.input_names)
    ]


def launch(
    candidate: KernelCandidate,
    inputs: dict[str, Any],
    *,
    poison: str | None = None,
    probe: bool = False,
) -> list[mx.array]:
    """One lazy call of the kernel. ``inputs`` may hold more names than the kernel takes (the
    task's params), which are in scope for the launch expressions."""
    kwargs = launch_kwargs(candidate, inputs, poison=poison)
    outs = bound_kernel(candidate, kwargs.pop("shared_memory"), probe=probe)(
        inputs=kernel_inputs(candidate, inputs), **kwargs
    )
    return started_as(candidate, inputs, outs)


def started_as(
    candidate: KernelCandidate, inputs: dict[str, Any], outs: list[mx.array]
) -> list[mx.array]:
    """In-out outputs: what the kernel never wrote (still NaN) is the input's."""
    for name, src in candidate.inout.items():
        k = candidate.output_names.index(name)
        outs[k] = mx.where(
            mx.isnan(outs[k]), inputs[src].reshape(outs[k].shape).astype(outs[k].dtype), outs[k]
        )
    return outs


def caller(candidate: KernelCandidate, example: dict[str, Any]):
    """A function of an input dict that launches the kernel, with the launch arguments resolved
    once from ``example`` (they depend only on shapes, dtypes and params), as a user's op calls it.
    Scalar params of ``example`` become kernel inputs once (arrays in an input dict take
    precedence)."""
    kwargs = launch_kwargs(candidate, example)
    kernel = bound_kernel(candidate, kwargs.pop("shared_memory"))
    scalars = {
        n: scalar_input(v, candidate.language)
        for n, v in example.items()
        if n in candidate.input_names and not isinstance(v, mx.array)
    }
    mx.eval(list(scalars.values()))
    return lambda inputs: started_as(
        candidate, inputs, kernel(inputs=kernel_inputs(candidate, {**scalars, **inputs}), **kwargs)
    )


def bound_kernel(candidate: KernelCandidate, shared_memory: int = 0, *, probe: bool = False):
    """The kernel object; cuda_kernel takes dynamic shared memory at construction."""
    if candidate.language == "cuda" and shared_memory:
        key = f"{candidate.id}:smem{shared_memory}"
        if key not in _kernels:
            _kernels[key] = mx.fast.cuda_kernel(
                name=candidate.name,
                input_names=candidate.input_names,
                output_names=candidate.output_names,
                source=candidate.source,
                header=candidate.header,
                ensure_row_contiguous=candidate.ensure_row_contiguous,
                shared_memory=shared_memory,
            )
        return _kernels[key]
    return make_kernel(candidate, probe=probe)


def compile_diagnostics(
    candidate: KernelCandidate, inputs: dict[str, Any], error: str
) -> list[Diagnostic]:
    """Map compiler messages back to lines of the candidate's body and header.

    MLX prepends its own headers and the generated signature, so the compiler's line numbers
    are offset. A second compile with ``#error`` markers at the start of the body and header
    tells exactly where they begin in the generated text.
    """
    starts = _probe_starts(candidate, inputs)
    diags = []
    for line, col, msg in _parse_errors(error):
        diags.append(_locate(line, col, msg, starts))
    return diags or [
        Diagnostic(
            message=error.strip().splitlines()[-1][:500] if error.strip() else "compile failed",
            where="generated",
        )
    ]


def _probe_starts(candidate: KernelCandidate, inputs: dict[str, Any]) -> dict[str, int]:
    try:
        mx.eval(*launch(candidate, inputs, probe=True))
    except Exception as e:  # the probe is meant to fail
        text = str(e)
    else:
        return {}
    starts = {}
    for line, _, msg in _parse_errors(text):
        if BODY_PROBE in msg:
            starts["source"] = line
        elif HEADER_PROBE in msg:
            starts["header"] = line
    if "header" in starts and "source" in starts:
        starts["source"] -= 1  # the header's probe line pushed the body down by one
    return starts


# Metal: "program_source:12:5: error: use of undeclared identifier 'y'"
# NVRTC: "custom_kernel_k.cu(12): error: identifier "y" is undefined"
_ERROR_RE = re.compile(r"(?:program_source:(\d+):(\d+)|\.cu\((\d+)\)):\s*(?:fatal )?error:\s*(.*)")


def _parse_errors(text: str) -> list[tuple[int, int | None, str]]:
    out = []
    for m in _ERROR_RE.finditer(text):
        line = int(m.group(1) or m.group(3))
        col = int(m.group(2)) if m.group(2) else None
        out.append((line, col, m.group(4).strip()))
    return out


def _locate(line: int, col: int | None, msg: str, starts: dict[str, int]) -> Diagnostic:
    # A region starts where its probe reported; the probe line itself was inserted, so the
    # region's first real line sits at that same generated line in the original compile.
    for where in ("source", "header"):
        start = starts.get(where)
        if start is None or line < start:
            continue
        later = [s for s in starts.values() if s > start]
        if later and line >= min(later):
            continue
        return Diagnostic(message=msg, where=where, line=line - start + 1, column=col)
    return Diagnostic(message=msg, where="generated", line=line, column=col)


GROUP = 20  # most calls submitted in one evaluation


def group_size(
    fn,
    input_sets: list[dict[str, Any]],
    *,
    min_batch_seconds: float = 2e-3,
    group_bytes: int = 2 << 30,
) -> int:
    """How many calls of ``fn`` to submit per evaluation (by the wall clock) or per profiled round
    (by device time): up to GROUP while a group stays under ``min_batch_seconds`` and
    ``group_bytes`` of outputs. Slow calls (a naive Python loop) get one; grouping only matters
    where the per-evaluation overhead is visible."""
    first = as_list(fn(input_sets[0]))
    mx.eval(*first)
    out_bytes = sum(o.nbytes for o in first)
    del first
    t0 = time.perf_counter()
    mx.eval(*as_list(fn(input_sets[-1])))
    alone = time.perf_counter() - t0
    return max(
        1, min(GROUP, group_bytes // max(out_bytes, 1), int(min_batch_seconds / max(alone, 1e-7)))
    )


def time_calls(
    fn,
    input_sets: list[dict[str, Any]],
    *,
    warmup: int,
    iters: int,
    min_batch_seconds: float = 2e-3,
    group: int | None = None,
) -> list[float]:
    """Seconds per call by the wall clock (``backends/timer.py`` picks it where the profiler's
    device time is not available). Each sample runs a batch of calls (rotating over input sets, so
    no cache or reused result helps) and synchronises once. Calls are submitted ``group`` at a time
    in one evaluation (default: ``group_size``), as a model's forward pass submits many ops
    together: one evaluation per call would time MLX's per-evaluation overhead (about 20 us on
    CUDA), not the kernel. Calls in a group are independent, so a device that runs them from a
    CUDA graph may overlap them (throughput, not latency, for kernels that do not fill the GPU):
    the CUDA timing worker turns graphs off, so calls run in order. Compare functions at one group
    size."""
    if group is None:
        group = group_size(fn, input_sets, min_batch_seconds=min_batch_seconds)

    whole = group == 1 or calls_in_order()

    def batch(n: int, offset: int) -> float:
        # Where the device starts a group only once it is submitted whole (a CUDA graph, a Metal
        # command buffer), the clock starts then: building the first group leaves the device
        # idle, a cost a running model does not pay between its ops. Where kernels start as they
        # are encoded (CUDA graphs off, as in the timing worker), or calls run one at a time
        # (group 1: slow enough that this does not matter), the batch is timed whole.
        t0 = time.perf_counter() if whole else None
        pending: list = []
        for j in range(n):
            pending += as_list(fn(input_sets[(offset + j) % len(input_sets)]))
            if (j + 1) % group == 0 or j == n - 1:
                mx.async_eval(pending)
                pending = []
                if t0 is None:
                    t0 = time.perf_counter()
        mx.synchronize()
        return time.perf_counter() - t0

    for i in range(warmup):
        batch(group, i)
    single = min(batch(group, i) for i in range(3)) / group
    # Grouped batches span at least five groups, so the first group's own submission (which the
    # clock skips) is a small part of what the device does in the sample.
    n = max(
        group if group == 1 else 5 * group, min(1000, int(min_batch_seconds / max(single, 1e-7)))
    )
    return [batch(n, i * n) / n for i in range(iters)]


def calls_in_order() -> bool:
    """Whether MLX launches each kernel as it is encoded, one after another on one stream
    (CUDA graphs off, as in the timing worker); MLX's CUDA graphs and Metal command buffers start
    only once an evaluation is submitted whole."""
    return mx.cuda.is_available() and os.environ.get("MLX_USE_CUDA_GRAPHS") == "0"


def as_list(out) -> list:
    return [out] if isinstance(out, mx.array) else [v for _, v in tree_flatten(out)]
