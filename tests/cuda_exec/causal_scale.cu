// Writes only the lower triangle of its T x T output (as causal attention scores do): the rest is
// unspecified, NaN in the golden, and the port's output starts as NaN.
#include <cuda_runtime.h>

__global__ void causal_scale(float *out, const float *x, int T) {
    int i = blockIdx.x, j = threadIdx.x;
    if (j <= i) out[i * T + j] = 2.0f * x[i * T + j];
}

int main() {
    int T = 64;
    float *x, *out;
    cudaMalloc((void **)&x, T * T * sizeof(float));
    cudaMalloc((void **)&out, T * T * sizeof(float));
    causal_scale<<<T, T>>>(out, x, T);
    return 0;
}
