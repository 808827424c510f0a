// An embedding backward pass in llm.c's style: gradients accumulated with atomicAdd through a
// pointer into the output, and a second output written then scaled in place. MLX makes every
// output atomic once one is, so the plain store and the in-place scale become atomic loads and
// stores in the port.
#include <cuda_runtime.h>

__global__ void embed_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T * C) return;
    int bt = idx / C, t = bt % T, c = idx % C;
    float *dwte_ix = dwte + inp[bt] * C + c;
    atomicAdd(dwte_ix, dout[idx]);
    if (bt / T == 0) {  // one row of the batch owns each element of dwpe
        dwpe[t * C + c] = dout[idx];
        dwpe[t * C + c] *= 2.0f;
    }
}

void embed_backward_host(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C, int V) {
    const int block = 128;
    embed_backward<<<(B * T * C + block - 1) / block, block>>>(dwte, dwpe, dout, inp, B, T, C);
}
