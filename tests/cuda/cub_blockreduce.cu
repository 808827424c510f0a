// Per-row max and prefix sums with cub block primitives and dynamic shared memory.
#include <cub/cub.cuh>

template <int BLOCK_THREADS, int ITEMS>
__global__ void row_max_cub(const float* __restrict__ in, float* __restrict__ row_max, int cols) {
  typedef cub::BlockReduce<float, BLOCK_THREADS> BlockReduceT;
  __shared__ typename BlockReduceT::TempStorage temp;
  float items[ITEMS];
  const float* row = in + (size_t)blockIdx.x * cols;
  for (int k = 0; k < ITEMS; ++k) {
    int c = threadIdx.x * ITEMS + k;
    items[k] = c < cols ? row[c] : -INFINITY;
  }
  float m = BlockReduceT(temp).Reduce(items, cub::Max());
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <int BLOCK_THREADS>
__global__ void exclusive_scan_rows(const int* in, int* out, int cols) {
  using BlockScanT = cub::BlockScan<int, BLOCK_THREADS>;
  __shared__ typename BlockScanT::TempStorage scan_storage;
  extern __shared__ int staging[];
  int c = threadIdx.x;
  staging[c] = c < cols ? in[blockIdx.x * cols + c] : 0;
  __syncthreads();
  int v;
  BlockScanT(scan_storage).ExclusiveSum(staging[c], v);
  if (c < cols) out[blockIdx.x * cols + c] = v;
}

void launch(const float* in, float* mx, const int* ci, int* co, int rows, int cols, cudaStream_t stream) {
  row_max_cub<256, 4><<<rows, 256, 0, stream>>>(in, mx, cols);
  size_t smem = 256 * sizeof(int);
  exclusive_scan_rows<256><<<rows, 256, smem, stream>>>(ci, co, cols);
}
