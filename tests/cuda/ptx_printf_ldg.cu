// Debug-heavy kernel: inline PTX, printf, assert, __ldg and a raw mma.sync in asm.
#include <cstdio>
#include <cassert>

__device__ __forceinline__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

__global__ void gather_debug(const float* __restrict__ table, const int* __restrict__ idx, float* out, int n,
                             int rows) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int r = __ldg(idx + i);
  assert(r >= 0 && r < rows);
  if (r < 0 || r >= rows) {
    printf("bad index %d at %d (lane %u)\n", r, i, lane_id());
    return;
  }
  out[i] = __ldg(&table[r]);
}

__global__ void mma_m16n8k8(const unsigned* a, const unsigned* b, float* d) {
  float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
  unsigned a0 = a[threadIdx.x * 2], a1 = a[threadIdx.x * 2 + 1], b0 = b[threadIdx.x];
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a0), "r"(a1), "r"(b0));
  reinterpret_cast<float4*>(d)[threadIdx.x] = make_float4(c0, c1, c2, c3);
}
