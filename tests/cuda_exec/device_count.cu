// The launch of scale is sized by a count the GPU computes and the host copies back: nothing
// before the program runs knows it, so porting scale needs --case n=... (or --grid).
__global__ void count(const int *flags, int *n, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N && flags[i]) atomicAdd(n, 1);
}
__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
int main() {
    int N = 1024, n;
    int *flags, *d_n; float *x;
    cudaMalloc(&flags, N * sizeof(int)); cudaMalloc(&d_n, sizeof(int)); cudaMalloc(&x, N * sizeof(float));
    count<<<(N + 255) / 256, 256>>>(flags, d_n, N);
    cudaMemcpy(&n, d_n, sizeof(int), cudaMemcpyDeviceToHost);
    scale<<<(n + 255) / 256, 256>>>(x, n);
}
