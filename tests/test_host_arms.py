"""A launch the host code picks in a branch: the port carries the arm its case takes, and the op
refuses, in one sentence, calls another arm would take (a size with no arm, an optional pointer
given)."""

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from mlxport.tasks import load_task
from mlxport.tasks.sizes import fresh_sizes
from mlxport.translate.translator import translate_task
from tests.test_op_works import ported

EXAMPLES = Path(__file__).parent / "cuda_exec"


def test_a_block_size_a_switch_on_the_row_length_picks_is_the_ops_contract(tmp_path):
    op, built = ported(tmp_path, None, {"N": 8, "K": 128}, path=EXAMPLES / "row_sum_switch.cu")
    assert built.task["cases"]["requires"] == ["K == 128"]
    assert any("`case 128:` of `switch (K)`" in n for n in built.notes)
    assert all(c["K"] == 128 for c in built.task["cases"]["heldout"])
    task = load_task(tmp_path / "task")
    drawn = fresh_sizes(task, 3, np.random.default_rng(0))
    assert drawn and {c["K"] for c in drawn} == {128} and len({c["N"] for c in drawn}) > 1
    x = np.random.default_rng(1).standard_normal((5, 128)).astype(np.float32)
    assert np.allclose(np.array(op.row_sum(mx.array(x))), x.sum(axis=1), atol=1e-4)
    with pytest.raises(ValueError, match=r"^row_sum was verified where K == 128, and here K=100$"):
        op.row_sum(mx.array(x[:, :100]))


def test_a_launch_an_optional_pointer_left_null_picks_takes_no_such_input(tmp_path):
    op, built = ported(tmp_path, None, {"n": 1000, "s": 2.0}, path=EXAMPLES / "scale_or_bias.cu")
    assert any("`if (bias == nullptr)`" in n for n in built.notes)
    assert str(op.SIGNATURE) == "(x, *, n=None, s=2.0)"
    x = np.random.default_rng(2).standard_normal(77).astype(np.float32)
    assert np.allclose(np.array(op.scale_bias(mx.array(x), s=3.0)), 3.0 * x)
    with pytest.raises(ValueError, match=r"^scale_bias makes bias itself .*without bias$"):
        op.scale_bias(mx.array(x), bias=mx.array(x), s=3.0)


ROW_MAX_LOOP = r"""
struct device_info { unsigned long smpb; };
device_info &query_info();

template <bool use_shared>
__global__ void row_max(const float *x, float *y, int K) {
    extern __shared__ float s[];
    float m = -1e30f;
    for (int c = threadIdx.x; c < K; c += blockDim.x) m = fmaxf(m, x[blockIdx.x * K + c]);
    s[threadIdx.x] = m;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off >>= 1) {
        if (threadIdx.x < off) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + off]);
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = use_shared ? s[0] : -s[0];
}

void launch_row_max(const float *x, float *y, int N, int K) {
    int nth = 32;
    while (nth < K && nth < 1024) nth *= 2;
    size_t bytes = nth * sizeof(float);
    if (bytes < query_info().smpb) {
        switch (K) {
        case 96:
            row_max<true><<<N, nth, bytes>>>(x, y, K);
            break;
        default:
            row_max<true><<<N, 32, 32 * sizeof(float)>>>(x, y, K);
            break;
        }
    } else {
        row_max<false><<<N, 32, 32 * sizeof(float)>>>(x, y, K);
    }
}

int main() {
    int N = 8, K = 96;
    float *x, *y;
    cudaMalloc((void **)&x, N * K * sizeof(float));
    cudaMalloc((void **)&y, N * sizeof(float));
    launch_row_max(x, y, N, K);
}
"""


def test_a_block_size_a_host_loop_doubles_is_run_in_the_arm_the_case_takes(tmp_path):
    """llama.cpp's softmax: `while (nth < K && nth < 1024) nth *= 2;` sizes the block, a device
    query the host code cannot read guards a switch on K: the port is the arm its case takes
    (K == 96), where the loop is run to nth = 128."""
    op, built = ported(tmp_path, ROW_MAX_LOOP, {"N": 8, "K": 96}, template="use_shared=true")
    assert built.task["cases"]["requires"] == ["K == 96"]
    x = np.random.default_rng(3).standard_normal((6, 96)).astype(np.float32)
    assert np.allclose(np.array(op.row_max(mx.array(x))), x.max(axis=1))
    task = load_task(tmp_path / "task")
    notes = translate_task(task, "msl").notes
    assert any("while loop at line" in n and "requires fix" in n for n in notes)
