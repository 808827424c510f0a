// SAXPY and friends with grid-stride loops; full host program with error checks.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                        \
  do {                                                                          \
    cudaError_t err__ = (call);                                                 \
    if (err__ != cudaSuccess) {                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err__)); \
      exit(EXIT_FAILURE);                                                       \
    }                                                                           \
  } while (0)

#define THREADS 256

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

__global__ void scale_inplace(float* data, float s, size_t n) {
  size_t stride = (size_t)blockDim.x * gridDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  while (i < n) {
    data[i] *= s;
    i += stride;
  }
}

__global__ void fill(float* out, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = v;
}

int main(int argc, char** argv) {
  const int n = 1 << 20;
  size_t bytes = n * sizeof(float);
  float *h_x = (float*)malloc(bytes), *h_y = (float*)malloc(bytes);
  for (int i = 0; i < n; ++i) { h_x[i] = 1.0f; h_y[i] = 2.0f; }
  float *d_x, *d_y;
  CUDA_CHECK(cudaMalloc(&d_x, bytes));
  CUDA_CHECK(cudaMalloc(&d_y, bytes));
  CUDA_CHECK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_y, h_y, bytes, cudaMemcpyHostToDevice));
  int blocks = (n + THREADS - 1) / THREADS;
  if (blocks > 1024) blocks = 1024;
  saxpy<<<blocks, THREADS>>>(n, 2.0f, d_x, d_y);
  CUDA_CHECK(cudaGetLastError());
  scale_inplace<<<blocks, THREADS>>>(d_y, 0.5f, n);
  fill<<<(n + 255) / 256, 256>>>(d_x, 0.0f, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(h_y, d_y, bytes, cudaMemcpyDeviceToHost));
  printf("y[0] = %f\n", h_y[0]);
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_y));
  free(h_x);
  free(h_y);
  return 0;
}
