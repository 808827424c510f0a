"""Names the way projects write them: a kernel parameter named as a file-scope constant, a kernel in
a namespace calling its helpers unqualified, helpers qualified by a macro (`DS_D_INLINE`) with
explicit specialisations called as `conversion::to<T>`, `half(x)` as a functional cast, and a
functor struct named like a Metal function. Each is made into a task from the .cu file (the
original on the CPU executor is the golden), translated, and checked on the simulator."""

import textwrap

import pytest

from mlxport.translate.translator import Untranslatable, translate
from tests.conftest import ported_msl


def test_a_parameter_named_as_a_file_constant_reads_its_own_input(tmp_path):
    """Two launches pass the kernel's `N` from different values, so the translation computes it
    from the inputs, one of which is `N` itself: the constant is declared in the body's block."""
    source = """
    const int N = 100000;
    const int GRID = 64;
    __global__ void partial_sums(const float* x, float* y, const int N) {
        __shared__ float s[128];
        float acc = 0.f;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x)
            acc += x[i];
        s[threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.x == 0) {
            float t = 0.f;
            for (int k = 0; k < blockDim.x; ++k) t += s[k];
            y[blockIdx.x] = t;
        }
    }
    void run(const float* x, float* y) {
        partial_sums<<<GRID, 128>>>(x, y, N);
        partial_sums<<<1, 128>>>(y, y, GRID);
    }
    """
    translation = ported_msl(tmp_path, source, [{"N": 4096, "GRID": 16}])
    assert "{ const int N = mlxport_N;" in translation.candidate.source


def test_a_kernel_in_a_namespace_calls_its_helpers_unqualified(tmp_path):
    source = """
    namespace act {
    template <typename T> __device__ __forceinline__ T silu(const T& x) {
        return x / (1.f + expf(-x));
    }
    namespace inner {
    __device__ float twice(float v) { return 2.f * v; }
    template <typename T>
    __global__ void silu_mul(T* out, const T* in, int d) {
        for (int i = threadIdx.x; i < d; i += blockDim.x) {
            const T x = in[blockIdx.x * 2 * d + i];
            out[blockIdx.x * d + i] = twice(silu(x)) * in[blockIdx.x * 2 * d + d + i];
        }
    }
    }  // namespace inner
    }  // namespace act
    void run(float* out, const float* in, int rows, int d) {
        act::inner::silu_mul<float><<<rows, 128>>>(out, in, d);
    }
    """
    translation = ported_msl(tmp_path, source, [{"rows": 8, "d": 300}])
    assert "using namespace act;\nusing namespace act::inner;" in translation.candidate.source


def test_helpers_qualified_by_a_macro_and_their_specialisations_are_carried(tmp_path):
    """`D_INLINE` expands to `__device__ __forceinline__`; the grammar reads the macro as the
    return type and leaves the real one (`__half`) in an ERROR node, which is still a type."""
    source = """
    #include <cuda_fp16.h>
    #define D_INLINE __device__ __forceinline__
    namespace conversion {
    template <typename TO, typename FROM> D_INLINE TO to(FROM val) { return to(val); }
    template <> D_INLINE float to(float val) { return val; }
    template <> D_INLINE __half to(float val) { return __float2half(val); }
    }  // namespace conversion
    D_INLINE float twice(float v) { return 2.f * v; }
    template <typename T>
    __global__ void scale_q(T* out, const int8_t* q, const float* s, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = conversion::to<T>(twice(s[i / 64]) * (float)q[i]);
    }
    void run(float* out, const int8_t* q, const float* s, int n) {
        scale_q<float><<<(n + 127) / 128, 128>>>(out, q, s, n);
    }
    """
    translation = ported_msl(tmp_path, source, [{"n": 1024}])
    header = translation.candidate.header
    assert "template <> D_INLINE half to(float val)" in header
    assert "D_INLINE float twice(float v)" in header


def test_a_half_functional_cast_and_a_functor_named_divide(tmp_path):
    source = """
    #include <cuda_fp16.h>
    template <typename T, int N> struct divide {
        __device__ void operator()(T* v, T by) const {
            for (int k = 0; k < N; ++k) v[k] = v[k] / by;
        }
    };
    __global__ void unpack(const uint8_t* q, const half* scale, half* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        half v[4];
        for (int k = 0; k < 2; ++k) {
            v[2 * k] = half(int(q[2 * i + k] >> 4));
            v[2 * k + 1] = __half(int(q[2 * i + k] & 0xf));
        }
        divide<half, 4>()(v, scale[i / 16]);
        for (int k = 0; k < 4; ++k) y[4 * i + k] = v[k];
    }
    void run(const uint8_t* q, const half* scale, half* y, int n) {
        unpack<<<(n + 63) / 64, 64>>>(q, scale, y, n);
    }
    """
    translation = ported_msl(tmp_path, source, [{"n": 256}])
    assert "v[2 * k] = half(int(" in translation.candidate.source
    assert "divide_<half, 4>()(v," in translation.candidate.source


def test_a_read_write_float4_buffer_updated_component_by_component(tmp_path):
    """`v[i].x += ...` on a float4 buffer the kernel also reads: the input and its output are
    both float4 views, each component is read back from the output once written, and the `.w` the
    kernel never writes keeps the input's value (as MLX's call leaves it: still NaN)."""
    source = """
    __global__ void kick(float4* p, float4* v, float dt, int n) {
        int i = blockDim.x * blockIdx.x + threadIdx.x;
        if (i < n) {
            float4 q = p[i];
            v[i].x += dt * q.x; v[i].y += dt * q.y; v[i].z += dt * q.z;
        }
    }
    int main() {
        int n = 1000;
        float* buf;
        cudaMalloc(&buf, 2 * n * sizeof(float4));
        kick<<<(n + 127) / 128, 128>>>((float4*)buf, ((float4*)buf) + n, 0.01f, n);
    }
    """
    translation = ported_msl(tmp_path, source, [{"n": 1000}])
    assert "auto v = mlxport_view_v; auto v_out = mlxport_view_v_out;" in (
        translation.candidate.source
    )


def test_an_alignment_test_on_a_pointers_integer_form(tmp_path):
    """`reinterpret_cast<uintptr_t>(row) % 4` and `(size_t)p & 3` pick the scalar or the half2
    path per row (odd rows of an odd width start 2 bytes off): the simulator answers with the
    pointer's place in its buffer, and a half2 access it let through misaligned would fault."""
    source = """
    #include <cuda_fp16.h>
    #include <stdint.h>
    __global__ void twice_rows(const half* x, half* y, int cols) {
        const half* row = x + blockIdx.x * cols;
        half* out = y + blockIdx.x * cols;
        int start = 0;
        if (reinterpret_cast<uintptr_t>(row) % 4 != 0) {
            if (threadIdx.x == 0) out[0] = row[0] * __float2half(2.f);
            start = 1;
        }
        const bool aligned_out = ((size_t)(out + start) & 3) == 0;
        for (int c = start + 2 * threadIdx.x; c + 1 < cols; c += 2 * blockDim.x) {
            half2 v = *reinterpret_cast<const half2*>(row + c);
            if (aligned_out) {
                *reinterpret_cast<half2*>(out + c) = __hmul2(v, __float2half2_rn(2.f));
            } else {
                out[c] = v.x * __float2half(2.f);
                out[c + 1] = v.y * __float2half(2.f);
            }
        }
        if (threadIdx.x == 0 && (cols - start) % 2 == 1)
            out[cols - 1] = row[cols - 1] * __float2half(2.f);
    }
    void run(const half* x, half* y, int rows, int cols) { twice_rows<<<rows, 64>>>(x, y, cols); }
    """
    translation = ported_msl(tmp_path, source, [{"rows": 6, "cols": 301}])
    assert "if (((ulong)(row)) % 4 != 0)" in translation.candidate.source


def test_libcudacxx_async_copies_are_refused_in_one_sentence():
    """`cuda::memcpy_async` into shared memory with a `cuda::barrier` (<cuda/barrier>): refused by
    its rule, not passed on as text no Metal compiler knows."""
    source = """
    #include <cuda/barrier>
    __global__ void stage(const float* x, float* y, int n) {
        __shared__ float tile[128];
        __shared__ cuda::barrier<cuda::thread_scope::thread_scope_block> bar;
        if (threadIdx.x == 0) init(&bar, blockDim.x);
        __syncthreads();
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        cuda::memcpy_async(&tile[threadIdx.x], &x[i], sizeof(float), bar);
        bar.arrive_and_wait();
        y[i] = tile[threadIdx.x] * 2.f;
    }
    void run(const float* x, float* y, int n) { stage<<<n / 128, 128>>>(x, y, n); }
    """
    with pytest.raises(
        Untranslatable, match=r"async copies \(cuda::barrier\) at line 5: no async copy in Metal"
    ):
        translate(textwrap.dedent(source), target="msl")


def test_a_grid_stride_macro_is_translated_as_the_loop_it_makes(tmp_path):
    """Caffe's and OneFlow's `CUDA_1D_KERNEL_LOOP(i, n)` names blockIdx and threadIdx inside a
    macro: expanded, the kernel's loop is translated; kept, Metal would see CUDA's names."""
    source = """
    #define CUDA_1D_KERNEL_LOOP(i, n) \\
      for (int i = blockIdx.x * blockDim.x + threadIdx.x, step = blockDim.x * gridDim.x; \\
           i < (n); i += step)
    __global__ void twice(const int n, const float* x, float* y) {
      CUDA_1D_KERNEL_LOOP(i, n) { y[i] = 2.0f * x[i]; }
    }
    void run(const float* x, float* y, int n) { twice<<<(n + 255) / 256, 256>>>(n, x, y); }
    """
    translation = ported_msl(tmp_path, source, [{"n": 1000}])
    assert "CUDA_1D_KERNEL_LOOP" not in translation.candidate.source
    assert "blockIdx" not in translation.candidate.header


def test_a_comment_between_launch_arguments_is_no_argument(tmp_path):
    """FasterTransformer's `softmax_kernel_v2<<<...>>>(buf, /*attr_mask*/ batch_size, ...)`: the
    comment was taken for an argument, and every later parameter got its neighbour's value."""
    source = """
    __global__ void scale(float* y, /*const float* mask, */ const int n, const float s) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = s * y[i];
    }
    void run(float* y, int n) { scale<<<(n + 127) / 128, 128>>>(y, /*mask*/ n, 0.5f); }
    """
    translation = ported_msl(tmp_path, source, [{"n": 1000}])
    assert "mask" not in translation.candidate.source


def test_specialisations_that_differ_only_by_double_become_one(tmp_path):
    """DeepSpeed's conversion::to: `double to(float)`, `float to(double)` and `double to(double)`
    are all `float to(float)` in Metal (no double; the grammar misreads `MACRO double f(...)`):
    one definition is kept, the one written without double."""
    source = """
    #define D_INLINE __device__ __forceinline__
    namespace conversion {
    template <typename TO, typename FROM>
    D_INLINE TO to(FROM val) { return to(val); }
    template <>
    D_INLINE double to(double val) { return val; }
    template <>
    D_INLINE float to(float val) { return val; }
    template <>
    D_INLINE double to(float val) { return double(val); }
    template <>
    D_INLINE float to(double val) { return (float)val; }
    template <>
    D_INLINE float to(int val) { return (float)val; }
    template <>
    D_INLINE float to(uint64_t val) { return __ull2float_rn(val); }
    template <>
    D_INLINE double to(int64_t val) { return __ll2double_rn(val); }
    template <>
    D_INLINE int64_t to(float val) { return __float2ll_rn(val); }
    template <>
    D_INLINE __half to(int64_t val) { return __ll2half_rn(val); }
    }
    __global__ void scale_add(const float* x, const int* k, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            double wide = conversion::to<double>(x[i]);
            y[i] = conversion::to<float>(wide) + conversion::to<float>(k[i]);
        }
    }
    void run(const float* x, const int* k, float* y, int n) {
        scale_add<<<(n + 127) / 128, 128>>>(x, k, y, n);
    }
    """
    header = ported_msl(tmp_path, source, [{"n": 1000}]).candidate.header
    assert header.count("float to(float val)") == 1 and "double" not in header
    assert "float to(uint64_t val) { return float(val); }" in header


def test_an_atomic_on_shared_memory_is_refused_saying_what_to_change():
    """A histogram's atomicAdd on a __shared__ array: no MLX output, so refused in one sentence
    that names the expression and what the user can do instead."""
    source = """
    __global__ void hist64(const unsigned* x, unsigned* out, int n) {
        __shared__ unsigned h[64];
        h[threadIdx.x] = 0;
        __syncthreads();
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&h[x[i] & 63], 1u);
        __syncthreads();
        out[blockIdx.x * 64 + threadIdx.x] = h[threadIdx.x];
    }
    void run(const unsigned* x, unsigned* out, int n) { hist64<<<(n + 63) / 64, 64>>>(x, out, n); }
    """
    with pytest.raises(Untranslatable) as e:
        translate(textwrap.dedent(source))
    assert "atomicAdd on `&h[x[i] & 63]`" in str(e.value)
    assert "combine after __syncthreads()" in str(e.value)
