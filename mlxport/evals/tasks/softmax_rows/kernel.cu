// Row-wise softmax over the last axis of a [rows, cols] matrix.
// One block per row. Each thread keeps an online (max, sum) pair over a strided
// slice of the row, warps merge pairs with __shfl_xor_sync, and warp leaders merge
// through shared memory. A second pass writes exp(x - max) / sum.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cfloat>

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float load_f(const float* p) { return __ldg(p); }
__device__ __forceinline__ float load_f(const __half* p) { return __half2float(p[0]); }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p) { return __bfloat162float(p[0]); }
__device__ __forceinline__ void store_f(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// Merge two (max, sum-of-exp relative to max) pairs.
__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
}

template <int BLOCK>
__device__ __forceinline__ void block_reduce(float& m, float& s) {
    __shared__ float warp_m[BLOCK / WARP_SIZE];
    __shared__ float warp_s[BLOCK / WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
#pragma unroll
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(FULL_MASK, m, off);
        float os = __shfl_xor_sync(FULL_MASK, s, off);
        merge(m, s, om, os);
    }
    if (lane == 0) { warp_m[warp] = m; warp_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < BLOCK / WARP_SIZE ? warp_m[lane] : -FLT_MAX;
        s = lane < BLOCK / WARP_SIZE ? warp_s[lane] : 0.0f;
#pragma unroll
        for (int off = WARP_SIZE / 2; off > 0; off >>= 1) {
            float om = __shfl_xor_sync(FULL_MASK, m, off);
            float os = __shfl_xor_sync(FULL_MASK, s, off);
            merge(m, s, om, os);
        }
        if (lane == 0) { warp_m[0] = m; warp_s[0] = s; }
    }
    __syncthreads();
    m = warp_m[0];
    s = warp_s[0];
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int rows, int cols) {
    const int row = blockIdx.x;
    if (row >= rows) return;
    const T* xr = x + (size_t)row * cols;
    T* outr = out + (size_t)row * cols;

    float m = -FLT_MAX, s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        float v = load_f(xr + c);
        if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; }
        else       { s += __expf(v - m); }
    }
    block_reduce<BLOCK>(m, s);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        store_f(outr + c, __expf(load_f(xr + c) - m) * inv);
    }
}

template <typename T>
void softmax_rows(const T* x, T* out, int rows, int cols, cudaStream_t stream) {
    if (cols <= 1024) {
        softmax_rows_kernel<T, 128><<<rows, 128, 0, stream>>>(x, out, rows, cols);
    } else {
        softmax_rows_kernel<T, 512><<<rows, 512, 0, stream>>>(x, out, rows, cols);
    }
}

template void softmax_rows<float>(const float*, float*, int, int, cudaStream_t);
template void softmax_rows<__half>(const __half*, __half*, int, int, cudaStream_t);
template void softmax_rows<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int, int, cudaStream_t);
