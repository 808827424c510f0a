"""The ``vector=V`` knob (mlxport/translate/tuning/vectorize.py): which stride loops take chunk
loads and stores, and what the rewritten loops compute, run as MLX's cuda_kernel runs them on the
CPU executor."""

from __future__ import annotations

import numpy as np
import pytest
from test_variant_knobs import run_on_executor

from mlxport.tasks import load_task
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.translator import translate, translate_task
from mlxport.translate.tuning.variants import Search
from mlxport.translate.tuning.vectorize import vector_plan

HEADER = """
#define BLOCK 128
#define SKIP_IF(v) if (v) continue
__device__ float load_f(const float* p) { return __ldg(p); }
__device__ void store_f(float* p, float v) { *p = v; }
__device__ void store_pos(float* p, float v) { if (v > 0) *p = v; }
__device__ float pair(const float* p) { return p[0] + p[1]; }
__device__ float next_lane(float v) { return __shfl_down_sync(0xffffffffu, v, 1); }
__device__ void scan(int& v) { __shared__ int part[BLOCK]; part[threadIdx.x] = v; __syncthreads(); \
v = part[0] + threadIdx.x; }
__device__ void total(int& v) { __shared__ int sum; if (threadIdx.x == 0) sum = v; \
__syncthreads(); v = sum; }
__global__ void k(const float* x, const float* y, float* out, float* out2, int n) {
    const float* xr = x + blockIdx.x * n;
    float* o1 = out + blockIdx.x * n;
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
"""
FOOTER = """
}
void launch(const float* x, const float* y, float* out, float* out2, int n) { \
k<<<1, BLOCK>>>(x, y, out, out2, n); }
"""
TAKEN = (
    "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ float v = load_f(xr + c); store_f(o1 + c, v * y[c + 1]); }\n"
    "for (int c = tid; c < n; c += gridDim.x * blockDim.x) out2[c] = x[c] + y[c];"
)
LEFT = {  # a loop each, and what makes its rewrite change the kernel's meaning or fail to compile
    "a read under an if": "for (int c = threadIdx.x; c < n; c += BLOCK) { if (c % 2) s += x[c]; }",
    "a store under an if": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ if (s > 0) out2[c] = x[c]; }",
    "a read in one arm of ?:": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ s += x[c] > 0 ? y[c] : 0.0f; }",
    "a buffer read and written": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ out2[c] = out2[c] + x[c]; }",
    "a break": "for (int c = threadIdx.x; c < n; c += BLOCK) { s += x[c]; if (s > 1) break; }",
    "a warp shuffle": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ s += __shfl_xor_sync(0xffffffffu, x[c], 1); }",
    "a shuffle in a helper": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ out2[c] = next_lane(x[c]); }",
    "a continue in a macro": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ SKIP_IF(x[c] < 0); out2[c] = x[c]; }",
    "a start not at a thread's index": "for (int c = n / 2 + tid; c < n; c += BLOCK) "
    "{ out2[c] = x[c]; }",
    "a start past the first stride": "for (int c = threadIdx.x + blockDim.x; c < n; "
    "c += blockDim.x) out2[c] = x[c];",
    "the thread's index in the body": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "out2[c] = x[c] + threadIdx.x;",
    "an accessor reading two elements": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ s += pair(x + c); }",
    "an accessor storing under an if": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "store_pos(out2 + c, x[c]);",
    "one output through two names": "float* o2 = out + n;\n"
    "for (int c = threadIdx.x; c < n; c += BLOCK) { o1[c] = x[c]; o2[c] = y[c]; }",
    "an address under another name": "auto o = out2;\n"
    "for (int c = threadIdx.x; c < n; c += BLOCK) { o[c] = x[c]; out[c] = out2[c]; }",
    "an index other than c plus an offset": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ s += x[2 * c]; }",
    "the loop's name declared again": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ float v; { const int c = 0; v = x[c]; } out2[c] = v; }",
    "an offset declared in the body": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "{ const int o = 1; out2[c] = x[c + o]; }",
    "a bound that is not an integer": "for (int c = threadIdx.x; c < n * 0.5f; c += BLOCK) "
    "out2[c] = x[c];",
    "an output the thread touches again": "for (int c = threadIdx.x; c < n; c += BLOCK) "
    "out2[c] = x[c];\n"
    "for (int c = threadIdx.x; c < n; c += BLOCK) out[c] = 2 * out2[c];",
    "a thread that may have left": "if (tid >= n) return;\n"
    "for (int c = tid; c < n; c += gridDim.x * blockDim.x) out2[c] = x[c];",
}
# What a thread's index may reach the loop through, each with a kernel like it that the rewrite
# takes: names assigned after their declaration, in an element, under conditions, through a
# reference, a macro or a function that waits for the block but returns per thread; exits the loop
# never sees; a macro that names a buffer or stands for two operands; a value carried into stores.
# Where the analysis cannot follow (an element assigned, a return in a loop), it refuses.
STRIDE = "for (int c = threadIdx.x; c < n; c += BLOCK) out2[c] = x[c]"
LEFT_BESIDE_TAKEN = {  # (left, taken)
    "the thread's index assigned later": (
        "int t2; t2 = threadIdx.x;\n" + STRIDE + " + t2;",
        "int t2; t2 = n;\n" + STRIDE + " + t2;",
    ),
    "the thread's index through a reference": (
        "int t2 = 0; int& r = t2; r = threadIdx.x;\n" + STRIDE + " + t2;",
        "int t2 = 0;\n" + STRIDE + " + t2;",
    ),
    "a value set on a test of the thread": (
        "int t2 = 0; if (threadIdx.x < 4) t2 = 1;\n" + STRIDE + " + t2;",
        "int t2 = 0; if (n < 4) t2 = 1;\n" + STRIDE + " + t2;",
    ),
    "a return on an index assigned later": (
        "int t2 = 0; t2 = threadIdx.x;\nif (t2 >= 4) return;\n" + STRIDE + ";",
        "int t2 = 0; t2 = blockIdx.x;\nif (t2 >= 4) return;\n" + STRIDE + ";",
    ),
    "a return under a switch on the thread": (
        "switch (threadIdx.x & 1) { case 1: return; default: break; }\n" + STRIDE + ";",
        "if (blockIdx.x & 1) return;\n" + STRIDE + ";",
    ),
    "a macro reading the output": (
        "#define MINE out2[threadIdx.x]\n" + STRIDE + ";\nout[threadIdx.x] = MINE;",
        "#define MINE y[threadIdx.x]\n" + STRIDE + ";\nout[threadIdx.x] = MINE;",
    ),
    "a value carried into the stores": (
        "for (int c = threadIdx.x; c < n; c += BLOCK) { out2[c] = x[c] + s; s = x[c]; }",
        "for (int c = threadIdx.x; c < n; c += BLOCK) { out2[c] = x[c]; s += x[c]; }",
    ),
    "the thread's index in an element": (
        "int a[1]; a[0] = threadIdx.x;\n" + STRIDE + " + a[0];",
        "int a[1] = {4};\n" + STRIDE + " + a[0];",
    ),
    "the thread's index whole": (
        "dim3 t3 = threadIdx;\n" + STRIDE + " + t3.x;",
        "dim3 t3 = gridDim;\n" + STRIDE + " + t3.x;",
    ),
    "the thread's index in a macro": (
        "#define TID threadIdx.x\nint t2 = TID;\n" + STRIDE + " + t2;",
        "#define TID gridDim.x\nint t2 = TID;\n" + STRIDE + " + t2;",
    ),
    "a block scan's per-thread prefix": (
        "int t2 = 0; scan(t2);\n" + STRIDE + " + t2;",
        "int t2 = 0; total(t2);\n" + STRIDE + " + t2;",
    ),
    "a bound on the thread": (
        "for (int c = threadIdx.x; c < n - (int)(threadIdx.x % 2) * 8; c += BLOCK) out2[c] = x[c];",
        "for (int c = threadIdx.x; c < n - (int)(blockIdx.x % 2) * 8; c += BLOCK) out2[c] = x[c];",
    ),
    "a return inside a loop": (
        "while (n > 0) { if (threadIdx.x < 4) break; return; }\n" + STRIDE + ";",
        "if (n < 0) return;\n" + STRIDE + ";",
    ),
    "the lane through a lane mask": (
        "int t2 = __popc(__lanemask_lt());\n" + STRIDE + " + t2;",
        "int t2 = __popc(n);\n" + STRIDE + " + t2;",
    ),
    "an offset macro of two operands": (
        "#define OFF2 1 << 2\n" + STRIDE.replace("x[c]", "x[c + OFF2]") + ";",
        "#define OFF2 (1 << 2)\n" + STRIDE.replace("x[c]", "x[c + OFF2]") + ";",
    ),
}


def plan_of(loops: str):
    src = HEADER + loops + FOOTER
    return src, vector_plan(src, read_cuda(src), "k")


def test_a_loop_whose_every_buffer_use_is_an_element_every_iteration_takes_vectors():
    """An accessor read, an accessor store and a subscript read at an offset; a grid-stride loop
    from a local thread index. The alignment tests turn output addresses into numbers, which reads
    nothing: no output becomes an input."""
    src, plan = plan_of(TAKEN)
    assert plan is not None and plan.lines == [16, 17]
    edited = src.encode()
    for start, end, new in sorted(plan.edits(8), reverse=True):
        edited = edited[:start] + new + edited[end:]
    text = edited.decode()
    # the copy reads its element as a reference: no __ldg on registers
    assert (
        "mlxport_elem_load_f(mlxport_r0.v[mlxport_k])" in text
        and "__device__ float mlxport_elem_load_f(const float& p) { return p; }" in text
    )
    # the stride is the block, at run time
    assert "(long long)(BLOCK) == (long long)(blockDim.x)" in text
    assert "(long long)(gridDim.x * blockDim.x) == (long long)(blockDim.x * gridDim.x)" in text
    cand = translate(text, kernel="k", target="cuda").candidate
    base = translate(src, kernel="k", target="cuda").candidate
    assert (cand.input_names, cand.output_names) == (base.input_names, base.output_names)


@pytest.mark.parametrize("why", list(LEFT))
def test_a_loop_the_rewrite_would_change_is_left_as_written(why):
    assert plan_of(LEFT[why])[1] is None, why


@pytest.mark.parametrize("why", list(LEFT_BESIDE_TAKEN))
def test_a_loop_is_left_only_where_the_thread_or_a_macro_reaches_it(why):
    left, taken = LEFT_BESIDE_TAKEN[why]
    assert plan_of(left)[1] is None, why
    assert plan_of(taken)[1] is not None, why


def test_an_output_at_two_offsets_is_vectorized_only_where_they_lie_a_chunk_apart():
    t = load_task("rope")
    plan = vector_plan(t.source_text(), read_cuda(t.source_text()), t.kernel)
    rope = plan.loops[-1].rewrite(4)
    assert (
        "mlxport_apart<4>(0, half)" in rope
        and "(long long)(half) >= (long long)(blockDim.x) * 4" in rope
    )


RUN_HEADER = """
#define BLOCK 128
#define ITEMS 4
#define SKIP k++
#define OUT out
__device__ float load_f(const float* p) { return __ldg(p); }
__device__ void store_f(float* p, float v) { *p = v; }
__device__ void bump(int& v) { v += 1; }
__device__ void twice(float& v) { v *= 2; }
__device__ float peek(int i) { extern __shared__ float dyn[]; return dyn[i]; }
struct Lim { int lim; };
__global__ void k(const float* x, const float* y, float* out, float* out2, int n) {
    const int first = (blockIdx.x * blockDim.x + threadIdx.x) * ITEMS;
    float items[ITEMS];
    float s = 0.0f;
"""
RUNS_TAKEN = (
    "#pragma unroll\n"
    "for (int k = 0; k < ITEMS; ++k) items[k] = first + k < n ? load_f(x + first + k) : 0.0f;\n"
    "for (int k = 0; k < ITEMS; k++) "
    "{ if (n > first + k) { out[first + k] = items[k] * y[first + k + 1]; } }\n"
    "for (int k = 0; k < 2 * ITEMS; k += 1) store_f(out2 + first + k, s);"
)
RUNS_LEFT = {  # a thread's run of elements, and what makes loading it whole change the kernel
    "a read under a test of an element": "for (int k = 0; k < ITEMS; ++k) "
    "s += x[first + k] > 0 ? y[first + k] : 0.0f;",
    "a store in an else branch": "for (int k = 0; k < ITEMS; ++k) "
    "{ if (first + k < n) s += x[first + k]; else out[first + k] = 0.0f; }",
    "a store under a test of what the body sums": "for (int k = 0; k < ITEMS; ++k) "
    "{ if (first + k < n && s > 0) out[first + k] = 1; s += x[first + k]; }",
    "a bound the body changes": "for (int k = 0; k < ITEMS; ++k) "
    "{ if (first + k < n) out[first + k] = x[first + k]; n -= 1; }",
    "an offset the body changes": "int o = first;\n"
    "for (int k = 0; k < ITEMS; ++k) { out[o + k] = x[o + k]; o += 1; }",
    "an offset a helper changes": "int o = first;\n"
    "for (int k = 0; k < ITEMS; ++k) { out[o + k] = x[o + k]; bump(o); }",
    "the index a helper changes": "for (int k = 0; k < ITEMS; ++k) "
    "{ out[first + k] = x[first + k]; bump(k); }",
    "the index a macro changes": "for (int k = 0; k < ITEMS; ++k) "
    "{ out[first + k] = x[first + k]; SKIP; }",
    "an offset in an array": "int o[1] = {first};\n"
    "for (int k = 0; k < ITEMS; ++k) { out[o[0] + k] = x[o[0] + k]; o[0]++; }",
    "a bound in a field": "Lim b = {n};\nfor (int k = 0; k < ITEMS; ++k) { if (first + k < b.lim) "
    "out[first + k] = x[first + k]; b.lim -= 1; }",
    "a buffer under a macro's name": "for (int k = 0; k < ITEMS; ++k) "
    "{ OUT[first + k] = x[first + k]; s += out[first + k]; }",
    "shared memory a helper reads": "extern __shared__ float sh[];\n"
    "for (int k = 0; k < ITEMS; ++k) { sh[first + k] = x[first + k]; s += peek(first + k); }",
    "an element a helper changes": "for (int k = 0; k < ITEMS; ++k) twice(out[first + k]);",
    "a buffer named through auto": "const auto* xa = x + first;\n"
    "for (int k = 0; k < ITEMS; ++k) out[first + k] = xa[k];",
    "shared memory a helper touches, read as a chunk": "extern __shared__ float sh[];\n"
    "for (int k = 0; k < ITEMS; ++k) s += sh[first + k] + peek(0);",
    "shared memory declared twice": "extern __shared__ float t2[];\nextern __shared__ float sh[];\n"
    "if (n < 0) { extern __shared__ float sh[]; }\nfor (int k = 0; k < ITEMS; ++k) "
    "{ sh[first + (k + 1) % ITEMS] = 7.0f; out[first + k] = t2[first + k]; }",
    "a bound a helper changes in parentheses": "int lim = n;\n"
    "for (int k = 0; k < ITEMS; ++k) "
    "{ if (first + k < lim) out[first + k] = x[first + k]; bump((lim)); }",
    "a bound a constructor changes": (
        "struct Dec { int& r; __device__ Dec(int& v) : r(v) { r -= 1; } };\n",
        "int lim = n;\nfor (int k = 0; k < ITEMS; ++k) { if (first + k < lim) "
        "out[first + k] = x[first + k]; Dec d(lim); }",
    ),
    "a bound in a variable of the file": (
        "__device__ int g_lim;\n",
        "for (int k = 0; k < ITEMS; ++k) if (first + k < g_lim) out[first + k] = x[first + k];",
    ),
    "a field a macro stands for": (
        "#define X x + 1\n",
        "for (int k = 0; k < ITEMS; ++k) "
        "if (first + k < threadIdx.X) out[first + k] = x[first + k];",
    ),
    "the rewrite's own names": "int mlxport_in = 1;\n"
    "for (int k = 0; k < ITEMS; ++k) if (mlxport_in) out[first + k] = 1;",
    "a run from 1": "for (int k = 1; k < ITEMS; ++k) out[first + k] = x[first + k];",
    "a step of 2": "for (int k = 0; k < ITEMS; k += 2) out[first + k] = x[first + k];",
    "a scaled index": "for (int k = 0; k < ITEMS; ++k) out[first + 2 * k] = x[first + k];",
    "a buffer read and written": "for (int k = 0; k < ITEMS; ++k) "
    "out[first + k] = out[first + k] + x[first + k];",
    "a warp shuffle": "for (int k = 0; k < ITEMS; ++k) "
    "out[first + k] = __shfl_xor_sync(0xffffffffu, x[first + k], 1);",
    "a break": "for (int k = 0; k < ITEMS; ++k) "
    "{ if (x[first + k] < 0) break; out[first + k] = x[first + k]; }",
    "an offset macro of two operands": (
        "#define OFF2 1 << 2\n",
        "for (int k = 0; k < ITEMS; ++k) out[first + k + OFF2] = x[first + k];",
    ),
}


def test_a_threads_run_of_elements_loads_whole_under_its_bounds_tests():
    """Items a thread reads or writes at ``first + k`` for k < ITEMS, guarded by ``first + k < n``
    (or ``n > first + k``) or not at all: the chunks run when every guard holds on every
    iteration, evaluated beforehand as the loop evaluates it; the loop as written otherwise."""
    src = RUN_HEADER + RUNS_TAKEN + FOOTER
    plan = vector_plan(src, read_cuda(src), "k")
    assert plan is not None and plan.lines == [17, 18, 19]
    first, second, third = (lp.rewrite(4) for lp in plan.loops)
    assert (
        "#pragma unroll\n"
        "for (int k = 0; k < (ITEMS); ++k) mlxport_in = mlxport_in && (first + k < n);" in first
    )
    assert (
        "mlxport_in && (n > first + k);" in second
        and "reinterpret_cast<size_t>(y + (first + 1))" in second
    )
    # unguarded: V dividing the count and alignment are the tests
    assert "mlxport_in = mlxport_in" not in third
    edited = src.encode()
    for start, end, new in sorted(plan.edits(4), reverse=True):
        edited = edited[:start] + new + edited[end:]
    assert translate(edited.decode(), kernel="k", target="cuda").candidate is not None


def test_a_runs_inner_guard_is_evaluated_only_where_the_outer_one_holds():
    """``if (first + k < n) { if (100 / (n - first - k) > 1) ... }``: the inner test divides by
    zero where the outer one fails; the chunked path's test evaluates them in the same order."""
    src = (
        RUN_HEADER
        + (
            "for (int k = 0; k < ITEMS; ++k) { if (first + k < n) { if (100 / (n - first - k) > 1) "
            "out[first + k] = x[first + k]; } }"
        )
        + FOOTER
    )
    rewrite = vector_plan(src, read_cuda(src), "k").loops[0].rewrite(4)
    assert "mlxport_in = mlxport_in && (first + k < n) && (100 / (n - first - k) > 1);" in rewrite


@pytest.mark.parametrize("why", list(RUNS_LEFT))
def test_a_run_the_rewrite_would_change_is_left_as_written(why):
    top, loop = RUNS_LEFT[why] if isinstance(RUNS_LEFT[why], tuple) else ("", RUNS_LEFT[why])
    src = top + RUN_HEADER + loop + FOOTER
    assert vector_plan(src, read_cuda(src), "k") is None, why


@pytest.mark.parametrize(
    ("n", "index"), [(64, "unsigned"), (30, "unsigned"), (64, "int"), (30, "int")]
)
def test_a_runs_guards_are_evaluated_as_the_loop_evaluates_them(executor, tmp_path, n, index):
    """``f2 + k < n`` with k unsigned (or n unsigned) is false where f2 + k is negative: the first
    thread's run starts at -4, and its chunk must not be read. Guards are evaluated for every k
    beforehand, with the loop's own types, so the rewrite reads and writes what the loop does, at
    a length (30) that leaves a partial run too."""
    from mlxport.backends.cuda_cpu import Launch

    n_type = "int" if index == "unsigned" else "unsigned"
    src = (
        f"__global__ void k(const float* x, float* out, {n_type} n) {{\n"
        "    const int f2 = (int)(blockIdx.x * blockDim.x + threadIdx.x) * 4 - 4;\n"
        f"    for ({index} k = 0; k < 4; ++k) {{ if (f2 + k < n) "
        f"out[f2 + k + 4] = 2.0f * x[f2 + k]; }}\n}}\n"
    )
    plan = vector_plan(src, read_cuda(src), "k")
    edited = src.encode()
    for start, end, new in sorted(plan.edits(4), reverse=True):
        edited = edited[:start] + new + edited[end:]
    x = np.arange(1, 65, dtype=np.float32)
    outs = []
    for name, code in (("a.cu", src), ("b.cu", edited.decode())):
        (tmp_path / name).write_text(code)
        r = executor.run(
            executor.compile(executor.source(tmp_path / name), "k"),
            Launch((1, 1, 1), (16, 1, 1), 0),
            [
                x,
                np.full(68, -1.0, np.float32),
                np.uint32(n) if n_type == "unsigned" else np.int32(n),
            ],
        )
        assert r.ok and not r.races, r.error
        outs.append(r.buffers["out"])
    np.testing.assert_array_equal(outs[1], outs[0])
    last = min(n, 60)  # 16 threads' runs start at -4, 0, ..., 56
    assert (
        (outs[0][:4] == -1).all()
        and (outs[0][4 : 4 + last] == 2 * x[:last]).all()
        and (outs[0][4 + last :] == -1).all()
    )


@pytest.fixture(scope="module")
def executor():
    from mlxport.backends.cuda_cpu import CudaExecutor

    ex = CudaExecutor()
    yield ex
    ex.close()


def bf16_as_float(a: np.ndarray) -> np.ndarray:
    return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def test_softmax_chunks_run_on_aligned_rows_and_the_loop_as_written_elsewhere(executor, tmp_path):
    """Rows of 1018 bfloat16 elements start 8-byte aligned every other row: rows 0 and 2 take
    4-element chunks for their first 1016 elements (a variant that doubles the chunked path's output
    differs there and nowhere else), row 1 and the last 2 elements run the loop as written; all
    three match the translation within rounding (a thread sums other elements in another order)."""
    t = load_task("softmax_rows")
    case = {"R": 3, "C": 1018}
    variant = Search(t, "cuda").variant("vector=4 + __restrict__").candidate
    doubled = variant.model_copy(
        update={
            "source": variant.source.replace(
                "__expf(mlxport_elem_load_f", "2.0f * __expf(mlxport_elem_load_f"
            )
        }
    )
    want = bf16_as_float(
        run_on_executor(
            executor, tmp_path / "a.cu", t, translate_task(t, "cuda").candidate, case, "bfloat16"
        )["out"]
    ).reshape(3, -1)
    got = bf16_as_float(
        run_on_executor(executor, tmp_path / "b.cu", t, variant, case, "bfloat16")["out"]
    ).reshape(3, -1)
    bad = bf16_as_float(
        run_on_executor(executor, tmp_path / "c.cu", t, doubled, case, "bfloat16")["out"]
    ).reshape(3, -1)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-6)
    assert ((bad != got).sum(axis=1) == [1016, 0, 1016]).all()
    assert (bad[:, 1016:] == got[:, 1016:]).all()


@pytest.mark.parametrize(
    "label", ["vector=4 + __restrict__", "vector=8 + SCAN_ITEMS=8 + __restrict__"]
)
def test_cumsum_runs_load_whole_on_aligned_rows_and_match_bit_for_bit(executor, tmp_path, label):
    """Each thread scans its run of SCAN_ITEMS elements in the order it did: the chunked variant
    matches the translation bit for bit. Rows of 1018 bfloat16 start 16-byte aligned every fourth
    row (8-byte: every other one): a variant that doubles what the chunked stores write differs on
    those rows, in every run that lies wholly within the row, and nowhere else."""
    t = load_task("cumsum")
    case = {"R": 9, "C": 1018}
    variant = Search(t, "cuda").variant(label).candidate
    assert variant.source.count("mlxport_chunk<T, ") == 4  # a load and a store: its type twice each
    doubled = variant.model_copy(
        update={
            "source": variant.source.replace(
                "mlxport_w0.v[mlxport_k] = from_float<T>(",
                "mlxport_w0.v[mlxport_k] = from_float<T>(2.0f * ",
            )
        }
    )
    want = run_on_executor(
        executor, tmp_path / "a.cu", t, translate_task(t, "cuda").candidate, case, "bfloat16"
    )["out"]
    got = run_on_executor(executor, tmp_path / "b.cu", t, variant, case, "bfloat16")["out"]
    bad = run_on_executor(executor, tmp_path / "c.cu", t, doubled, case, "bfloat16")["out"]
    np.testing.assert_array_equal(got, want)
    items, width = (8, 8) if "SCAN_ITEMS=8" in label else (4, 4)
    whole = 1018 // items * items
    rows = [r for r in range(9) if r * 1018 * 2 % (width * 2) == 0]
    differs = (bf16_as_float(bad) != bf16_as_float(got)).reshape(9, -1)
    assert differs[:, whole:].sum() == 0 and differs.any(axis=1).nonzero()[0].tolist() == rows
    assert all(differs[r, :whole].mean() > 0.9 for r in rows)


@pytest.mark.parametrize(
    ("task", "label", "case"),
    [
        ("rope", "vector=4 + block.x@54=16 + __restrict__", {"B": 1, "H": 2, "T": 8, "D": 128}),
        ("layernorm", "vector=4 + LN_BLOCK=128 + __restrict__", {"R": 4, "D": 1024}),
    ],
)
def test_vector_variants_match_the_translation(executor, tmp_path, task, label, case):
    """rope (elementwise: bit for bit) and layernorm (its sums regrouped: within rounding), at sizes
    where every thread gets a whole chunk, layernorm's row through shared memory in chunks too."""
    t = load_task(task)
    variant = Search(t, "cuda").variant(label)
    assert variant is not None and "mlxport_chunk" in variant.candidate.source
    want = run_on_executor(
        executor, tmp_path / "a.cu", t, translate_task(t, "cuda").candidate, case, "bfloat16"
    )["out"]
    got = run_on_executor(executor, tmp_path / "b.cu", t, variant.candidate, case, "bfloat16")[
        "out"
    ]
    if task == "rope":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(bf16_as_float(got), bf16_as_float(want), rtol=1e-2, atol=1e-5)


def test_an_extern_c_kernel_gets_its_helpers_before_the_linkage_and_no_linkage_left_in_the_header():
    src = (
        'extern "C" __global__ void k(const float* x, float* out, int n) {\n'
        "    for (int c = threadIdx.x; c < n; c += blockDim.x) out[c] = x[c];\n}\n"
        "void launch(const float* x, float* out, int n) { k<<<1, 128>>>(x, out, n); }\n"
    )
    plan = vector_plan(src, read_cuda(src), "k")
    edited = src.encode()
    for start, end, new in sorted(plan.edits(4), reverse=True):
        edited = edited[:start] + new + edited[end:]
    assert edited.decode().index("struct alignas") < edited.decode().index('extern "C"')
    header = translate(edited.decode(), kernel="k", target="cuda").candidate.header
    # MLX's namespace follows
    assert "mlxport_chunk" in header and not header.rstrip().endswith('extern "C"')


def test_knobs_that_edit_the_same_source_make_no_variant():
    """A constant tuned inside a loop the vector knob rewrites: each knob alone builds, the two
    together would splice one edit into the other and are skipped."""
    t = load_task("softmax_rows")
    src = t.source_text().replace(
        "store_f(outr + c, __expf(load_f(xr + c) - m) * inv);",
        "constexpr int K = 1;\n        store_f(outr + c, K * __expf(load_f(xr + c) - m) * inv);",
    )
    object.__setattr__(t, "source_text", lambda: src)
    search = Search(t, "cuda")
    assert (
        search.variant("K=2 + __restrict__") is not None
        and search.variant("vector=8 + __restrict__") is not None
    )
    assert search.variant("vector=8 + K=2 + __restrict__") is None
