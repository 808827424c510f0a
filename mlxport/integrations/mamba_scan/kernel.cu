// Mamba-1 selective scan, forward pass, continuing from a state: what a model's prefill runs
// before generation carries the state on (h starts at h0 and ends in h_out, [batch, dim, dstate]).
//
//   dt      = delta_softplus ? softplus(delta[b,l,d]) : delta[b,l,d]
//   h[n]    = exp(dt * A[d,n]) * h[n] + dt * u[b,l,d] * B[b,l,n]
//   y[b,l,d] = sum_n C[b,l,n] * h[n] + D_skip[d] * u[b,l,d]
//
// Layout: u, delta, y are [batch, seqlen, dim]; B, C are [batch, seqlen, dstate];
// A is [dim, dstate] and D_skip is [dim], both float32 weights.
//
// One thread owns one (batch, channel) pair and walks the sequence with its dstate-long
// state in registers. The B and C rows of a chunk of timesteps are shared by every channel
// of the batch row, so a block stages them in dynamic shared memory once per chunk.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define SCAN_THREADS 128
#define SCAN_CHUNK 64
#define LOG2E 1.4426950408889634f

__device__ __forceinline__ float load_f(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store_f(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_f(__half* p, int64_t i, float v) { p[i] = __float2half(v); }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16(v); }

__device__ __forceinline__ float softplus_f(float x) {
    // log(1 + e^x) without overflow for large x.
    return x > 20.0f ? x : log1pf(__expf(x));
}

template <typename input_t, int kNState>
__global__ void __launch_bounds__(SCAN_THREADS)
mamba_scan_fwd_kernel(const input_t* __restrict__ u,
                          const input_t* __restrict__ delta,
                          const float* __restrict__ A,
                          const input_t* __restrict__ B,
                          const input_t* __restrict__ C,
                          const float* __restrict__ D_skip,
                          const float* __restrict__ h0,
                          input_t* __restrict__ y,
                          float* __restrict__ h_out,
                          int seqlen, int dim, bool delta_softplus) {
    extern __shared__ float smem[];           // [SCAN_CHUNK][kNState] of B, then of C
    float* B_s = smem;
    float* C_s = smem + SCAN_CHUNK * kNState;

    const int batch = blockIdx.y;
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = d < dim;

    // exp(dt * A) == exp2(dt * A * log2(e)): fold the constant into A once.
    float A2[kNState];
    float h[kNState];
#pragma unroll
    for (int n = 0; n < kNState; ++n) {
        A2[n] = active ? A[(int64_t)d * kNState + n] * LOG2E : 0.0f;
        h[n] = active ? h0[((int64_t)batch * dim + d) * kNState + n] : 0.0f;
    }
    const float Dd = active ? D_skip[d] : 0.0f;

    const int64_t row = (int64_t)batch * seqlen;
    for (int l0 = 0; l0 < seqlen; l0 += SCAN_CHUNK) {
        const int len = min(SCAN_CHUNK, seqlen - l0);
        // Stage this chunk's B and C rows (contiguous [len][kNState] blocks).
        for (int i = threadIdx.x; i < len * kNState; i += blockDim.x) {
            B_s[i] = load_f(B, (row + l0) * kNState + i);
            C_s[i] = load_f(C, (row + l0) * kNState + i);
        }
        __syncthreads();

        if (active) {
            for (int t = 0; t < len; ++t) {
                const int64_t idx = (row + l0 + t) * dim + d;
                const float x = load_f(u, idx);
                float dt = load_f(delta, idx);
                if (delta_softplus) dt = softplus_f(dt);
                const float dtx = dt * x;
                float acc = 0.0f;
#pragma unroll
                for (int n = 0; n < kNState; ++n) {
                    h[n] = exp2f(dt * A2[n]) * h[n] + dtx * B_s[t * kNState + n];
                    acc += h[n] * C_s[t * kNState + n];
                }
                store_f(y, idx, acc + Dd * x);
            }
        }
        __syncthreads();
    }
    if (active) {
#pragma unroll
        for (int n = 0; n < kNState; ++n) h_out[((int64_t)batch * dim + d) * kNState + n] = h[n];
    }
}

template <typename input_t, int kNState>
void mamba_scan_fwd(const input_t* u, const input_t* delta, const float* A,
                        const input_t* B, const input_t* C, const float* D_skip, const float* h0,
                        input_t* y, float* h_out,
                        int batch, int seqlen, int dim, bool delta_softplus,
                        cudaStream_t stream) {
    dim3 grid((dim + SCAN_THREADS - 1) / SCAN_THREADS, batch);
    size_t smem = 2 * SCAN_CHUNK * kNState * sizeof(float);
    mamba_scan_fwd_kernel<input_t, kNState><<<grid, SCAN_THREADS, smem, stream>>>(
        u, delta, A, B, C, D_skip, h0, y, h_out, seqlen, dim, delta_softplus);
}
