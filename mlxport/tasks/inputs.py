"""Fresh inputs for a case: arrays drawn from the task's distributions, reproducibly from a seed,
and what candidate expressions see of them."""

from __future__ import annotations

import math
import os
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.expr import ITEMSIZE, ArrayInfo, Dtype
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


def make_inputs(
    task: KernelTask, case: dict[str, Any], dtype: str, seed: int
) -> dict[str, mx.array]:
    """Input arrays for one case and dtype, drawn with numpy from ``seed``: reproducible
    anywhere."""
    rng = np.random.default_rng(seed)
    shapes = task.shapes(case, dtype)
    _check_memory(task, case, dtype, shapes)
    return {t.name: _draw(t, shapes[t.name], t.resolve_dtype(dtype), rng) for t in task.inputs}


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
    spec: TensorSpec, shape: tuple[int, ...], dtype: str, rng: np.random.Generator
) -> mx.array:
    init = spec.init
    match init.kind:
        case "normal":
            a = rng.normal(init.mean, init.std, shape)
        case "uniform":
            a = rng.uniform(init.low, init.high, shape)
        case "randint":
            a = rng.integers(int(init.low), int(init.high), shape)
        case "arange":
            a = np.arange(int(np.prod(shape))).reshape(shape) + init.low
        case "full":
            a = np.full(shape, init.value)
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
