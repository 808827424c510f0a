// C = A @ B with shared-memory tiling (row-major A [M, K], B [K, N], C [M, N]).
//
// Classic square tiling: a TILE x TILE block of threads walks the K dimension one tile at a
// time, staging a tile of A and a tile of B in shared memory so each global element is read
// once per block instead of once per thread. Accumulation is in float for every input type.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#ifndef TILE
#define TILE 16
#endif

template <typename T> __device__ __forceinline__ float to_f(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

template <typename T, int TILE_SIZE>
__global__ void matmul_tiled_kernel(const T* __restrict__ A,
                                    const T* __restrict__ B,
                                    T* __restrict__ C,
                                    int M, int N, int K) {
    __shared__ float As[TILE_SIZE][TILE_SIZE];
    __shared__ float Bs[TILE_SIZE][TILE_SIZE + 1];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_SIZE + ty;
    const int col = blockIdx.x * TILE_SIZE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE_SIZE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? to_f(A[(int64_t)row * K + k0 + tx]) : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? to_f(B[(int64_t)(k0 + ty) * N + col]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_SIZE; ++k) {
            acc = fmaf(As[ty][k], Bs[k][tx], acc);
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(int64_t)row * N + col] = from_f<T>(acc);
    }
}

template <typename T>
void matmul_tiled(const T* A, const T* B, T* C, int M, int N, int K, cudaStream_t stream) {
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled_kernel<T, TILE><<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}

template void matmul_tiled<float>(const float*, const float*, float*, int, int, int, cudaStream_t);
template void matmul_tiled<__half>(const __half*, const __half*, __half*, int, int, int, cudaStream_t);
template void matmul_tiled<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                          int, int, int, cudaStream_t);
