"""The CPU executor runs CUDA kernels as written: results against numpy, and the faults, races and
extents it reports. Kernels are written here in the styles real ones use."""

import re
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


SHARED_PATTERNS = r"""
__global__ void patterns(const float* x, float* y, int mode) {
  __shared__ float s[64];
  __shared__ float tile[2][32];
  int t = threadIdx.x;
  if (mode == 0) {  // a neighbour's element, read with no barrier after its write
    s[t] = x[t];
    y[t] = s[(t + 1) % 64];
  } else if (mode == 1) {  // half the block writes, the whole block reads
    if (t < 32) s[t] = x[t];
    __syncthreads();
    y[t] = s[t];
  } else if (mode == 2) {  // every lane of a warp writes the warp's one value: CUDA keeps one
    s[t / 32] = 2.0f;
    __syncthreads();
    y[t] = s[t / 32] + x[t];
  } else if (mode == 3) {  // the same element, different values
    s[0] = x[t];
    __syncthreads();
    y[t] = s[0];
  } else if (mode == 4) {  // warp-synchronous, ordered by __syncwarp
    s[t] = x[t];
    __syncwarp();
    y[t] = s[t ^ 1];
  } else if (mode == 5) {  // pre-Volta warp-synchronous reduction: no __syncwarp
    s[t] = x[t];
    __syncthreads();
    if (t < 32) {
      volatile float* v = s;
      v[t] += v[t + 32];
      v[t] += v[t + 16];
    }
    __syncthreads();
    y[t] = s[0];
  } else {  // a subscript of a two-dimensional array names its line
    tile[t / 32][t % 32] = x[t];
    y[t] = tile[0][(t + 1) % 32];
  }
}
"""


def test_a_race_or_unwritten_read_in_shared_memory_stops_the_original(ex, tmp_path):
    """A golden must not be the product of a race: the executor keeps the simulator's shadow of
    shared memory, and knows what CUDA guarantees (one of several writes lands; __syncwarp
    orders a warp; warp-synchronous code without it races since Volta)."""
    c = kernel(ex, tmp_path, SHARED_PATTERNS, "patterns")
    x = RNG.standard_normal(64).astype(np.float32)

    def run(mode):
        return ex.run(
            c, Launch((1, 1, 1), (64, 1, 1)), [x, np.zeros(64, np.float32), np.int32(mode)]
        )

    assert re.search(
        r"race on shared memory s\[\d+\]: thread \d+ wrote it .* thread \d+ read it", run(0).error
    )
    unwritten = run(1).error
    assert (
        "reads shared memory s[32]" in unwritten
        and "no thread of the block had written" in unwritten
    )
    same, warp = run(2), run(4)
    assert same.ok and warp.ok, same.error or warp.error
    np.testing.assert_array_equal(same.buffers["y"], x + np.float32(2))
    np.testing.assert_array_equal(warp.buffers["y"], x[np.arange(64) ^ 1])
    assert "wrote another value to it" in run(3).error
    assert re.search(r"race on shared memory s\[\d+\]: thread \d+ read it", run(5).error)
    assert re.search(
        r"tile\[1\]: thread 1 wrote it \(patterns\.cu line 36\) and thread 32 read it "
        r"\(patterns\.cu line 37\)",
        run(6).error,
    )


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
        "  typedef cub::BlockRadixSort<float, 128, 4> R; x[0] = 1.0f;\n}\n"
        "__global__ void plain(float* x) { x[threadIdx.x] = 2.0f; }\n"
    )
    path = tmp_path / "mixed.cu"
    path.write_text(source)
    src = ex.source(path)
    with pytest.raises(ExecError, match=r"it uses cub \(CUDA's template library\)"):
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


PTX = r"""
#include <cuda_runtime.h>
__device__ void load4(void* dst, const void* src, bool ok) {
  uint4* data = reinterpret_cast<uint4*>(dst);
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\tmov.b32 %0, 0;\n\tmov.b32 %1, 0;\n"
               "\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n"
               "\t@p ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
               : "=r"(data[0].x), "=r"(data[0].y), "=r"(data[0].z), "=r"(data[0].w)
               : "l"(src), "r"((int)ok));
}
__device__ void store2(void* dst, const void* src) {
  const uint2* data = reinterpret_cast<const uint2*>(src);
  asm volatile("st.global.wb.v2.u32 [%0], {%1, %2};" : : "l"(dst), "r"(data[0].x),
               "r"(data[0].y) : "memory");
}
__global__ void copy4(const float* x, float* y, unsigned* lanes, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  float v[4];
  load4(v, x + i, i < n);
  store2(y + i, v);
  store2(y + i + 2, v + 2);
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  lanes[i / 4] = lane;
}
__global__ void past_the_end(const float* x, float* y) {
  float v[4];
  load4(v, x + 4 * threadIdx.x, true);
  y[threadIdx.x] = v[0];
}
__global__ void through_shared(const float* x, float* y) {
  __shared__ float tile[64];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  unsigned at = (unsigned)__cvta_generic_to_shared(&tile[63 - threadIdx.x]);
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(at));
  y[threadIdx.x] = v;
}
__global__ void adds(float* y) {
  float r;
  asm("add.f32 %0, %1, %2;" : "=f"(r) : "f"(y[0]), "f"(y[1]));
  y[0] = r;
}
__global__ void forges(float* y, unsigned long long bits) {
  float* p;
  asm("mov.b64 %0, %1;" : "=l"(p) : "l"(bits));
  p[0] = 1.0f;
}
__global__ void to_int8(const float* x, int* q) {
  int r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(x[threadIdx.x]));
  q[threadIdx.x] = r;
}
"""


def test_inline_ptx_loads_and_stores_run_through_the_checked_pointers(ex, tmp_path):
    path = tmp_path / "ptx.cu"
    path.write_text(PTX)
    src = ex.source(path)
    x = np.arange(64, dtype=np.float32)
    args = [x, np.zeros(64, np.float32), np.zeros(16, np.uint32), np.int32(48)]
    r = ex.run(ex.compile(src, "copy4"), Launch((2, 1, 1), (8, 1, 1)), args)
    assert r.ok, r.error
    # the predicated load gives zeros past n; every thread's lane is its index in the warp
    np.testing.assert_array_equal(r.buffers["y"], np.where(x < 48, x, 0))
    np.testing.assert_array_equal(r.buffers["lanes"], np.tile(np.arange(8), 2))
    r = ex.run(ex.compile(src, "through_shared"), Launch((1, 1, 1), (64, 1, 1)), [x, x * 0])
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["y"], x[::-1])
    # cvt rounds ties to even and saturates, NaN to 0, sign-extended into the register
    x6 = np.array([2.5, -3.5, 300, -300, np.nan, 0.4], np.float32)
    r = ex.run(
        ex.compile(src, "to_int8"), Launch((1, 1, 1), (6, 1, 1)), [x6, np.zeros(6, np.int32)]
    )
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["q"], [2, -4, 127, -128, 0, 0])
    # a vector load past the end of the buffer is an out-of-bounds read, as a C++ one is
    r = ex.run(
        ex.compile(src, "past_the_end"),
        Launch((1, 1, 1), (4, 1, 1)),
        [np.zeros(14, np.float32), np.zeros(4, np.float32)],
    )
    assert "out-of-bounds read of x" in r.error, r.error


def test_inline_ptx_outside_the_subset_stops_the_thread_naming_the_instruction(ex, tmp_path):
    path = tmp_path / "ptx.cu"
    path.write_text(PTX)
    src = ex.source(path)
    y = np.ones(2, np.float32)
    r = ex.run(ex.compile(src, "adds"), Launch((1, 1, 1), (1, 1, 1)), [y])
    assert r.error.startswith(
        "inline PTX `add.f32 %0, %1, %2` (line 42 of ptx.cu) is outside what the CPU executor "
        "interprets"
    ), r.error
    assert (r.buffers["y"] == 1).all()
    # a register never becomes a pointer: the address would be out of reach of the checks
    r = ex.run(ex.compile(src, "forges"), Launch((1, 1, 1), (1, 1, 1)), [y, np.uint64(0)])
    assert "writes a register into a pointer" in r.error, r.error


CUB = r"""
#include <cub/cub.cuh>
__global__ void block_sum(const float* x, float* out) {
  using R = cub::BlockReduce<float, 128>;
  __shared__ typename R::TempStorage temp;
  float s = R(temp).Sum(x[blockIdx.x * 128 + threadIdx.x]);
  float m = R(temp).Reduce(x[blockIdx.x * 128 + threadIdx.x], cub::Max());
  if (threadIdx.x == 0) { out[2 * blockIdx.x] = s; out[2 * blockIdx.x + 1] = m; }
}
__global__ void warp_sums(const float* x, float* out) {
  using W = cub::WarpReduce<float, 16>;
  __shared__ typename W::TempStorage temp;
  float s = W(temp).Sum(x[threadIdx.x]);
  if (threadIdx.x % 16 == 0) out[threadIdx.x / 16] = s;
}
"""


def test_cub_block_and_warp_reductions_give_thread_zero_the_aggregate(ex, tmp_path):
    c = kernel(ex, tmp_path, CUB, "block_sum")
    x = RNG.standard_normal(3 * 128).astype(np.float32)
    r = ex.run(c, Launch((3, 1, 1), (128, 1, 1)), [x, np.zeros(6, np.float32)])
    assert r.ok, r.error
    rows = x.reshape(3, 128)
    np.testing.assert_allclose(r.buffers["out"][0::2], rows.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(r.buffers["out"][1::2], rows.max(1))
    c = kernel(ex, tmp_path, CUB, "warp_sums")
    r = ex.run(c, Launch((1, 1, 1), (64, 1, 1)), [x[:64], np.zeros(4, np.float32)])
    assert r.ok, r.error
    np.testing.assert_allclose(r.buffers["out"], x[:64].reshape(4, 16).sum(1), rtol=1e-5)


COALESCED = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ int agg_inc(int* counter) {
  cg::coalesced_group active = cg::coalesced_threads();
  int res = 0;
  if (active.thread_rank() == 0) res = atomicAdd(counter, active.size());
  res = active.shfl(res, 0);
  return res + active.thread_rank();
}
__global__ void keep_positive(int* dst, int* count, const int* src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && src[i] > 0) dst[agg_inc(count)] = src[i];
}
"""


def test_a_coalesced_group_is_the_lanes_that_reach_it_together(ex, tmp_path):
    c = kernel(ex, tmp_path, COALESCED, "keep_positive")
    src = RNG.integers(-5, 5, 200).astype(np.int32)
    args = [np.zeros(200, np.int32), np.zeros(1, np.int32), src, np.int32(200)]
    r = ex.run(c, Launch((4, 1, 1), (64, 1, 1)), args)
    assert r.ok, r.error
    kept = int((src > 0).sum())
    assert r.buffers["count"][0] == kept
    np.testing.assert_array_equal(np.sort(r.buffers["dst"][:kept]), np.sort(src[src > 0]))


STAGED = r"""
#include <cuda/barrier>
#include <cooperative_groups.h>
__global__ void reversed_rows(const float* x, float* y) {
  auto block = cooperative_groups::this_thread_block();
  __shared__ cuda::barrier<cuda::thread_scope::thread_scope_block> bar;
  __shared__ float tile[64];
  if (block.thread_rank() == 0) init(&bar, block.size());
  __syncthreads();
  cuda::memcpy_async(&tile[threadIdx.x], &x[blockIdx.x * 64 + threadIdx.x],
                     cuda::aligned_size_t<4>(sizeof(float)), bar);
  bar.arrive_and_wait();
  y[blockIdx.x * 64 + threadIdx.x] = tile[63 - threadIdx.x];
}
"""


def test_memcpy_async_into_shared_memory_is_seen_after_the_barrier(ex, tmp_path):
    c = kernel(ex, tmp_path, STAGED, "reversed_rows")
    x = np.arange(128, dtype=np.float32)
    r = ex.run(c, Launch((2, 1, 1), (64, 1, 1)), [x, np.zeros(128, np.float32)])
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["y"], x.reshape(2, 64)[:, ::-1].reshape(-1))


def test_a_kernel_in_a_namespace_calls_that_namespaces_helpers_unqualified(ex, tmp_path):
    source = (
        "namespace act {\ntemplate <typename T> __device__ T twice(const T& x) { return x + x; }\n"
        "__global__ void doubled(float* y) { y[threadIdx.x] = twice(y[threadIdx.x]); }\n}\n"
    )
    r = ex.run(
        kernel(ex, tmp_path, source, "doubled"),
        Launch((1, 1, 1), (4, 1, 1)),
        [np.ones(4, np.float32)],
    )
    assert r.ok and (r.buffers["y"] == 2).all(), r.error


def test_inline_ptx_operands_may_be_members_of_an_anonymous_union(ex, tmp_path):
    source = (
        "__global__ void halves(const float* x, short* y) {\n"
        "  union { short int16; unsigned short bits; };\n"
        "  int t = threadIdx.x;\n"
        '  if (t < 2) asm("cvt.rzi.s16.f32 %0, %1;" : "=h"(int16) : "f"(x[t]));\n'
        "  else int16 = 7;\n"
        "  y[t] = int16;\n}\n"
    )
    c = kernel(ex, tmp_path, source, "halves")
    x = np.array([-2.7, 40000.0, 0.0], np.float32)
    r = ex.run(c, Launch((1, 1, 1), (3, 1, 1)), [x, np.zeros(3, np.int16)])
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["y"], [-2, 32767, 7])


TILE_POINTER = r"""
__global__ void tiles(const float* k, float* out, int tiles) {
  __shared__ float sram[64];
  float* kj = &sram[32];  // every thread takes the address; only thread t writes kj[t]
  int t = threadIdx.x;
  for (int j = 0; j < tiles; j++) {
    kj[t] = k[j * 32 + t];
    __syncthreads();
    out[j * 32 + t] = kj[(t + 1) % 32];
    __syncthreads();
  }
}
"""


def test_taking_an_address_in_shared_memory_is_no_access(ex, tmp_path):
    """`&sram[32]` in every thread, then thread 0 writing sram[32]: the address was counted as a
    read, and the README's FlashAttention example stopped as a race in the original."""
    c = kernel(ex, tmp_path, TILE_POINTER, "tiles")
    k = RNG.standard_normal(64).astype(np.float32)
    r = ex.run(c, Launch((1, 1, 1), (32, 1, 1)), [k, np.zeros(64, np.float32), np.int32(2)])
    assert r.ok, r.error
    np.testing.assert_array_equal(
        r.buffers["out"], k.reshape(2, 32)[:, (np.arange(32) + 1) % 32].ravel()
    )
