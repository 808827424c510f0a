"""Parity test of kernel.py, written by mlxport: the op called at sizes the task never had,
against the golden outputs mlxport computed for them (the original CUDA kernel or the reference)
and stored in golden.npz. It needs mlx, numpy and pytest, not mlxport."""

import importlib.util
import tomllib
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
OP = tomllib.loads((HERE / "op.toml").read_text())
GOLDEN = OP.get("golden", [])


def _kernel():
    spec = importlib.util.spec_from_file_location(f"{OP['name']}_kernel", HERE / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kernel = _kernel()


def _case(i: int):
    arrays = np.load(HERE / "golden.npz")
    g = GOLDEN[i]
    inputs = []
    for t in (t for t in OP["inputs"] if "fill" not in t):  # the op fills the others itself
        dtype = g["dtype"] if t["dtype"] == "T" else t["dtype"]
        inputs.append(mx.array(arrays[f"{i}.in.{t['name']}"]).astype(kernel.DTYPES[dtype]))
    outputs = [arrays[f"{i}.out.{k}"] for k in range(len(OP["outputs"]))]
    return g, inputs, outputs


def _check(out, golden, dtype):
    outs = list(out) if isinstance(out, tuple) else [out]
    assert len(outs) == len(golden)
    tol = OP["tolerance"][dtype]
    for o, want in zip(outs, golden, strict=True):
        got = np.array(o.astype(mx.float32) if o.dtype == mx.bfloat16 else o, dtype=np.float64)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=tol["atol"], rtol=tol["rtol"], equal_nan=True)


def _simulator_here() -> bool:
    return kernel.LANGUAGE == "msl" and importlib.util.find_spec("mlxport") is not None


@pytest.mark.parametrize("i", range(len(GOLDEN)))
def test_the_op_matches_the_golden(i, monkeypatch):
    """On the path that runs here; where none does (no GPU, no reference), on mlxport's
    simulator if mlxport is installed."""
    if kernel.backend == "none":
        if not _simulator_here():
            pytest.skip(
                f"nothing runs {OP['name']} here (no {kernel.GPU}, no reference): "
                f"{kernel.INSTALL_MLXPORT} and this test runs its kernel on mlxport's Metal "
                f"simulator"
            )
        monkeypatch.setattr(kernel, "backend", "sim")
    g, inputs, golden = _case(i)
    _check(kernel.op(*inputs, **g["params"]), golden, g["dtype"])


def test_the_kernel_on_mlxports_simulator(monkeypatch):
    """The kernel itself where the reference stands in for it here: on mlxport's simulator (the
    smallest case)."""
    if kernel.backend != "reference" or not GOLDEN or not _simulator_here():
        pytest.skip("the kernel runs here already, or mlxport (the simulator) is not installed")
    monkeypatch.setattr(kernel, "backend", "sim")
    g, inputs, golden = _case(min(range(len(GOLDEN)), key=lambda i: _case(i)[1][0].size))
    _check(kernel.op(*inputs, **g["params"]), golden, g["dtype"])


def test_inputs_the_op_was_not_verified_for_are_refused_in_one_sentence():
    if not GOLDEN:
        pytest.skip("no golden case")
    g, inputs, _ = _case(0)
    wrong_rank = inputs[0].reshape(1, 1, *inputs[0].shape)
    with pytest.raises(kernel.ContractError, match=OP["inputs"][0]["name"]):
        kernel.op(wrong_rank, *inputs[1:], **g["params"])
