// Cooperative groups: block and tile reductions, a sub-warp tile, and a grid-wide sync.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

__device__ float tile_sum16(cg::thread_block_tile<16> tile, float v) {
  for (int o = tile.size() / 2; o > 0; o /= 2) v += tile.shfl_down(v, o);
  return v;
}

__global__ void row_sum(const float* x, float* y, int cols) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  float acc = 0.f;
  for (int c = block.thread_rank(); c < cols; c += block.size()) acc += x[blockIdx.x * cols + c];
  acc = cg::reduce(warp, acc, cg::plus<float>());
  __shared__ float warp_sums[32];
  if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = acc;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    acc = warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : 0.f;
    acc = cg::reduce(warp, acc, cg::plus<float>());
    if (warp.thread_rank() == 0) y[blockIdx.x] = acc;
  }
}

__global__ void half_warp_sum(const float* x, float* y) {
  auto tile = cg::tiled_partition<16>(cg::this_thread_block());
  float v = tile_sum16(tile, x[threadIdx.x]);
  if (tile.thread_rank() == 0) y[threadIdx.x / 16] = v;
}

__global__ void normalize_grid(float* data, float* scratch, int n) {
  cg::grid_group grid = cg::this_grid();
  float local = 0.f;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) local += data[i];
  atomicAdd(scratch, local);
  grid.sync();
  float total = *scratch;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) data[i] /= total;
}

void launch_normalize(float* data, float* scratch, int n, cudaStream_t stream) {
  void* args[] = {&data, &scratch, &n};
  cudaLaunchCooperativeKernel((void*)normalize_grid, dim3(80), dim3(256), args, 0, stream);
  row_sum<<<n / 1024, 256>>>(data, scratch, 1024);
}
