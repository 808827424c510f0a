"""Backends and their selection: ``auto`` picks metal on Apple silicon, cuda where MLX's CUDA
backend runs, and the simulator elsewhere. The registry below is the one list of backend names."""

from __future__ import annotations

import importlib
import threading
from functools import cache

from mlxport.backends.base import Availability, Backend, BackendUnavailable

# name -> class, imported on first use (the GPU backends need MLX's GPU stack, the simulator a
# compiler)
REGISTRY = {
    "metal": "mlxport.backends.gpu:MetalBackend",
    "cuda": "mlxport.backends.gpu:CudaBackend",
    "sim": "mlxport.backends.sim:SimBackend",
}
NAMES = tuple(REGISTRY)
CHOICES = ("auto", *NAMES)
GPUS = ("metal", "cuda")  # what auto prefers, in order; the simulator runs anywhere else
_LOCK = threading.RLock()


def get_backend(name: str) -> Backend:
    """One backend object per process (each owns its worker process), also when ports on several
    threads ask at once."""
    with _LOCK:
        return _get_backend(resolve(name))


def resolve(name: str) -> str:
    """The backend ``name`` stands for: ``auto`` is the first of GPUS that runs here (Metal on
    Apple silicon, MLX's CUDA backend on NVIDIA), else the simulator; any other name is checked
    and kept. Every caller that lets a user say ``auto`` resolves it here."""
    check_name(name)
    return _auto() if name == "auto" else name


@cache
def _auto() -> str:
    # once per process: get_backend keeps one backend per name, so the choice never moves
    return next((name for name in GPUS if _status(name).ok), "sim")


@cache
def _get_backend(name: str) -> Backend:
    backend = backend_class(name)()
    status = backend.available()
    if not status.ok:
        raise BackendUnavailable(f"the {name} backend is not available here: {status.reason}")
    return backend


def check_name(name: str) -> str:
    if name not in CHOICES:
        raise BackendUnavailable(f"unknown backend {name!r}: use {', '.join(CHOICES)}")
    return name


def backend_class(name: str) -> type:
    module, _, cls = REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def availability() -> dict[str, Availability]:
    """Each backend and whether it can run here (for ``mlxport doctor``)."""
    return {name: _status(name) for name in NAMES}


def _status(name: str) -> Availability:
    try:
        return backend_class(name)().available()
    except Exception as e:  # a backend that cannot even be constructed is unavailable
        return Availability(False, f"{type(e).__name__}: {e}")
