// Out-of-place 2-D matrix transpose through a padded shared-memory tile.
//
// Each 32x8 thread block moves one 32x32 tile: the tile is read with coalesced row loads,
// staged in shared memory, and written back with coalesced row stores of the transposed
// matrix. The extra column (TILE_DIM + 1) shifts each tile row by one bank so the
// column-wise reads of the second phase are free of shared-memory bank conflicts.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8

template <typename T>
__global__ void transpose_tiled_kernel(const T* __restrict__ x,
                                       T* __restrict__ out,
                                       int rows,   // rows of x (M)
                                       int cols) { // columns of x (N)
    __shared__ T tile[TILE_DIM][TILE_DIM + 1];

    int col = blockIdx.x * TILE_DIM + threadIdx.x;
    int row = blockIdx.y * TILE_DIM + threadIdx.y;

#pragma unroll
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        if (col < cols && row + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = x[(int64_t)(row + j) * cols + col];
        }
    }
    __syncthreads();

    // Swap the block coordinates: this block writes tile (bx, by) of out = x^T.
    int out_col = blockIdx.y * TILE_DIM + threadIdx.x;  // a row index of x
    int out_row = blockIdx.x * TILE_DIM + threadIdx.y;  // a column index of x

#pragma unroll
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        if (out_col < rows && out_row + j < cols) {
            out[(int64_t)(out_row + j) * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}

template <typename T>
void transpose_tiled(const T* x, T* out, int rows, int cols, cudaStream_t stream) {
    dim3 block(TILE_DIM, BLOCK_ROWS);
    dim3 grid((cols + TILE_DIM - 1) / TILE_DIM, (rows + TILE_DIM - 1) / TILE_DIM);
    transpose_tiled_kernel<T><<<grid, block, 0, stream>>>(x, out, rows, cols);
}

template void transpose_tiled<float>(const float*, float*, int, int, cudaStream_t);
template void transpose_tiled<__half>(const __half*, __half*, int, int, cudaStream_t);
template void transpose_tiled<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int, int, cudaStream_t);
