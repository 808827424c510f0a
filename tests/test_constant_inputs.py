"""A ``__constant__`` array the host fills at run time from values the file does not state (a
convolution's filter copied in by cudaMemcpyToSymbol) is an input of the op: the executor fills
the symbol from it before the launch, the task draws it, the golden and the port read the same
values, and kernel.py takes it as an argument."""

import importlib.util
import sys
import tomllib
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from mlxport.backends.cuda_cpu import CudaExecutor, ExecError, Launch
from mlxport.spec import KernelTask
from mlxport.translate.translator import Untranslatable, translate

CONV = Path(__file__).parent / "cuda_exec" / "conv1d_constant.cu"


def _conv(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """What conv1d computes: out[i] = sum_j k[R - j] * x[i + j], zeros past the ends."""
    return np.convolve(x, k, mode="same")


def test_the_executor_fills_a_constant_array_from_each_launchs_values():
    ex = CudaExecutor()
    try:
        compiled = ex.compile(ex.source(CONV), "conv1d", [], ("c_k",))
        x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
        for seed in (1, 2):  # a second launch of the same library reads the new values
            k = np.random.default_rng(seed).standard_normal(7)
            args = [np.zeros(300, np.float32), x, np.int32(300)]
            r = ex.run(compiled, Launch((3, 1, 1), (128, 1, 1)), args, constants={"c_k": k})
            assert r.ok, r.error
            np.testing.assert_allclose(r.buffers["out"], _conv(x, k.astype(np.float32)), atol=1e-5)
        with pytest.raises(ExecError, match="pass one array for each"):
            ex.run(compiled, Launch((3, 1, 1), (128, 1, 1)), args)
    finally:
        ex.close()


def test_a_filter_the_host_copies_into_constant_memory_is_an_argument_of_the_op(
    tmp_path, cli, monkeypatch
):
    out = tmp_path / "out"
    result = cli(
        "port",
        str(CONV),
        "--case",
        "n=300",
        "--backend",
        "sim",
        "--budget",
        "iterations=6,extra_seeds=0",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "verified on sim" in result.stdout
    task = tomllib.loads((out / "_tasks" / "conv1d" / "task.toml").read_text())
    assert {"name": "c_k", "dtype": "float32", "shape": [7]} in task["inputs"]
    assert task["original"]["constants"] == {"c_k": "c_k"}
    task["original"]["constants"] = {"c_k": "filter"}
    with pytest.raises(ValueError, match="from filter, which is no input"):
        KernelTask.model_validate(task)
    notes = (out / "_tasks" / "conv1d" / "NOTES.md").read_text()
    assert "c_k, filled by the host at run time, is an input of the op" in notes
    # the op a user imports takes the filter, and a filter it was never checked with gives the
    # convolution at a size no case has
    monkeypatch.setenv("MLXPORT_KERNEL_BACKEND", "sim")
    spec = importlib.util.spec_from_file_location("conv1d_op", out / "conv1d" / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["conv1d_op"] = module
    try:
        spec.loader.exec_module(module)
        x = np.random.default_rng(3).standard_normal(517).astype(np.float32)
        k = np.array([0, 0, 0, 1, 2, 0, 0], np.float32)  # x[i] + 2 x[i - 1]
        got = module.op(mx.array(x), mx.array(k))
        np.testing.assert_allclose(np.array(got), _conv(x, k), atol=1e-5)
    finally:
        sys.modules.pop("conv1d_op", None)


HELPER_READS = r"""
__constant__ float taps[4];
__device__ float tap(int j) { return taps[j]; }
__global__ void fir(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tap(0) * in[i];
}
"""

TWO_DIMENSIONS = r"""
__constant__ float taps[3][3];
__global__ void fir(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = taps[i % 3][0] * in[i];
}
"""


@pytest.mark.parametrize(
    "source, fix",
    [
        (HELPER_READS, "read taps in the kernel and pass what tap needs as its arguments"),
        (TWO_DIMENSIONS, "it has 2 dimensions: declare it as a flat array"),
    ],
)
def test_a_constant_array_that_cannot_be_an_input_is_refused_with_the_fix(source, fix):
    with pytest.raises(Untranslatable) as refused:
        translate(source, kernel="fir")
    assert "the host fills it at run time" in str(refused.value)
    assert fix in str(refused.value)


def test_the_cuda_body_takes_the_array_as_an_input_and_drops_its_declaration():
    launched = CONV.read_text().replace("atoi(argv[1])", "1000")  # no task binds n
    candidate = translate(launched, kernel="conv1d", target="cuda").candidate
    assert "c_k" in candidate.input_names
    assert "__constant__" not in candidate.header
