"""Ported kernels in a running mlx-lm model.

``patch_mamba(model)`` swaps the per-timestep Python scan of mlx-lm's own Mamba-1 model
(``mlx_lm.models.mamba``, imported, never copied) for one call of the ``mamba_scan`` port (the
selective scan from a state, returning the final state; its task is ``TASK_DIR``): the
projections and the convolution stay MLX's, and the final state goes into mlx-lm's cache, so
generation continues after the prefill. Decode steps (one token) keep mlx-lm's own path.

mlx-lm's package ``__init__`` imports transformers; ``mamba_module()`` loads the model module
without it. ``scan_op(backend)`` runs the port through ``mx.fast.metal_kernel`` or
``mx.fast.cuda_kernel``, or on mlxport's Metal simulator (``sim``: slow, for checking where no GPU
is).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx

from mlxport.errors import UserError

TASK_DIR = Path(__file__).parent / "mamba_scan"
ScanOp = Callable[..., tuple[mx.array, mx.array]]


def mamba_module():
    """``mlx_lm.models.mamba``, loaded without running ``mlx_lm/__init__.py``."""
    if "mlx_lm.models.mamba" in sys.modules:
        return sys.modules["mlx_lm.models.mamba"]
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or spec.origin is None:
        raise UserError("mlx-lm is not installed: pip install mlx-lm")
    if "mlx_lm" not in sys.modules:
        package = types.ModuleType("mlx_lm")
        package.__path__ = [str(Path(spec.origin).parent)]
        sys.modules["mlx_lm"] = package
    return importlib.import_module("mlx_lm.models.mamba")


def scan_op(backend: str | None = None) -> ScanOp:
    """The port as ``op(u, delta, A, B, C, D_skip, h0, delta_softplus=True) -> (y, h_out)``."""
    from mlxport.backends import resolve
    from mlxport.spec import KernelCandidate

    backend = resolve(backend or "auto")
    language = "cuda" if backend == "cuda" else "msl"
    candidate = KernelCandidate.from_toml(TASK_DIR / "ports" / f"{language}.toml")
    if backend == "sim":
        return _simulated(candidate)
    from mlxport.backends.mlx_kernel import launch_kwargs, make_kernel

    kernel = make_kernel(candidate)

    def op(u, delta, A, B, C, D_skip, h0, delta_softplus=True):
        inputs = {
            "u": u,
            "delta": delta,
            "A": A,
            "B": B,
            "C": C,
            "D_skip": D_skip,
            "h0": h0,
            "delta_softplus": delta_softplus,
        }
        kwargs = launch_kwargs(candidate, inputs)
        kwargs.pop(
            "shared_memory", None
        )  # the kernel object carries it (0: static shared memory only)
        y, h = kernel(inputs=[inputs[n] for n in candidate.input_names], **kwargs)
        return y, h

    return op


def _simulated(candidate) -> ScanOp:
    from mlxport.backends import get_backend

    sim = get_backend("sim")

    def op(u, delta, A, B, C, D_skip, h0, delta_softplus=True):
        run = sim.run(
            candidate,
            {
                "u": u,
                "delta": delta,
                "A": A,
                "B": B,
                "C": C,
                "D_skip": D_skip,
                "h0": h0,
                "delta_softplus": delta_softplus,
            },
        )
        if not run.ok:
            raise RuntimeError(f"the simulator could not run the mamba_scan port: {run.error}")
        return mx.array(run.outputs[0]).astype(u.dtype), mx.array(run.outputs[1])

    return op


def patch_mamba(model, op: ScanOp | None = None):
    """Make every Mamba block of ``model`` prefill through ``op`` (default: ``scan_op()``)."""
    op = op or scan_op()
    blocks = [layer.mixer for layer in model.layers]
    if not blocks or not hasattr(blocks[0], "_process_sequence"):
        raise UserError("patch_mamba needs mlx-lm's Mamba-1 model (mlx_lm.models.mamba.Model)")
    for block in blocks:
        stock = block._process_sequence
        block._process_sequence = types.MethodType(_prefill(op, stock), block)
    return model


def _prefill(op: ScanOp, stock):
    def process(self, x, conv_cache, state_cache):
        T = x.shape[1]
        if T == 1:  # a decode step: mlx-lm's own path
            return stock(x, conv_cache, state_cache)
        x, z = self.in_proj(x).split(2, axis=-1)
        K = self.conv_kernel_size
        padded = (
            mx.concatenate([conv_cache, x], axis=1)
            if conv_cache is not None
            else mx.pad(x, [(0, 0), (K - 1, 0), (0, 0)])
        )
        u = mx.sigmoid(conv := self.conv1d(padded)) * conv  # silu
        n, r = self.ssm_state_size, self.time_step_rank
        dbc = self.x_proj(u)
        delta, B, C = dbc[..., :r], dbc[..., r : r + n], dbc[..., r + n :]
        if self.use_bcdt_rms:
            eps = self.args.mixer_rms_eps
            delta, B, C = (mx.fast.rms_norm(a, weight=None, eps=eps) for a in (delta, B, C))
        delta = self.dt_proj(delta)  # the port applies the softplus
        A = -mx.exp(self.A_log.astype(mx.float32))
        h0 = (
            state_cache.astype(mx.float32)
            if state_cache is not None
            else mx.zeros((x.shape[0], u.shape[-1], n), dtype=mx.float32)
        )
        y, h = op(u, delta, A, B, C, self.D.astype(mx.float32), h0, delta_softplus=True)
        gate = z * mx.sigmoid(z)  # swiglu(z, y) = silu(z) * y
        return self.out_proj(gate * y), (padded[:, -(K - 1) :, :], h.astype(x.dtype))

    return process
