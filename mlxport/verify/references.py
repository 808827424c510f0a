"""A task's reference and baselines run in a confined worker with a timeout: they are the task
author's code, and an endless loop, a crash or a ``sys.exit`` in them ends in one sentence, never
in a hang or in mlxport exiting. Each thread has its own worker (batch runs ports in threads)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.backends.worker import Worker, WorkerError
from mlxport.spec import KernelTask
from mlxport.tasks import MLX_LOCK, TaskError, call, dtype_name, golden, to_numpy

SECONDS = float(os.environ.get("MLXPORT_REFERENCE_SECONDS", "300"))
_local = threading.local()


def _profile() -> str | None:
    """The GPU workers' sandbox where MLX has a GPU here: its arrays live in the GPU's memory even
    on the CPU stream (MLX's CUDA backend allocates every array with cudaMallocManaged), so the
    workers' system-call allowlist, which has no GPU driver in it, would stop the first one."""
    gpu = mx.cuda.is_available() if hasattr(mx, "cuda") else False
    return "gpu" if gpu or mx.metal.is_available() else None


def reference_outputs(
    task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]
) -> list[np.ndarray]:
    """The task's reference in float32 on ``inputs`` (the golden), in float64."""
    return _run(task, None, inputs, case)


def function_outputs(
    task: KernelTask, ref: str, inputs: dict[str, mx.array], case: dict[str, Any]
) -> list[np.ndarray]:
    """A baseline or the reference (``module:function``) on ``inputs`` as given, in float64."""
    return _run(task, ref, inputs, case)


def _run(
    task: KernelTask, ref: str | None, inputs: dict[str, mx.array], case: dict[str, Any]
) -> list[np.ndarray]:
    worker = getattr(_local, "worker", None)
    if worker is None:
        worker = _local.worker = Worker(f"{__name__}:serve", memory_bytes=0, profile=_profile())
    with MLX_LOCK:
        arrays = [
            np.array(a.view(mx.uint16) if a.dtype == mx.bfloat16 else a) for a in inputs.values()
        ]
    header = {
        "task": task.model_dump(mode="json"),
        "folder": str(task.folder or ""),
        "ref": ref,
        "case": case,
        "inputs": [[name, dtype_name(a.dtype)] for name, a in inputs.items()],
    }
    what = ref or task.reference
    try:
        reads = (task.folder,) if task.folder else ()  # the reference and the baselines' code
        return worker.call(header, arrays, timeout=SECONDS, reads=reads)[1]
    except WorkerError as e:
        if e.kind == "timeout":
            raise TaskError(
                f"{what} of task {task.name} did not return within {SECONDS:g} s: fix its endless "
                "loop, or allow more with MLXPORT_REFERENCE_SECONDS"
            ) from None
        if e.kind == "error" and str(e).startswith("TaskError: "):
            raise TaskError(str(e).removeprefix("TaskError: ")) from None
        raise TaskError(f"{what} of task {task.name} failed in its worker: {e}") from None


# ---------------------------------------------------------------- worker side

_tasks: dict[str, KernelTask] = {}


def serve(
    header: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    key = json.dumps([header["task"], header["folder"]], sort_keys=True)
    task = _tasks.get(key)
    if task is None:
        task = _tasks[key] = KernelTask.model_validate(header["task"])
        task.folder = Path(header["folder"]) if header["folder"] else None
    inputs = {}
    for (name, dtype), a in zip(header["inputs"], arrays, strict=True):
        a = mx.array(a)
        inputs[name] = a.view(mx.bfloat16) if dtype == "bfloat16" else a
    with mx.stream(mx.cpu):
        if header["ref"] is None:
            outs = golden(task, inputs, header["case"])
        else:
            outs = call(header["ref"], task, inputs, header["case"])
        return {}, [to_numpy(o) for o in outs]
