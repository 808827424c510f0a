// Flash-attention style forward pass: out = softmax(scale * q k^T [+ causal mask]) v.
//
// q: [B, H, Tq, HEAD_DIM], k, v: [B, H, Tk, HEAD_DIM], out like q. The causal mask is
// bottom-right aligned (query i sees keys j <= i + Tk - Tq), so decode (Tq = 1) sees all keys.
//
// A block owns BLOCK_Q query rows of one (batch, head). It streams K/V through shared
// memory BLOCK_K keys at a time and keeps, per row, the running max m, the running
// denominator l and an unnormalised output accumulator (the online softmax), so the Tq x Tk
// score matrix never exists. Each warp holds 2 "teams" of 16 lanes; a team processes one
// query row at a time: lane t scores key t of the block, the team reduces max/sum with
// xor-shuffles, and lane t accumulates output dims t, t+16, ...
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define BLOCK_Q 16
#define BLOCK_K 16
#define NUM_THREADS 128
#define ROWS_PER_TEAM (BLOCK_Q / (NUM_THREADS / 16))

template <typename T> __device__ __forceinline__ float to_f(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

__device__ __forceinline__ float team_max(float v) {
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ float team_sum(float v) {
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

template <typename T, int HEAD_DIM, bool CAUSAL>
__global__ void __launch_bounds__(NUM_THREADS)
flash_attention_fwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           T* __restrict__ out, int Tq, int Tk, float scale) {
    static_assert(HEAD_DIM % 16 == 0, "head dim must be a multiple of 16");
    constexpr int DV = HEAD_DIM / 16;
    __shared__ float Qs[BLOCK_Q][HEAD_DIM];
    __shared__ float Ks[HEAD_DIM][BLOCK_K + 1];   // transposed, padded
    __shared__ float Vs[BLOCK_K][HEAD_DIM];

    const int tid = threadIdx.x;
    const int team = tid / 16;
    const int t = tid % 16;
    const int team_base = (tid % 32) & 16;
    const int64_t bh = blockIdx.z;
    const int q0 = blockIdx.y * BLOCK_Q;
    const int offset = Tk - Tq;
    const T* qp = q + bh * Tq * HEAD_DIM;
    const T* kp = k + bh * Tk * HEAD_DIM;
    const T* vp = v + bh * Tk * HEAD_DIM;

    for (int e = tid; e < BLOCK_Q * HEAD_DIM; e += NUM_THREADS) {
        const int r = e / HEAD_DIM, d = e % HEAD_DIM;
        Qs[r][d] = q0 + r < Tq ? to_f(qp[(int64_t)(q0 + r) * HEAD_DIM + d]) * scale : 0.0f;
    }

    float m[ROWS_PER_TEAM], l[ROWS_PER_TEAM], acc[ROWS_PER_TEAM][DV];
#pragma unroll
    for (int rr = 0; rr < ROWS_PER_TEAM; ++rr) {
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
#pragma unroll
        for (int i = 0; i < DV; ++i) acc[rr][i] = 0.0f;
    }

    const int k_end = CAUSAL ? min(Tk, q0 + BLOCK_Q + offset) : Tk;
    for (int kb = 0; kb < k_end; kb += BLOCK_K) {
        __syncthreads();
        for (int e = tid; e < BLOCK_K * HEAD_DIM; e += NUM_THREADS) {
            const int j = e / HEAD_DIM, d = e % HEAD_DIM;
            const bool ok = kb + j < Tk;
            Ks[d][j] = ok ? to_f(kp[(int64_t)(kb + j) * HEAD_DIM + d]) : 0.0f;
            Vs[j][d] = ok ? to_f(vp[(int64_t)(kb + j) * HEAD_DIM + d]) : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int rr = 0; rr < ROWS_PER_TEAM; ++rr) {
            const int r = team * ROWS_PER_TEAM + rr;
            float s = 0.0f;
#pragma unroll 16
            for (int d = 0; d < HEAD_DIM; ++d) s = fmaf(Qs[r][d], Ks[d][t], s);
            const int key = kb + t;
            const bool valid = key < Tk && (!CAUSAL || key <= q0 + r + offset);
            s = valid ? s : -INFINITY;

            const float m_new = fmaxf(m[rr], team_max(s));
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float p = __expf(s - m_use);
            const float alpha = __expf(m[rr] - m_use);
            l[rr] = l[rr] * alpha + team_sum(p);
            m[rr] = m_new;
#pragma unroll
            for (int i = 0; i < DV; ++i) acc[rr][i] *= alpha;
#pragma unroll
            for (int j = 0; j < BLOCK_K; ++j) {
                const float pj = __shfl_sync(0xffffffffu, p, team_base + j);
#pragma unroll
                for (int i = 0; i < DV; ++i) acc[rr][i] = fmaf(pj, Vs[j][t + 16 * i], acc[rr][i]);
            }
        }
    }

#pragma unroll
    for (int rr = 0; rr < ROWS_PER_TEAM; ++rr) {
        const int qi = q0 + team * ROWS_PER_TEAM + rr;
        if (qi < Tq) {
            const float inv = 1.0f / l[rr];
#pragma unroll
            for (int i = 0; i < DV; ++i) {
                out[(bh * Tq + qi) * HEAD_DIM + t + 16 * i] = from_f<T>(acc[rr][i] * inv);
            }
        }
    }
}

template <typename T, int HEAD_DIM>
void flash_attention_fwd(const T* q, const T* k, const T* v, T* out, int B, int H, int Tq, int Tk,
                         float scale, bool causal, cudaStream_t stream) {
    dim3 grid(1, (Tq + BLOCK_Q - 1) / BLOCK_Q, B * H);
    if (causal) {
        flash_attention_fwd_kernel<T, HEAD_DIM, true><<<grid, NUM_THREADS, 0, stream>>>(q, k, v, out, Tq, Tk, scale);
    } else {
        flash_attention_fwd_kernel<T, HEAD_DIM, false><<<grid, NUM_THREADS, 0, stream>>>(q, k, v, out, Tq, Tk, scale);
    }
}

template void flash_attention_fwd<__half, 64>(const __half*, const __half*, const __half*, __half*, int, int,
                                              int, int, float, bool, cudaStream_t);
template void flash_attention_fwd<__half, 128>(const __half*, const __half*, const __half*, __half*, int, int,
                                               int, int, float, bool, cudaStream_t);
template void flash_attention_fwd<__nv_bfloat16, 128>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                      const __nv_bfloat16*, __nv_bfloat16*, int, int, int,
                                                      int, float, bool, cudaStream_t);
template void flash_attention_fwd<float, 64>(const float*, const float*, const float*, float*, int, int, int,
                                             int, float, bool, cudaStream_t);
