"""Calling a port's written kernel.py as a user's program calls it: the final verification checks
the op as shipped, not only the candidate. On the simulator the call runs here (kernel.py's sim
path runs the kernel in the simulator's own workers); on a GPU, in the GPU worker."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends.base import RunResult

# What kernel.py reads to run its kernel (reference.py is only for its fallback, never taken here).
OP_TEXT = ("kernel.py", "mlxport_expr.py", "candidate.toml", "op.toml")


def load(folder: Path, backend: str):
    """kernel.py of ``folder`` as a fresh module, made to run on ``backend``."""
    path = Path(folder) / "kernel.py"
    spec = importlib.util.spec_from_file_location(f"_mlxport_op_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.backend = backend
    return module


def call(
    folder: Path, backend: str, arrays: list[np.ndarray], dtypes: list[str], params: dict[str, Any]
) -> RunResult:
    """The op on inputs (numpy, bfloat16 as float32) of these dtypes; its outputs in numpy, or
    what it raised in its own words."""
    import mlx.core as mx

    from mlxport.tasks import MLX_LOCK

    try:
        with MLX_LOCK:
            module = load(folder, backend)
            pairs = zip(arrays, dtypes, strict=True)
            inputs = [mx.array(a).astype(module.DTYPES[d]) for a, d in pairs]
            out = module.op(*inputs, **params)
            outs = list(out) if isinstance(out, tuple) else [out]
            mx.eval(*outs)
            return RunResult(outputs=[_numpy(o) for o in outs])
    except Exception as e:  # the op's own refusal or failure is the result
        return RunResult(error=f"kernel.py raised {type(e).__name__}: {e}")


def _numpy(a) -> np.ndarray:
    import mlx.core as mx

    return np.array(a.astype(mx.float32) if a.dtype == mx.bfloat16 else a)
