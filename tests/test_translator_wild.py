"""Kernels written the way projects the translator was not built on write them: the launch chosen in
a `switch` on a host value, a dim3 grid set in if/else, constexpr locals of templated helpers, a
device function reached through a macro alias, stores through a reinterpret-cast macro, extern "C"
kernels, __constant__ memory the host fills, and the messages for what cannot run. Each is made into
a task from the .cu file (the original on the CPU executor is the golden), translated, and checked
on the simulator."""

import textwrap

import pytest

from mlxport.backends import get_backend
from mlxport.backends.cuda_cpu import ExecError
from mlxport.tasks import load_task
from mlxport.tasks.make import TaskRequest, from_cuda, write_task
from mlxport.tasks.make.kernel import CudaTaskError
from mlxport.translate.host.evaluate import evaluate_launch
from mlxport.translate.host.values import HostEvalError
from mlxport.translate.translator import Untranslatable, translate, translate_task
from mlxport.verify.correctness import run_correctness


def _file(tmp_path, source: str):
    path = tmp_path / "kernel_src.cu"
    path.write_text(textwrap.dedent(source))
    return path


def _ported(tmp_path, source: str, cases: list[dict], kernel: str | None = None, heldout=1):
    """The task made from the file at ``cases``, its MSL translation, and the simulator's verdict
    at every case (held-out ones included)."""
    path = _file(tmp_path, source)
    built = from_cuda(TaskRequest(source=path, kernel=kernel, cases=cases), heldout=heldout)
    task = load_task(write_task(built, tmp_path / "task", path))
    translation = translate_task(task, "msl")
    report = run_correctness(task, translation.candidate, get_backend("sim"), heldout=True)
    assert report.ok, report.summary()
    return built, task, translation


# ----------------------------------------------------------------- switch and if/else on the host

SWITCH = """
template <int BLOCK>
__global__ void row_max(const float* x, float* y, int cols) {
    __shared__ float part[BLOCK];
    float m = -1e30f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[blockIdx.x * cols + c]);
    part[threadIdx.x] = m;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = part[0];
}

void launch_row_max(const float* x, float* y, int rows, int cols, int block_size) {
    switch (block_size) {
        case 32: row_max<32><<<rows, block_size>>>(x, y, cols); break;
        case 64: {
            row_max<64><<<rows, block_size>>>(x, y, cols);
            break;
        }
        case 96:
        case 128: row_max<128><<<rows, block_size>>>(x, y, cols); break;
        default: row_max<256><<<rows, 256>>>(x, y, cols);
    }
}
"""


@pytest.mark.parametrize(
    "block_size,block,template,arm",
    [
        (32, 32, "32", "`case 32:`"),
        (64, 64, "64", "`case 64:`"),
        (96, 96, "128", "`case 96:` (falling through to `case 128:`)"),
        (512, 256, "256", "`default:`"),
    ],
)
def test_a_launch_in_a_switch_is_the_one_in_the_arm_the_case_selects(
    block_size, block, template, arm
):
    launch = evaluate_launch(
        textwrap.dedent(SWITCH), "row_max", {"rows": 4, "cols": 300, "block_size": block_size}
    )
    assert (launch.block, launch.template_args) == ((block, 1, 1), [template])
    assert launch.arm.endswith(
        f"in {arm} of `switch (block_size)` (line 17), which the case takes "
        f"(block_size={block_size})"
    )


def test_a_switch_the_case_does_not_decide_names_what_to_bind():
    with pytest.raises(
        HostEvalError, match=r"`switch \(block_size\)` \(line 17\), which this case"
    ):
        evaluate_launch(textwrap.dedent(SWITCH), "row_max", {"rows": 4, "cols": 300})


def test_a_switch_on_the_block_size_ports_the_arm_the_case_names(tmp_path):
    built, task, _ = _ported(tmp_path, SWITCH, [{"rows": 6, "cols": 300, "block_size": 128}])
    launches = built.task["original"]["launches"]
    assert [(x["block"], x["template"]) for x in launches] == [([128, 1, 1], ["128"])] * 2
    assert any("`case 128:` of `switch (block_size)`" in n for n in built.notes)
    assert "`case 128:`" in (task.folder / "NOTES.md").read_text()


def test_a_dim3_grid_set_in_if_else_becomes_a_choice_of_each_field(tmp_path):
    """The grid is part of the result (gridDim.x scales it), and the visible cases take both
    branches, so no formula read off the launches stands in for the host code."""
    source = """
    __global__ void spread(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] * gridDim.x;
    }
    void run(const float* x, float* y, int n) {
        dim3 grid;
        dim3 block(128);
        if (n > 1024)
            grid = dim3((n + 127) / 128);
        else
            grid = dim3{16, 1, 1};
        spread<<<grid, block>>>(x, y, n);
    }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 3000}, {"n": 500}], heldout=0)
    grid = translation.candidate.grid[0]
    assert "ceildiv" in grid and "16" in grid and "launch read off" not in str(translation.notes)


# ---------------------------------------------------------------- what the kernel's code reaches


def test_a_templated_helpers_constexpr_local_sizes_its_hoisted_shared_array(tmp_path):
    source = """
    template <int BLOCK>
    __device__ float block_sum(float v) {
        constexpr int NUM_WARPS = BLOCK / 32;
        __shared__ float warp_sums[NUM_WARPS];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
        if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
        __syncthreads();
        float t = 0.f;
        for (int w = 0; w < NUM_WARPS; ++w) t += warp_sums[w];
        return t;
    }
    template <int BLOCK>
    __global__ void rms(const float* x, float* y, int cols) {
        const float* row = x + blockIdx.x * cols;
        float acc = 0.f;
        for (int c = threadIdx.x; c < cols; c += BLOCK) acc += row[c] * row[c];
        float inv = rsqrtf(block_sum<BLOCK>(acc) / cols + 1e-6f);
        for (int c = threadIdx.x; c < cols; c += BLOCK) y[blockIdx.x * cols + c] = row[c] * inv;
    }
    void run(const float* x, float* y, int rows, int cols) { rms<64><<<rows, 64>>>(x, y, cols); }
    """
    _, _, translation = _ported(tmp_path, source, [{"rows": 4, "cols": 100}])
    assert "threadgroup float block_sum_warp_sums[((BLOCK) / 32)];" in translation.candidate.source


def test_a_device_function_reached_through_a_macro_alias_is_carried(tmp_path):
    source = """
    #define ACTIVATION softplus_f
    __device__ __forceinline__ float softplus_f(float v) { return v > 20.f ? v : log1pf(expf(v)); }
    __global__ void act(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = ACTIVATION(x[i]);
    }
    void run(const float* x, float* y, int n) { act<<<(n + 63) / 64, 64>>>(x, y, n); }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 300}])
    assert "float softplus_f(float v)" in translation.candidate.header


def test_loads_and_stores_through_a_reinterpret_cast_macro_are_reads_and_writes(tmp_path):
    source = """
    #define F4(v) (reinterpret_cast<float4*>(&(v))[0])
    __global__ void clamp4(float* x, float* y, float hi, int n) {
        int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
        if (i < n) {
            float4 a = F4(x[i]);
            a.x = fminf(a.x, hi); a.y = fminf(a.y, hi); a.z = fminf(a.z, hi); a.w = fminf(a.w, hi);
            F4(y[i]) = a;
        }
    }
    void run(float* x, float* y, float hi, int n) { clamp4<<<(n + 255) / 256, 64>>>(x, y, hi, n); }
    """
    built, _, translation = _ported(tmp_path, source, [{"n": 512, "hi": 0.5}])
    assert [o["name"] for o in built.task["outputs"]] == ["y"]
    assert [i["name"] for i in built.task["inputs"]] == ["x"]
    assert "mlxport_ptr_cast<float4>((y + (i)))[0]) = a;" in translation.candidate.source


def test_an_extern_c_kernel_ports(tmp_path):
    source = """
    extern "C" __global__ void shift_by(const float* x, float* y, float s, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] + s;
    }
    extern "C" void run(const float* x, float* y, float s, int n) {
        shift_by<<<(n + 127) / 128, 128>>>(x, y, s, n);
    }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 300, "s": 1.5}])
    assert "__global__" not in translation.candidate.header


# ---------------------------------------------------------------- __constant__ memory

CONSTANT = """
#define TAPS 4
__constant__ float taps[TAPS];
__constant__ int lag;
__global__ void fir(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int k = 0; k < TAPS; ++k) {
        int j = i - k * lag;
        if (j >= 0) acc += taps[k] * x[j];
    }
    y[i] = acc;
}
void run(const float* x, float* y, int n) {
    FILL
    int two = 2;
    cudaMemcpyToSymbol(taps, h, sizeof(h));
    cudaMemcpyToSymbol(lag, &two, sizeof(int));
    fir<<<(n + 127) / 128, 128>>>(x, y, n);
}
"""


def test_constant_memory_the_host_fills_with_stated_values_is_a_constant_array(tmp_path):
    source = CONSTANT.replace("FILL", "const float h[TAPS] = {0.5f, -0.25f, 2.0f, 0.125f};")
    built, task, translation = _ported(tmp_path, source, [{"n": 300}])
    assert "__constant__ float taps[TAPS] = {0.5f, -0.25f, 2.0f, 0.125f};" in built.source
    assert any("__constant__ lag holds the values the host copies" in n for n in built.notes)
    assert "constant float taps[TAPS] = {0.5f, -0.25f, 2.0f, 0.125f};" in (
        translation.candidate.header
    )
    # the golden reads the host's values too: a port holding other taps does not pass
    wrong = translation.candidate.model_copy(
        update={"header": translation.candidate.header.replace("-0.25f", "0.25f")}
    )
    assert not run_correctness(task, wrong, get_backend("sim")).ok


def test_constant_memory_filled_with_values_the_host_computes_is_an_input_or_names_the_fix():
    source = CONSTANT.replace("FILL", "float h[TAPS]; for (int k = 0; k < TAPS; ++k) h[k] = k;")
    assert "taps" in translate(source, kernel="fir").candidate.input_names
    computed = source.replace("int two = 2;", "int two = n % 3;")
    with pytest.raises(
        Untranslatable, match=r"__constant__ lag \(declared at line 4\).*declare it as an array"
    ):
        translate(computed, kernel="fir")


# ---------------------------------------------------------------- what cannot run, said so


def test_dynamic_parallelism_is_named_as_such(tmp_path):
    path = _file(
        tmp_path,
        """
        __global__ void child(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] += 1.f; }
        __global__ void parent(float* y, int n) {
            if (threadIdx.x == 0) child<<<1, 32>>>(y, n);
        }
        void run(float* y, int n) { parent<<<1, 32>>>(y, n); }
        """,
    )
    with pytest.raises(CudaTaskError, match=r"parent launches child from device code at line 4 "):
        from_cuda(TaskRequest(source=path, kernel="parent", cases=[{"n": 8}]), heldout=0)


def test_a_missing_semicolon_is_placed_on_its_own_line(tmp_path):
    path = _file(
        tmp_path,
        """
        __global__ void inc(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x
            if (i < n) y[i] = x[i] + 1.f;
        }
        void run(const float* x, float* y, int n) { inc<<<(n + 63) / 64, 64>>>(x, y, n); }
        """,
    )
    with pytest.raises(ExecError, match=r"the reader finds line 3: missing ';' in kernel inc"):
        from_cuda(TaskRequest(source=path, cases=[{"n": 8}]), heldout=0)


def test_a_size_the_host_reads_off_a_tensor_is_named():
    source = """
    __global__ void k(const float* x, float* y, int d) {}
    torch::Tensor run(torch::Tensor x) {
        const int d = x.size(1);
        auto y = torch::empty_like(x);
        k<<<4, 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), d);
        return y;
    }
    """
    launch = evaluate_launch(textwrap.dedent(source), "k", {})
    assert launch.args[2].value.why == "d is x.size(1), which the case does not give"


def test_a_parenthesized_half_cast_of_a_read_back_buffer(tmp_path):
    """`(half)(a + b)` reads to the grammar as a call of `half`: it stays the type; the buffer
    read back after its own write is compared as a float (GCC compares two widened halves in
    half precision, through libgcc's __nehf2 where the CPU has no half instructions)."""
    source = """
    #include <cuda_fp16.h>
    __global__ void accumulate(half* dest, half* src, int size) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < size) dest[i] = (half)((float)dest[i] + (float)src[i]);
    }
    void run(half* dest, half* src, int size) {
        accumulate<<<(size + 255) / 256, 256>>>(dest, src, size);
    }
    """
    _, _, translation = _ported(tmp_path, source, [{"size": 1000}])
    assert "(half)((float)mlxport_read_back(" in translation.candidate.source


def test_vector_stores_into_a_buffer_read_and_written_go_to_its_output(tmp_path):
    """`C` is read and written: a store through a `(pair*)` pointer into it, copied as a uint2,
    and one through `reinterpret_cast<float2*>(&C[i])` both land in C's output. (A local struct
    copied through a `(uint2*)&q` cast is refused by the simulator: a struct may hold a pointer's
    bits.)"""
    source = """
    typedef struct __align__(8) { float a; float b; } pair;
    __global__ void fold4(const float* x, float* C, float alpha, float beta, int n) {
        int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
        if (i + 4 > n) return;
        pair* p = (pair*)(C + i);
        ((uint2*)p)[0] = ((uint2*)p)[1];
        float4 v = reinterpret_cast<const float4*>(&x[i])[0];
        reinterpret_cast<float2*>(&C[i + 2])[0] = make_float2(alpha * v.z, beta * v.w);
    }
    void run(const float* x, float* C, float alpha, float beta, int n) {
        fold4<<<(n / 4 + 63) / 64, 64>>>(x, C, alpha, beta, n);
    }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 1024, "alpha": 0.5, "beta": 2.0}])
    assert "mlxport_ptr_cast<float2>((C_out + (i + 2)))[0] =" in translation.candidate.source


def test_the_getpointer_shared_memory_idiom_in_a_helper_called_with_a_null_buffer(tmp_path):
    """apex's norms: `SharedMemory<U> s; U* buf = s.getPointer();` is the dynamic shared array,
    a helper's (hoisted into the kernel, sized by the launch), PyTorch's WARP_SHFL shuffles, a
    `nullptr` for a buffer the RMS form does not write, and a printf of no result dropped."""
    source = """
    template <typename T> struct SharedMemory;
    template <> struct SharedMemory<float> {
        __device__ float* getPointer() { extern __shared__ float s_float[]; return s_float; }
    };
    template <typename U>
    __device__ void row_stats(const U* x, U* mean, U* rstd, int cols, bool rms_only) {
        SharedMemory<U> shared;
        U* buf = shared.getPointer();
        U sum = 0, sq = 0;
        for (int c = threadIdx.x; c < cols; c += 32) { sum += x[c]; sq += x[c] * x[c]; }
        for (int o = 16; o > 0; o /= 2) {
            sum += WARP_SHFL_XOR(sum, o);
            sq += WARP_SHFL_XOR(sq, o);
        }
        if (threadIdx.x == 0) { buf[0] = sum / cols; buf[1] = sq / cols; }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (!rms_only) mean[blockIdx.x] = buf[0];
            rstd[blockIdx.x] = rsqrtf(buf[1] - (rms_only ? 0.f : buf[0] * buf[0]) + 1e-5f);
            if (blockIdx.x == 0) printf("row 0: %f\\n", buf[0]);
        }
    }
    template <typename U>
    __global__ void rms_stats(const U* x, U* rstd, int cols) {
        row_stats<U>(x + blockIdx.x * cols, nullptr, rstd, cols, true);
    }
    void run(const float* x, float* rstd, int rows, int cols) {
        rms_stats<float><<<rows, 32, 2 * sizeof(float)>>>(x, rstd, cols);
    }
    """
    _, _, translation = _ported(tmp_path, source, [{"rows": 5, "cols": 200}])
    assert "threadgroup U row_stats_buf[SMEM_BUF];" in translation.candidate.source
    assert any("printf at line" in n for n in translation.notes)


def test_a_printf_that_changes_state_is_refused_not_dropped():
    source = """
    __global__ void count(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { printf("%d\\n", i++); y[i - 1] = x[i - 1]; }
    }
    """
    with pytest.raises(Untranslatable, match=r"printf with side effects.*move them out"):
        translate(textwrap.dedent(source), kernel="count")


def test_an_output_the_files_own_constants_size_is_that_many_elements(tmp_path):
    """`#define N` sizes both buffers and the case binds nothing: the output's extent is the
    number the task's one case gives it, though no input is said to share it."""
    source = """
    #define N 64
    #define TILE 16
    __global__ void transpose(int *input, int *output) {
        __shared__ int tile[TILE][TILE + 1];
        int x = threadIdx.x + blockIdx.x * TILE, y = threadIdx.y + blockIdx.y * TILE;
        tile[threadIdx.x][threadIdx.y] = input[y * N + x];
        __syncthreads();
        int tx = threadIdx.x + blockIdx.y * TILE, ty = threadIdx.y + blockIdx.x * TILE;
        output[ty * N + tx] = tile[threadIdx.y][threadIdx.x];
    }
    int main(void) {
        int *d_a, *d_b;
        int size = N * N * sizeof(int);
        cudaMalloc((void **)&d_a, size);
        cudaMalloc((void **)&d_b, size);
        dim3 block(TILE, TILE, 1), grid(N / TILE, N / TILE, 1);
        transpose<<<grid, block>>>(d_a, d_b);
        return 0;
    }
    """
    _, _, translation = _ported(tmp_path, source, [{}])
    assert translation.candidate.output_shapes == [[4096]]
    # a name the case binds may size it: one case cannot tell how
    bound = source.replace("int *output)", "int *output, int scale)")
    bound = bound.replace("(d_a, d_b)", "(d_a, d_b, scale)").replace("main(void)", "run(int scale)")
    path = _file(tmp_path, bound)
    built = from_cuda(TaskRequest(source=path, cases=[{"scale": 3}]), heldout=0)
    task = load_task(write_task(built, tmp_path / "bound", path))
    with pytest.raises(Untranslatable, match="output dimension n_output"):
        translate_task(task, "msl")


def test_atomic_inc_dec_and_compare_and_swap_are_exchange_loops(tmp_path):
    """CUDA's wrapping counters and compare-and-swap, which Metal lacks, on an int output seen
    as unsigned (cuda-samples' simpleAtomicIntrinsics) and on an unsigned one whose old value is
    used."""
    source = """
    __global__ void atomics(int *out, unsigned int *hits, int n) {
        const unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
        if (tid >= n) return;
        atomicAdd(&out[0], 10);
        atomicInc((unsigned int *)&out[1], 17);
        atomicDec((unsigned int *)&out[2], 137);
        if (atomicCAS(&out[3], 0, 7) == 0) atomicAdd(&out[5], 1);
        unsigned int slot = atomicInc(&hits[0], 1000000);
        if (slot < 4) atomicMax(&out[4], (int)slot);
    }
    void run(int *out, unsigned int *hits, int n) {
        atomics<<<(n + 63) / 64, 64>>>(out, hits, n);
    }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 200}])
    assert "mlxport_atomic_inc((out + (1)), 17);" in translation.candidate.source


def test_memcpy_of_a_value_s_bytes_is_a_byte_copy_metal_accepts(tmp_path):
    """A 16-byte pack filled from and read back as an int4 with memcpy (the const member reads a
    const array's bytes), and a memcpy in the kernel body: Metal has no memcpy."""
    source = """
    #include <cstring>
    template <class E>
    struct alignas(16) Pack {
        Pack() = default;
        __device__ explicit Pack(int4 bits) { memcpy(&vals, &bits, sizeof(bits)); }
        __device__ int4 bits() const {
            int4 b;
            memcpy(&b, &vals, sizeof(b));
            return b;
        }
        static constexpr int size = sizeof(int4) / sizeof(E);
        E vals[size];
    };
    __global__ void twice(const float* x, float* y, int n) {
        int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
        if (i < n) {
            Pack<float> p(*reinterpret_cast<const int4*>(x + i));
            for (int k = 0; k < Pack<float>::size; ++k) p.vals[k] *= 2.f;
            int4 out = p.bits();
            float last;
            memcpy(&last, &out.w, sizeof(float));
            *reinterpret_cast<int4*>(y + i) = out;
            y[i + 3] = last + 1.f;
        }
    }
    void run(const float* x, float* y, int n) { twice<<<(n / 4 + 63) / 64, 64>>>(x, y, n); }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 1024}])
    candidate = translation.candidate
    assert "memcpy(" not in (candidate.header + candidate.source).replace("mlxport_memcpy(", "")
    assert "mlxport_memcpy(&last, &out.w, sizeof(float));" in candidate.source


def test_a_cast_to_a_reference_type_reads_the_storage_through_a_pointer_cast(tmp_path):
    """`(float4&)(tile[j])` over threadgroup floats and `float4& s = (float4&)(acc[j])` over a
    thread array, updated through the reference: Metal has no casts to reference types."""
    source = """
    __global__ void dots(const float* x, float* y, int n) {
        __shared__ float tile[64];
        float acc[8] = {0.f};
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        tile[threadIdx.x] = i < n ? x[i] : 0.f;
        __syncthreads();
        for (int j = 0; j < 64; j += 4) {
            const float4& t = (float4&)(tile[j]);
            float4& s = reinterpret_cast<float4&>(acc[j % 8]);
            s.x += t.x; s.y += t.y * 2.f; s.z += t.z; s.w += t.w;
        }
        if (i < n) y[i] = acc[0] + acc[1] + acc[6] + acc[7] + (float)threadIdx.x;
    }
    void run(const float* x, float* y, int n) { dots<<<(n + 63) / 64, 64>>>(x, y, n); }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 200}])
    body = translation.candidate.source
    assert "threadgroup const float4 & t = (*mlxport_ptr_cast<float4>(&((tile[j]))));" in body
    assert "thread float4 & s = (*mlxport_ptr_cast<float4>(&(acc[j % 8])));" in body


def test_a_qualified_call_reaches_only_its_namespace_s_function(tmp_path):
    """`wt::scale<2>(x, i)` called, and another `scale` in an anonymous namespace (an included
    file's): only the called one is carried, with the address space its call passes."""
    source = """
    namespace wt {
    template <int K>
    __device__ float scale(const float* p, int i) { return p[i] * K; }
    }
    namespace {
    __device__ float scale(const float* p, int i) { return p[i] * 3.f + 1.f; }
    }
    __global__ void twice(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = wt::scale<2>(x, i);
    }
    void run(const float* x, float* y, int n) { twice<<<(n + 63) / 64, 64>>>(x, y, n); }
    """
    _, _, translation = _ported(tmp_path, source, [{"n": 100}])
    header = translation.candidate.header
    assert "float scale(device const float* p, int i)" in header and "3.f" not in header
