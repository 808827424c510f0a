"""The CPU executor runs CUDA kernels as written: results against numpy, and the faults, races and
extents it reports. Kernels are written here in the styles real ones use."""

from pathlib import Path

import numpy as np
import pytest

from mlxport.backends.cuda_cpu import CudaExecutor, ExecError, Launch

HERE = Path(__file__).parent / "cuda_exec"
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def ex():
    executor = CudaExecutor()
    yield executor
    executor.close()


def kernel(ex, tmp_path, source: str, name: str, template=None):
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    return ex.compile(ex.source(path), name, template)


BLOCK_REDUCE = r"""
#include <cuda_runtime.h>
#define WARP 32
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) row_sum(const T* __restrict__ x, float* out, int cols) {
    __shared__ float partial[BLOCK / WARP];
    const T* row = x + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) s += (float)row[c];
    #pragma unroll
    for (int o = WARP / 2; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x % WARP == 0) partial[threadIdx.x / WARP] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < BLOCK / WARP; ++w) total += partial[w];
        out[blockIdx.x] = total;
    }
}
void launch(const float* x, float* out, int rows, int cols) {
    row_sum<float, 128><<<rows, 128>>>(x, out, cols);
}
"""


def test_shared_memory_barriers_and_shuffles_in_a_templated_kernel(ex, tmp_path):
    c = kernel(ex, tmp_path, BLOCK_REDUCE, "row_sum", ["float", "128"])
    x = RNG.standard_normal((7, 300)).astype(np.float32)
    r = ex.run(c, Launch((7, 1, 1), (128, 1, 1)), [x, np.zeros(7, np.float32), np.int32(300)])
    assert r.ok, r.error
    np.testing.assert_allclose(r.buffers["out"], x.sum(1), rtol=1e-5, atol=1e-5)
    assert not r.races


COOP = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void tile_max(const float* x, float* out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    int i = blockIdx.x * blockDim.x + block.thread_rank();
    float v = i < n ? x[i] : -1e30f;
    float m = cg::reduce(tile, v, cg::greater<float>());
    if (tile.thread_rank() == 0) out[i / 16] = m;
}
"""


def test_cooperative_groups_tiles_reduce_over_their_own_lanes(ex, tmp_path):
    c = kernel(ex, tmp_path, COOP, "tile_max")
    x = RNG.standard_normal(256).astype(np.float32)
    r = ex.run(c, Launch((2, 1, 1), (128, 1, 1)), [x, np.zeros(16, np.float32), np.int32(256)])
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["out"], x.reshape(16, 16).max(1))


HALF = r"""
#include <cuda_fp16.h>
__global__ void gelu_half2(const __half2* x, __half2* y, int n2) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += blockDim.x * gridDim.x) {
        float2 v = __half22float2(x[i]);
        v.x = 0.5f * v.x * (1.0f + tanhf(0.7978845608f * (v.x + 0.044715f * v.x * v.x * v.x)));
        v.y = 0.5f * v.y * (1.0f + tanhf(0.7978845608f * (v.y + 0.044715f * v.y * v.y * v.y)));
        y[i] = __float22half2_rn(v);
    }
}
"""


def test_half2_grid_stride_loop(ex, tmp_path):
    c = kernel(ex, tmp_path, HALF, "gelu_half2")
    x = RNG.standard_normal(1000).astype(np.float16)
    r = ex.run(c, Launch((2, 1, 1), (64, 1, 1)), [x, np.zeros(1000, np.float16), np.int32(500)])
    assert r.ok, r.error
    f = x.astype(np.float64)
    want = 0.5 * f * (1 + np.tanh(0.7978845608 * (f + 0.044715 * f**3)))
    np.testing.assert_allclose(r.buffers["y"].astype(np.float64), want, rtol=2e-3, atol=2e-3)


HISTOGRAM = r"""
__global__ void histogram(const int* x, unsigned int* bins, int n) {
    __shared__ unsigned int local[16];
    if (threadIdx.x < 16) local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[x[i] & 15], 1u);
    __syncthreads();
    if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}
"""


def test_atomics_on_shared_and_global_memory_count_exactly_and_are_no_race(ex, tmp_path):
    c = kernel(ex, tmp_path, HISTOGRAM, "histogram")
    x = RNG.integers(0, 1000, 5000).astype(np.int32)
    r = ex.run(c, Launch((4, 1, 1), (128, 1, 1)), [x, np.zeros(16, np.uint32), np.int32(5000)])
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["bins"], np.bincount(x & 15, minlength=16))
    assert not r.races


VECTOR_DYNAMIC = r"""
__global__ void scale4(const float* x, float* y, float a, int n4) {
    extern __shared__ float4 staged[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) staged[threadIdx.x] = reinterpret_cast<const float4*>(x)[i];
    __syncthreads();
    if (i < n4) {
        float4 v = staged[threadIdx.x];
        reinterpret_cast<float4*>(y)[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    }
}
"""


def test_vector_views_and_dynamic_shared_memory_sized_by_the_launch(ex, tmp_path):
    c = kernel(ex, tmp_path, VECTOR_DYNAMIC, "scale4")
    x = RNG.standard_normal(512).astype(np.float32)
    r = ex.run(
        c,
        Launch((2, 1, 1), (64, 1, 1), shared_bytes=64 * 16),
        [x, np.zeros(512, np.float32), np.float32(3), np.int32(128)],
    )
    assert r.ok, r.error
    np.testing.assert_allclose(r.buffers["y"], 3 * x, rtol=1e-6)
    small = ex.run(
        c,
        Launch((2, 1, 1), (64, 1, 1), shared_bytes=16),
        [x, np.zeros(512, np.float32), np.float32(3), np.int32(128)],
    )
    assert "extern __shared__ memory" in small.error and "threadIdx" in small.error


def test_an_out_of_bounds_read_names_the_buffer_element_and_thread(ex, tmp_path):
    c = kernel(
        ex,
        tmp_path,
        "__global__ void shift(const float* x, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i + 1];\n}\n",
        "shift",
    )
    r = ex.run(
        c,
        Launch((1, 1, 1), (32, 1, 1)),
        [np.zeros(32, np.float32), np.zeros(32, np.float32), np.int32(32)],
    )
    assert (
        "out-of-bounds read of x[32]" in r.error
        and "threadIdx (31,0,0) of blockIdx (0,0,0)" in r.error
    )


def test_a_misaligned_access_through_a_byte_stride_faults_as_on_a_gpu(ex, tmp_path):
    """llama.cpp's `(float *)((char *)dst + i*nb1)` with an nb1 that is no multiple of 4."""
    c = kernel(
        ex,
        tmp_path,
        "__global__ void rows(float* dst, int nb1) {\n"
        "  float* row = (float*)((char*)dst + blockIdx.x * nb1);\n  row[threadIdx.x] = 1.0f;\n}\n",
        "rows",
    )
    ok = ex.run(c, Launch((2, 1, 1), (4, 1, 1)), [np.zeros(16, np.float32), np.int32(32)])
    bad = ex.run(c, Launch((2, 1, 1), (4, 1, 1)), [np.zeros(16, np.float32), np.int32(33)])
    assert ok.ok, ok.error
    assert "misaligned access to dst at byte 33 through a 4-byte element pointer" in bad.error


def test_two_blocks_writing_one_element_without_atomics_is_a_race(ex, tmp_path):
    c = kernel(
        ex,
        tmp_path,
        "__global__ void last(const float* x, float* out) {\n"
        "  if (threadIdx.x == 0) out[0] = x[blockIdx.x];\n}\n",
        "last",
    )
    r = ex.run(c, Launch((2, 1, 1), (32, 1, 1)), [np.ones(2, np.float32), np.zeros(1, np.float32)])
    assert r.ok and r.races and "out[0]" in r.races[0]


def test_a_barrier_some_threads_skip_is_reported(ex, tmp_path):
    c = kernel(
        ex,
        tmp_path,
        "__global__ void skip(float* y) {\n  if (threadIdx.x < 16) return;\n"
        "  __syncthreads();\n  y[threadIdx.x] = 1.0f;\n}\n",
        "skip",
    )
    r = ex.run(c, Launch((1, 1, 1), (32, 1, 1)), [np.zeros(32, np.float32)])
    assert "barrier divergence" in r.error and "__syncthreads" in r.error


def test_a_measuring_run_tells_how_far_the_kernel_reaches(ex, tmp_path):
    c = kernel(ex, tmp_path, BLOCK_REDUCE, "row_sum", ["float", "128"])
    r = ex.run(
        c,
        Launch((3, 1, 1), (128, 1, 1)),
        [np.zeros(1 << 16, np.float32), np.zeros(1 << 10, np.float32), np.int32(100)],
        measure=True,
    )
    assert r.ok and r.touched == {"x": 300, "out": 3}


def test_an_unsupported_library_is_named_and_other_kernels_of_the_file_still_run(ex, tmp_path):
    source = (
        "#include <cub/cub.cuh>\n__global__ void uses_cub(float* x) {\n"
        "  typedef cub::BlockReduce<float, 128> R; x[0] = 1.0f;\n}\n"
        "__global__ void plain(float* x) { x[threadIdx.x] = 2.0f; }\n"
    )
    path = tmp_path / "mixed.cu"
    path.write_text(source)
    src = ex.source(path)
    assert "cub/cub.cuh" in src.dropped_includes
    with pytest.raises(ExecError, match="cub"):
        ex.compile(src, "uses_cub")
    r = ex.run(ex.compile(src, "plain"), Launch((1, 1, 1), (4, 1, 1)), [np.zeros(4, np.float32)])
    assert r.ok and (r.buffers["x"] == 2).all()


def test_the_host_code_is_never_run_and_its_headers_need_not_exist(ex):
    src = ex.source(HERE / "attention_torch_host.cu")
    assert "torch/extension.h" in src.dropped_includes
    assert "cudaMalloc" not in src.text and "torch::zeros" not in src.text
    assert [p.name for p in src.kernels["attn_fwd"].params][:3] == ["Q", "K", "V"]


def test_attention_with_running_max_and_sum_matches_numpy(ex):
    src = ex.source(HERE / "attention_torch_host.cu")
    c = ex.compile(src, "attn_fwd")
    B, H, T, D, tile = 1, 2, 32, 8, 16
    q, k, v = (RNG.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(3))
    args = [
        q,
        k,
        v,
        np.int32(T),
        np.int32(D),
        np.int32(2),
        np.int32(tile),
        np.float32(1 / np.sqrt(D)),
        np.zeros((B, H, T), np.float32),
        np.full((B, H, T), -np.inf, np.float32),
        np.zeros_like(q),
    ]
    r = ex.run(c, Launch((B, H, 1), (tile, 1, 1), 2 * tile * D * 4), args)
    assert r.ok, r.error
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(
        r.buffers["O"], (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5
    )
