// GELU on half2 pairs with float4 vector loads; bf16 variant.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float gelu(float x) {
  const float k = 0.7978845608f;
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__global__ void __launch_bounds__(256, 2) gelu_half2(const __half* __restrict__ x, __half* __restrict__ y,
                                                     int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (i + 8 > n) return;
  float4 packed = *reinterpret_cast<const float4*>(x + i);
  const half2* h = reinterpret_cast<const half2*>(&packed);
  float4 result;
  half2* r = reinterpret_cast<half2*>(&result);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 f = __half22float2(h[k]);
    r[k] = __floats2half2_rn(gelu(f.x), gelu(f.y));
  }
  *reinterpret_cast<float4*>(y + i) = result;
}

__global__ void scale_half2(half2* data, half2 s, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) data[i] = __hmul2(data[i], s);
}

__global__ void gelu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(gelu(__bfloat162float(x[i])));
}
