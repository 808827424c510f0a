"""Fresh inputs for a case: arrays drawn from the task's distributions, reproducibly from a seed,
and what candidate expressions see of them."""

from __future__ import annotations

import math
import os
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.expr import ITEMSIZE, ArrayInfo, Dtype, as_int
from mlxport.spec import KernelTask, TensorSpec
from mlxport.tasks.folder import TaskError

MX_DTYPES = {
    "float32": mx.float32,
    "float16": mx.float16,
    "bfloat16": mx.bfloat16,
    "int32": mx.int32,
    "uint32": mx.uint32,
    "int64": mx.int64,
    "uint64": mx.uint64,
    "int8": mx.int8,
    "uint8": mx.uint8,
    "int16": mx.int16,
    "uint16": mx.uint16,
    "bool": mx.bool_,
}
DTYPE_NAMES = {v: k for k, v in MX_DTYPES.items()}


def dtype_name(d: mx.Dtype) -> str:
    return DTYPE_NAMES[d]


# The distributions one verification draws float inputs from: the task's own, a wide one (logits
# of scale 30, where a softmax without its row max overflows), one with zero and constant rows
# (where a norm without its eps divides by zero), and one of each sign (where a - |b| passes for
# a + b when b is never positive). Only inputs the task draws at random (normal, uniform) change.
DISTRIBUTIONS = {
    "task": "the task's own",
    "wide": "normal with a standard deviation of 30",
    "rows": "the task's, with a zero row, a constant row along the last axis and scattered zeros",
    "positive": "the task's, made positive",
    "negative": "the task's, made negative",
}


def make_inputs(
    task: KernelTask, case: dict[str, Any], dtype: str, seed: int, dist: str = "task"
) -> dict[str, mx.array]:
    """Input arrays for one case and dtype, drawn with numpy from ``seed`` (reproducible anywhere)
    from one of DISTRIBUTIONS."""
    rng = np.random.default_rng(seed)
    shapes = task.shapes(case, dtype)
    _check_memory(task, case, dtype, shapes)
    names = task.bindings(case, dtype)
    out = {}
    for t in task.inputs:
        a = _draw(t, shapes[t.name], names, rng)
        if dist != "task" and t.init.kind in ("normal", "uniform"):
            a = _reshaped(a, dist, rng)
        out[t.name] = _array(a, t.resolve_dtype(dtype))
    return out


def _reshaped(a: np.ndarray, dist: str, rng: np.random.Generator) -> np.ndarray:
    if dist == "wide":
        return rng.normal(0.0, 30.0, a.shape)
    if dist == "positive":
        return np.abs(a)
    if dist == "negative":
        return -np.abs(a)
    b = a.copy()
    rows = b.reshape(-1, b.shape[-1]) if b.ndim > 1 else b.reshape(1, -1)  # views of b
    # zeros where no other input has them too: `a == 0 ? -b : a + b` is wrong only there
    b.reshape(-1)[rng.random(b.size) < 1 / 16] = 0.0
    if rows.shape[0] >= 2:
        rows[0], rows[-1] = 0.0, _exactly_summed(rows[-1, 0])
    elif rows.size:  # one row: a zero stretch and a constant one
        q = max(1, rows.shape[1] // 4)
        rows[0, :q], rows[0, -q:] = 0.0, _exactly_summed(rows[0, -q])
    return b


def _exactly_summed(v: float) -> float:
    """``v`` rounded to a quarter: a row of it sums exactly in float32 in any order (up to 2^16
    elements of magnitude under 64), so a constant row tests a norm's eps, not which order the
    kernel and the golden add in (a mean off by one rounding, times rsqrt(eps), is a visible
    error in an output that is exactly the bias)."""
    return float(np.clip(np.round(v * 4) / 4, -63.75, 63.75))


def _check_memory(
    task: KernelTask, case: dict[str, Any], dtype: str, shapes: dict[str, tuple[int, ...]]
) -> None:
    """Refuse, before allocating, a case whose arrays cannot fit in this machine's memory (inputs
    are drawn in float64 first)."""

    def nbytes(spec: TensorSpec, extra: int = 0) -> int:
        return math.prod(shapes[spec.name]) * (ITEMSIZE[spec.resolve_dtype(dtype)] + extra)

    need = sum(nbytes(t, 8) for t in task.inputs) + sum(nbytes(t) for t in task.outputs)
    have = physical_memory()
    if have and need > have:
        raise TaskError(
            f"case {task.case_label(case)} needs {_size(need)} for its arrays at {dtype}; this "
            f"machine "
            f"has {_size(have)} of memory: make the case smaller"
        )


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TB"


def _draw(
    spec: TensorSpec, shape: tuple[int, ...], names: dict[str, Any], rng: np.random.Generator
) -> np.ndarray:
    init = spec.init
    match init.kind:
        case "normal":
            return rng.normal(init.mean, init.std, shape)
        case "uniform":
            return rng.uniform(init.low, init.high, shape)
        case "randint":
            low, high = (as_int(v, names, f"init of {spec.name}") for v in (init.low, init.high))
            if low >= high:
                raise TaskError(
                    f"{spec.name} draws integers from [{low}, {high}) at this case, which is empty"
                )
            return rng.integers(low, high, shape)
        case "arange":
            return np.arange(int(np.prod(shape))).reshape(shape) + init.low
        case "full":
            return np.full(shape, init.value)


def _array(a: np.ndarray, dtype: str) -> mx.array:
    if dtype.startswith("float") or dtype == "bfloat16":
        return mx.array(a.astype(np.float32)).astype(MX_DTYPES[dtype])
    return mx.array(a).astype(MX_DTYPES[dtype])


def case_infos(task: KernelTask, case: dict[str, Any], dtype: str) -> dict[str, Any]:
    """``arg_infos`` at a case and dtype, without making the inputs."""
    shapes = task.shapes(case, dtype)
    infos: dict[str, Any] = {
        t.name: ArrayInfo(shapes[t.name], Dtype(t.resolve_dtype(dtype))) for t in task.inputs
    }
    infos.update(task.param_values(case))
    return infos


def arg_infos(
    task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]
) -> dict[str, Any]:
    """What candidate expressions see: ArrayInfo per input, and each param's value."""
    infos: dict[str, Any] = {
        n: ArrayInfo(tuple(a.shape), Dtype(dtype_name(a.dtype))) for n, a in inputs.items()
    }
    infos.update(task.param_values(case))
    return infos
