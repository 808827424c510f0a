"""Calling a task's reference and baselines (``module:function``: a file of the task folder or an
importable module) on MLX arrays, one evaluation at a time."""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.spec import KernelTask
from mlxport.tasks.folder import TaskError


def resolve(task: KernelTask, ref: str) -> Callable:
    """Import ``module:function`` where ``module`` is a file in the task folder or an importable
    module."""
    if ":" not in ref:
        raise TaskError(f"{ref!r} in {task.name} must look like module:function")
    mod_name, fn_name = ref.split(":", 1)
    module = _import(task, mod_name)
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise TaskError(f"{mod_name}.py of task {task.name} has no function {fn_name!r}")
    return fn


def baseline(task: KernelTask, ref: str, params: dict[str, Any]) -> Callable:
    """A baseline (``module:function``) as a function of an input dict, with the case's params
    bound, as the benchmark calls it."""
    fn = resolve(task, ref)
    order = [t.name for t in task.inputs]
    return lambda inputs: fn(*[inputs[n] for n in order], **params)


def _import(task: KernelTask, mod_name: str) -> ModuleType:
    path = (task.folder / f"{mod_name}.py") if task.folder else None
    if path is None or not path.is_file():
        try:
            return importlib.import_module(mod_name)
        except Exception as e:
            raise TaskError(f"cannot import {mod_name!r} for task {task.name}: {e}") from e
    key = f"mlxport_task_{task.name}_{mod_name}_{abs(hash(str(path)))}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise TaskError(
            f"{path} does not import ({type(e).__name__}: {e}): fix the reference module"
        ) from e
    sys.modules[key] = module
    return module


# MLX evaluation is not safe from several threads at once (ml-explore/mlx#2067): batch and eval
# run ports in threads, so every evaluation in this process goes through this lock.
MLX_LOCK = threading.RLock()


def call(
    ref: str, task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]
) -> list[mx.array]:
    """Call a reference or baseline (``module:function``): inputs positionally in task order,
    params by keyword."""
    fn = resolve(task, ref)
    args = [inputs[t.name] for t in task.inputs]
    try:
        out = fn(*args, **task.param_values(case))
        outs = list(out) if isinstance(out, tuple | list) else [out]
        wrong = [o for o in outs if not isinstance(o, mx.array)]
        if wrong:
            raise TaskError(
                f"{ref} of task {task.name} returned {type(wrong[0]).__name__}, not mx.array: "
                f"return the "
                f"outputs as MLX arrays (a tuple for several)"
            )
        mx.eval(*outs)
    except TaskError:
        raise
    except (
        Exception,
        SystemExit,
    ) as e:  # a reference's sys.exit() is its bug, not the end of mlxport
        raise TaskError(f"{ref} of task {task.name} raised {type(e).__name__}: {e}") from e
    if len(outs) != len(task.outputs):
        raise TaskError(
            f"{ref} returned {len(outs)} output(s); task {task.name} declares {len(task.outputs)}"
        )
    return outs


def golden(task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]) -> list[mx.array]:
    """The reference evaluated in float32 on the same (already rounded) inputs: the truth that
    every dtype is compared with, so a half-precision reference's own rounding is not the bar."""
    up = {
        n: a.astype(mx.float32) if a.dtype in (mx.float16, mx.bfloat16) else a
        for n, a in inputs.items()
    }
    return call(task.reference, task, up, case)


def to_numpy(a: mx.array) -> np.ndarray:
    """float64 copy for comparisons (bfloat16 has no numpy dtype)."""
    if a.dtype == mx.bfloat16:
        a = a.astype(mx.float32)
    return np.array(a).astype(np.float64)
