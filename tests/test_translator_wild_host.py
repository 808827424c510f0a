"""Launch values real host code computes from what the translator could not see before: constants
of the file's types (`x128::size`), sizeof a typedef the dtype picks, device queries, fields of a
host dim3, launches chosen in a switch or by a template argument passed as a tag type, and outputs
sized by a product of four params. Each kernel is made into a task from the .cu file (the original
on the CPU executor is the golden), translated, and checked on the simulator."""

import textwrap

import mlx.core as mx
import numpy as np
import pytest

from mlxport.backends import get_backend
from mlxport.tasks import load_task
from mlxport.tasks.make import TaskRequest, from_cuda, write_task
from mlxport.translate.host.evaluate import evaluate_launch
from mlxport.translate.host.values import HostEvalError
from mlxport.translate.translator import translate, translate_task
from mlxport.verify.correctness import run_correctness


def _ported(tmp_path, source: str, cases: list[dict], kernel: str | None = None, **request):
    path = tmp_path / "kernel_src.cu"
    path.write_text(textwrap.dedent(source))
    built = from_cuda(TaskRequest(source=path, kernel=kernel, cases=cases, **request), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    translation = translate_task(task, "msl")
    report = run_correctness(task, translation.candidate, get_backend("sim"), heldout=True)
    assert report.ok, report.summary()
    return translation


def test_a_constant_of_a_packed_type_and_sizeof_its_typedef_follow_the_dtype(tmp_path):
    """`Pack<real>::size` is `16 / sizeof(real)`, and `real` is what the kernel's pointers are:
    the grid is expressed over the input's itemsize, right for every dtype."""
    source = """
    #ifdef USE_HALF
    typedef __half real;
    #else
    typedef float real;
    #endif
    template <class E> struct Pack { static constexpr int size = 16 / sizeof(E); E v[size]; };
    typedef Pack<real> packed;
    __global__ void twice(real* y, const real* x, int n) {
        int i = (blockIdx.x * blockDim.x + threadIdx.x) * packed::size;
        for (int k = 0; k < packed::size; ++k)
            if (i + k < n) y[i + k] = x[i + k] * (real)2.0f;
    }
    void run(real* y, const real* x, int n) {
        const int block = 64;
        const int per_block = block * packed::size;
        twice<<<(n + per_block - 1) / per_block, block, 0>>>(y, x, n);
    }
    """
    translation = _ported(tmp_path, source, [{"n": 3000}])
    assert translation.candidate.grid[0] == "ceildiv(n, 64 * (16 // x.itemsize)) * 64"


def test_device_queries_are_fixed_at_the_targets_documented_value(tmp_path):
    """A persistent grid sized from the SM count: the count is the target's documented value (an
    M1's 8 GPU cores for Metal), said in the notes; the grid-stride loop covers any grid. A query
    the cases bind (`per_sm`) is the original's value, a param of the port."""
    source = """
    int num_sms = 0;
    void setup() {
        cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, 0);
        num_sms = prop.multiProcessorCount;
    }
    __global__ void grid_scale(const float* x, float* y, float s, int n) {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
            y[i] = x[i] * s;
    }
    void run(const float* x, float* y, float s, int n) {
        int per_sm;
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, 0);
        int blocks = num_sms * per_sm / 128;
        grid_scale<<<blocks, 128>>>(x, y, s, n);
    }
    """
    translation = _ported(tmp_path, source, [{"n": 5000, "s": 0.5, "num_sms": 2, "per_sm": 1024}])
    assert translation.candidate.grid[0] == "8 * per_sm // 128 * 128"
    assert any("`num_sms` (multiProcessorCount) is fixed at 8" in n for n in translation.notes)


def test_partial_sums_over_a_grid_the_cases_size_by_a_device_query(tmp_path):
    """Per-block partial sums (a two-pass reduction): the output depends on the grid, which the
    host sizes from the SM count the cases bind, so that count is the original's and a param of
    the port; the second launch's `n_blocks` passed as `n` is not the task's `n`."""
    source = """
    __global__ void partial_sums(float* out, const float* in, int n) {
        float s = 0.f;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            s += in[i];
        __shared__ float part[64];
        part[threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            float t = 0.f;
            for (int k = 0; k < blockDim.x; ++k) t += part[k];
            out[blockIdx.x] = t;
        }
    }
    void run(float* out, float* in, int n) {
        int num_sms;
        cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0);
        int n_blocks = min(2 * num_sms, (n + 63) / 64);
        partial_sums<<<n_blocks, 64>>>(out, in, n);
        partial_sums<<<1, 64>>>(out, out, n_blocks);
    }
    """
    translation = _ported(
        tmp_path, source, [{"n": 3000, "num_sms": 3}], kernel="partial_sums", shapes={"out": "n"}
    )
    assert "num_sms" in translation.candidate.grid[0]


SWITCH_ON_A_HOST_VALUE = """
#define VEC_WIDTH 2
template <int VEC, bool SCALED>
__global__ void widen(const float* x, float* y, float s, int n) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    for (int k = 0; k < VEC; ++k)
        if (i + k < n) y[i + k] = SCALED ? x[i + k] * s : x[i + k];
}
void run(const float* x, float* y, const float* scale_ptr, float s, int n) {
    const int vec = VEC_WIDTH;
    dim3 block = {160, 1, 1};
    switch (vec) {
        case 1:
        case 2: {
            dim3 grid((n + 2 * block.x - 1) / (2 * block.x));
            if (scale_ptr == nullptr) widen<2, false><<<grid, block>>>(x, y, s, n);
            else widen<2, true><<<grid, block>>>(x, y, s, n);
            break;
        }
        default:
            widen<4, true><<<(n + 4 * block.x - 1) / (4 * block.x), block>>>(x, y, s, n);
    }
}
"""


def test_a_launch_among_branches_the_host_cannot_decide_is_the_one_the_cases_take(tmp_path):
    """The switch arm follows from the file, but `scale_ptr == nullptr` is no value of the task:
    the launch is the one whose grid and template arguments are the original's at every case
    (the task binds no buffer to the pointer: null), and the notes say so."""
    translation = _ported(tmp_path, SWITCH_ON_A_HOST_VALUE, [{"n": 3000, "s": 2.0}], kernel="widen")
    assert translation.candidate.template == {"VEC": 2, "SCALED": False}
    assert translation.candidate.grid[0] == "ceildiv(n, 320) * 160"
    assert any("the one whose grid, block and template arguments" in n for n in translation.notes)


def test_a_template_argument_passed_as_a_tag_type_is_the_launchs():
    """`std::bool_constant<Negate>{}` sets the template argument; the tag carries no value."""
    source = """
    template <bool Negate>
    __global__ void maybe_negate(const float* x, float* y, int n, std::bool_constant<Negate>) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = Negate ? -x[i] : x[i];
    }
    void run(const float* x, float* y, int n) {
        maybe_negate<<<(n + 127) / 128, 128>>>(x, y, n, std::bool_constant<true>{});
    }
    """
    candidate = translate(textwrap.dedent(source), kernel="maybe_negate").candidate
    assert candidate.template == {"Negate": True}
    assert candidate.input_names == ["x", "n"]


def test_an_output_sized_by_four_params_is_their_product(tmp_path):
    """Attention scores are (B, NH, T, T): no input has that size, and the four params give it."""
    source = """
    __global__ void scores(float* att, const float* q, int B, int T, int NH, int hs) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= B * NH * T * T) return;
        int t2 = i % T, t1 = (i / T) % T, bh = i / (T * T);
        float acc = 0.f;
        for (int k = 0; k < hs; ++k) acc += q[(bh * T + t1) * hs + k] * q[(bh * T + t2) * hs + k];
        att[i] = acc;
    }
    void run(float* att, const float* q, int B, int T, int NH, int hs) {
        dim3 block(64);
        scores<<<(B * NH * T * T + block.x - 1) / block.x, block>>>(att, q, B, T, NH, hs);
    }
    """
    translation = _ported(tmp_path, source, [{"B": 2, "T": 9, "NH": 3, "hs": 4}])
    assert translation.candidate.output_shapes == [["B * T * T * NH"]]


def test_a_host_value_that_is_a_factor_of_an_input_dimension(tmp_path):
    """`M` is no param, but the input has `M*(1<<log2N)` elements: M is that over `1 << log2N`,
    and the shift stays a shift."""
    source = """
    __global__ void rows_twice(float* y, const float* x, int log2N) {
        int i = (blockIdx.y << log2N) + blockIdx.x * blockDim.x + threadIdx.x;
        y[i] = 2.f * x[i];
    }
    void run(float* y, const float* x, int M, int log2N) {
        dim3 grid((1 << log2N) / 64, M);
        rows_twice<<<grid, 64>>>(y, x, log2N);
    }
    """
    shapes = {"x": "M*(1<<log2N)", "y": "M*(1<<log2N)"}
    translation = _ported(tmp_path, source, [{"M": 3, "log2N": 7}], shapes=shapes)
    assert translation.candidate.grid[1] == "x.shape[0] // (1 << log2N)"


def test_a_quotient_by_zero_in_host_code_is_named_not_a_crash():
    source = """
    __global__ void k(float* y, int n) {}
    void run(float* y, int n, int parts) { k<<<n % parts, 32>>>(y, n); }
    """
    with pytest.raises(HostEvalError, match="takes a remainder by zero at this case"):
        evaluate_launch(textwrap.dedent(source), "k", {"n": 64, "parts": 0})


def test_a_torch_warp_size_a_braced_block_and_a_comment_on_the_launch_line(tmp_path):
    """`{C10_WARP_SIZE * 4, 1, 1}` is the block, the launch's own comment is no statement, and a
    templated helper's `static __shared__ T` is the type its call deduces (float, in a kernel of
    halves)."""
    source = """
    #include <cuda_fp16.h>
    template <typename T>
    __device__ T block_sum(T v) {
        static __shared__ T part[32];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
        __syncthreads();
        T t = 0;
        for (int w = 0; w < blockDim.x / 32; ++w) t += part[w];
        return t;
    }
    __global__ void row_norm(const half* x, half* y, int cols) {
        float acc = 0.f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = __half2float(x[blockIdx.x * cols + c]);
            acc += v * v;
        }
        float total = block_sum(acc);
        float inv = rsqrtf(total / cols + 1e-5f);
        for (int c = threadIdx.x; c < cols; c += blockDim.x)
            y[blockIdx.x * cols + c] = __float2half(__half2float(x[blockIdx.x * cols + c]) * inv);
    }
    void run(const half* x, half* y, int rows, int cols) {
        row_norm<<<rows, {C10_WARP_SIZE * 4, 1, 1}>>>(x, y, cols);  // one block per row
    }
    """
    translation = _ported(tmp_path, source, [{"rows": 6, "cols": 300}])
    assert translation.candidate.threadgroup == [128, 1, 1]
    assert "threadgroup float block_sum_part[32];" in translation.candidate.source


PARTIAL_SUMS = """
__global__ void partial_sums(const float* x, float* partial, unsigned int n) {
    __shared__ float s[128];
    unsigned int tid = threadIdx.x;
    float v = 0.f;
    for (unsigned int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x)
        v += x[i];
    s[tid] = v;
    __syncthreads();
    for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (tid < k) s[tid] += s[tid + k];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = s[0];
}
void reduce(int size, int blocks, float* x, float* partial) {
    partial_sums<<<blocks, 128>>>(x, partial, size);
}
"""


def test_an_output_sized_by_a_name_only_the_case_binds_is_the_ops_argument(tmp_path):
    """One partial sum a block, `blocks` of them: no input has that size, so `blocks` is a param
    the op takes from its caller, and the op called at other sizes sums right."""
    from mlxport.backends.op_call import load
    from mlxport.op import write_op

    translation = _ported(tmp_path, PARTIAL_SUMS, [{"size": 5000, "blocks": 12}])
    assert translation.candidate.output_shapes == [["blocks"]]
    assert translation.candidate.grid[0] == "blocks * 128"
    task = load_task(tmp_path / "task")
    assert [p.name for p in task.params] == ["n", "blocks"]
    op = load(write_op(tmp_path / "op", task, translation.candidate, label="v", model="r"), "sim")
    x = np.random.default_rng(0).standard_normal(3000).astype(np.float32)
    assert str(op.SIGNATURE) == "(x, *, blocks)"  # n is x's size; blocks is no shape's
    got = np.array(op.partial_sums(mx.array(x), blocks=5))
    assert got.shape == (5,) and np.isclose(got.sum(), x.sum(), atol=1e-3)


def test_a_grid_over_names_only_the_case_binds_and_a_templated_std_min(tmp_path):
    """`dim3 grid(B, NH)` over flat buffers whose sizes no name gives: B and NH are params; the
    block is `std::min<int64_t>(64, T * hs)`."""
    source = """
    #include <cstdint>
    #include <algorithm>
    __global__ void scale_heads(const float* q, float* o, int T, int hs) {
        int bh = blockIdx.x * gridDim.y + blockIdx.y;
        for (int i = threadIdx.x; i < T * hs; i += blockDim.x)
            o[bh * T * hs + i] = q[bh * T * hs + i] * 0.5f;
    }
    void launch(const float* q, float* o, int B, int NH, int T, int hs) {
        dim3 grid(B, NH);
        const int64_t threads = std::min<int64_t>(64, T * hs);
        scale_heads<<<grid, threads>>>(q, o, T, hs);
    }
    """
    translation = _ported(tmp_path, source, [{"B": 2, "NH": 3, "T": 5, "hs": 8}])
    assert translation.candidate.grid[1] == "NH"
    assert [p.name for p in load_task(tmp_path / "task").params] == ["T", "hs", "B", "NH"]


def test_an_output_shaped_as_an_input_expression_is_that_inputs_size(tmp_path):
    """`M*(1<<log2N)` for both: the output is as large as the input, whatever M is."""
    source = """
    __global__ void negate(float* y, const float* x, int log2N) {
        int i = (blockIdx.y << log2N) + blockIdx.x * blockDim.x + threadIdx.x;
        y[i] = -x[i];
    }
    void run(float* y, const float* x, int M, int log2N) {
        negate<<<dim3((1 << log2N) / 32, M), 32>>>(y, x, log2N);
    }
    """
    shapes = {"x": "M*(1<<log2N)", "y": "M*(1<<log2N)"}
    translation = _ported(tmp_path, source, [{"M": 2, "log2N": 6}], shapes=shapes)
    assert translation.candidate.output_shapes == [["x.shape[0]"]]


def test_a_file_constant_the_case_binds_stays_the_bodys_constant(tmp_path):
    """`N` is the file's constant, which the case binds for the host's launch only: the body reads
    the file's value, so N is no param of the task (one would hide it from the body)."""
    source = """
    const int N = 100000;
    __global__ void twice(const float* x, float* y) {
        int n = blockIdx.x * 64 + threadIdx.x;
        if (n < N) y[n] = 2.f * x[n];
    }
    void run(const float* x, float* y) { twice<<<(N + 63) / 64, 64>>>(x, y); }
    """
    _ported(tmp_path, source, [{"N": 1000}])
    assert "N" not in [p.name for p in load_task(tmp_path / "task").params]
