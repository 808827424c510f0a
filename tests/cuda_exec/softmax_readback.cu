// Row softmax that normalizes its output in place (out is written, then read back), launched by a
// host function with no main(): the case gives N and C, and the buffers' extents are measured.
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows(float *out, const float *inp, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const float *x = inp + i * C;
    float *y = out + i * C;
    float m = -INFINITY;
    for (int j = 0; j < C; j++) m = fmaxf(m, x[j]);
    float s = 0.0f;
    for (int j = 0; j < C; j++) {
        y[j] = expf(x[j] - m);
        s += y[j];
    }
    for (int j = 0; j < C; j++) y[j] /= s;
}

void softmax(float *out, const float *inp, int N, int C) {
    int block = 64;
    softmax_rows<<<(N + block - 1) / block, block>>>(out, inp, N, C);
}
