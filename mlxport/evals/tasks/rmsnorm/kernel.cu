// RMSNorm (LLaMA-style): out = x * rsqrt(mean(x^2) + eps) * weight, over the last axis.
// One block per row. The row is read once into registers (as float4 for float32 rows
// whose width is a multiple of 4); the sum of squares is reduced with __shfl_down_sync
// inside warps and through a small static shared-memory array across warps; then the
// scaled row is written back.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define WARP_SIZE 32
#define MAX_WARPS 32

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Block-wide sum; the result is valid in every thread.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[MAX_WARPS];
    __shared__ float total;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x + WARP_SIZE - 1) / WARP_SIZE ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

// Simple path used for every dtype and any hidden size; VPT = columns per thread, cached in registers.
template <typename T, int BLOCK, int VPT>
__global__ void __launch_bounds__(BLOCK)
rmsnorm_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
               int rows, int dim, float eps) {
    const int row = blockIdx.x;
    if (row >= rows) return;
    const T* xr = x + (size_t)row * dim;
    T* outr = out + (size_t)row * dim;

    float vals[VPT];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int c = threadIdx.x + k * BLOCK;
        vals[k] = c < dim ? static_cast<float>(xr[c]) : 0.0f;
        ss += vals[k] * vals[k];
    }
    const float inv_rms = rsqrtf(block_sum(ss) / dim + eps);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int c = threadIdx.x + k * BLOCK;
        if (c < dim) outr[c] = static_cast<T>(vals[k] * inv_rms * static_cast<float>(weight[c]));
    }
}

// float32 fast path for dim % 4 == 0: float4 loads, VPT4 vectors per thread.
template <int BLOCK, int VPT4>
__global__ void __launch_bounds__(BLOCK)
rmsnorm_kernel_f4(const float* __restrict__ x, const float* __restrict__ weight, float* __restrict__ out,
                  int rows, int dim, float eps) {
    const int row = blockIdx.x;
    if (row >= rows) return;
    const int dim4 = dim / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)row * dim);
    const float4* w4 = reinterpret_cast<const float4*>(weight);
    float4* outr = reinterpret_cast<float4*>(out + (size_t)row * dim);

    float4 vals[VPT4];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT4; ++k) {
        const int c = threadIdx.x + k * BLOCK;
        vals[k] = c < dim4 ? __ldg(&xr[c]) : make_float4(0.f, 0.f, 0.f, 0.f);
        ss += vals[k].x * vals[k].x + vals[k].y * vals[k].y + vals[k].z * vals[k].z + vals[k].w * vals[k].w;
    }
    const float inv_rms = rsqrtf(block_sum(ss) / dim + eps);
#pragma unroll
    for (int k = 0; k < VPT4; ++k) {
        const int c = threadIdx.x + k * BLOCK;
        if (c < dim4) {
            const float4 w = __ldg(&w4[c]);
            outr[c] = make_float4(vals[k].x * inv_rms * w.x, vals[k].y * inv_rms * w.y,
                                  vals[k].z * inv_rms * w.z, vals[k].w * inv_rms * w.w);
        }
    }
}

template <typename T>
void rmsnorm(const T* x, const T* weight, T* out, int rows, int dim, float eps, cudaStream_t stream) {
    constexpr int BLOCK = 256;
    if (dim <= BLOCK * 4) {
        rmsnorm_kernel<T, BLOCK, 4><<<rows, BLOCK, 0, stream>>>(x, weight, out, rows, dim, eps);
    } else if (dim <= BLOCK * 16) {
        rmsnorm_kernel<T, BLOCK, 16><<<rows, BLOCK, 0, stream>>>(x, weight, out, rows, dim, eps);
    } else {  // up to 16384 columns
        rmsnorm_kernel<T, 1024, 16><<<rows, 1024, 0, stream>>>(x, weight, out, rows, dim, eps);
    }
}

template <>
void rmsnorm<float>(const float* x, const float* weight, float* out, int rows, int dim, float eps,
                    cudaStream_t stream) {
    constexpr int BLOCK = 256;
    if (dim % 4 == 0 && dim <= BLOCK * 16) {
        rmsnorm_kernel_f4<BLOCK, 4><<<rows, BLOCK, 0, stream>>>(x, weight, out, rows, dim, eps);
    } else if (dim <= BLOCK * 4) {
        rmsnorm_kernel<float, BLOCK, 4><<<rows, BLOCK, 0, stream>>>(x, weight, out, rows, dim, eps);
    } else {
        rmsnorm_kernel<float, 1024, 16><<<rows, 1024, 0, stream>>>(x, weight, out, rows, dim, eps);
    }
}

template void rmsnorm<__half>(const __half*, const __half*, __half*, int, int, float, cudaStream_t);
template void rmsnorm<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int, int, float,
                                     cudaStream_t);
