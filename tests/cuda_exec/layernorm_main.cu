// Layer normalization, one warp per row, launched from main() through a launcher function with a
// block size the host picks: the shape of standalone benchmark files (written for mlxport's tests).
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include "common_test.h"

namespace cg = cooperative_groups;

__global__ void layernorm_rows(float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                               const float* __restrict__ inp, const float* __restrict__ weight,
                               const float* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) return;
    const float* x = inp + idx * C;
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) sum += x[i];
    float m = cg::reduce(warp, sum, cg::plus<float>{}) / C;
    float var = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) var += (x[i] - m) * (x[i] - m);
    float s = rsqrtf(cg::reduce(warp, var, cg::plus<float>{}) / C + EPSILON);
    float* o = out + idx * C;
    for (int c = warp.thread_rank(); c < C; c += warp.size()) o[c] = s * (__ldcs(x + c) - m) * weight[c] + bias[c];
    if (warp.thread_rank() == 0) { mean[idx] = m; rstd[idx] = s; }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int B, int T, int C, const int block_size) {
    const int N = B * T;
    const int grid_size = ceil_div(N * 32, block_size);
    layernorm_rows<<<grid_size, block_size>>>(out, mean, rstd, inp, weight, bias, N, C);
}

int main(int argc, char** argv) {
    int B = 8, T = 1024, C = 768;
    float* inp = make_random(B * T * C);
    float *d_out, *d_mean, *d_rstd, *d_inp, *d_weight, *d_bias;
    cudaMalloc(&d_out, B * T * C * sizeof(float));
    cudaMalloc(&d_mean, B * T * sizeof(float));
    cudaMalloc(&d_rstd, B * T * sizeof(float));
    cudaMalloc(&d_inp, B * T * C * sizeof(float));
    cudaMalloc(&d_weight, C * sizeof(float));
    cudaMalloc(&d_bias, C * sizeof(float));
    cudaMemcpy(d_inp, inp, B * T * C * sizeof(float), cudaMemcpyHostToDevice);
    int block_sizes[] = {32, 64, 128, 256, 512};
    for (int j = 0; j < 5; j++) {
        int block_size = block_sizes[j];
        layernorm_forward(d_out, d_mean, d_rstd, d_inp, d_weight, d_bias, B, T, C, block_size);
    }
    free(inp);
    return 0;
}
