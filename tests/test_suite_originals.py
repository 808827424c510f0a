"""The [original] tables of the suite tasks (benchmarks/suite_originals.py): every task describes
the launch of its original CUDA kernel at every case it lists, the tables are what kernel.cu's host
code gives, and the original run on the CPU executor agrees with the reference at small cases."""

import importlib.util
import sys
from pathlib import Path

import mlx.core as mx
import pytest

from mlxport.tasks import MLX_LOCK, load_task, make_inputs, suite_names
from mlxport.verify.compare import compare
from mlxport.verify.golden import golden, run_original

ROOT = Path(__file__).resolve().parents[1]


def _script():
    if "suite_originals" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "suite_originals", ROOT / "benchmarks" / "suite_originals.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["suite_originals"] = module
        spec.loader.exec_module(module)
    return sys.modules["suite_originals"]


@pytest.mark.parametrize("name", suite_names())
def test_original_launches_cover_every_case(name):
    task = load_task(name)
    assert task.original is not None
    # [original] must not replace the reference as the golden
    assert task.reference == "reference:reference"
    labels = [
        task.case_label(c) for c in task.cases.visible + task.cases.heldout + task.cases.bench
    ]
    assert [launch.case for launch in task.original.launches] == labels
    for launch in task.original.launches:
        assert min(launch.grid + launch.block) >= 1 and launch.shared_bytes >= 0
    tensors = {t.name for t in task.inputs} | {t.name for t in task.outputs}
    assert set(task.original.results) == {t.name for t in task.outputs}
    assert set(task.original.results.values()) <= tensors


def test_tables_are_what_the_host_code_gives():
    """Each task.toml holds the table the script derives from kernel.cu now (run it
    with --write)."""
    script = _script()
    stale = [
        n
        for n in suite_names()
        if script.written(n, script.table(n)) != (load_task(n).folder / "task.toml").read_text()
    ]
    assert not stale


def test_branches_and_named_template_arguments_follow_the_case():
    """softmax_rows launches BLOCK 512 past 1024 columns; rmsnorm's BLOCK is a local constexpr and
    its VPT follows dim; attention's HEAD_DIM and CAUSAL come from the case."""
    by_case = {
        n: {launch.case: launch for launch in load_task(n).original.launches}
        for n in ("softmax_rows", "rmsnorm", "attention_fwd")
    }
    assert by_case["softmax_rows"]["R=7,C=4097"].template == ["T", "512"]
    assert by_case["softmax_rows"]["R=7,C=4097"].block == (512, 1, 1)
    assert by_case["softmax_rows"]["R=100,C=33"].template == ["T", "128"]
    assert by_case["rmsnorm"]["R=8,D=4096"].template == ["T", "256", "16"]
    assert by_case["rmsnorm"]["R=7,D=4097"].template == ["T", "1024", "16"]
    assert by_case["attention_fwd"]["B=2,H=2,Tq=96,Tk=96,D=64,causal=False"].template == [
        "T",
        "64",
        "false",
    ]
    assert by_case["attention_fwd"][
        "B=1,H=2,Tq=50,Tk=131,D=32,causal=False,scale=0.17677669529663687"
    ].template == ["T", "32", "false"]


@pytest.mark.parametrize(
    "name,case",
    [
        ("vector_add", {"N": 4096}),
        ("gelu_tanh", {"N": 4096}),
        ("softmax_rows", {"R": 64, "C": 128}),
    ],
)
def test_original_agrees_with_the_reference(name, case):
    """golden.run_original (the original kernel on the CPU executor, its scalar arguments bound from
    the case's dimensions: n = N, rows = R) against the reference, every dtype."""
    task = load_task(name)
    assert case in task.cases.visible and task.reference is not None
    for dtype in task.dtypes:
        with MLX_LOCK, mx.stream(mx.cpu):
            inputs = make_inputs(task, case, dtype, 0)
        refs = golden(task, inputs, case)  # the reference, as task.toml keeps it
        outs = run_original(task, inputs, case)
        results = [
            compare(o, r, task.tolerance[dtype], case=task.case_label(case), dtype=dtype)
            for o, r in zip(outs, refs, strict=True)
        ]
        assert [r.verdict for r in results] == ["pass"] * len(task.outputs), (dtype, results)
