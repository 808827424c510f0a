"""The tuning search's knobs that keep meaning (mlxport/translate/tuning/variants.py):
``#pragma unroll U`` on block- and grid-stride loops, and the buffers as ``__restrict__`` kernel
parameters. CUDA variants run on the CPU executor wrapped as MLX's cuda_kernel wraps them and match
the translation bit for bit; MSL ones pass the simulator."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from mlxport.backends.cuda_source import mlx_cuda_source
from mlxport.tasks import case_infos, load_task, make_inputs
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.render.cuda_kernel import restrict_buffers
from mlxport.translate.translator import translate, translate_task
from mlxport.translate.tuning.variants import stride_loops, tuning_variants, unrolled

ROOT = Path(__file__).resolve().parents[1]

LOOPS = """
#define BLOCK 128
__device__ float row_sum(const float* p, int n) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += BLOCK) s += p[i];
    return s;
}
__device__ float unused(const float* p, int n) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += BLOCK) s += p[i];
    return s;
}
__global__ void k(const float* x, float* out, int n) {
    float t = row_sum(x, n);
    for (int j = threadIdx.x; j < BLOCK; j += 32) t += 1.0f;
#pragma unroll 1
    for (int i = threadIdx.x; i < n; i += blockDim.x) t += x[i];
    for (int i = 0; i < n; ++i) t += x[i];
    if (n > 0) for (int i = threadIdx.x; i < n; i += BLOCK) t += x[i];
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; \
i += gridDim.x * blockDim.x) out[i] = t;
}
void launch(const float* x, float* out, int n) { k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, out, n); }
"""


def test_only_stride_loops_with_runtime_bounds_and_no_pragma_get_one():
    """The helper's block-stride loop and the kernel's grid-stride loop; not a constant bound, a
    loop with a pragma of its own, a unit step, a loop that shares its line, or an
    uncalled helper."""
    loops = stride_loops(LOOPS, read_cuda(LOOPS), "k")
    got = unrolled(LOOPS, loops, 4).splitlines()
    marked = [got[i + 1].strip() for i, s in enumerate(got) if s.strip() == "#pragma unroll 4"]
    assert marked == [
        "for (int i = threadIdx.x; i < n; i += BLOCK) s += p[i];",
        "for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; "
        "i < n; i += gridDim.x * blockDim.x) out[i] = t;",
    ]
    # the loop's own indent
    assert got[got.index("    float s = 0.0f;") + 1] == "    #pragma unroll 4"
    body = translate(unrolled(LOOPS, loops, 8), kernel="k", target="cuda").candidate
    assert (body.header + body.source).count("#pragma unroll 8") == 2


@pytest.mark.parametrize(
    ("task", "lines"), [("softmax_rows", 2), ("layernorm", 3), ("gelu_tanh", 2), ("rmsnorm", 0)]
)
def test_suite_kernels_stride_loops(task, lines):
    """rmsnorm's loops run a template constant's count of times and carry their own pragmas."""
    t = load_task(task)
    assert len(stride_loops(t.source_text(), read_cuda(t.source_text()), t.kernel)) == lines


def test_restrict_qualifies_the_signature_and_ends_before_the_body():
    tr = translate_task(load_task("layernorm"), "cuda")
    c = restrict_buffers(tr).candidate
    assert c.header.endswith(
        "#define x __restrict__ x\n#define weight __restrict__ weight\n#define bias __restrict__ "
        "bias\n#define eps __restrict__ eps\n#define out __restrict__ out\n"
    )
    assert c.source.startswith("#undef x\n#undef weight\n#undef bias\n#undef eps\n#undef out\n")
    clash = tr.model_copy(
        update={"candidate": tr.candidate.model_copy(update={"input_names": ["cu", "weight"]})}
    )
    assert restrict_buffers(clash) is None  # `cu` is in MLX's `namespace mlx::core::cu`


# ------------------------------------------------------------- run as MLX's cuda_kernel runs them


def run_on_executor(ex, path: Path, task, cand, case: dict, dtype: str) -> dict[str, np.ndarray]:
    from mlxport.backends.cuda_cpu import Launch

    inputs, params, shapes = (
        make_inputs(task, case, dtype, 3),
        task.param_values(case),
        task.shapes(case, dtype),
    )
    launch = cand.launch(case_infos(task, case, dtype))
    path.write_text(
        mlx_cuda_source(
            cand, launch, {n: dtype if n in inputs else "float32" for n in cand.input_names}
        )
    )
    args = []
    for n in cand.input_names:
        a = inputs.get(n)
        args.append(
            np.full(16, params[n], np.float32)
            if a is None
            # a scalar param: 16 elements, as MLX's
            else np.array(a.view(mx.uint16) if a.dtype == mx.bfloat16 else a).reshape(-1)
        )
        if f"{n}_shape" in cand.source:
            args.append(np.array(shapes[n], np.int32))
    args += [
        np.zeros(int(np.prod(s)), np.uint16 if d == "bfloat16" else np.dtype(d))
        for s, d in zip(launch.output_shapes, launch.output_dtypes, strict=True)
    ]
    blocks = tuple(-(-g // t) for g, t in zip(launch.grid, launch.threadgroup, strict=True))
    r = ex.run(
        ex.compile(ex.source(path), "custom_kernel_port"),
        Launch(blocks, launch.threadgroup, launch.shared_memory),
        args,
    )
    assert r.ok and not r.races, r.error
    return {n: r.buffers[n] for n in cand.output_names}


@pytest.mark.parametrize("task", ["softmax_rows", "layernorm", "gelu_tanh"])
def test_restrict_and_unroll_variants_match_the_translation_bit_for_bit(task, tmp_path):
    """In bfloat16 at a visible case with several iterations per loop: __restrict__ alone, then
    unrolled by 4 and by 8, write exactly what the translation writes."""
    from mlxport.backends.cuda_cpu import CudaExecutor

    t = load_task(task)
    case = t.cases.visible[0]
    wanted = ["__restrict__", "unroll=4 + __restrict__", "unroll=8 + __restrict__"]
    leading = [(label, v) for label, v in tuning_variants(t, "cuda") if label in wanted]
    assert [label for label, _ in leading] == wanted
    ex = CudaExecutor()
    try:
        want = run_on_executor(
            ex, tmp_path / "base.cu", t, translate_task(t, "cuda").candidate, case, "bfloat16"
        )
        for label, translation in leading:
            got = run_on_executor(
                ex, tmp_path / "variant.cu", t, translation.candidate, case, "bfloat16"
            )
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], err_msg=label)
    finally:
        ex.close()


def test_unroll_variants_pass_on_the_simulator():
    from mlxport.backends.sim import SimBackend
    from mlxport.verify.correctness import run_correctness

    task = load_task("softmax_rows")
    label, translation = tuning_variants(task, "msl")[1]
    assert label == "unroll=8" and "#pragma unroll 8" in translation.candidate.source
    sim = SimBackend()
    try:
        report = run_correctness(task, translation.candidate, sim, seed=3)
    finally:
        sim.close()
    assert report.ok, report.summary()


def test_the_benchmark_script_loads_without_the_agent_stack():
    """benchmarks/rules_vs_expert.py runs on a bare GPU machine (numpy, mlx,
    pydantic, tree-sitter)."""
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, "benchmarks")
        import rules_vs_expert
        assert rules_vs_expert.task_names("memory") == list(rules_vs_expert.MEMORY_BOUND)
        bad = sorted(m for m in sys.modules
                     if m.split(".")[0] in ("langgraph", "langchain", "langchain_core"))
        assert not bad, bad
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
