"""CUDA ports compile as MLX compiles them (NVRTC, sm_90a on Hopper, sm_80 elsewhere) on a machine
without a GPU: every expert port at its first bench case, attention's three paths and its
mma.sync fallback, and the rules translation with its tuning knobs (the buffers as
``__restrict__`` through ``#define``s around MLX's signature, loops unrolled)."""

from __future__ import annotations

import pytest

from mlxport.backends.cuda_source import nvrtc_compile, nvrtc_root, nvrtc_source
from mlxport.tasks import MEMORY_BOUND, case_infos, expert_ports, load_task, suite_names
from mlxport.translate.tuning.variants import tuning_variants
from mlxport.verify.benchmark import primary_dtype

pytestmark = pytest.mark.skipif(
    nvrtc_root() is None,
    reason="NVRTC is not installed (the nvidia-cuda-nvrtc, "
    "nvidia-cuda-runtime and nvidia-cuda-cccl wheels; Linux x86-64)",
)


def compiled(task, cand, case: dict, dtype: str, arch: str = "sm_90a") -> str:
    ok, log, cubin = nvrtc_compile(nvrtc_source(cand, case_infos(task, case, dtype)), arch)
    assert ok and cubin, f"{cand.name} at {task.case_label(case)} {dtype} {arch}:\n{log[-3000:]}"
    return log


@pytest.mark.parametrize("name", suite_names())
def test_expert_cuda_ports_compile(name):
    task = load_task(name)
    log = compiled(task, expert_ports(task)["cuda"], task.bench_cases()[0], primary_dtype(task))
    assert "0 bytes spill stores" in log  # ptxas's report came back, and the port does not spill


@pytest.mark.parametrize(
    ("case", "dtype", "arch"),
    [
        (0, "float32", "sm_90a"),
        (2, "float16", "sm_90a"),
        (1, "bfloat16", "sm_90a"),
        (1, "bfloat16", "sm_80"),
    ],
)
def test_attention_paths_compile(case, dtype, arch):
    """Float32 prefill on FMAs, split-KV decode, wgmma at D = 64, and mma.sync where there is no
    wgmma (the port picks its engine when MLX compiles it); wgmma at D = 128 is the first test's."""
    task = load_task("attention_fwd")
    compiled(task, expert_ports(task)["cuda"], task.bench_cases()[case], dtype, arch)


@pytest.mark.parametrize(("case", "arch"), [(0, "sm_90a"), (1, "sm_80")])
def test_attention_float32_on_3xtf32_compiles_without_spills(case, arch):
    """benchmarks/variants/attention_tf32x3.toml's float32 prefill (mma.sync m16n8k8 tf32, which
    needs sm_80) at both prefill bench cases: D = 128 for Hopper, D = 64 for the GPUs before it."""
    from pathlib import Path

    from mlxport.tasks import load_candidate

    task = load_task("attention_fwd")
    variant = load_candidate(
        Path(__file__).parents[1] / "benchmarks" / "variants" / "attention_tf32x3.toml"
    )
    log = compiled(task, variant, task.bench_cases()[case], "float32", arch)
    assert "0 bytes spill stores" in log, log[-2000:]


@pytest.mark.parametrize("name", MEMORY_BOUND)
def test_rules_translation_and_its_knobs_compile(name):
    """The translation with its first variant that unrolls (else its first): both knobs at once
    where the kernel has a stride loop, ``__restrict__`` alone where it has none. The variant is the
    whole translation plus the knobs, so it is the one compiled."""
    task = load_task(name)
    case, dtype = task.bench_cases()[0], primary_dtype(task)
    variants = tuning_variants(task, "cuda")
    label, variant = next((v for v in variants if v[0].startswith("unroll=")), variants[0])
    assert "__restrict__" in label
    compiled(task, variant.candidate, case, dtype)


def test_attention_profile_variants_include_the_ports_own_shapes():
    """kernel_profile.py --variants times the port beside its variants: the variant labelled with
    the port's own shape launches exactly as the port does at both head dimensions."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.port_variants import attention_variants

    task = load_task("attention_fwd")
    port = expert_ports(task)["cuda"]
    variants = attention_variants(port)
    for case in task.bench_cases()[:2]:
        infos = case_infos(task, case, "bfloat16")
        mine, theirs = port.launch(infos), variants["wgmma_mt1"].launch(infos)
        assert (mine.grid, mine.threadgroup, mine.shared_memory, mine.template) == (
            theirs.grid,
            theirs.threadgroup,
            theirs.shared_memory,
            theirs.template,
        ), task.case_label(case)


@pytest.mark.parametrize("case", [0, 1])
def test_the_attention_ports_pipelined_wgmma_stays_asynchronous(case):
    """The port's pipelined wgmma loop at both prefill bench cases: ptxas keeps its products
    asynchronous (it serializes them when one is issued and waited on different branches)."""
    task = load_task("attention_fwd")
    log = compiled(task, expert_ports(task)["cuda"], task.bench_cases()[case], "bfloat16")
    assert "0 bytes spill stores" in log and "serialized" not in log, log[-2000:]


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("rope", "unroll=8 + block.x@54=16 + ROWS_PER_BLOCK=16 + __restrict__"),
        ("transpose_tiled", "TILE_DIM=64 + BLOCK_ROWS=4 + __restrict__"),
        ("softmax_rows", "vector=8 + unroll=4 + block@84=128 + __restrict__"),
        ("layernorm", "vector=4 + LN_BLOCK=128 + __restrict__"),
        # runs chunked inside an unrolled tile loop
        ("cumsum", "vector=8 + unroll=8 + SCAN_ITEMS=8 + __restrict__"),
        # selects in a chunk step
        ("softmax_rows", "vector=8 + selects=1 + unroll=4 + block@84=128 + __restrict__"),
    ],
)
def test_the_combined_variants_the_h200_search_chose_compile(name, label):
    """Knobs stacked by the search (benchmarks/results/h200_s8_rules_vs_expert.json and
    h200_s9_rules_vs_expert_3.json) edit the source together: the variant each task shipped there
    builds here."""
    from mlxport.translate.tuning.variants import Search

    task = load_task(name)
    variant = Search(task, "cuda").variant(label)
    assert variant is not None, label
    compiled(task, variant.candidate, task.bench_cases()[0], primary_dtype(task))


@pytest.mark.parametrize(
    ("name", "label"),
    [
        # eight blocks' rows a block, 32 pairs a thread
        ("rope", "coarsen=8 + unroll=8 + block.x@54=16 + ROWS_PER_BLOCK=8 + __restrict__"),
        # eight 16-byte chunks a thread held between the two loops
        ("softmax_rows", "vector=8 + selects=1 + keep=8 + block@84=128 + __restrict__"),
        # two threads' tile rows a thread, their 2-byte loads and stores paired
        ("transpose_tiled", "lanes=2 + __restrict__"),
        ("transpose_tiled", "lanes=2 + TILE_DIM=64 + BLOCK_ROWS=4 + __restrict__"),
    ],
)
def test_coarsened_and_kept_variants_build_without_spills(name, label):
    """The knobs that hold more in registers (several blocks' or threads' work a thread, a row
    between two loops) at their largest values: ptxas keeps it all in registers."""
    from mlxport.translate.tuning.variants import Search

    task = load_task(name)
    variant = Search(task, "cuda").variant(label)
    assert variant is not None, label
    log = compiled(task, variant.candidate, task.bench_cases()[0], primary_dtype(task))
    assert "0 bytes spill stores" in log and "0 bytes stack frame" in log, log[-2000:]
