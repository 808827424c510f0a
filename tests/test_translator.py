"""The rule-based CUDA -> MLX translator: every suite task translates or is refused with the
construct named, translated MSL candidates pass the simulator, and each rule holds on its own."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlxport.errors import UserError
from mlxport.tasks import load_task, suite_names
from mlxport.translate.reading.reader import CudaReadError
from mlxport.translate.translator import Translation, Untranslatable, translate, translate_task


@pytest.fixture(scope="module")
def sim():
    from mlxport.backends.sim import SimBackend

    backend = SimBackend()
    assert backend.available().ok, backend.available().reason  # the simulator ships with mlxport
    yield backend
    backend.close()


def make_task(tmp: Path, cu: str, toml: str, reference: str) -> object:
    (tmp / "kernel.cu").write_text(textwrap.dedent(cu))
    (tmp / "task.toml").write_text(textwrap.dedent(toml))
    (tmp / "reference.py").write_text(textwrap.dedent(reference))
    return load_task(tmp)


ELEMENTWISE_TOML = """
name = "{name}"
kernel = "k"
dtypes = {dtypes}
[baselines]
native = "reference:reference"
naive = "reference:reference"
[[inputs]]
name = "x"
shape = ["N"]
[[outputs]]
name = "out"
shape = {out_shape}
{extra}
[tolerance.float32]
atol = 1e-5
rtol = 1e-5
[tolerance.float16]
atol = 1e-2
rtol = 1e-2
[cost]
bytes = "N * itemsize"
[cases]
visible = [{{ N = 1000 }}]
heldout = [{{ N = 5 }}]
"""


def elementwise(
    tmp: Path,
    cu: str,
    reference: str,
    *,
    dtypes: str = '["float32"]',
    out_shape: str = '["N"]',
    extra: str = "",
    name: str = "t",
):
    toml = ELEMENTWISE_TOML.format(name=name, dtypes=dtypes, out_shape=out_shape, extra=extra)
    return make_task(tmp, cu, toml, "import mlx.core as mx\n" + textwrap.dedent(reference))


# ------------------------------------------------------------------------------------------ suite


@pytest.mark.parametrize("name", suite_names())  # one test a task, so pytest-xdist spreads them
def test_suite_translates_and_passes_the_simulator(sim, name):
    from mlxport.verify.correctness import run_correctness

    task = load_task(name)
    try:
        tr = translate_task(task, "msl")
    except Untranslatable as e:
        assert e.construct and e.line >= 0 and str(e).startswith("cannot translate ")
        pytest.fail(f"{name} is untranslatable: {e.construct} (line {e.line})")
    assert isinstance(tr, Translation) and tr.candidate.language == "msl"
    report = run_correctness(task, tr.candidate, sim, seed=0, heldout=True, stop_after=1)
    assert report.ok, f"{name} fails: " + report.summary(limit=1).splitlines()[-1].strip()


@pytest.mark.parametrize("name", suite_names())
def test_suite_cuda_body_candidates(name):
    task = load_task(name)
    tr = translate_task(task, "cuda")
    c = tr.candidate
    assert c.language == "cuda" and not c.atomic_outputs
    assert "<<<" not in c.header + c.source and "__global__" not in c.header
    assert {t.name for t in task.outputs} <= set(c.output_names)
    # every expression evaluates for the task's first case
    from mlxport.tasks import make_inputs

    case = task.cases.visible[0]
    inputs = make_inputs(task, case, task.dtypes[0], 0)
    from mlxport.expr import ArrayInfo, Dtype

    infos = {
        n: ArrayInfo(tuple(a.shape), Dtype(str(a.dtype).split(".")[-1])) for n, a in inputs.items()
    }
    infos.update(task.param_values(case))
    launch = c.launch({n: infos[n] for n in c.input_names})
    assert all(g % t == 0 for g, t in zip(launch.grid, launch.threadgroup, strict=True))


def _bf16(x):
    """float32 -> bfloat16 storage (uint16), rounded to nearest even, and back to float32."""
    bits = x.astype(np.float32).view(np.uint32)
    b = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return b, (b.astype(np.uint32) << 16).view(np.float32)


def test_float4_views_of_a_float_only_kernel_run_on_16_bit_buffers(tmp_path):
    """vector_add's kernel is written for float with float4 views; MLX hands the CUDA body 16-bit
    pointers for float16 and bfloat16. The body, wrapped as MLX wraps it, runs on the CPU executor
    and matches numpy in every dtype, the scalar tail included."""
    from mlxport.backends.cuda_cpu import CudaExecutor, Launch

    c = translate_task(load_task("vector_add"), "cuda").candidate
    assert "mlxport_view4(a)[i]" in c.source and "reinterpret_cast<const float4" not in c.source
    path = tmp_path / "port.cu"
    path.write_text(
        "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + c.header + "\ntemplate <typename T>\n"
        "__global__ void port(const T* a, const int* a_shape, const T* b, T* out) {\n"
        + c.source
        + "\n}\n"
    )
    rng, n = np.random.default_rng(3), 1003
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ex = CudaExecutor()
    try:
        for ctype in ("float", "__half", "__nv_bfloat16"):
            if ctype == "__nv_bfloat16":
                (a, xf), (b, yf) = _bf16(x), _bf16(y)
                want = _bf16(xf + yf)[1]
            else:
                st = np.float32 if ctype == "float" else np.float16
                a, b = x.astype(st), y.astype(st)
                want = (a + b).astype(np.float32)
            k = ex.compile(ex.source(path), "port", [ctype])
            r = ex.run(
                k,
                Launch((((n + 3) // 4 + 255) // 256, 1, 1), (256, 1, 1)),
                [a, np.array([n], np.int32), b, np.zeros(n, a.dtype)],
            )
            assert r.ok, (ctype, r.error)
            got = r.buffers["out"]
            got = (
                (got.astype(np.uint32) << 16).view(np.float32)
                if ctype == "__nv_bfloat16"
                else got.astype(np.float32)
            )
            np.testing.assert_array_equal(got, want, err_msg=ctype)
    finally:
        ex.close()


def test_atomics_into_a_tiny_output_go_through_a_stage_the_last_block_copies_out(tmp_path):
    """reduce_sum's blocks each atomicAdd into a 1-element output, which MLX keeps in host-visible
    memory; the CUDA body stages them in a scratch output and the last block writes the sum. Run on
    the CPU executor with 147 blocks, wrapped as MLX wraps it."""
    from mlxport.backends.cuda_cpu import CudaExecutor, Launch
    from mlxport.expr import ArrayInfo, Dtype

    c = translate_task(load_task("reduce_sum_atomic"), "cuda").candidate
    assert (
        c.output_names == ["out", "mlxport_stage"]
        and c.output_shapes == [[1], [1025]]
        and c.init_value == 0.0
    )
    path = tmp_path / "port.cu"
    path.write_text(
        "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + c.header + "\ntemplate <typename T>\n"
        "__global__ void port(const T* x, const int* x_shape, float* out, float* mlxport_stage) {\n"
        + c.source
        + "\n}\n"
    )
    n = 300001
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    launch = c.launch({"x": ArrayInfo((n,), Dtype("float32"))})
    blocks = launch.grid[0] // launch.threadgroup[0]
    ex = CudaExecutor()
    try:
        k = ex.compile(ex.source(path), "port", ["float"])
        r = ex.run(
            k,
            Launch((blocks, 1, 1), launch.threadgroup),
            [x, np.array([n], np.int32), np.zeros(1, np.float32), np.zeros(1025, np.float32)],
        )
    finally:
        ex.close()
    assert r.ok and not r.races, r.error
    assert blocks > 100 and abs(float(r.buffers["out"][0]) - x.astype(np.float64).sum()) < 1e-3


# ------------------------------------------------------------------------------------------ rules

SHARED_SHUFFLE = """
#define BLOCK 64
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ float block_sum(float v) {
    __shared__ float parts[BLOCK / 32];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) parts[w] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < BLOCK / 32; ++i) t += parts[i];
    return t;
}
__global__ void k(const float* __restrict__ x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? __ldg(&x[i]) : 0.0f;
    float s = block_sum(v);
    float up = __shfl_down_sync(0xffffffffu, v, 1);
    if (i < n) out[i] = v / (s + 1.0f) + 0.0f * up + expf(0.0f) - 1.0f;
}
void launch(const float* x, float* out, int n) { k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, out, n); }
"""


def test_indices_shared_barriers_shuffles_helpers(tmp_path, sim):
    from mlxport.verify.correctness import run_correctness

    task = elementwise(
        tmp_path,
        SHARED_SHUFFLE,
        """
        def reference(x):
            n = x.shape[0]
            pad = (-n) % 64
            xp = mx.concatenate([x, mx.zeros((pad,), x.dtype)]) if pad else x
            s = mx.repeat(xp.reshape(-1, 64).sum(axis=1), 64)[:n]
            return x / (s + 1.0)
        """,
    )
    tr = translate_task(task)
    src, hdr = tr.candidate.source, tr.candidate.header
    assert "const uint3 threadIdx = thread_position_in_threadgroup;" in src
    assert "const uint3 blockIdx = threadgroup_position_in_grid;" in src
    assert "uint3(64, 1, 1)" in src  # blockDim fixed to the launch's block size
    assert "threadgroup float block_sum_parts[BLOCK / 32];" in src  # hoisted out of the helper
    assert "threadgroup_barrier(mem_flags::mem_threadgroup)" in hdr
    assert "v = simd_sum(v);" in hdr  # a recognised warp reduction
    assert "simd_shuffle_down(v, 1)" in src
    assert "metal::exp" in src and "(*((x + (i))))" in src  # __ldg(&x[i]): a device pointer
    assert "uint3 threadIdx" in hdr and "threadgroup float* parts" in hdr
    assert tr.candidate.grid == [
        "ceildiv(x.shape[0], 64) * 64",
        1,
        1,
    ] and tr.candidate.threadgroup == [64, 1, 1]
    assert tr.bindings["n"] == "x.shape[0]"
    assert run_correctness(task, tr.candidate, sim, seed=0, heldout=True).ok


ATOMIC = """
__global__ void k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
void run(const float* x, float* out, int n) {
    cudaMemset(out, 0, 4);
    k<<<(n + 127) / 128, 128>>>(x, out, n);
}
"""


def test_atomics_become_atomic_outputs(tmp_path, sim):
    from mlxport.verify.correctness import run_correctness

    task = elementwise(
        tmp_path,
        ATOMIC,
        "def reference(x):\n    return mx.sum(x, keepdims=True)\n",
        out_shape="[1]",
    )
    tr = translate_task(task)
    c = tr.candidate
    assert c.atomic_outputs and c.init_value == 0.0
    assert "atomic_fetch_add_explicit(out, x[i], memory_order_relaxed)" in c.source
    assert run_correctness(task, c, sim, seed=0, heldout=True).ok


def test_atomic_on_16_bit_output_is_refused(tmp_path):
    task = elementwise(
        tmp_path,
        ATOMIC.replace("float*", "T*")
        .replace("__global__", "template <typename T> __global__")
        .replace("k<<<", "k<T><<<"),
        "def reference(x):\n    return mx.sum(x, keepdims=True)\n",
        dtypes='["float32", "float16"]',
        out_shape="[1]",
    )
    with pytest.raises(Untranslatable, match="atomic output out"):
        translate_task(task)


HALF_VECTOR = """
#include <cuda_fp16.h>
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__global__ void k(const __half* x, __half* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 v = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    if (i < n) out[i] = __float2half(load(x + i) * v.y + rsqrtf(4.0f) + fmaxf(0.0f, -1.0f));
}
void run(const __half* x, __half* out, int n) { k<<<(n + 255) / 256, 256>>>(x, out, n); }
"""


def test_half_and_vector_types(tmp_path, sim):
    from mlxport.verify.correctness import run_correctness

    task = elementwise(
        tmp_path, HALF_VECTOR, "def reference(x):\n    return x * 2.0 + 0.5\n", dtypes='["float16"]'
    )
    tr = translate_task(task)
    c = tr.candidate
    assert "float4(1.0f, 2.0f, 3.0f, 4.0f)" in c.source and "half(load(x + i)" in c.source
    assert "metal::rsqrt" in c.source and "metal::max" in c.source
    # x may be `device` or (under 8 elements) `constant`: one overload each
    assert "load(device const half* p)" in c.header and "load(constant const half* p)" in c.header
    assert "float(*p)" in c.header
    assert run_correctness(task, c, sim, seed=0, heldout=True).ok


VECTOR_CAST = """
__global__ void k(const float* a, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 4) {
        float4 v = reinterpret_cast<const float4*>(a)[i];
        reinterpret_cast<float4*>(out)[i] =
            make_float4(v.x * 2.0f, v.y * 2.0f, v.z * 2.0f, v.w * 2.0f);
    }
    int t = (n / 4) * 4 + i;
    if (i < n - (n / 4) * 4) out[t] = a[t] * 2.0f;
}
void run(const float* a, float* out, int n) {
    int blocks = ((n + 3) / 4 + 255) / 256;
    k<<<blocks, 256>>>(a, out, n);
}
"""


def test_vector_casts_keep_the_address_space_and_float_kernels_become_generic(tmp_path, sim):
    from mlxport.verify.correctness import run_correctness

    task = elementwise(
        tmp_path,
        VECTOR_CAST.replace("a,", "x,").replace("a)", "x)").replace("a[", "x["),
        "def reference(x):\n    return x * 2.0\n",
        dtypes='["float32", "float16"]',
    )
    tr = translate_task(task)
    c = tr.candidate
    assert "mlxport_ptr_cast<vec<T, 4>>(x)" in c.source and c.template == {"T": "x.dtype"}
    assert any("written for float" in n for n in tr.notes)
    assert run_correctness(task, c, sim, seed=0, heldout=True).ok


DYNAMIC = """
template <typename T>
__global__ void k(const T* x, T* out, int n) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? (float)x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = (T)(buf[blockDim.x - 1 - threadIdx.x] + 1.0f);
}
template <typename T>
void run(const T* x, T* out, int n) {
    const int threads = 128;
    size_t smem = threads * sizeof(float);
    k<T><<<(n + threads - 1) / threads, threads, smem>>>(x, out, n);
}
"""


def test_dynamic_shared_memory_gets_a_compile_time_size(tmp_path):
    task = elementwise(tmp_path, DYNAMIC, "def reference(x):\n    return x\n")
    tr = translate_task(task)
    assert "threadgroup float buf[128];" in tr.candidate.source
    cuda = translate_task(task, "cuda").candidate
    assert cuda.shared_memory == 512 and "extern __shared__ float buf[];" in cuda.source


def test_dynamic_shared_memory_from_a_shape_is_a_template(tmp_path):
    task = elementwise(
        tmp_path,
        DYNAMIC.replace("threads * sizeof(float)", "n * sizeof(float)"),
        "def reference(x):\n    return x\n",
    )
    c = translate_task(task).candidate
    assert c.template["SMEM_BUF"] == "x.shape[0]" and "threadgroup float buf[SMEM_BUF];" in c.source


def test_launch_branches_and_clamps_become_arithmetic(tmp_path):
    cu = """
    template <typename T, int B>
    __global__ void k(const T* x, T* out, int n) {
        int i = blockIdx.x * B + threadIdx.x;
        if (i < n) out[i] = x[i];
    }
    template <typename T>
    void run(const T* x, T* out, int n) {
        int blocks = (n + 255) / 256;
        if (blocks > 64) blocks = 64;
        if (n <= 1024) k<T, 128><<<blocks, 128>>>(x, out, n);
        else k<T, 256><<<blocks, 256>>>(x, out, n);
    }
    """
    tr = translate_task(elementwise(tmp_path, cu, "def reference(x):\n    return x\n"))
    c = tr.candidate
    assert c.template["B"] == "256 + min(1, max(0, 1024 - x.shape[0] + 1)) * -128"
    assert c.grid[0] == "min(ceildiv(x.shape[0], 256), 64) * B"
    from mlxport.expr import ArrayInfo, Dtype

    for n, block in ((1000, 128), (5000, 256)):
        launch = c.launch({"x": ArrayInfo((n,), Dtype("float32"))})
        assert (
            launch.threadgroup == (block, 1, 1) and launch.grid[0] == min(-(-n // 256), 64) * block
        )


def test_cuda_body_binds_params_from_zero_d_inputs(tmp_path):
    cu = """
    __global__ void k(const float* x, float* out, int n, float eps) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = x[i] + eps;
    }
    void run(const float* x, float* out, int n, float eps) {
        k<<<(n + 255) / 256, 256>>>(x, out, n, eps);
    }
    """
    task = elementwise(
        tmp_path,
        cu,
        "def reference(x, eps):\n    return x + eps\n",
        extra='[[params]]\nname = "eps"\ntype = "float"\ndefault = 0.5',
    )
    cuda = translate_task(task, "cuda").candidate
    assert cuda.input_names == ["x", "eps"]
    assert (
        "const float mlxport_eps = eps[0];" in cuda.source
        and "const int n = x_shape[0];" in cuda.source
    )
    msl = translate_task(task, "msl").candidate
    assert msl.input_names == ["x", "eps"] and "mlxport_eps" not in msl.source


def test_read_write_pointer_becomes_input_plus_output(tmp_path):
    cu = """
    __global__ void k(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] = x[i] * 2.0f;
    }
    void run(float* x, int n) { k<<<(n + 255) / 256, 256>>>(x, n); }
    """
    task = elementwise(tmp_path, cu.replace("out", "x"), "def reference(x):\n    return x * 2\n")
    task.outputs[0].name = "x_out"
    c = translate_task(task).candidate
    assert c.input_names == ["x"] and c.output_names == ["x_out"] and c.inout == {"x_out": "x"}
    assert "x_out[i] = mlxport_read_back(x_out, x, i) * 2.0f" in c.source


def test_a_buffer_read_back_after_a_write_reads_what_was_written(tmp_path, sim):
    """x is doubled, then read again and incremented: the second read must see the first write (a
    flash-attention row's running max and sum are read back like this)."""
    from mlxport.verify.correctness import run_correctness

    cu = """
    __global__ void k(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { x[i] = x[i] * 2.0f; x[i] = x[i] + 1.0f; }
    }
    void run(float* x, int n) { k<<<(n + 255) / 256, 256>>>(x, n); }
    """
    task = elementwise(tmp_path, cu, "def reference(x):\n    return x * 2 + 1\n")
    task.outputs[0].name = "x_out"
    c = translate_task(task).candidate
    assert run_correctness(task, c, sim, seed=0, heldout=True).ok


# ----------------------------------------------------------------------------------------- refusals

KERNEL = (
    "__global__ void k(const float* x, float* out, int n) {{\n{body}\n}}\n"
    "void run(const float* x, float* out, int n) {{ k<<<(n + 255) / 256, 256>>>(x, out, n); }}\n"
)
REFUSALS = [
    (
        "#include <cub/cub.cuh>\n",
        "    typedef cub::BlockScan<float, 256> S;\n    out[0] = x[0];",
        "cub",
        3,
    ),
    (
        "#include <mma.h>\nusing namespace nvcuda;\n",
        "    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;\n"
        "    out[0] = x[0];",
        "wmma",
        4,
    ),
    ("", '    float y; asm("abs.f32 %0, %1;" : "=f"(y) : "f"(x[0]));\n    out[0] = y;', "PTX", 2),
    (
        "",
        "    out[threadIdx.x] = x[threadIdx.x];\n    __syncwarp(0x0000ffff);",
        "mask 0x0000ffff",
        3,
    ),
    (
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n",
        "    cg::grid_group g = cg::this_grid();\n    out[0] = x[0];\n    g.sync();",
        "grid sync",
        6,
    ),
]


@pytest.mark.parametrize(
    "prefix,body,construct,line", REFUSALS, ids=["cub", "wmma", "asm", "mask", "grid_sync"]
)
def test_untranslatable_constructs_are_named_with_their_line(prefix, body, construct, line):
    with pytest.raises(Untranslatable) as info:
        translate(prefix + KERNEL.format(body=body), kernel="k")
    e = info.value
    assert construct.lower() in e.construct.lower(), e
    assert e.line == line, e
    assert str(e) == f"cannot translate {e.construct} at line {e.line}: {e.reason}" and e.reason


def test_translate_without_task_uses_the_kernel_names():
    tr = translate(
        KERNEL.format(
            body="    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] = x[i];"
        ),
        kernel="k",
    )
    c = tr.candidate
    assert c.input_names == ["x", "n"] and c.output_names == ["out"]
    assert c.grid == ["ceildiv(n, 256) * 256", 1, 1]
    assert "[[" not in c.to_toml().split("source")[0]


def test_missing_launch_is_refused():
    with pytest.raises(Untranslatable, match="no launch"):
        translate("__global__ void k(float* out) { out[threadIdx.x] = 1.0f; }\n")


# ------------------------------------------------------------------------------------------ fuzz

CORPUS = [load_task(n).source_text() for n in ("vector_add", "softmax_rows", "layernorm")]
TOKENS = [
    "__global__",
    "__device__",
    "__shared__",
    "extern",
    "float",
    "int",
    "*",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "<<<",
    ">>>",
    ";",
    ",",
    "=",
    "x",
    "template",
    "typename",
    "T",
    "#define",
    "\n",
    " ",
    "threadIdx.x",
    "__syncthreads()",
    "atomicAdd",
    "__shfl_xor_sync",
    "asm",
    "dim3",
    "if",
    "else",
    "0xffff",
    "1",
    "256",
    "/",
    "?",
    ":",
]


def _check(src: str) -> None:
    with contextlib.suppress(Untranslatable, CudaReadError, UserError):
        translate(src)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(CORPUS),
    st.integers(0, 10_000),
    st.integers(1, 80),
    st.lists(st.sampled_from(TOKENS), max_size=6),
)
def test_fuzz_garbled_cuda_never_crashes(src, at, cut, insert):
    at %= len(src)
    _check(src[:at] + "".join(insert) + src[at + cut :])


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=40))
def test_fuzz_token_soup_never_crashes(tokens):
    _check(" ".join(tokens))
