"""Backends and their selection: ``auto`` picks metal on Apple silicon, cuda where MLX's CUDA
backend runs, and the simulator elsewhere."""

from __future__ import annotations

import threading
from functools import cache

from mlxport.backends.base import Availability, Backend, BackendUnavailable

NAMES = ("metal", "cuda", "sim")


_LOCK = threading.RLock()


def get_backend(name: str) -> Backend:
    """One backend object per process (each owns its worker process), also when ports on several
    threads ask at once."""
    with _LOCK:
        return _get_backend(name)


@cache
def _get_backend(name: str) -> Backend:
    if name == "auto":
        return _get_backend(select_auto())
    if name not in NAMES:
        raise BackendUnavailable(f"unknown backend {name!r}: use auto, {', '.join(NAMES)}")
    backend = _backend_class(name)()
    status = backend.available()
    if not status.ok:
        raise BackendUnavailable(f"the {name} backend is not available here: {status.reason}")
    return backend


def availability() -> dict[str, Availability]:
    """Each backend and whether it can run here (for ``mlxport doctor``)."""
    out = {}
    for name in NAMES:
        try:
            out[name] = _backend_class(name)().available()
        except Exception as e:  # a backend that cannot even be constructed is unavailable
            out[name] = Availability(False, f"{type(e).__name__}: {e}")
    return out


def _backend_class(name: str):
    if name == "sim":
        from mlxport.backends.sim import SimBackend

        return SimBackend
    from mlxport.backends.gpu import CudaBackend, MetalBackend

    return MetalBackend if name == "metal" else CudaBackend


def select_auto() -> str:
    status = availability()
    for name in ("metal", "cuda"):
        if status[name].ok:
            return name
    return "sim"
