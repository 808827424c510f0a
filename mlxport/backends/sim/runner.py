"""The simulator's side of the worker process: load a kernel library and launch it.

Runs inside ``mlxport.backends.worker`` (target ``mlxport.backends.sim.runner:handle``), so a
kernel that crashes or hangs never takes the caller with it. numpy and ctypes only.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

ERR_LEN = 4096


class Buffer(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("base", ctypes.c_void_p),
        ("bytes", ctypes.c_int64),
        ("data", ctypes.c_void_p),
        ("elem_size", ctypes.c_int32),
        ("space", ctypes.c_int32),
        ("mask", ctypes.c_void_p),
        ("touched", ctypes.c_int64),
        ("counted", ctypes.c_int64),
    ]


class LaunchParams(ctypes.Structure):
    _fields_ = [
        ("buffers", ctypes.POINTER(Buffer)),
        ("nbuffers", ctypes.c_int32),
        ("fibers", ctypes.c_int32),
        ("threads", ctypes.c_int32),
        ("reverse", ctypes.c_int32),
        ("grid", ctypes.c_uint32 * 3),
        ("threadgroup", ctypes.c_uint32 * 3),
        ("stack_bytes", ctypes.c_int64),
        ("shared_bytes", ctypes.c_int64),
        ("tg_memory_limit", ctypes.c_int64),
        ("races_after", ctypes.c_int32),
        ("cuda", ctypes.c_int32),
        ("stats", ctypes.c_int64 * 4),
        ("count", ctypes.c_int32),
        ("count_line_bytes", ctypes.c_int32),
        ("count_banks", ctypes.c_int32),
        ("count_bank_bytes", ctypes.c_int32),
        ("counts", ctypes.c_int64 * 12),
    ]


SPACES = {"device": 1, "constant": 2, "generic": 4}
CONFLICT = 0xFFFFFFFE  # two threadgroups touched the element without atomics (races_after)
_libraries: dict[str, Any] = {}


def _library(path: str) -> Any:
    if path not in _libraries:
        lib = ctypes.CDLL(path)
        lib.mlxsim_run.argtypes = [ctypes.POINTER(LaunchParams), ctypes.c_char_p, ctypes.c_int]
        lib.mlxsim_run.restype = ctypes.c_int
        _libraries[path] = lib
    return _libraries[path]


def _filled(slot: dict[str, Any], poison: str) -> np.ndarray:
    storage, fill = slot["storage"], slot["fill"]
    if fill is None:
        return _poisoned(slot.get("dtype", storage), storage, slot["shape"], poison)
    out = np.empty(slot["shape"], dtype=np.dtype(storage))
    if isinstance(fill, dict):  # bfloat16 bits
        out.fill(fill["bits"])
    else:
        out.fill(fill)
    return out


# (exponent bits, mantissa bits) of the float dtypes
_FLOAT_BITS = {"float32": (8, 23), "float16": (5, 10), "bfloat16": (8, 7)}


def _poisoned(dtype: str, storage: str, shape: list[int], poison: str) -> np.ndarray:
    """What an output starts as without an init_value: garbage, as a GPU leaves it, drawn for this
    run and element from the system's randomness, so a kernel cannot recognise the verifier's
    fill. ``poison`` "nan": NaNs of any sign and payload (a value read before it is written
    shows); "finite": numbers such as data holds, half of them zeros (a kernel folding what the
    output held into its result, max(out, y), or telling zeroed memory apart, is wrong).
    Integers get random bits either way."""
    rng = np.random.default_rng()
    size = int(np.prod(shape, dtype=np.int64))
    if dtype not in _FLOAT_BITS:
        bits = rng.integers(0, 256, size * np.dtype(storage).itemsize, dtype=np.uint8)
        if dtype == "bool":
            bits &= 1
        return bits.view(np.dtype(storage)).reshape(shape)
    exponent, mantissa = _FLOAT_BITS[dtype]
    if poison == "finite":
        values = rng.standard_normal(size, dtype=np.float32) * np.float32(10 ** rng.uniform(-1, 1))
        values[rng.random(size) < 0.5] = 0.0  # fresh GPU memory is often zeros
        if dtype == "bfloat16":
            return (values.view(np.uint32) >> 16).astype(np.uint16).reshape(shape)
        return values.astype(np.dtype(storage)).reshape(shape)
    unsigned = np.uint32 if dtype == "float32" else np.uint16
    # quiet NaNs (the payload's top bit set): a signalling one would raise on the host's converts
    payload = rng.integers(1 << (mantissa - 1), 1 << mantissa, size, dtype=unsigned)
    sign = rng.integers(0, 2, size, dtype=unsigned) << unsigned(exponent + mantissa)
    nan = sign | unsigned(((1 << exponent) - 1) << mantissa) | payload
    return nan.view(np.dtype(storage)).reshape(shape)


def handle(
    header: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    if header.get("op") == "ping":
        return {"pid": os.getpid()}, []
    if header.get("op") != "run":
        raise ValueError(f"unknown request {header.get('op')!r}")
    return run(header, arrays)


def run(
    header: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Bind every buffer slot, launch, and return the data of every output and in-out buffer,
    followed by their written masks.

    Slot roles: ``output`` (fresh, filled with ``fill``), ``buffer`` (in-out: starts as the next
    array; ``writable`` ones get a written mask), and read-only ones (``input``, shapes, strides).
    """
    slots = header["slots"]
    keep: list[Any] = []
    buffers = (Buffer * len(slots))()
    results, masks = [], []
    kept: list[Kept] = []
    inputs = iter(arrays)
    measure = -1 if not header.get("measure") else 0
    count = header.get("count")  # {line_bytes, banks, bank_bytes}: count for the cost estimate
    for k, slot in enumerate(slots):
        role = slot["role"]
        if role == "output":
            data = _filled(slot, "nan" if slot.get("inout") else str(header.get("poison", "nan")))
            was = data.copy()
        else:
            was = np.asarray(next(inputs))
            data = np.array(was, copy=True)  # writable and aligned, owned by this process
        mask = (
            np.zeros(data.size, dtype=np.uint32)
            if role == "output" or slot.get("writable")
            else None
        )
        kept.append((slot["name"], data, was, mask))
        if role in ("output", "buffer"):
            results.append(data)
            if mask is not None:
                masks.append(mask)
        keep += [data, mask]
        base = data.ctypes.data
        name = slot["name"].encode()
        keep.append(name)
        buffers[k] = Buffer(
            name,
            base,
            data.nbytes,
            base + slot.get("offset", 0),
            slot["elem_size"],
            SPACES[slot["space"]],
            mask.ctypes.data if mask is not None else None,
            measure if role == "buffer" else -1,
            int(bool(count) and slot["space"] == "device"),
        )
    params = _launch_params(header, buffers, len(slots))
    _count(params, count)
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = _library(header["library"]).mlxsim_run(ctypes.byref(params), err, ERR_LEN)
    reply = {
        "error": err.value.decode(errors="replace") if rc else unchecked_write(header, kept),
        "stats": list(params.stats),
        "counts": list(params.counts) if count else None,
        "touched": [
            int(buffers[k].touched) for k, slot in enumerate(slots) if slot["role"] == "buffer"
        ],
        "conflicts": [
            int(np.flatnonzero(m == CONFLICT)[0]) if (m == CONFLICT).any() else -1 for m in masks
        ],
    }
    # The threadgroup tags matter only inside the run (race checks): the caller needs written or
    # not. An output element still holding its NaN poison's bits was not written, though a store
    # to another part of it marked it (`.x` of a float4 view: the whole vector).
    written = [
        (m != 0) & ~_still_nan_poison(data, was) if slot_role == "output" else m != 0
        for (_, data, was, m), slot_role in _masked(kept, slots)
    ]
    return reply, results + [w.view(np.uint8) for w in written]


def _masked(kept: list, slots: list[dict]) -> list:
    """The kept buffers that have a written mask, with their roles, in the masks' order."""
    return [
        (k, slot["role"])
        for k, slot in zip(kept, slots, strict=True)
        if slot["role"] in ("output", "buffer") and k[3] is not None
    ]


def _still_nan_poison(data: np.ndarray, was: np.ndarray) -> np.ndarray:
    """Where an output holds the very NaN it was poisoned with (a random payload no arithmetic
    makes); nowhere for integers, bfloat16's bits and fills."""
    if data.dtype.kind != "f":
        return np.zeros(data.size, dtype=bool)
    unsigned = np.dtype(f"u{data.itemsize}")
    same = data.reshape(-1).view(unsigned) == was.reshape(-1).view(unsigned)
    return same & np.isnan(was.reshape(-1))


def _launch_params(header: dict[str, Any], buffers: Any, nbuffers: int) -> LaunchParams:
    """The runtime's launch parameters for ``header`` over ``buffers``."""
    params = LaunchParams()
    params.buffers = buffers
    params.nbuffers = nbuffers
    params.fibers = int(header["fibers"])
    params.threads = int(header["threads"])
    params.reverse = int(header.get("reverse", 0))
    params.grid = (ctypes.c_uint32 * 3)(*header["grid"])
    params.threadgroup = (ctypes.c_uint32 * 3)(*header["threadgroup"])
    params.stack_bytes = int(header.get("stack_bytes", 64 << 10))
    params.shared_bytes = int(header.get("shared_bytes", 0))
    params.tg_memory_limit = int(header.get("tg_memory_limit", 0))
    params.races_after = int(header.get("races_after", 0))
    params.cuda = int(header.get("cuda", 0))
    return params


AROUND = (
    ": it wrote through an address made around the checks (bounds, written elements, races); "
    "write a buffer only through its pointer"
)


# A bound buffer: its name, its data, its data before the launch, its written mask (or None).
Kept = tuple[str, np.ndarray, np.ndarray, "np.ndarray | None"]


def unchecked_write(header: dict[str, Any], kept: list[Kept]) -> str | None:
    """The sentence naming memory an MSL launch changed that no checked access touched: an
    element of an output whose written mask is clear, or anything of a read-only buffer (an
    input, its shape). Every write of MSL code goes through a checked pointer, which marks it;
    one that did not went through an address made around the checks. None where there is none,
    and for CUDA code, whose pointers convert to plain ones that mark nothing."""
    if header.get("cuda"):
        return None
    for name, data, was, mask in kept:
        bits = f"u{data.itemsize}" if data.itemsize in (1, 2, 4, 8) else "u1"
        now, then = data.reshape(-1).view(bits), np.ascontiguousarray(was).reshape(-1).view(bits)
        changed = now != then
        if mask is None and changed.any():
            return f"the kernel changed its read-only buffer {name}{AROUND}"
        per = now.size // max(data.size, 1)  # words of an element
        if mask is not None and (changed & np.repeat(mask == 0, per)).any():
            k = int(np.flatnonzero(changed & np.repeat(mask == 0, per))[0]) // per
            return f"the kernel changed {name}[{k}], which no checked access touched{AROUND}"
    return None


def _count(params: LaunchParams, count: dict[str, int] | None) -> None:
    """Ask the runtime to count (counters.py): in lines and banks of these sizes."""
    if count:
        params.count = 1
        params.count_line_bytes = int(count["line_bytes"])
        params.count_banks = int(count["banks"])
        params.count_bank_bytes = int(count["bank_bytes"])
