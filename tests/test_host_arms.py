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


TRANSPOSE_PICKED = r"""
__global__ void copy_rows(const float *in, float *out, int nx, int ny) {}
__global__ void transpose(const float *in, float *out, int nx, int ny) {
    int ix = threadIdx.x + blockDim.x * blockIdx.x, iy = threadIdx.y + blockDim.y * blockIdx.y;
    int in_idx = iy * nx + ix;
    int out_idx = ix * ny + iy;
    if (ix < nx && iy < ny) out[out_idx] = in[in_idx];
}
int main(int argc, char **argv) {
    int nx = 1 << 12, ny = 1 << 12, which = 0;
    if (argc > 1) which = atoi(argv[1]);
    int nxy = nx * ny;
    int bytes = nxy * sizeof(float);
    float *a, *b;
    cudaMalloc((void **)&a, bytes);
    cudaMalloc((void **)&b, bytes);
    dim3 block(16, 16), grid((nx + 15) / 16, (ny + 15) / 16);
    switch (which) {
    case 0: copy_rows<<<grid, block>>>(a, b, nx, ny); break;
    case 1: transpose<<<grid, block>>>(a, b, nx, ny); break;
    }
}
"""


def test_a_kernel_main_picks_by_a_switch_keeps_its_selector_and_its_layout(tmp_path):
    """CUDA_Freshman's transpose: the one launch of the kernel sits in `case 1:` of a switch on
    a value the case binds (which=1), its buffers are sized by a local (`nxy * sizeof(float)`) and
    indexed through locals (`in[in_idx]`, `in_idx = iy * nx + ix`). The selector stays at 1 in the
    held-out cases and the op takes no such argument; `in` is [ny, nx], `out` [nx, ny]."""
    op, built = ported(
        tmp_path, TRANSPOSE_PICKED, {"nx": 48, "ny": 32, "which": 1}, kernel="transpose"
    )
    task = built.task
    assert task["cases"]["requires"] == ["which == 1"]
    assert all(c["which"] == 1 for c in task["cases"]["heldout"])
    assert [t["shape"] for t in task["inputs"] + task["outputs"]] == [["ny", "nx"], ["nx", "ny"]]
    a = np.random.default_rng(4).standard_normal((24, 40)).astype(np.float32)
    assert np.allclose(np.array(op.transpose(mx.array(a))), a.T)
