// LayerNorm over the last axis with an affine transform:
//   out = (x - mean) * rsqrt(var + eps) * weight + bias      (biased variance)
// One block per row. The row is staged once in dynamic shared memory as float, so the
// mean and the variance are two exact passes over shared memory rather than over DRAM.
// Block reductions: __shfl_down_sync within warps, a static shared array across warps.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define LN_BLOCK 256
#define LN_WARPS (LN_BLOCK / 32)

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

__device__ __forceinline__ float block_reduce_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < LN_WARPS ? scratch[lane] : 0.0f;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) scratch[LN_WARPS] = v;
    }
    __syncthreads();
    float total = scratch[LN_WARPS];
    __syncthreads();  // scratch is reused by the next reduction
    return total;
}

template <typename T>
__global__ void __launch_bounds__(LN_BLOCK)
layernorm_kernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                 T* __restrict__ out, int rows, int dim, float eps) {
    extern __shared__ float row_buf[];  // dim floats
    __shared__ float scratch[LN_WARPS + 1];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const T* xr = x + (size_t)row * dim;
    T* outr = out + (size_t)row * dim;

    float sum = 0.0f;
    for (int c = threadIdx.x; c < dim; c += LN_BLOCK) {
        const float v = to_f(xr[c]);
        row_buf[c] = v;
        sum += v;
    }
    const float mean = block_reduce_sum(sum, scratch) / dim;

    float sq = 0.0f;
    for (int c = threadIdx.x; c < dim; c += LN_BLOCK) {
        const float d = row_buf[c] - mean;
        sq += d * d;
    }
    const float rstd = rsqrtf(block_reduce_sum(sq, scratch) / dim + eps);

    for (int c = threadIdx.x; c < dim; c += LN_BLOCK) {
        const float y = (row_buf[c] - mean) * rstd;
        outr[c] = from_f<T>(fmaf(y, to_f(weight[c]), to_f(bias[c])));
    }
}

template <typename T>
cudaError_t layernorm(const T* x, const T* weight, const T* bias, T* out, int rows, int dim, float eps,
                      cudaStream_t stream) {
    const size_t smem = (size_t)dim * sizeof(float);
    if (smem > 48 * 1024) {
        cudaError_t err = cudaFuncSetAttribute(layernorm_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)smem);
        if (err != cudaSuccess) return err;
    }
    layernorm_kernel<T><<<rows, LN_BLOCK, smem, stream>>>(x, weight, bias, out, rows, dim, eps);
    return cudaGetLastError();
}

template cudaError_t layernorm<float>(const float*, const float*, const float*, float*, int, int, float, cudaStream_t);
template cudaError_t layernorm<__half>(const __half*, const __half*, const __half*, __half*, int, int, float,
                                       cudaStream_t);
template cudaError_t layernorm<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                              __nv_bfloat16*, int, int, float, cudaStream_t);
