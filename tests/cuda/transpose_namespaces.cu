// Tiled transpose in a namespace, an extern "C" entry point, a functor-based map kernel,
// and kernels guarded by preprocessor conditionals.
#include <cuda_runtime.h>

namespace ops {
namespace detail {
constexpr int TILE_DIM = 32;
constexpr int BLOCK_ROWS = 8;
}  // namespace detail

__global__ void transpose(float* __restrict__ odata, const float* __restrict__ idata, int width, int height) {
  __shared__ float tile[detail::TILE_DIM][detail::TILE_DIM + 1];
  int x = blockIdx.x * detail::TILE_DIM + threadIdx.x;
  int y = blockIdx.y * detail::TILE_DIM + threadIdx.y;
  for (int j = 0; j < detail::TILE_DIM; j += detail::BLOCK_ROWS)
    if (x < width && y + j < height) tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
  __syncthreads();
  x = blockIdx.y * detail::TILE_DIM + threadIdx.x;
  y = blockIdx.x * detail::TILE_DIM + threadIdx.y;
  for (int j = 0; j < detail::TILE_DIM; j += detail::BLOCK_ROWS)
    if (x < height && y + j < width) odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}

struct Square {
  __device__ float operator()(float v) const { return v * v; }
};

template <typename F>
__global__ void map_kernel(const float* in, float* out, int n, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f(in[i]);
}
}  // namespace ops

extern "C" __global__ void copy_rows(const float* src, float* dst, int cols) {
  const float* s = src + blockIdx.x * cols;
  float* d = dst + blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

#if 0
__global__ void disabled_kernel(float* p) { p[0] = 1.f; }
#endif

#ifdef USE_DOUBLE
__global__ void axpy_t(double a, const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
#else
__global__ void axpy_t(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
#endif

void run(float* a, float* b, int w, int h) {
  dim3 grid(w / ops::detail::TILE_DIM, h / ops::detail::TILE_DIM);
  ops::transpose<<<grid, dim3(ops::detail::TILE_DIM, ops::detail::BLOCK_ROWS)>>>(b, a, w, h);
  ops::map_kernel<<<(w * h + 255) / 256, 256>>>(a, b, w * h, ops::Square{});
  copy_rows<<<h, 128>>>(a, b, w);
}
