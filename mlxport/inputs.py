"""Fresh random inputs for a task case, and calls of references and baselines on them."""

from __future__ import annotations

import threading
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.expr import ArrayInfo, Dtype
from mlxport.spec import KernelTask, TensorSpec
from mlxport.suite import TaskError, resolve

# MLX evaluation is not safe from several threads at once (ml-explore/mlx#2067): batch and eval
# run ports in threads, so every evaluation in this process goes through this lock.
MLX_LOCK = threading.RLock()

MX_DTYPES = {
    "float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16, "int32": mx.int32,
    "uint32": mx.uint32, "int64": mx.int64, "uint64": mx.uint64, "int8": mx.int8, "uint8": mx.uint8,
    "int16": mx.int16, "uint16": mx.uint16, "bool": mx.bool_,
}
DTYPE_NAMES = {v: k for k, v in MX_DTYPES.items()}


def dtype_name(d: mx.Dtype) -> str:
    return DTYPE_NAMES[d]


def make_inputs(task: KernelTask, case: dict[str, Any], dtype: str, seed: int) -> dict[str, mx.array]:
    """Input arrays for one case and dtype, drawn with numpy from ``seed`` (reproducible anywhere)."""
    rng = np.random.default_rng(seed)
    shapes = task.shapes(case, dtype)
    return {t.name: _draw(t, shapes[t.name], t.resolve_dtype(dtype), rng) for t in task.inputs}


def _draw(spec: TensorSpec, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> mx.array:
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
    if dtype.startswith("float") or dtype == "bfloat16":
        return mx.array(a.astype(np.float32)).astype(MX_DTYPES[dtype])
    return mx.array(a).astype(MX_DTYPES[dtype])


def arg_infos(task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]) -> dict[str, Any]:
    """What candidate expressions see: ArrayInfo per input, and each param's value."""
    infos: dict[str, Any] = {n: ArrayInfo(tuple(a.shape), Dtype(dtype_name(a.dtype))) for n, a in inputs.items()}
    infos.update(task.param_values(case))
    return infos


def call(ref: str, task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]) -> list[mx.array]:
    """Call a reference or baseline (``module:function``): inputs positionally in task order,
    params by keyword."""
    fn = resolve(task, ref)
    args = [inputs[t.name] for t in task.inputs]
    try:
        out = fn(*args, **task.param_values(case))
        outs = list(out) if isinstance(out, tuple | list) else [out]
        mx.eval(*outs)
    except Exception as e:
        raise TaskError(f"{ref} of task {task.name} raised {type(e).__name__}: {e}") from e
    if len(outs) != len(task.outputs):
        raise TaskError(f"{ref} returned {len(outs)} output(s); task {task.name} declares {len(task.outputs)}")
    return outs


def golden(task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]) -> list[mx.array]:
    """The reference evaluated in float32 on the same (already rounded) inputs: the truth that
    every dtype is compared with, so a half-precision reference's own rounding is not the bar."""
    up = {n: a.astype(mx.float32) if a.dtype in (mx.float16, mx.bfloat16) else a for n, a in inputs.items()}
    return call(task.reference, task, up, case)


def to_numpy(a: mx.array) -> np.ndarray:
    """float64 copy for comparisons (bfloat16 has no numpy dtype)."""
    if a.dtype == mx.bfloat16:
        a = a.astype(mx.float32)
    return np.array(a).astype(np.float64)
