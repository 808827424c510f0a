// Rotary position embedding, GPT-NeoX / LLaMA "rotate half" layout (traditional = false):
// for a head vector x[0:D] at position p = offset + t and i < D/2,
//   theta = p * base^(-2i/D)
//   out[i]       = x[i] * cos(theta) - x[i + D/2] * sin(theta)
//   out[i + D/2] = x[i] * sin(theta) + x[i + D/2] * cos(theta)
// x is [B, H, T, D], contiguous. A block covers ROWS_PER_BLOCK (b, h, t) rows; thread
// (tx, ty) rotates pairs tx, tx + blockDim.x, ... of row ty. Inverse frequencies are
// computed once per block into static shared memory.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define ROPE_MAX_HALF 256      // supports head dims up to 512
#define ROWS_PER_BLOCK 4

template <typename T> __device__ __forceinline__ float load_f(const T* p) { return static_cast<float>(*p); }
template <> __device__ __forceinline__ float load_f<__half>(const __half* p) { return __half2float(*p); }
template <> __device__ __forceinline__ float load_f<__nv_bfloat16>(const __nv_bfloat16* p) { return __bfloat162float(*p); }
template <typename T> __device__ __forceinline__ T cvt(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half cvt<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 cvt<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ out, int n_rows, int seq_len,
                            int head_dim, int offset, float base) {
    __shared__ float inv_freq[ROPE_MAX_HALF];
    const int half = head_dim / 2;
    const float log2_base = log2f(base);
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < half; i += blockDim.x * blockDim.y) {
        inv_freq[i] = exp2f(-(2.0f * i / head_dim) * log2_base);
    }
    __syncthreads();

    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y;  // flattened (b, h, t)
    if (row >= n_rows) return;
    const float pos = (float)(offset + row % seq_len);
    const T* xr = x + (size_t)row * head_dim;
    T* outr = out + (size_t)row * head_dim;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float s, c;
        sincosf(pos * inv_freq[i], &s, &c);
        const float a = load_f(xr + i);
        const float b = load_f(xr + i + half);
        outr[i] = cvt<T>(a * c - b * s);
        outr[i + half] = cvt<T>(a * s + b * c);
    }
}

template <typename T>
void rope(const T* x, T* out, int batch, int heads, int seq_len, int head_dim, int offset, float base,
          cudaStream_t stream) {
    const int n_rows = batch * heads * seq_len;
    const int half = head_dim / 2;
    dim3 block(half < 64 ? half : 64, ROWS_PER_BLOCK);
    dim3 grid((n_rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    rope_kernel<T><<<grid, block, 0, stream>>>(x, out, n_rows, seq_len, head_dim, offset, base);
}

template void rope<float>(const float*, float*, int, int, int, int, int, float, cudaStream_t);
template void rope<__half>(const __half*, __half*, int, int, int, int, int, float, cudaStream_t);
template void rope<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int, int, int, int, int, float,
                                  cudaStream_t);
