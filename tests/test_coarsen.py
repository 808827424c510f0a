"""The ``coarsen=F`` knob (mlxport/translate/tuning/coarsen.py): which kernels run several of the
launch's blocks in one, and what the rewritten kernel computes, run as MLX's cuda_kernel runs it on
the CPU executor and checked on the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from test_variant_knobs import run_on_executor
from test_vectorize import executor  # noqa: F401  (a fixture)

from mlxport.tasks import load_task
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.translator import translate, translate_task
from mlxport.translate.tuning.coarsen import coarsened
from mlxport.translate.tuning.variants import Search

KERNEL = """
#define ROWS 4
__device__ float twice(float v) { return 2.0f * v; }
__device__ void put(float* p, float v) { *p = v; }
__global__ void k(const float* x, float* out, int n, int len) {
    __shared__ float table[64];
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < 64; i += blockDim.x * blockDim.y)
        table[i] = i * 0.5f;
    __syncthreads();
    int count = 0;
    const int row = blockIdx.x * ROWS + threadIdx.y;
    if (row >= n) return;
    const float pos = (float)(row % len);
    const float* xr = x + (size_t)row * 64;
    float* outr = out + (size_t)row * 64;
    for (int i = threadIdx.x; i < 64; i += blockDim.x) {
        float s, c;
        sincosf(pos * table[i], &s, &c);
        put(outr + i, xr[i] * c + twice(s));
    }
}
void launch(const float* x, float* out, int n, int len) {
    dim3 block(16, ROWS);
    dim3 grid((n + ROWS - 1) / ROWS);
    k<<<grid, block>>>(x, out, n, len);
}
"""
LOOP = "        put(outr + i, xr[i] * c + twice(s));\n"
GUARD = "    if (row >= n) return;\n"
LEFT = {  # (what is replaced, by what): each lets a block see another's work, or its identity
    "a barrier after the block's index": (GUARD, GUARD + "    __syncthreads();\n"),
    "a shuffle": (LOOP, LOOP + "        s = __shfl_xor_sync(0xffffffffu, s, 1);\n"),
    "the grid's size": ("(float)(row % len)", "(float)(row % gridDim.x)"),
    "a second grid axis": ("blockIdx.x * ROWS", "blockIdx.y * ROWS"),
    "the block's index whole": ("blockIdx.x * ROWS", "((uint3)blockIdx).x * ROWS"),
    "an atomic": (LOOP, LOOP + "        atomicAdd(out, 1.0f);\n"),
    "an output read": (LOOP, "        put(outr + i, outr[i] + xr[i]);\n"),
    "an output added to": (LOOP, "        outr[i] += xr[i];\n"),
    "a local every copy shares, written": (LOOP, LOOP + "        count += 1;\n"),
    "its address taken": (LOOP, LOOP + "        put(outr + i, *(&count));\n"),
    "shared memory written": (LOOP, LOOP + "        table[i] = s;\n"),
    "shared memory passed on": (LOOP, "        put(table + i, s);\n"),
    "a return in a loop": (LOOP, LOOP + "        if (xr[i] < 0) return;\n"),
    "a break of a loop every copy runs": (LOOP, LOOP + "        if (xr[i] < 0) break;\n"),
    "a function reading the block's index": (
        "__device__ float twice(float v) { return 2.0f * v; }",
        "__device__ float twice(float v) { return blockIdx.x * v; }",
    ),
    "a macro naming the block's index": ("#define ROWS 4", "#define ROWS (4 + 0 * blockIdx.x)"),
    "shared memory declared after the block's index": (
        GUARD,
        GUARD + "    __shared__ float mine[4];\n",
    ),
    "a file-scope variable written": (
        "__device__ float twice(float v) { return 2.0f * v; }",
        "__device__ float seen;\n__device__ float twice(float v) { seen = v; return 2.0f * v; }",
    ),
    "the kernel declared twice": (
        "#define ROWS 4",
        "#define ROWS 4\n__global__ void k(const float* x, float* out, int n, int len);",
    ),
    "a goto": (LOOP, LOOP + "        goto done;\n        done:;\n"),
    "a local array every copy shares, handed on": [
        ("    int count = 0;\n", "    float held[2];\n"),
        (LOOP, "        put(held, s);\n        put(outr + i, held[0]);\n"),
    ],
    "a launch with a grid list": ("k<<<grid, block>>>", "k<<<{4, 1, 1}, block>>>"),
    "cooperative groups": (
        "    int count = 0;\n",
        "    int count = 0;\n    auto g = cooperative_groups::this_grid();\n",
    ),
}


def rewritten(src: str, factor: int = 4):
    return coarsened(src, read_cuda(src), "k", factor)


def test_the_kernel_runs_four_blocks_a_block_and_still_translates():
    done = rewritten(KERNEL)
    assert done is not None
    assert (
        "k<<<dim3((grid.x + 4 - 1) / 4, grid.y, grid.z), block>>>(x, out, n, len, (int)(grid.x))"
        in (done.source)
    )
    assert "int len, int mlxport_nblk)" in done.source
    # what comes before the block's index runs once; the loop once for the four copies
    assert done.source.count("__syncthreads();") == 1
    assert done.source.count("for (int i = threadIdx.x; i < 64; i += blockDim.x)") == 1
    assert "(blockIdx.x + 3u * gridDim.x) * ROWS + threadIdx.y" in done.source
    lines = KERNEL.splitlines()
    host = lines.index("    dim3 block(16, ROWS);") + 1
    moved = done.source.splitlines().index("    dim3 block(16, ROWS);") + 1
    assert done.source_line(moved) == host  # knobs name a line by where it was
    cand = translate(done.source, kernel="k", target="cuda").candidate
    assert "mlxport_nblk" in cand.source


@pytest.mark.parametrize("why", list(LEFT))
def test_a_kernel_whose_blocks_could_see_each_other_is_left(why):
    src = KERNEL
    for old, new in LEFT[why] if isinstance(LEFT[why], list) else [LEFT[why]]:
        assert old in src
        src = src.replace(old, new)
    assert rewritten(src) is None, why


def test_rope_and_vector_add_get_the_knob_and_the_row_kernels_do_not():
    labels = {
        name: [label for label, _ in _labels(name)]
        for name in ("rope", "vector_add", "softmax_rows", "cumsum", "transpose_tiled")
    }
    assert labels["rope"][3:5] == ["coarsen=4 + __restrict__", "coarsen=8 + __restrict__"]
    assert labels["vector_add"][1:3] == ["coarsen=4 + __restrict__", "coarsen=8 + __restrict__"]
    for name in ("softmax_rows", "cumsum", "transpose_tiled"):  # barriers, or a second axis
        assert not any("coarsen" in label for label in labels[name]), name
    search = Search(load_task("rope"), "cuda")
    stacked = search.variant(
        "coarsen=4 + unroll=8 + block.x@54=16 + ROWS_PER_BLOCK=8 + __restrict__"
    )
    assert stacked is not None and "#pragma unroll 8" in stacked.candidate.source


def test_coarsen_is_tried_alone_where_it_does_not_stack_on_the_fastest():
    """Rope's coarsened source has no vector knob: with vector=8 fastest, coarsen is timed on the
    translation rather than skipped, and the search goes on from vector=8."""
    search, times, offered = Search(load_task("rope"), "cuda"), {}, []
    while (v := search.next(times, 100.0)) is not None and len(offered) < 7:
        offered.append(v[0])
        times[v[0]] = 50.0 if v[0] == "vector=8 + __restrict__" else 90.0
    assert offered[1:] == [
        "vector=8 + __restrict__",
        "vector=4 + __restrict__",
        "coarsen=4 + __restrict__",
        "coarsen=8 + __restrict__",
        "vector=8 + unroll=4 + __restrict__",
        "vector=8 + unroll=8 + __restrict__",
    ]


def _labels(name: str):
    from mlxport.translate.tuning.variants import tuning_variants

    return tuning_variants(load_task(name), "cuda")


def test_rope_coarsened_matches_the_translation_bit_for_bit(executor, tmp_path):  # noqa: F811
    """At 3 heads of 100 rows, 75 blocks as written run as 19: a block's four copies are rows 76
    apart (other positions: each computes its own sincos), and the last block's fourth does
    nothing. The same bits as the translation in bfloat16; a variant whose copies take the first
    copy's sincos whatever their argument differs."""
    t = load_task("rope")
    case = {"B": 1, "H": 3, "T": 100, "D": 96, "offset": 333}
    variant = Search(t, "cuda").variant("coarsen=4 + __restrict__").candidate
    reused = variant.model_copy(
        update={
            "source": variant.source.replace(
                "if (mlxport_m0 && __float_as_uint(mlxport_m0_x) == __float_as_uint(mlxport_m0_a))",
                "if (mlxport_m0)",
            )
        }
    )
    assert reused.source != variant.source
    from mlxport.tasks import case_infos

    assert variant.launch(case_infos(t, case, "bfloat16")).grid[0] == 19 * 48
    want = run_on_executor(
        executor, tmp_path / "a.cu", t, translate_task(t, "cuda").candidate, case, "bfloat16"
    )["out"]
    got = run_on_executor(executor, tmp_path / "b.cu", t, variant, case, "bfloat16")["out"]
    bad = run_on_executor(executor, tmp_path / "c.cu", t, reused, case, "bfloat16")["out"]
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(bad, want)


def test_rope_coarsened_for_metal_passes_its_check_on_the_simulator():
    """The knob is the source's, so the Metal translation takes it too: checked at a visible and a
    held-out case (heads sharing positions, and not) against the reference."""
    from mlxport.backends.sim import SimBackend
    from mlxport.verify.correctness import check_case

    t = load_task("rope")
    variant = Search(t, "msl").variant("coarsen=4")
    assert variant is not None and "mlxport_live3" in variant.candidate.source
    sim = SimBackend()
    try:
        for case in (t.cases.visible[1], t.cases.heldout[0]):
            result = check_case(t, variant.candidate, sim, case, "bfloat16", seed=3)
            assert result.verdict == "pass", result
    finally:
        sim.close()
