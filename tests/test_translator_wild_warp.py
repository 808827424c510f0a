"""Warp code as real projects write it: shuffles within segments of a warp (`width` 4, or one the
block size gives), masks held in local constants, votes over part of a warp, cooperative groups
passed to helpers, run-time `tiled_partition`, `cg::sync`, and `cg::reduce` with the file's own
operation on a struct. Each kernel is made into a task from the .cu file (the original on the CPU
executor is the golden), translated, and checked on the simulator."""

import pytest

from mlxport.translate.translator import Untranslatable, translate
from tests.conftest import ported_msl


def test_shuffles_within_segments_and_votes_over_part_of_a_warp(tmp_path):
    """Width-4 sums (a helper's too), a broadcast within 8 lanes, a scan step whose width the
    block gives, and a ballot of the lower half-warp, its mask a local constant."""
    source = """
    __device__ float quad_sum(float v) {
        v += __shfl_xor_sync(0xffffffff, v, 1, 4);
        return v + __shfl_xor_sync(0xffffffff, v, 2, 4);
    }
    __global__ void segments(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        int lane = threadIdx.x % 32;
        unsigned full = 0xffffffff;
        float v = i < n ? x[i] : 0.f;
        float down = v + __shfl_down_sync(full, v, 1, 4);
        down += __shfl_down_sync(full, down, 2, 4);
        float first = __shfl_sync(full, v, 3, 8);
        float up = __shfl_up_sync(full, v, 1, blockDim.x / 4);
        float votes = 0.f;
        if (lane < 16) votes = (float)(__ballot_sync(0x0000ffff, v > 0.f) % 61u);
        if (i < n) y[i] = down + 10.f * first + 100.f * up + 1000.f * quad_sum(v) + votes;
    }
    void run(const float* x, float* y, int n) { segments<<<(n + 63) / 64, 64>>>(x, y, n); }
    """
    translation = ported_msl(tmp_path, source, [{"n": 300}])
    source_msl = translation.candidate.source + translation.candidate.header
    assert "simd_shuffle_down" not in source_msl  # each width became lane arithmetic
    assert "thread_index_in_simdgroup" in translation.candidate.source


def test_a_custom_reduction_over_a_tile_passed_to_a_helper(tmp_path):
    """Online softmax's (max, sum) pair reduced with the file's own operation over a tile that a
    run-time `tiled_partition` made and a helper receives, with `cg::sync` on the block."""
    source = """
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;
    struct MaxSum { float m; float s; };
    __device__ MaxSum combine(MaxSum a, MaxSum b) {
        MaxSum hi = a.m > b.m ? a : b, lo = a.m > b.m ? b : a;
        return {hi.m, hi.s + lo.s * expf(lo.m - hi.m)};
    }
    __device__ MaxSum row_stats(const cg::thread_block_tile<32>& warp, const float* row, int cols) {
        MaxSum acc = {-1e30f, 0.f};
        for (int c = warp.thread_rank(); c < cols; c += warp.size())
            acc = combine(acc, {row[c], 1.f});
        return cg::reduce(warp, acc, combine);
    }
    __device__ void settle(cg::thread_block block) { cg::sync(block); }
    __global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
        cg::thread_block block = cg::this_thread_block();
        cg::thread_group tile = cg::tiled_partition(block, 32);
        cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
        int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
        settle(block);
        if (row >= rows) return;
        MaxSum st = row_stats(warp, x + row * cols, cols);
        for (int c = tile.thread_rank(); c < cols; c += 32)
            y[row * cols + c] = expf(x[row * cols + c] - st.m) / st.s;
    }
    void run(const float* x, float* y, int rows, int cols) {
        softmax_rows<<<(rows + 3) / 4, 128>>>(x, y, rows, cols);
    }
    """
    translation = ported_msl(tmp_path, source, [{"rows": 10, "cols": 77}])
    assert "mlxport_reduce_combine_32(acc)" in translation.candidate.header


def test_a_tile_whose_width_is_a_macro(tmp_path):
    """`cg::thread_block_tile<WARP_SIZE> g = cg::tiled_partition<WARP_SIZE>(b);` with WARP_SIZE a
    #define: tree-sitter reads the statement as comparisons; its text still declares a tile."""
    source = """
    #include <cooperative_groups.h>
    namespace cg = cooperative_groups;
    #define WARP_SIZE 32
    __global__ void row_max(const float* x, float* y, int n) {
        cg::thread_block b = cg::this_thread_block();
        cg::thread_block_tile<WARP_SIZE> g = cg::tiled_partition<WARP_SIZE>(b);
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        float v = i < n ? x[i] : -1e30f;
        for (int o = 16; o > 0; o /= 2) v = fmaxf(v, g.shfl_xor(v, o));
        if (i < n) y[i] = v;
    }
    void run(const float* x, float* y, int n) { row_max<<<(n + 63) / 64, 64>>>(x, y, n); }
    """
    translation = ported_msl(tmp_path, source, [{"n": 1000}])
    assert "const ushort g = 32;" in translation.candidate.source


def test_every_lane_storing_a_warp_sum_becomes_one_lane_storing_it(tmp_path):
    """`part[warp] = sum;` by every lane, the sum a butterfly's (inline and in a helper) or a
    `cg::reduce`'s: one element, one value, and still a race on a GPU, so the first lane storing
    each element stores it."""
    source = """
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;
    __device__ float warp_max(float v) {
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
        return v;
    }
    __global__ void row_stats(const float* x, float* y, int cols) {
        cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
        __shared__ float sums[8], maxes[8], sq[8];
        int w = threadIdx.x / 32;
        float s = 0.f, q = 0.f, m = -1e30f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = x[blockIdx.x * cols + c];
            s += v; q += v * v; m = fmaxf(m, v);
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
        sums[w] = s;
        maxes[w] = warp_max(m);
        float wq = cg::reduce(warp, q, cg::plus<float>());
        sq[w] = wq;
        __syncthreads();
        if (threadIdx.x == 0) {
            float ts = 0.f, tq = 0.f, tm = -1e30f;
            for (int i = 0; i < blockDim.x / 32; ++i) {
                ts += sums[i]; tq += sq[i]; tm = fmaxf(tm, maxes[i]);
            }
            y[blockIdx.x] = ts + 10.f * tq + 100.f * tm;
        }
    }
    void run(const float* x, float* y, int rows, int cols) { row_stats<<<rows, 128>>>(x, y, cols); }
    """
    translation = ported_msl(tmp_path, source, [{"rows": 6, "cols": 300}])
    body = translation.candidate.source
    assert body.count("if (mlxport_first || mlxport_at != mlxport_first_at)") == 3
    for stored in (
        "mlxport_value = s;",
        "mlxport_value = warp_max(m",
        "sums[mlxport_at]",
        "maxes[mlxport_at]",
        "sq[mlxport_at]",
    ):
        assert stored in body


def test_a_helpers_shared_buffer_sized_by_a_pack_its_caller_sets(tmp_path):
    """DeepSpeed's reduce: `block<Add>` calls `_block<float, warp_bound, Add>` (warp_bound a
    default template argument), whose __shared__ buffer has `max_warps * sizeof...(Ops)` rows:
    hoisted into the kernel at the size the chain of calls gives."""
    source = """
    constexpr int max_warps = 32;
    enum class Op { Add, Max };
    template <Op O> __device__ float combine(float a, float b) {
        return O == Op::Add ? a + b : fmaxf(a, b);
    }
    template <typename T, int total_warps, Op... Ops>
    __device__ void _block(T* data) {
        constexpr int elems = sizeof...(Ops);
        __shared__ T reduce_buffer[max_warps * elems];
        int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        for (int o = 16; o > 0; o /= 2)
            data[0] = combine<Ops...>(data[0], __shfl_xor_sync(0xffffffff, data[0], o));
        if (lane == 0) reduce_buffer[warp * elems] = data[0];
        __syncthreads();
        T acc = reduce_buffer[0];
        for (int w = 1; w < total_warps; ++w) acc = combine<Ops...>(acc, reduce_buffer[w * elems]);
        data[0] = acc;
    }
    template <Op O, int warp_bound = 4>
    __device__ void block(float& val) { _block<float, warp_bound, O>(&val); }

    __global__ void row_sum(const float* x, float* y, int cols) {
        float v = 0.f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) v += x[blockIdx.x * cols + c];
        block<Op::Add>(v);
        if (threadIdx.x == 0) y[blockIdx.x] = v;
    }
    void run(const float* x, float* y, int rows, int cols) { row_sum<<<rows, 128>>>(x, y, cols); }
    """
    source = ported_msl(tmp_path, source, [{"rows": 6, "cols": 300}]).candidate.source
    assert "threadgroup float _block_reduce_buffer[max_warps * (1)];" in source


def test_a_tile_whose_width_is_a_template_parameter_is_refused_naming_it():
    """`thread_block_tile<threadsPerHead>`: the width is known only per instantiation, and Metal
    has SIMD-groups of 32 and quads of 4: refused in one sentence naming the width."""
    source = """
    #include <cooperative_groups.h>
    namespace cg = cooperative_groups;
    template <int threadsPerHead>
    __global__ void head_max(const float* x, float* y, int n) {
        cg::thread_block tb = cg::this_thread_block();
        cg::thread_block_tile<threadsPerHead> g = cg::tiled_partition<threadsPerHead>(tb);
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        float v = i < n ? x[i] : -1e30f;
        for (int o = threadsPerHead / 2; o > 0; o /= 2) v = fmaxf(v, g.shfl_xor(v, o));
        if (i < n) y[i] = v;
    }
    void run(const float* x, float* y, int n) { head_max<32><<<(n + 63) / 64, 64>>>(x, y, n); }
    """
    with pytest.raises(Untranslatable, match="its width threadsPerHead is no number"):
        translate(source)
