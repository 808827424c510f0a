// A templated block reduction as CUDA samples write it: dynamic shared memory through the
// SharedMemory<T> struct, sizes from file-scope constants, a launcher template, host headers
// the executor does not provide, and a helper needing a library it lacks (never called).
#include <cstdio>
#include <fstream>
#include <sys/time.h>
#include <cuda/barrier>

template <class T> struct SharedMemory {
    __device__ inline operator T *() {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }
};

static const unsigned int THREADS = 128;

__device__ void copy_async(float *dst, const float *src, cuda::barrier<cuda::thread_scope_block> &bar) {
    cuda::memcpy_async(dst, src, sizeof(float), bar);
}

template <class T> __global__ void block_sum(const T *in, T *out, unsigned int n) {
    T *sdata = SharedMemory<T>();
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = i < n ? in[i] : (T)0;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

template <class T> void reduce(int size, const T *d_in, T *d_out) {
    int blocks = (size + THREADS - 1) / THREADS;
    int smem = THREADS * sizeof(T);
    block_sum<T><<<blocks, THREADS, smem>>>(d_in, d_out, size);
}

int main() {
    int n = 1 << 20;
    float *d_in, *d_out;
    cudaMalloc((void **)&d_in, n * sizeof(float));
    cudaMalloc((void **)&d_out, ((n + THREADS - 1) / THREADS) * sizeof(float));
    reduce<float>(n, d_in, d_out);
    struct timeval t;
    gettimeofday(&t, NULL);
    return 0;
}
