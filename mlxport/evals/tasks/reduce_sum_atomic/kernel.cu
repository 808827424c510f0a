// Sum of a large vector into a single float: each block reduces a grid-stride slice
// (float4 loads for float input), warps reduce with shuffles, the block's warp partials go
// through shared memory, and one atomicAdd per block folds the partial into *out.
// The caller zeroes *out first. Accumulation is always in float, whatever the input type.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define WARP_SIZE 32
#define MAX_BLOCKS 1024

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

template <typename T>
__device__ __forceinline__ float thread_partial(const T* __restrict__ x, int64_t n) {
    float acc = 0.0f;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        acc += to_float(x[i]);
    }
    return acc;
}

// float input: vectorised body, scalar tail.
template <>
__device__ __forceinline__ float thread_partial<float>(const float* __restrict__ x, int64_t n) {
    float acc = 0.0f;
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int64_t i = tid; i < n4; i += stride) {
        float4 v = x4[i];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    for (int64_t i = n4 * 4 + tid; i < n; i += stride) {
        acc += x[i];
    }
    return acc;
}

template <typename T>
__global__ void __launch_bounds__(BLOCK_SIZE)
reduce_sum_atomic_kernel(const T* __restrict__ x, float* __restrict__ out, int64_t n) {
    __shared__ float warp_sums[BLOCK_SIZE / WARP_SIZE];

    float v = warp_reduce_sum(thread_partial<T>(x, n));
    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();

    if (warp == 0) {
        v = lane < BLOCK_SIZE / WARP_SIZE ? warp_sums[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) atomicAdd(out, v);
    }
}

template <typename T>
void reduce_sum_atomic(const T* x, float* out, int64_t n, cudaStream_t stream) {
    int64_t per_block = (int64_t)BLOCK_SIZE * 8;
    int blocks = (int)((n + per_block - 1) / per_block);
    blocks = blocks < 1 ? 1 : (blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
    cudaMemsetAsync(out, 0, sizeof(float), stream);
    reduce_sum_atomic_kernel<T><<<blocks, BLOCK_SIZE, 0, stream>>>(x, out, n);
}

template void reduce_sum_atomic<float>(const float*, float*, int64_t, cudaStream_t);
template void reduce_sum_atomic<__half>(const __half*, float*, int64_t, cudaStream_t);
template void reduce_sum_atomic<__nv_bfloat16>(const __nv_bfloat16*, float*, int64_t, cudaStream_t);
