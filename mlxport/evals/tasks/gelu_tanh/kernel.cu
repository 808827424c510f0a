// GELU, tanh approximation (the form GPT-2 / BERT style MLPs use):
//   gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// Grid-stride loop over groups of four elements: float32 moves them as one float4,
// the 16-bit types as two packed pairs (__half2 / __nv_bfloat162) in one 8-byte access.
// A scalar grid-stride tail handles n % 4.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define GELU_THREADS 256
#define GELU_MAX_BLOCKS 4096
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_COEF 0.044715f

__device__ __forceinline__ float gelu_tanh_f(float v) {
    const float inner = SQRT_2_OVER_PI * fmaf(GELU_COEF * v, v * v, v);
    return 0.5f * v * (1.0f + tanhf(inner));
}

// Four-element vector loads and stores, converted to and from float.
__device__ __forceinline__ float4 load4(const float* __restrict__ p, size_t i) {
    return __ldg(reinterpret_cast<const float4*>(p) + i);
}
__device__ __forceinline__ void store4(float* __restrict__ p, size_t i, float4 v) {
    reinterpret_cast<float4*>(p)[i] = v;
}

struct __align__(8) half4 { __half2 lo, hi; };
struct __align__(8) bf164 { __nv_bfloat162 lo, hi; };

__device__ __forceinline__ float4 load4(const __half* __restrict__ p, size_t i) {
    const half4 h = reinterpret_cast<const half4*>(p)[i];
    const float2 a = __half22float2(h.lo), b = __half22float2(h.hi);
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void store4(__half* __restrict__ p, size_t i, float4 v) {
    half4 h;
    h.lo = __floats2half2_rn(v.x, v.y);
    h.hi = __floats2half2_rn(v.z, v.w);
    reinterpret_cast<half4*>(p)[i] = h;
}
__device__ __forceinline__ float4 load4(const __nv_bfloat16* __restrict__ p, size_t i) {
    const bf164 h = reinterpret_cast<const bf164*>(p)[i];
    const float2 a = __bfloat1622float2(h.lo), b = __bfloat1622float2(h.hi);
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void store4(__nv_bfloat16* __restrict__ p, size_t i, float4 v) {
    bf164 h;
    h.lo = __floats2bfloat162_rn(v.x, v.y);
    h.hi = __floats2bfloat162_rn(v.z, v.w);
    reinterpret_cast<bf164*>(p)[i] = h;
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void __launch_bounds__(GELU_THREADS)
gelu_tanh_kernel(const T* __restrict__ x, T* __restrict__ out, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t n4 = n / 4;
    for (size_t i = tid; i < n4; i += stride) {
        float4 v = load4(x, i);
        v.x = gelu_tanh_f(v.x);
        v.y = gelu_tanh_f(v.y);
        v.z = gelu_tanh_f(v.z);
        v.w = gelu_tanh_f(v.w);
        store4(out, i, v);
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride) {
        out[i] = from_float<T>(gelu_tanh_f(to_float(x[i])));
    }
}

template <typename T>
void gelu_tanh(const T* x, T* out, size_t n, cudaStream_t stream) {
    const size_t work = (n + 3) / 4;
    int blocks = (int)((work + GELU_THREADS - 1) / GELU_THREADS);
    if (blocks > GELU_MAX_BLOCKS) blocks = GELU_MAX_BLOCKS;
    if (blocks < 1) blocks = 1;
    gelu_tanh_kernel<T><<<blocks, GELU_THREADS, 0, stream>>>(x, out, n);
}

template void gelu_tanh<float>(const float*, float*, size_t, cudaStream_t);
template void gelu_tanh<__half>(const __half*, __half*, size_t, cudaStream_t);
template void gelu_tanh<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, size_t, cudaStream_t);
