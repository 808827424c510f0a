// Inclusive prefix sum along the last axis of a row-major [rows, cols] matrix.
// One block per row; the row is walked in tiles of BLOCK * ITEMS elements. Per tile:
//   1. each thread loads ITEMS consecutive elements and scans them serially (in float);
//   2. the per-thread totals are scanned across each warp with __shfl_up_sync;
//   3. warp totals go through shared memory and are scanned by warp 0;
//   4. each thread adds (carry + warp prefix + thread prefix) and writes its ITEMS.
// The tile total is carried into the next tile.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define SCAN_BLOCK 256
#define SCAN_ITEMS 4
#define WARP 32
#define NUM_WARPS (SCAN_BLOCK / WARP)

template <typename T> __device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

__device__ __forceinline__ float warp_inclusive_scan(float v, int lane) {
#pragma unroll
    for (int d = 1; d < WARP; d <<= 1) {
        const float up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    return v;
}

template <typename T>
__global__ void __launch_bounds__(SCAN_BLOCK)
cumsum_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int rows, int cols) {
    __shared__ float warp_totals[NUM_WARPS];
    __shared__ float tile_total;
    const int row = blockIdx.x;
    if (row >= rows) return;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const T* xr = x + (size_t)row * cols;
    T* outr = out + (size_t)row * cols;

    float carry = 0.0f;
    for (int tile = 0; tile < cols; tile += SCAN_BLOCK * SCAN_ITEMS) {
        const int first = tile + threadIdx.x * SCAN_ITEMS;
        float items[SCAN_ITEMS];
        float running = 0.0f;
#pragma unroll
        for (int k = 0; k < SCAN_ITEMS; ++k) {
            running += first + k < cols ? to_float(xr[first + k]) : 0.0f;
            items[k] = running;
        }

        const float inclusive = warp_inclusive_scan(running, lane);
        if (lane == WARP - 1) warp_totals[warp] = inclusive;
        __syncthreads();
        if (warp == 0) {
            const float w = lane < NUM_WARPS ? warp_totals[lane] : 0.0f;
            const float ws = warp_inclusive_scan(w, lane);
            if (lane < NUM_WARPS) warp_totals[lane] = ws - w;  // exclusive prefix of warp totals
            if (lane == NUM_WARPS - 1) tile_total = ws;
        }
        __syncthreads();

        const float prefix = carry + warp_totals[warp] + (inclusive - running);
#pragma unroll
        for (int k = 0; k < SCAN_ITEMS; ++k) {
            if (first + k < cols) outr[first + k] = from_float<T>(prefix + items[k]);
        }
        carry += tile_total;
        __syncthreads();  // warp_totals and tile_total are rewritten by the next tile
    }
}

template <typename T>
void cumsum_rows(const T* x, T* out, int rows, int cols, cudaStream_t stream) {
    cumsum_rows_kernel<T><<<rows, SCAN_BLOCK, 0, stream>>>(x, out, rows, cols);
}

template void cumsum_rows<float>(const float*, float*, int, int, cudaStream_t);
template void cumsum_rows<__half>(const __half*, __half*, int, int, cudaStream_t);
template void cumsum_rows<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int, int, cudaStream_t);
