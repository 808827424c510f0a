// Tensor-core GEMM tile with WMMA: C = A * B, half inputs, float accumulate.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

constexpr int WM = 16, WN = 16, WK = 16;

__global__ void wmma_gemm(const half* a, const half* b, float* c, int M, int N, int K) {
  int warp_m = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
  int warp_n = blockIdx.y * blockDim.y + threadIdx.y;
  wmma::fragment<wmma::matrix_a, WM, WN, WK, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, WM, WN, WK, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, WM, WN, WK, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += WK) {
    int ar = warp_m * WM, bc = warp_n * WN;
    if (ar < M && bc < N) {
      wmma::load_matrix_sync(fa, a + ar * K + k, K);
      wmma::load_matrix_sync(fb, b + bc * K + k, K);
      wmma::mma_sync(acc, fa, fb, acc);
    }
  }
  int cr = warp_m * WM, cc = warp_n * WN;
  if (cr < M && cc < N) wmma::store_matrix_sync(c + cr * N + cc, acc, N, wmma::mem_row_major);
}

void gemm(const half* a, const half* b, float* c, int M, int N, int K) {
  dim3 block(128, 4);
  dim3 grid((M + (WM * block.x / 32) - 1) / (WM * block.x / 32), (N + WN * block.y - 1) / (WN * block.y));
  wmma_gemm<<<grid, block>>>(a, b, c, M, N, K);
}
