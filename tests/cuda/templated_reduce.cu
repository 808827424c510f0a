// Block-wide sum reduction, templated on element type and block size,
// with explicit instantiations and a runtime dispatch over block sizes.
#include <cuda_fp16.h>

template <typename T>
struct Acc { using type = float; };
template <>
struct Acc<double> { using type = double; };

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(0xffffffff, v, offset);
  }
  return v;
}

template <typename T, int BLOCK = 256>
__global__ void __launch_bounds__(BLOCK) block_sum(const T* __restrict__ in, typename Acc<T>::type* out,
                                                   int n) {
  using AccT = typename Acc<T>::type;
  __shared__ AccT partial[BLOCK / 32];
  AccT acc = 0;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += BLOCK * gridDim.x) {
    acc += static_cast<AccT>(in[i]);
  }
  acc = warp_sum(acc);
  const int lane = threadIdx.x % warpSize;
  const int warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < BLOCK / 32 ? partial[lane] : AccT(0);
    acc = warp_sum(acc);
    if (lane == 0) out[blockIdx.x] = acc;
  }
}

template __global__ void block_sum<float, 256>(const float*, float*, int);
template __global__ void block_sum<double, 256>(const double*, double*, int);
template __global__ void block_sum<__half, 128>(const __half*, float*, int);

template <typename T>
void launch_block_sum(const T* in, typename Acc<T>::type* out, int n, int block, cudaStream_t s) {
  int grid = (n + block - 1) / block;
  switch (block) {
    case 128: block_sum<T, 128><<<grid, 128, 0, s>>>(in, out, n); break;
    case 512: block_sum<T, 512><<<grid, 512, 0, s>>>(in, out, n); break;
    default: block_sum<T><<<grid, 256, 0, s>>>(in, out, n); break;
  }
}
