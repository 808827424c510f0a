// A histogram: integer data that index the bins (so they must be drawn within them), bins the host
// zeroes with cudaMemset (which also says how many there are), filled by atomics.
#include <cuda_runtime.h>
__global__ void histogram(const int* data, int* bins, int n, int nbins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[data[i]], 1);
}
void run(const int* data, int* bins, int n, int nbins) {
    cudaMemset(bins, 0, nbins * sizeof(int));
    histogram<<<(n + 255) / 256, 256>>>(data, bins, n, nbins);
}
