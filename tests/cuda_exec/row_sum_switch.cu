// A row sum whose block size is a template argument chosen by a switch on the row length, one
// thread per element: it is right only at the lengths the switch has an arm for.
#include <cuda_runtime.h>
#include <stdexcept>

template <int NUM_THREADS>
__global__ void row_sum(const float *x, float *y, int K) {
    __shared__ float s[NUM_THREADS];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * K + t];
    __syncthreads();
    for (int off = NUM_THREADS / 2; off > 0; off >>= 1) {
        if (t < off) s[t] += s[t + off];
        __syncthreads();
    }
    if (t == 0) y[blockIdx.x] = s[0];
}

void launch_row_sum(const float *x, float *y, int N, int K) {
    switch (K) {
    case 64:
        row_sum<64><<<N, 64>>>(x, y, K);
        break;
    case 128:
        row_sum<128><<<N, 128>>>(x, y, K);
        break;
    default:
        throw std::runtime_error("K must be 64 or 128");
    }
}

int main() {
    int N = 8, K = 128;
    float *x, *y;
    cudaMalloc((void **)&x, N * K * sizeof(float));
    cudaMalloc((void **)&y, N * sizeof(float));
    launch_row_sum(x, y, N, K);
    return 0;
}
