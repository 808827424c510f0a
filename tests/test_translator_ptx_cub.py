"""Inline PTX of the subset the CPU executor reads (vector loads and stores with cache hints, a
predicated load, %laneid, cvt) and cub's BlockReduce and WarpReduce, translated to MSL: each
kernel is made into a task from the .cu file (the original on the CPU executor is the golden),
translated, and checked on the simulator."""

import pytest

from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.translator import translate
from tests.conftest import ported_msl


def test_vector_and_predicated_ptx_loads_and_stores(tmp_path):
    """DeepSpeed's memory helpers: v4 and v2 loads with cache hints in explicit specializations
    of a declared template taking void*, a predicated v4 load that gives zeros where the
    predicate is off, a v2 store, a u16 load at an offset, the lane from %laneid and a
    saturating cvt; a tile whose width is a constant of the file; asm outside the subset in an
    #if branch that neither CUDA nor Metal compiles."""
    source = """
    #include <cstdint>
    #include <cooperative_groups.h>
    namespace cg = cooperative_groups;
    constexpr int hw_warp_size = 32;
    __device__ void load4(void* dst, const void* src, bool ok) {
        uint4* data = reinterpret_cast<uint4*>(dst);
        asm volatile("{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %5, 0;\\n\\tmov.b32 %0, 0;\\n"
                     "\\tmov.b32 %1, 0;\\n\\tmov.b32 %2, 0;\\n\\tmov.b32 %3, 0;\\n"
                     "\\t@p ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\\n}\\n"
                     : "=r"(data[0].x), "=r"(data[0].y), "=r"(data[0].z), "=r"(data[0].w)
                     : "l"(src), "r"((int)ok));
    }
    template <int Bytes> __device__ void load_cached(void* dst, const void* src);
    template <> __device__ void load_cached<16>(void* dst, const void* src) {
        uint4* data = reinterpret_cast<uint4*>(dst);
        asm volatile("ld.global.ca.v4.u32 {%0, %1, %2, %3}, [%4];\\n"
                     : "=r"(data[0].x), "=r"(data[0].y), "=r"(data[0].z), "=r"(data[0].w)
                     : "l"(src));
    }
    template <> __device__ void load_cached<8>(void* dst, const void* src) {
        uint2* data = reinterpret_cast<uint2*>(dst);
        asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];" : "=r"(data[0].x), "=r"(data[0].y)
                     : "l"(src));
    }
    __device__ void store2(void* dst, const void* src) {
        const uint2* data = reinterpret_cast<const uint2*>(src);
        asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" : : "l"(dst), "r"(data[0].x),
                     "r"(data[0].y) : "memory");
    }
    __device__ float magnitude(float v) {
    #if defined(NEVER_DEFINED)
        float r;
        asm("abs.f32 %0, %1;" : "=f"(r) : "f"(v));
        return r;
    #else
        return fabsf(v);
    #endif
    }
    __device__ unsigned lane_id() {
        unsigned lane;
        asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
        return lane;
    }
    __global__ void copy(const float* x, const short* h, float* y, int n) {
        cg::thread_block_tile<hw_warp_size> warp = cg::tiled_partition<hw_warp_size>(
            cg::this_thread_block());
        int t = blockIdx.x * blockDim.x + threadIdx.x;
        int i = t * 4;
        float v[4], w[4];
        load4(v, x + i, i < n);
        load_cached<16>(w, x);
        load_cached<8>(w + 2, x + 2 * (t % 3));
        short s;
        asm("ld.global.nc.u16 %0, [%1+2];" : "=h"(s) : "l"(h + t));
        int q;
        asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(q) : "f"(v[0] * 10.0f));
        for (int k = 0; k < 4; k++) v[k] += magnitude(w[k]) + (float)s;
        if (i < n) {
            store2(y + i, v);
            store2(y + i + 2, v + 2);
            y[i + 1] += (float)(lane_id() + 1000 * q + 100000 * (int)warp.thread_rank());
        }
    }
    void run(const float* x, const short* h, float* y, int n) {
        copy<<<(n / 4 + 63) / 64, 64>>>(x, h, y, n);
    }
    """
    translation = ported_msl(tmp_path, source, [{"n": 500}])
    assert "asm" not in translation.candidate.source + translation.candidate.header


def test_block_reductions_sum_max_and_the_files_own_operation(tmp_path):
    """A BlockReduce through an alias, its TempStorage reused for a sum, a max and a reduction
    with the file's own functor, one of them in a helper (its storage hoisted to the kernel),
    the block not a multiple of 32 threads."""
    source = """
    #include <cub/cub.cuh>
    struct AbsMax {
        __device__ float operator()(float a, float b) const { return fmaxf(fabsf(a), fabsf(b)); }
    };
    __device__ float block_max(float v) {
        using R = cub::BlockReduce<float, 96>;
        __shared__ typename R::TempStorage temp;
        return R(temp).Reduce(v, cub::Max());
    }
    __global__ void stats(const float* x, float* out, int cols) {
        using BlockReduce = cub::BlockReduce<float, 96>;
        __shared__ typename BlockReduce::TempStorage temp;
        __shared__ float total;
        float s = 0.f, a = 0.f, m = -1e30f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = x[blockIdx.x * cols + c];
            s += v; m = fmaxf(m, v); a = fmaxf(a, fabsf(v));
        }
        s = BlockReduce(temp).Sum(s);
        if (threadIdx.x == 0) total = s;
        float big = BlockReduce(temp).Reduce(a, AbsMax());
        float top = block_max(m);
        __syncthreads();
        if (threadIdx.x == 0) {
            out[3 * blockIdx.x] = total;
            out[3 * blockIdx.x + 1] = top;
            out[3 * blockIdx.x + 2] = big;
        }
    }
    void run(const float* x, float* out, int rows, int cols) {
        stats<<<rows, 96>>>(x, out, cols);
    }
    """
    translation = ported_msl(tmp_path, source, [{"rows": 5, "cols": 300}])
    assert "cub::" not in translation.candidate.source + translation.candidate.header


def test_warp_reductions_one_output_per_warp(tmp_path):
    """llama2.cu's matrix-vector product: a WarpReduce sum per row, rows on threadIdx.y, and a
    max through a typedef."""
    source = """
    #include <cub/cub.cuh>
    __global__ void mat_vec(const float* w, const float* x, float* y, float* peak, int n, int d) {
        int row = blockIdx.x * blockDim.y + threadIdx.y;
        if (row >= d) return;
        float sum = 0.f, m = -1e30f;
        for (int j = threadIdx.x; j < n; j += 32) {
            float p = w[row * n + j] * x[j];
            sum += p; m = fmaxf(m, p);
        }
        typedef cub::WarpReduce<float> WarpReduce;
        __shared__ typename WarpReduce::TempStorage temp[4];
        sum = WarpReduce(temp[threadIdx.y]).Sum(sum);
        m = WarpReduce(temp[threadIdx.y]).Reduce(m, cub::Max());
        if (threadIdx.x == 0) { y[row] = sum; peak[row] = m; }
    }
    void run(const float* w, const float* x, float* y, float* peak, int n, int d) {
        mat_vec<<<(d + 3) / 4, dim3(32, 4)>>>(w, x, y, peak, n, d);
    }
    """
    translation = ported_msl(tmp_path, source, [{"n": 100, "d": 10}])
    assert "simd_sum(sum)" in translation.candidate.source


def test_the_cuda_body_refuses_cub_and_keeps_the_ptx():
    """mx.fast.cuda_kernel's body has no cub include, so cub stays refused there; inline PTX is
    CUDA, so it stays as it is."""
    launch = "void run(const float* x, float* out) { k<<<1, 32>>>(x, out); }\n"
    cub = (
        "#include <cub/cub.cuh>\n__global__ void k(const float* x, float* out) {\n"
        "    typedef cub::WarpReduce<float> W;\n    __shared__ typename W::TempStorage t;\n"
        "    out[threadIdx.x] = W(t).Sum(x[threadIdx.x]);\n}\n"
    )
    with pytest.raises(Untranslatable, match="cub"):
        translate(cub + launch, kernel="k", target="cuda")
    ptx = (
        "__global__ void k(const float* x, float* out) {\n    unsigned lane;\n"
        '    asm("mov.u32 %0, %%laneid;" : "=r"(lane));\n    out[threadIdx.x] = x[lane];\n}\n'
    )
    assert "%%laneid" in translate(ptx + launch, kernel="k", target="cuda").candidate.source
