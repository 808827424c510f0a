// Row softmax and layernorm with dynamic shared memory, warp xor-reductions and stream launches.
#include <cuda_runtime.h>
#include <math.h>

#define WARP 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_max(float v) {
  for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  extern __shared__ float smem[];
  float* row_cache = smem;
  float* red = smem + cols;
  const float* xr = x + (size_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    row_cache[c] = xr[c];
    m = fmaxf(m, row_cache[c]);
  }
  m = warp_max(m);
  if ((threadIdx.x % WARP) == 0) red[threadIdx.x / WARP] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < blockDim.x / WARP; ++w) m = fmaxf(m, red[w]);
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float e = __expf(row_cache[c] - m);
    row_cache[c] = e;
    s += e;
  }
  s = warp_sum(s);
  __syncthreads();
  if ((threadIdx.x % WARP) == 0) red[threadIdx.x / WARP] = s;
  __syncthreads();
  s = 0.f;
  for (int w = 0; w < blockDim.x / WARP; ++w) s += red[w];
  float* yr = y + (size_t)blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = row_cache[c] / s;
}

__global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y, int cols, float eps) {
  const float* xr = x + blockIdx.x * cols;
  float sum = 0.f, sq = 0.f;
  for (int c = threadIdx.x; c < cols; c += WARP) { float v = xr[c]; sum += v; sq += v * v; }
  sum = warp_sum(sum);
  sq = warp_sum(sq);
  float mean = sum / cols;
  float inv = rsqrtf(sq / cols - mean * mean + eps);
  for (int c = threadIdx.x; c < cols; c += WARP)
    y[blockIdx.x * cols + c] = (xr[c] - mean) * inv * gamma[c] + beta[c];
}

void launch_softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  int threads = 256;
  size_t smem = (cols + threads / WARP) * sizeof(float);
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(softmax_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  softmax_rows<<<rows, threads, smem, stream>>>(x, y, cols);
}

void launch_layernorm(const float* x, const float* g, const float* b, float* y, int rows, int cols) {
  void* args[] = {&x, &g, &b, &y, &rows, &cols};
  cudaLaunchKernel((const void*)layernorm, dim3(rows), dim3(WARP), args, 0, nullptr);
}
