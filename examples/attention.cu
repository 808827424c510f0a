// A minimal FlashAttention forward pass, written for mlxport's README: one block per (batch, head),
// Bc keys and values at a time in shared memory, each thread one query row, an online softmax.
// Q, K, V and O are [B, nh, N, d]; l and m (the running sum and max per query) are [B, nh, N].
#include <cmath>
#include <torch/extension.h>

__global__ void forward_kernel(const float* Q, const float* K, const float* V, const int N,
                               const int d, const int Tc, const int Tr, const int Bc, const int Br,
                               const float softmax_scale, float* l, float* m, float* O) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x, by = blockIdx.y;  // batch, head
    const int qkv_offset = (bx * gridDim.y * N * d) + (by * N * d);
    const int lm_offset = (bx * gridDim.y * N) + (by * N);

    extern __shared__ float sram[];
    float* Qi = sram;
    float* Kj = &sram[Br * d];
    float* Vj = &sram[Br * d + Bc * d];
    float* S = &sram[Br * d + 2 * Bc * d];

    for (int j = 0; j < Tc; j++) {
        for (int x = 0; x < d; x++) {  // load the j-th tile of keys and values
            const int key = j * Bc + tx;
            Kj[tx * d + x] = key < N ? K[qkv_offset + key * d + x] : 0.0f;
            Vj[tx * d + x] = key < N ? V[qkv_offset + key * d + x] : 0.0f;
        }
        __syncthreads();
        for (int i = 0; i < Tr; i++) {
            const int row = i * Br + tx;
            const bool live = tx < Br && row < N;
            if (live) {
                for (int x = 0; x < d; x++) Qi[tx * d + x] = Q[qkv_offset + row * d + x];
                const float row_m_prev = m[lm_offset + row];
                const float row_l_prev = l[lm_offset + row];
                float row_m = -INFINITY;
                for (int y = 0; y < Bc; y++) {  // S = Q K^T, scaled, and its row max
                    float sum = 0.0f;
                    for (int x = 0; x < d; x++) sum += Qi[tx * d + x] * Kj[y * d + x];
                    sum = j * Bc + y < N ? sum * softmax_scale : -INFINITY;
                    S[Bc * tx + y] = sum;
                    row_m = fmaxf(row_m, sum);
                }
                float row_l = 0.0f;
                for (int y = 0; y < Bc; y++) {  // P = exp(S - m) and its row sum
                    S[Bc * tx + y] = __expf(S[Bc * tx + y] - row_m);
                    row_l += S[Bc * tx + y];
                }
                const float row_m_new = fmaxf(row_m_prev, row_m);
                const float row_l_new = __expf(row_m_prev - row_m_new) * row_l_prev +
                                        __expf(row_m - row_m_new) * row_l;
                for (int x = 0; x < d; x++) {  // O = (l_prev e^(m_prev - m) O + e^(m~ - m) P V) / l
                    float pv = 0.0f;
                    for (int y = 0; y < Bc; y++) pv += S[Bc * tx + y] * Vj[y * d + x];
                    O[qkv_offset + row * d + x] =
                        (1 / row_l_new) * ((row_l_prev * __expf(row_m_prev - row_m_new) *
                                            O[qkv_offset + row * d + x]) +
                                           (__expf(row_m - row_m_new) * pv));
                }
                m[lm_offset + row] = row_m_new;
                l[lm_offset + row] = row_l_new;
            }
        }
        __syncthreads();
    }
}

torch::Tensor forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V) {
    const int Bc = 32;
    const int Br = 32;
    const int B = Q.size(0);
    const int nh = Q.size(1);
    const int N = Q.size(2);
    const int d = Q.size(3);
    const int Tc = ceil((float)N / Bc);
    const int Tr = ceil((float)N / Br);
    const float softmax_scale = 1.0 / sqrt(d);

    auto O = torch::zeros_like(Q);
    auto l = torch::zeros({B, nh, N});
    auto m = torch::full({B, nh, N}, -INFINITY);
    const int sram_size = (Br * d + 2 * Bc * d + Bc * Br) * sizeof(float);
    dim3 grid_dim(B, nh);
    dim3 block_dim(Bc);
    forward_kernel<<<grid_dim, block_dim, sram_size>>>(
        Q.data_ptr<float>(), K.data_ptr<float>(), V.data_ptr<float>(), N, d, Tc, Tr, Bc, Br,
        softmax_scale, l.data_ptr<float>(), m.data_ptr<float>(), O.data_ptr<float>());
    return O;
}
