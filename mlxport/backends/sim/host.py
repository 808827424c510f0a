"""Kernel inputs as the simulator receives them: bytes, dtype, shape and element strides.

Inputs may be mx.array, numpy arrays or Python scalars (MLX's rule: bool -> bool, int -> int32,
float -> float32). With ``ensure_row_contiguous=False`` an input keeps its layout: the bytes
sent are the span its elements cover, and strides (which may be 0 or negative) index it.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlxport.backends.sim.signature import SignatureError, scalar_info
from mlxport.expr import ITEMSIZE, ArrayInfo, Dtype

NUMPY_NAMES = {
    "float32": "float32",
    "float16": "float16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "bool": "bool",
}
STORAGE = {**NUMPY_NAMES, "bfloat16": "uint16"}


@dataclass
class HostArray:
    dtype: str  # logical dtype name (bfloat16 travels as uint16 bits)
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    data: np.ndarray  # contiguous bytes covering every element
    offset: int  # bytes from the start of ``data`` to element 0

    @property
    def info(self) -> ArrayInfo:
        return ArrayInfo(self.shape, Dtype(self.dtype))


def from_value(value: Any, row_contiguous: bool) -> HostArray:
    if isinstance(value, bool | int | float) and not isinstance(value, np.generic):
        dtype = scalar_info(value).dtype.name
        return _from_numpy(np.array(value, dtype=NUMPY_NAMES[dtype]), dtype, True)
    if type(value).__module__.startswith("mlx"):
        return _from_mlx(value, row_contiguous)
    arr = np.asarray(value)
    name = arr.dtype.name
    if name not in NUMPY_NAMES:
        raise SignatureError(
            f"numpy dtype {name} cannot be passed to a Metal kernel "
            f"(use one of {', '.join(NUMPY_NAMES)})"
        )
    return _from_numpy(arr, name, row_contiguous)


def _from_mlx(x: Any, row_contiguous: bool) -> HostArray:
    import mlx.core as mx

    name = str(x.dtype).rsplit(".", 1)[-1].replace("bool_", "bool")
    if name not in STORAGE:
        raise SignatureError(f"mlx dtype {name} cannot be passed to a Metal kernel")
    mx.eval(x)
    arr = np.asarray(x.view(mx.uint16) if name == "bfloat16" else x)
    return _from_numpy(arr, name, row_contiguous)


def _from_numpy(arr: np.ndarray, dtype: str, row_contiguous: bool) -> HostArray:
    itemsize = ITEMSIZE[dtype]
    if row_contiguous or arr.ndim == 0 or arr.size == 0:
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
        return HostArray(
            dtype, tuple(arr.shape), _row_strides(arr.shape), arr.reshape(-1).view(np.uint8), 0
        )
    lo = sum(min(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides, strict=True))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides, strict=True)) + itemsize
    raw = ctypes.string_at(arr.ctypes.data + lo, hi - lo)
    strides = tuple(s // itemsize for s in arr.strides)
    return HostArray(dtype, tuple(arr.shape), strides, np.frombuffer(raw, dtype=np.uint8), -lo)


def _row_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def bfloat16_bits(values: np.ndarray | float) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even) and return the bits as uint16."""
    u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded)


def bfloat16_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def output_fill(dtype: str, init_value: float | None) -> Any:
    """How the worker fills an output before the launch: None poisons it."""
    if init_value is None:
        return None
    if dtype == "bfloat16":
        return {"bits": int(bfloat16_bits(init_value))}
    if dtype == "bool":
        return bool(init_value)
    if dtype.startswith(("int", "uint")):
        # NaN (an in-out or partly written output's poison) has no integer form: MLX converts it as
        # the CPU does, and Apple silicon's float-to-int conversion gives 0
        return 0 if math.isnan(init_value) else int(init_value)
    return float(init_value)
