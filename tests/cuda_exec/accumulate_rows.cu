// A backward pass in llm.c's style: a pointer to a row of an in-out gradient buffer, added into.
#include <cuda_runtime.h>

__global__ void accumulate_rows(float *dlogits, const float *probs, const float *dloss, int N, int V) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * V) return;
    int row = i / V, v = i % V;
    float *dlogits_row = dlogits + row * V;
    const float *probs_row = probs + row * V;
    dlogits_row[v] += probs_row[v] * dloss[row];
}

void accumulate(float *dlogits, const float *probs, const float *dloss, int N, int V) {
    accumulate_rows<<<(N * V + 255) / 256, 256>>>(dlogits, probs, dloss, N, V);
}
