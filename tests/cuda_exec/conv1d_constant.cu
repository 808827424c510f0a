#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define RADIUS 3
#define K (2 * RADIUS + 1)

__constant__ float c_k[K];

__global__ void conv1d(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = -RADIUS; j <= RADIUS; ++j) {
        int x = i + j;
        if (x >= 0 && x < n) s += c_k[RADIUS - j] * in[x];
    }
    out[i] = s;
}

int main(int argc, char** argv) {
    int n = atoi(argv[1]);
    float* h_k = (float*)malloc(K * sizeof(float));
    for (int j = 0; j < K; ++j) h_k[j] = rand() / (float)RAND_MAX;
    cudaMemcpyToSymbol(c_k, h_k, K * sizeof(float));
    float *d_in, *d_out;
    cudaMalloc(&d_in, n * sizeof(float));
    cudaMalloc(&d_out, n * sizeof(float));
    conv1d<<<(n + 127) / 128, 128>>>(d_out, d_in, n);
    cudaDeviceSynchronize();
    return 0;
}
