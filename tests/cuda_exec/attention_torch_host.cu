// A one-block-per-(batch, head) attention forward with running max and sum kept in global
// memory across key tiles, launched from a torch-extension host: the shape of small public
// flash-attention ports (written for mlxport's tests).
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void attn_fwd(const float* Q, const float* K, const float* V, const int T, const int D,
                         const int n_tiles, const int tile, const float scale,
                         float* row_sum, float* row_max, float* O) {
    extern __shared__ float smem[];
    float* Ks = smem;
    float* Vs = smem + tile * D;
    const int t = threadIdx.x;
    const int head = blockIdx.x * gridDim.y + blockIdx.y;
    const int base = head * T * D;
    for (int j = 0; j < n_tiles; ++j) {
        for (int x = 0; x < D; ++x) {
            Ks[t * D + x] = K[base + (j * tile + t) * D + x];
            Vs[t * D + x] = V[base + (j * tile + t) * D + x];
        }
        __syncthreads();
        for (int i = 0; i < n_tiles; ++i) {
            const int q = i * tile + t;
            const float m_prev = row_max[head * T + q];
            const float l_prev = row_sum[head * T + q];
            float s[32];
            float m = -INFINITY;
            for (int y = 0; y < tile; ++y) {
                float dot = 0.0f;
                for (int x = 0; x < D; ++x) dot += Q[base + q * D + x] * Ks[y * D + x];
                s[y] = dot * scale;
                m = fmaxf(m, s[y]);
            }
            float l = 0.0f;
            for (int y = 0; y < tile; ++y) {
                s[y] = __expf(s[y] - m);
                l += s[y];
            }
            const float m_new = fmaxf(m_prev, m);
            const float l_new = __expf(m_prev - m_new) * l_prev + __expf(m - m_new) * l;
            for (int x = 0; x < D; ++x) {
                float pv = 0.0f;
                for (int y = 0; y < tile; ++y) pv += s[y] * Vs[y * D + x];
                O[base + q * D + x] = (l_prev * __expf(m_prev - m_new) * O[base + q * D + x] +
                                       __expf(m - m_new) * pv) / l_new;
            }
            row_max[head * T + q] = m_new;
            row_sum[head * T + q] = l_new;
        }
        __syncthreads();
    }
}

torch::Tensor forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V) {
    const int tile = 16;
    const int B = Q.size(0); const int H = Q.size(1);
    const int T = Q.size(2); const int D = Q.size(3);
    const int n_tiles = ceil((float) T / tile);
    const float scale = 1.0 / sqrt(D);
    auto O = torch::zeros_like(Q);
    auto row_sum = torch::zeros({B, H, T});
    auto row_max = torch::full({B, H, T}, -INFINITY);
    const int smem = 2 * tile * D * sizeof(float);
    dim3 grid(B, H);
    dim3 block(tile);
    attn_fwd<<<grid, block, smem>>>(Q.data_ptr<float>(), K.data_ptr<float>(), V.data_ptr<float>(), T, D, n_tiles,
                                    tile, scale, row_sum.data_ptr<float>(), row_max.data_ptr<float>(),
                                    O.data_ptr<float>());
    return O;
}
