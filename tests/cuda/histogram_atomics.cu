// Histograms and reductions with shared and global atomics, warp votes and a double CAS loop.
#define NUM_BINS 256

__device__ double atomic_add_double(double* address, double val) {
  unsigned long long* p = (unsigned long long*)address;
  unsigned long long old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, __double_as_longlong(val + __longlong_as_double(assumed)));
  } while (assumed != old);
  return __longlong_as_double(old);
}

__global__ void histogram(const unsigned char* pixels, unsigned int* bins, int n) {
  __shared__ unsigned int local[NUM_BINS];
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[pixels[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

__global__ void count_and_max(const float* x, int* count, int* maxbits, double* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool pos = i < n && x[i] > 0.f;
  unsigned vote = __ballot_sync(0xffffffff, pos);
  if ((threadIdx.x & 31) == 0) atomicAdd(count, __popc(vote));
  if (i < n) {
    atomicMax(maxbits, __float_as_int(x[i]));
    atomic_add_double(total, (double)x[i]);
  }
}

__global__ void float_sum(const float* x, float* sum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sum, v);
}
