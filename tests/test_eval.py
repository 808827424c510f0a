"""The eval runner on the real simulator with scripted models of known behaviour (generated from
the tasks' expert ports): exact metrics, resume, retries, and a self-contained HTML report."""

import json
import re
import shutil
from pathlib import Path

import pytest
from evals_scripts.scripts import USAGE, buggy_kernels, write_scripts
from small_tasks import small_task

from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig
from mlxport.errors import UserError
from mlxport.evals import metrics as M
from mlxport.evals.report import build_reports, collect
from mlxport.evals.runner import (
    load_errors,
    load_manifest,
    load_runs,
    model_slug,
    parse_budget,
    resolve_models,
    run_eval,
    seed_dir,
)
from mlxport.tasks import load_task

TASKS = ["vector_add", "gelu_tanh"]
CONFIG = {"backend": "sim", "max_iterations": 8, "prices": (1.0, 2.0), "extra_seeds": 0}
PRICE_IN, PRICE_OUT = CONFIG["prices"]


class Evaluated:
    def __init__(self, root: Path) -> None:
        self.specs = write_scripts(root / "scripts", TASKS)
        # the suite's tasks with small cases: what is measured is the runner, not the kernels
        self.tasks = [str(small_task(name, root / "tasks")) for name in TASKS]
        self.out = root / "eval"
        self.events: list[dict] = []
        run_eval(
            list(self.specs.values()),
            self.tasks,
            1,
            CONFIG,
            2,
            self.out,
            on_progress=self.events.append,
        )
        self.runs = load_runs(self.out)
        self.rows = {r["label"]: r for r in M.leaderboard(self.runs, expected_per_model=len(TASKS))}


@pytest.fixture(scope="module")
def ev(tmp_path_factory) -> Evaluated:
    return Evaluated(tmp_path_factory.mktemp("eval"))


def cost(turns: int) -> float:
    return turns * (USAGE["input_tokens"] * PRICE_IN + USAGE["output_tokens"] * PRICE_OUT) / 1e6


def test_every_model_task_seed_runs_once_under_one_config(ev):
    assert len(ev.runs) == 5 * len(TASKS)
    for r in ev.runs:
        assert (
            r["config"]["max_iterations"] == 8
            and r["config"]["backend"] == "sim"
            and r["seed"] == 0
        )
        assert (
            ev.out / "runs" / model_slug(r["model"]) / "seed0" / r["task"] / "run.json"
        ).is_file()
    manifest = load_manifest(ev.out)
    assert (
        manifest["models"][0] == "rules" and manifest["tasks"] == TASKS and manifest["seeds"] == 1
    )
    assert sorted(e["status"] for e in ev.events) == ["done"] * 10 + ["started"] * 10
    assert ev.events[-1]["done"] == ev.events[-1]["total"] == 10


def test_expert_model_metrics(ev):
    m = ev.rows["scripted:expert"]
    assert (m["fast_0"], m["correct@1"], m["correct@k"], m["k"]) == (1.0, 1.0, 1.0, 1)
    assert m["timing"] == M.SIM_NA and m["geomean"] == {"native": None, "naive": None}
    assert (m["candidates"], m["compile_failures"], m["compile_failure_rate"]) == (2, 0, 0.0)
    assert (m["tool_calls"], m["tool_errors"], m["tool_error_rate"]) == (8, 0, 0.0)
    assert (m["tokens_in"], m["tokens_out"]) == (
        8 * USAGE["input_tokens"],
        8 * USAGE["output_tokens"],
    )
    assert m["cost_usd"] == pytest.approx(cost(8))
    assert (
        m["stop_reasons"] == {"finish": 2}
        and m["median_iterations_to_best"] == 3
        and m["mean_iterations"] == 4
    )


def test_buggy_model_metrics(ev):
    m = ev.rows["scripted:buggy"]
    assert (m["fast_0"], m["correct@1"], m["correct@k"]) == (0.0, 0.0, 0.0)
    assert (m["candidates"], m["compile_failures"], m["compile_failure_rate"]) == (4, 2, 0.5)
    assert (m["tool_error_rate"], m["stop_reasons"], m["median_iterations_to_best"]) == (
        0.0,
        {"finish": 2},
        None,
    )
    assert m["cost_usd"] == pytest.approx(cost(10))
    for task in TASKS:  # the wrong kernel was checked and failed
        folder = ev.out / "runs" / model_slug(ev.specs["buggy"]) / "seed0" / task
        transcript = (folder / "transcript.jsonl").read_text()
        assert f"candidate {buggy_kernels(task)[1].id}: FAIL" in transcript, transcript[-2000:]


def test_looper_and_clumsy_model_metrics(ev):
    looper = ev.rows["scripted:looper"]
    assert looper["stop_reasons"] == {"iterations": 2} and looper["mean_iterations"] == 8
    assert (looper["fast_0"], looper["candidates"], looper["compile_failure_rate"]) == (
        0.0,
        0,
        None,
    )
    assert (looper["tool_calls"], looper["tool_error_rate"], looper["tokens_in"]) == (
        16,
        0.0,
        16_000,
    )
    clumsy = ev.rows["scripted:clumsy"]
    assert clumsy["stop_reasons"] == {"consecutive_errors": 2} and clumsy["mean_iterations"] == 4
    assert (clumsy["tool_calls"], clumsy["tool_errors"], clumsy["tool_error_rate"]) == (8, 8, 1.0)
    assert clumsy["fast_0"] == 0.0 and clumsy["cost_usd"] == pytest.approx(cost(8))


def test_rules_is_the_labelled_non_llm_baseline(ev):
    rules = ev.rows["rules"]
    assert rules["non_llm_baseline"] and rules["fast_0"] == 1.0 and rules["cost_usd"] == 0.0
    assert rules["tokens_in"] == rules["tokens_out"] == 0 and rules["stop_reasons"] == {"finish": 2}
    assert not any(r["non_llm_baseline"] for label, r in ev.rows.items() if label != "rules")
    assert resolve_models(["openai:gpt-4.1", "rules", "openai:gpt-4.1"]) == [
        "rules",
        "openai:gpt-4.1",
    ]
    ranked = [r["label"] for r in M.leaderboard(ev.runs)]
    assert ranked[:2] == ["rules", "scripted:expert"]  # both verify everything; rules costs nothing


def test_reports_are_self_contained_and_rebuild_from_run_records(ev, tmp_path):
    md, html = build_reports(ev.out)
    text, page = md.read_text(), html.read_text()
    for needle in (
        "rules (non-LLM baseline)",
        "n/a (simulator: correctness only)",
        "scripted:expert",
        "### gelu_tanh",
        "consecutive_errors 2",
        "2 (50%)",
        "8 of 8 calls (100%)",
    ):
        assert needle in text, needle
    assert page.count("<svg") == 3 and "rules (non-LLM baseline)" in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(", page, re.I)
    # Only run records: no eval.json, the reports are the same tables.
    shutil.copytree(ev.out / "runs", tmp_path / "runs")
    md2, _ = build_reports(tmp_path)
    board = lambda s: s.split("## Leaderboard")[1].split("## Per task")[0]  # noqa: E731
    assert board(md2.read_text()) == board(text)
    with pytest.raises(UserError, match="no eval runs"):
        build_reports(tmp_path / "nothing")


def test_resume_skips_finished_runs_resumes_interrupted_ones_and_retries_errors(ev, tmp_path):
    out = tmp_path / "eval"
    shutil.copytree(ev.out, out)
    expert = ev.specs["expert"]
    shutil.rmtree(seed_dir(out, model_slug(expert), 0) / "vector_add")

    def interrupt_after_compile(node, update):
        if node == "tools" and update.get("records"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # a port killed after its compile step
        run_port(
            load_task(ev.tasks[0]),
            RunConfig(model=expert, seed=0, **CONFIG),
            seed_dir(out, model_slug(expert), 0),
            session="expert-killed",
            on_update=interrupt_after_compile,
        )
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    events = []
    run_eval(
        [*ev.specs.values(), f"scripted:{broken}"],
        ev.tasks,
        1,
        CONFIG,
        1,
        out,
        on_progress=events.append,
    )
    status = {(M.label(e["model"]), e["task"], e["status"]) for e in events}
    assert ("scripted:expert", "vector_add", "resumed") in status
    assert ("scripted:broken", "vector_add", "error") in status and (
        "scripted:broken",
        "gelu_tanh",
        "error",
    ) in status
    assert (
        sum(e["status"] == "skipped" for e in events) == 9
        and sum(e["status"] == "started" for e in events) == 2
    )
    resumed = json.loads(
        (seed_dir(out, model_slug(expert), 0) / "vector_add" / "run.json").read_text()
    )
    assert (
        resumed["session"] == "expert-killed"
        and resumed["result"]["verified"]
        and resumed["iterations"] == 4
    )
    errors = load_errors(out)
    assert len(errors) == 2 and "not valid JSON" in errors[0]["error"]
    assert "Runs that raised" in build_reports(out)[0].read_text()
    broken_row = next(r for r in collect(out).rows if r["label"] == "scripted:broken")
    assert broken_row["missing_runs"] == 2  # 2 runs asked for, none finished...
    assert broken_row["fast_0"] == 0.0 and broken_row["tasks"] == 2  # ...and they count as failures
    events.clear()
    run_eval(
        [*ev.specs.values(), f"scripted:{broken}"],
        ev.tasks,
        1,
        CONFIG,
        1,
        out,
        on_progress=events.append,
    )
    # Only the errored runs are retried (they had started a session, so they resume it).
    assert sorted({e["status"] for e in events}) == ["error", "resumed", "skipped"]


def test_an_eval_folder_keeps_one_budget(ev):
    with pytest.raises(UserError, match="max_iterations"):
        run_eval([], ev.tasks, 1, {**CONFIG, "max_iterations": 9}, 1, ev.out)


def test_inputs_are_checked_before_any_work(tmp_path):
    with pytest.raises(UserError, match="--seeds"):
        run_eval([], TASKS, 0, CONFIG, 1, tmp_path)
    with pytest.raises(UserError, match="no task named"):
        run_eval([], ["no_such_task"], 1, CONFIG, 1, tmp_path)
    with pytest.raises(UserError, match="unknown run setting"):
        run_eval([], TASKS, 1, {"temperature": 0.1}, 1, tmp_path)
    with pytest.raises(UserError, match="does not exist"):
        run_eval(["scripted:/no/such/file.json"], TASKS, 1, CONFIG, 1, tmp_path)
    assert not (tmp_path / "eval.json").exists()


def test_parse_budget():
    assert parse_budget("iterations=12, patience=4,tokens=400k,cost=2.5,wall=30m,errors=3") == {
        "max_iterations": 12,
        "patience": 4,
        "max_tokens": 400_000,
        "max_cost": 2.5,
        "max_wall_seconds": 1800.0,
        "max_consecutive_errors": 3,
    }
    assert parse_budget("max_iterations=5,backend=sim") == {"max_iterations": 5, "backend": "sim"}
    assert parse_budget("") == {}
    for bad in ("iterations", "model=x", "cost=lots", "speed=3"):
        with pytest.raises(UserError):
            parse_budget(bad)


def test_the_same_model_with_tree_search_is_its_own_entrant(tmp_path):
    out = tmp_path / "eval"
    run_eval(["rules@tree"], [str(small_task("vector_add", tmp_path))], 1, CONFIG, 1, out)
    runs = {r["model"]: r for r in load_runs(out)}
    assert set(runs) == {"rules", "rules@tree"}
    assert (
        runs["rules"]["config"]["search"] == "linear"
        and runs["rules@tree"]["config"]["search"] == "tree"
    )
    assert runs["rules@tree"]["cycles"] and runs["rules@tree"]["result"]["verified"]
    rows = {r["label"]: r for r in M.leaderboard(load_runs(out), expected_per_model=1)}
    assert set(rows) == {"rules", "rules@tree"} and rows["rules@tree"]["non_llm_baseline"]


def test_eval_without_models_runs_the_rules_baseline(tmp_path, cli):
    result = cli(
        "eval",
        "--tasks",
        str(small_task("vector_add", tmp_path)),
        "--backend",
        "sim",
        "--budget",
        "iterations=6,extra_seeds=0",
        "--out",
        str(tmp_path / "eval"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert [r["model"] for r in load_runs(tmp_path / "eval")] == ["rules"]
