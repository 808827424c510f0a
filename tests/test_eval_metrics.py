"""Eval metrics as pure functions, on timed run records built by the real run-record writer from
real benchmark reports (a GPU is needed to time kernels, so these records stand in for GPU runs)."""

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest

from mlxport.agent.outputs import Ending, run_record
from mlxport.agent.state import RunConfig, State
from mlxport.evals import metrics as M
from mlxport.evals.report import build_reports
from mlxport.evals.runner import model_slug, seed_dir
from mlxport.spec import BenchmarkReport, Timing
from mlxport.tasks import load_task


def record(
    model: str,
    task: str,
    seed: int,
    native: float | None,
    naive: float | None = None,
    *,
    backend: str = "metal",
    history: list[dict] | None = None,
    **extra,
) -> dict:
    """A run record as a port writes it; ``native=None`` is a port that failed verification."""
    t = load_task(task)
    final = {"candidate_id": None, "verified": False, "backend": backend, "rejected": []}
    if native is not None:
        cand = Timing(name="candidate", median_us=10.0, spread=0.02, samples=30)
        bench = BenchmarkReport(
            backend=backend,
            device="Apple M3 Max",
            candidate_id="c0ffee",
            task=task,
            case="N=1M",
            dtype="float32",
            candidate=cand,
            baselines=[
                cand.model_copy(update={"name": "native", "median_us": 10.0 * native}),
                cand.model_copy(update={"name": "naive", "median_us": 10.0 * (naive or native)}),
            ],
            speedups={"native": native, "naive": naive or native},
        )
        final = {
            **final,
            "candidate_id": "c0ffee",
            "verified": True,
            "benchmark": bench.model_dump(mode="json"),
        }
    state = State(
        stop_reason="finish",
        iterations=5,
        elapsed=12.5,
        final=final,
        usage={"reason": {"input_tokens": 1000, "output_tokens": 100, "calls": 5}},
        best_history=history
        if history is not None
        else (
            [{"iteration": 3, "candidate": "c0ffee", "speedup": native}]
            if native is not None
            else []
        ),
    )
    config = asdict(RunConfig(model=model, seed=seed, backend=backend))
    ending = Ending.of_state(state)
    return {**run_record(t, ending, config, f"s{seed}", {}), "tool_calls": 5, **extra}


# Model A over 3 tasks x 2 seeds: always 2x; 1.2x then a failure; two failures.
A = [
    record("openai:gpt-4.1", "vector_add", 0, 2.0, 4.0),
    record("openai:gpt-4.1", "vector_add", 1, 2.0, 4.0),
    record("openai:gpt-4.1", "gelu_tanh", 0, 1.2, 3.0),
    record("openai:gpt-4.1", "gelu_tanh", 1, None),
    record("openai:gpt-4.1", "softmax_rows", 0, None),
    record("openai:gpt-4.1", "softmax_rows", 1, None),
]


def test_fast_p_geomean_and_correct_at_k_are_exact():
    m = M.model_metrics(A)
    assert m["timing"] == "measured" and m["runs"] == 6 and m["tasks"] == 3 and m["k"] == 2
    assert m["fast_0"] == pytest.approx(0.5) and m["correct@1"] == pytest.approx(0.5)
    # verified on at least one of 2 seeds: 2 of 3 tasks
    assert m["correct@k"] == pytest.approx(2 / 3)
    # 2.0 is not > 2
    assert m["fast_p"]["native"] == pytest.approx({"0": 0.5, "1": 0.5, "1.5": 1 / 3, "2": 0.0})
    assert m["fast_p"]["naive"] == pytest.approx({"0": 0.5, "1": 0.5, "1.5": 0.5, "2": 0.5})
    # Failed seeds count 1.0x; a task's seeds are geo-averaged, then the tasks.
    assert m["geomean"]["native"] == pytest.approx((2.0 * math.sqrt(1.2) * 1.0) ** (1 / 3))
    assert m["geomean"]["naive"] == pytest.approx((4.0 * math.sqrt(3.0) * 1.0) ** (1 / 3))
    assert (
        m["tokens_in"] == 6000
        and m["tokens_out"] == 600
        and m["cost_usd"] == pytest.approx(6 * (2000 + 800) / 1e6)
    )
    assert m["median_iterations_to_best"] == 3 and m["stop_reasons"] == {"finish": 6}
    # no candidates recorded
    assert m["tool_error_rate"] == 0.0 and m["compile_failure_rate"] is None


def test_a_verified_but_slower_port_counts_its_real_speedup():
    m = M.model_metrics(
        [record("rules", "vector_add", 0, 0.5), record("rules", "gelu_tanh", 0, 2.0)]
    )
    assert m["fast_0"] == 1.0 and m["fast_p"]["native"]["1"] == 0.5
    assert m["geomean"]["native"] == pytest.approx(1.0)


def test_pass_at_k_is_the_unbiased_estimator():
    assert M.pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert (
        M.pass_at_k(3, 0, 3) == 0.0 and M.pass_at_k(3, 1, 3) == 1.0 and M.pass_at_k(4, 2, 1) == 0.5
    )


def test_bootstrap_is_deterministic_and_brackets_the_estimate():
    values = [1.0, 0.0, 0.5, 1.0, 1.0, 0.0, 0.5]
    lo, hi = M.bootstrap_ci(values, M.mean)
    assert (lo, hi) == M.bootstrap_ci(values, M.mean)
    assert 0.0 <= lo < M.mean(values) < hi <= 1.0
    assert M.bootstrap_ci([0.7] * 5, M.mean) == pytest.approx((0.7, 0.7))
    m = M.model_metrics(A)
    assert m["ci"]["geomean_native"][0] <= m["geomean"]["native"] <= m["ci"]["geomean_native"][1]


def test_simulator_and_untimed_runs_report_no_speedup():
    sim = [record("rules", "vector_add", 0, None, backend="sim")]
    sim[0]["result"]["verified"] = True
    m = M.model_metrics(sim)
    assert m["timing"] == M.SIM_NA == "n/a (simulator: correctness only)"
    assert m["fast_0"] == 1.0 and m["geomean"] == {"native": None, "naive": None}
    assert m["fast_p"]["native"] == {"0": None, "1": None, "1.5": None, "2": None}
    untimed = record("rules", "vector_add", 0, 2.0)
    untimed["result"]["speedups"] = {}
    assert M.timing_status([untimed]) == M.UNTIMED_NA


def test_leaderboard_always_has_rules_and_ranks_by_speedup_when_timed():
    b = [
        record("anthropic:claude-sonnet-4-5", t, s, 3.0)
        for t in ("vector_add", "gelu_tanh", "softmax_rows")
        for s in (0, 1)
    ]
    rows = M.leaderboard(A + b, ["openai:gpt-4.1", "anthropic:claude-sonnet-4-5"])
    assert [r["label"] for r in rows][:2] == ["anthropic:claude-sonnet-4-5", "openai:gpt-4.1"]
    rules = next(r for r in rows if r["model"] == "rules")
    assert rules["non_llm_baseline"] and rules["runs"] == 0
    assert all(not r["non_llm_baseline"] for r in rows if r["model"] != "rules")


def test_convergence_curves():
    runs = [
        record(
            "x:y",
            "vector_add",
            0,
            2.0,
            history=[
                {"iteration": 2, "candidate": "a", "speedup": 1.5},
                {"iteration": 4, "candidate": "b", "speedup": 2.0},
            ],
        ),
        record("x:y", "gelu_tanh", 0, None),
    ]
    what, curve = M.convergence(runs, 5)
    assert what == "best speedup over native"
    assert curve == pytest.approx(
        [1.0, 1.0, math.sqrt(1.5), math.sqrt(1.5), math.sqrt(2.0), math.sqrt(2.0)]
    )
    for r in runs:
        r["result"]["backend"] = "sim"
    what, curve = M.convergence(runs, 5)
    assert what == "share of runs with a correct candidate" and curve == [0, 0, 0.5, 0.5, 0.5, 0.5]


def test_labels_and_stop_kinds():
    assert (
        M.label("scripted:/a/b/expert") == "scripted:expert"
        and M.label("scripted:/a/looper.json") == "scripted:looper"
    )
    assert M.stop_kind("model_error: RateLimitError: slow down") == "model_error"
    assert model_slug("openai:gpt-4.1") == "openai-gpt-4.1"


def test_timed_report_renders_speedups(tmp_path):
    for r in A:
        folder = seed_dir(tmp_path, model_slug(r["model"]), r["seed"]) / r["task"]
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps(r))
    md, html = build_reports(tmp_path)
    text = md.read_text()
    # rules always a row, even without runs
    assert "rules (non-LLM baseline)" in text and "not run" in text
    assert f"{(2.0 * math.sqrt(1.2)) ** (1 / 3):.2f}x" in text and "50% / 33% / 0%" in text
    assert "Speedup metrics: n/a" not in text
    page = html.read_text()
    assert "Speedup over the native baseline, per task" in page and page.count("<svg") == 3
    assert Path(html).stat().st_size < 200_000


def test_a_run_that_crashed_counts_as_a_failure_not_as_absent():
    """Model A verified t1 and crashed on t2 (no record); B verified t1 and failed t2:
    same score."""

    def run(model, task, ok):
        return {
            "model": model,
            "task": task,
            "seed": 0,
            "result": {
                "verified": ok,
                "timed": ok,
                "backend": "cuda",
                "speedups": {"native": 2.0, "naive": 2.0},
            },
        }

    runs = [run("a", "t1", True), run("b", "t1", True), run("b", "t2", False)]
    rows = {
        r["model"]: r
        for r in M.leaderboard(runs, ["a", "b"], tasks=["t1", "t2"], seeds=1, bootstrap=50)
    }
    assert rows["a"]["fast_0"] == rows["b"]["fast_0"] == 0.5
    assert rows["a"]["geomean"]["native"] == pytest.approx(2**0.5)
    assert rows["a"]["tasks"] == rows["b"]["tasks"] == 2
