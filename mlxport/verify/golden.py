"""The golden outputs every candidate is compared with.

A task's reference (``reference.py``) is evaluated in float32 on the same, already rounded, inputs.
A task without one is checked against its original CUDA kernel, run as written on the CPU
executor at the launch its host code gives for the case: in float32 where the kernel is templated
on its element type (so half precision's own rounding is not the bar), else at its own types.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.expr import ExprError, evaluate
from mlxport.spec import KernelTask
from mlxport.tasks import MLX_LOCK, TaskError
from mlxport.verify.references import reference_outputs

# C element types as the executor stores them (bfloat16 as its bits)
STORAGE = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "__half": "float16",
    "half2": "float16",
    "__half2": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "__nv_bfloat162": "bfloat16",
    "at::Half": "float16",  # torch's names, as the executor's torch_device.h defines them
    "c10::Half": "float16",
    "at::BFloat16": "bfloat16",
    "c10::BFloat16": "bfloat16",
    "int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "long": "int64",
    "long long": "int64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "unsigned long": "uint64",
    "unsigned long long": "uint64",
    "short": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "bool": "uint8",
    "float2": "float32",
    "float3": "float32",
    "float4": "float32",
    "int2": "int32",
    "int4": "int32",
    "uint2": "uint32",
    "uint4": "uint32",
    "double2": "float64",
}
ELEMENT = "float"  # what a kernel templated on its element type is instantiated with for the golden


def golden(task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]) -> list[np.ndarray]:
    """The golden outputs for ``inputs`` at ``case``, in float64."""
    if task.reference is not None:
        return reference_outputs(task, inputs, case)
    return run_original(task, inputs, case)


def golden_name(task: KernelTask) -> str:
    """What a report says the golden is."""
    if task.reference is not None:
        return f"the task's reference {task.reference} (MLX, float32)"
    return f"the original kernel {task.kernel} run as written on the CPU executor"


def run_original(
    task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any], element: str = ELEMENT
) -> list[np.ndarray]:
    """The task's outputs as the original kernel computes them at ``case``."""
    from mlxport.backends.cuda_cpu import Launch, packed, unpacked

    if task.original is None:
        raise TaskError(
            f"task {task.name} has no [original] launch: `mlxport tasks new --from` writes one"
        )
    label = task.case_label(case)
    try:
        launch = launch_of(task, case)
    except KeyError as e:
        raise TaskError(
            f"task {task.name} has no launch of its original kernel for case {label}: "
            f"add the case with `mlxport tasks new --from`"
        ) from e
    executor = shared_executor()
    source = executor.source(
        task.folder / task.source, tuple(task.folder / p for p in task.original.include)
    )
    sig = source.kernels.get(task.kernel)
    if sig is None:
        raise TaskError(f"{task.source} has no __global__ kernel {task.kernel}")
    elements = {p.base for p in sig.params if p.pointer}
    names = [n for n, _ in sig.template_params]
    template = [
        element if i < len(names) and names[i] in elements else t
        for i, t in enumerate(launch.template)
    ]
    constants = task.original.constants
    compiled = executor.compile(source, task.kernel, template, tuple(constants))
    with MLX_LOCK:
        arrays = {n: _numpy(a) for n, a in inputs.items()}
    # a struct of buffers passed by value: its members are the task's parameters
    bound = dict(zip(names, template, strict=False))
    slots = {n: slot for n, (slot, _) in source.members(sig, bound).items()}
    kernel_sig, sig = sig, source.flat(sig, bound)
    args = _arguments(task, sig, source, arrays, case, element)
    if slots:
        args = packed(kernel_sig, slots, {p.name: a for p, a in zip(sig.params, args, strict=True)})
    geometry = Launch(launch.grid, launch.block, launch.shared_bytes)
    filled = {c: arrays[t] for c, t in constants.items()}
    result = unpacked(executor.run(compiled, geometry, args, constants=filled), slots)
    if not result.ok:
        raise TaskError(f"the original kernel {task.kernel} fails at {label}: {result.error}")
    shapes = task.shapes(case, task.dtypes[0])
    outs = []
    for o in task.outputs:
        param = task.original.results[o.name]
        out = _float64(result.buffers[param], _storage_of(sig, source, param, element))
        written = result.written.get(param)
        if param not in task.original.args and written is not None and _start(task, o.name) is None:
            # what the original leaves is unspecified
            out = np.where(written.reshape(out.shape), out, np.nan)
        outs.append(out.reshape(shapes[o.name]))
    return outs


def _arguments(task: KernelTask, sig, source, arrays: dict[str, np.ndarray], case, element: str):
    """The original kernel's arguments at a case: the task's inputs in the storage of the
    kernel's parameters, outputs that are no input as fresh buffers, scalars from the case."""
    label = task.case_label(case)
    # the case's dimensions and every param, defaults filled
    names = task.bindings(case, task.dtypes[0])
    shapes = task.shapes(case, task.dtypes[0])
    bound = {v: k for k, v in task.original.results.items()}
    args = []
    for p in sig.params:
        base = element if p.base in {n for n, _ in sig.template_params} else source.resolve(p.base)
        storage = STORAGE.get(_plain(base))
        name = task.original.args.get(p.name)
        if p.pointer:
            if storage is None:
                raise TaskError(
                    f"the executor cannot pass a buffer of {p.base} ({p.name} of {task.kernel})"
                )
            if name is not None:
                args.append(_as_storage(arrays[name], storage))
            else:
                out = bound.get(p.name)
                n = int(np.prod(shapes[out])) if out is not None else 1
                args.append(_as_storage(np.full(n, _start(task, out) or 0.0), storage))
        elif p.name in task.original.zeroed:
            args.append(zero_struct(task.original.zeroed[p.name]))
        else:
            if name is None:
                raise TaskError(
                    f"no value for {p.name}, a scalar parameter of {task.kernel}, in case {label}"
                )
            try:  # a task name, or an expression over them (rope's n_rows = "B * H * T")
                value = names[name] if name in names else evaluate(name, names)
            except ExprError as e:
                raise TaskError(
                    f"no value for {p.name}, a scalar parameter of {task.kernel}, in case {label}: "
                    f"{name} ({e})"
                ) from e
            args.append(np.array(value).astype(_np(storage or "float32")))
    return args


def launch_of(task: KernelTask, case: dict[str, Any]):
    """The original's launch at ``case``: that of its label, or, for a case whose float params
    were drawn within their ranges (which change no launch), that of the case it was drawn from."""
    try:
        return task.original.launch(task.case_label(case))
    except KeyError:
        ranged = {p.name for p in task.params if p.range is not None}
        if not ranged & set(case):
            raise
    want = {k: str(v) for k, v in case.items() if k not in ranged}
    for launch in task.original.launches:
        named = dict(part.partition("=")[::2] for part in launch.case.split(","))
        if {k: v for k, v in named.items() if k not in ranged} == want:
            return launch
    raise KeyError(task.case_label(case))


@functools.cache
def shared_executor():
    """One executor (and worker process) for the goldens of this process."""
    from mlxport.backends.cuda_cpu import CudaExecutor

    return CudaExecutor()


def _plain(t: str) -> str:
    return " ".join(
        w for w in t.replace("*", " ").split() if w not in ("const", "volatile", "__restrict__")
    )


def _np(storage: str) -> np.dtype:
    return np.dtype("uint16" if storage == "bfloat16" else storage)


def _numpy(a: mx.array) -> np.ndarray:
    if a.dtype == mx.bfloat16:
        return np.array(a.astype(mx.float32))
    return np.array(a)


def _as_storage(a: np.ndarray, storage: str) -> np.ndarray:
    flat = np.asarray(a).reshape(-1)
    if storage == "bfloat16":
        bits = flat.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return flat.astype(storage)


def _storage_of(sig, source, param: str, element: str) -> str:
    p = next(q for q in sig.params if q.name == param)
    base = element if p.base in {n for n, _ in sig.template_params} else source.resolve(p.base)
    return STORAGE.get(_plain(base), "float32")


def _float64(a: np.ndarray, storage: str) -> np.ndarray:
    if storage == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def zero_struct(nbytes: int) -> np.void:
    """A struct passed by value, all zero bytes: one scalar slot of its size."""
    return np.zeros(1, np.dtype((np.void, nbytes)))[0]


def _start(task: KernelTask, output: str | None) -> float | None:
    """What an output holds before the launch where the task says (``init = {kind = "full"}``,
    finite: accumulators the host zeroes); else None: it starts as zeros that the golden never
    shows."""
    spec = next((o for o in task.outputs if o.name == output), None)
    if spec is not None and spec.init.kind == "full" and not math.isnan(spec.init.value):
        return spec.init.value
    return None
