// Elementwise kernels stamped out by macros, as many code bases do.
#include <cuda_runtime.h>

#define HOST_DEVICE __host__ __device__
#define DEVICE_INLINE __device__ __forceinline__

HOST_DEVICE inline float relu_f(float x) { return x > 0.f ? x : 0.f; }
DEVICE_INLINE float sigmoid_f(float x) { return 1.f / (1.f + __expf(-x)); }

#define DEFINE_UNARY_KERNEL(NAME, EXPR)                                   \
  __global__ void NAME##_kernel(const float* in, float* out, int n) {     \
    int i = blockIdx.x * blockDim.x + threadIdx.x;                        \
    if (i < n) {                                                          \
      float x = in[i];                                                    \
      out[i] = (EXPR);                                                    \
    }                                                                     \
  }

DEFINE_UNARY_KERNEL(relu, relu_f(x))
DEFINE_UNARY_KERNEL(sigmoid, sigmoid_f(x))
DEFINE_UNARY_KERNEL(square, x * x);

#define DEFINE_BINARY(NAME, OP, T)                                            \
  __global__ void NAME##_##T(const T* a, const T* b, T* c, int n) {           \
    int i = blockIdx.x * blockDim.x + threadIdx.x;                            \
    if (i < n) c[i] = a[i] OP b[i];                                           \
  }
#define DEFINE_BINARY_ALL_TYPES(NAME, OP) \
  DEFINE_BINARY(NAME, OP, float)          \
  DEFINE_BINARY(NAME, OP, int)

DEFINE_BINARY_ALL_TYPES(add, +)
DEFINE_BINARY_ALL_TYPES(mul, *)

#define LAUNCH_UNARY(NAME, in, out, n) NAME##_kernel<<<((n) + 255) / 256, 256>>>(in, out, n)

void run_all(const float* in, float* out, int n) {
  LAUNCH_UNARY(relu, in, out, n);
  LAUNCH_UNARY(sigmoid, in, out, n);
  square_kernel<<<(n + 255) / 256, 256>>>(in, out, n);
}
