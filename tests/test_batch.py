"""Batch ports: input forms, and a real batch killed halfway and restarted (no port runs twice)."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from small_tasks import small_task

from mlxport.batch import load_jobs, read_events, run_batch
from mlxport.errors import UserError
from mlxport.tasks import SUITE_DIR, suite_names

# The quickest suite tasks under the rules policy on the simulator.
FOUR = ["vector_add", "softmax_rows", "gelu_tanh", "transpose_tiled"]
ROOT = Path(__file__).resolve().parents[1]


def manifest(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "batch.toml"
    path.write_text(body)
    return path


def test_inputs_manifest_folder_and_suite(tmp_path):
    m = manifest(
        tmp_path,
        'model = "rules"\n[budget]\nmax_iterations = 5\n\n[[port]]\ntask = "vector_add"\n\n'
        '[[port]]\ntask = "softmax_rows"\nbudget = {patience = 2}\n',
    )
    jobs = load_jobs(m, budget={"backend": "sim"})
    assert [(j.name, j.config) for j in jobs] == [
        ("vector_add", {"backend": "sim", "max_iterations": 5}),
        ("softmax_rows", {"backend": "sim", "max_iterations": 5, "patience": 2}),
    ]
    assert (
        [j.name for j in load_jobs(SUITE_DIR)]
        == suite_names()
        == [j.name for j in load_jobs("suite")]
    )
    assert [j.name for j in load_jobs(SUITE_DIR / "rope")] == ["rope"]


def test_manifest_kernel_entry_builds_a_task(tmp_path):
    src = SUITE_DIR / "vector_add"
    (tmp_path / "add.cu").write_text((src / "kernel.cu").read_text())
    (tmp_path / "ref.py").write_text((src / "reference.py").read_text())
    fn = next(
        line.split("(")[0].removeprefix("def ")
        for line in (src / "reference.py").read_text().splitlines()
        if line.startswith("def ")
    )
    m = manifest(
        tmp_path,
        f'[[port]]\nkernel = "add.cu"\nreference = "ref.py:{fn}"\ninputs = "a[N];b[N]"\n'
        f'outputs = "out[N]"\ncases = ["N=1000"]\n',
    )
    (job,) = load_jobs(m, out=tmp_path / "out")
    assert (
        job.name == "add" and Path(job.task_dir) == (tmp_path / "out" / "_tasks" / "add").resolve()
    )


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('[[port]]\ntask = "vector_add"\n[[port]]\ntask = "vector_add"\n', "appears twice"),
        ('[[port]]\ntask = "vector_add"\nbudget = {speed = 3}\n', "unknown keys ['speed']"),
        ("[[port]]\nfoo = 1\n", "unknown keys ['foo']"),
        ('[[port]]\nkernel = "x.cu"\n', "ports a .cu file and needs cases"),
        ("model = 'rules'\n", "no [[port]] entries"),
        ("[[port]\n", "not valid TOML"),
        ('[[port]]\ntask = "no_such_task"\n', "no task named"),
        (
            '[[port]]\ntask = "vector_add"\nname = "va_two"\n',
            "output folders are named after tasks",
        ),
    ],
)
def test_bad_manifests_name_the_fix(tmp_path, body, words):
    with pytest.raises(UserError, match=None) as e:
        load_jobs(manifest(tmp_path, body))
    assert words in str(e.value)


def test_bad_source_and_ray_without_backend(tmp_path):
    with pytest.raises(UserError, match="pass a manifest"):
        load_jobs(tmp_path / "missing")
    with pytest.raises(UserError, match="holds no task folders"):
        load_jobs(tmp_path)
    with pytest.raises(UserError, match="pick the backend"):
        run_batch(SUITE_DIR / "vector_add", out=tmp_path / "o", ray_address="local")
    with pytest.raises(UserError, match="scripted model"):
        run_batch(SUITE_DIR / "vector_add", model="scripted:/nope", out=tmp_path / "o")


BATCH = """
import sys
from pathlib import Path
from mlxport.batch import run_batch
run_batch(
    sys.argv[1], model="rules", jobs=2, out=Path(sys.argv[2]),
    budget={"backend": "sim", "extra_seeds": 0},
)
"""


def start_batch(source: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", BATCH, str(source), str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_killed_batch_restarts_without_running_a_task_twice(tmp_path):
    # the tasks with small cases: what is tested is the restart, not the kernels
    tasks = [small_task(t, tmp_path / "tasks") for t in FOUR]
    source = manifest(tmp_path, "".join(f'[[port]]\ntask = "{t}"\n' for t in tasks))
    out = tmp_path / "out"
    first = start_batch(source, out)
    deadline = time.monotonic() + 240
    while len(list(out.glob("*/run.json"))) < 2:
        assert first.poll() is None, first.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "the batch made no progress"
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the batch and its simulator workers, as a crash would
    first.wait()
    done_before = {p.parent.name for p in out.glob("*/run.json")}
    assert 2 <= len(done_before) < 4
    assert not (out / "batch.json").exists()

    second = start_batch(source, out)
    assert second.wait(timeout=300) == 0, second.stderr.read()[-2000:]
    events = read_events(out)
    starts = Counter(e["task"] for e in events if e["event"] == "start")
    assert starts == Counter(FOUR), "every task started from scratch exactly once"
    second_pid = second.pid
    skipped = {e["task"] for e in events if e["event"] == "skip" and e["pid"] == second_pid}
    assert skipped == done_before
    resumed = {e["task"] for e in events if e["event"] == "resume"}
    print(f"done before the kill: {sorted(done_before)}; resumed: {sorted(resumed)}")
    assert resumed.isdisjoint(done_before)
    for task in FOUR:
        run = json.loads((out / task / "run.json").read_text())
        assert run["result"]["verified"], task
    summary = json.loads((out / "batch.json").read_text())
    assert [r["task"] for r in summary["tasks"]] == FOUR
    assert {r["task"] for r in summary["tasks"] if r["status"] == "skipped"} == done_before
    assert summary["totals"]["verified"] == 4
    assert "| vector_add |" in (out / "batch_report.md").read_text()


def test_the_batch_command_runs_with_its_flags(cli, tmp_path):
    """The CLI's flags reach every port's config (search among them); a verified batch exits 0."""
    result = cli(
        "batch",
        str(small_task("vector_add", tmp_path / "tasks")),
        "--backend",
        "sim",
        "--search",
        "tree",
        "--budget",
        "extra_seeds=0",
        "--out",
        str(tmp_path / "out"),
        "--json",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert summary["totals"]["verified"] == 1
    assert (
        json.loads((tmp_path / "out" / "vector_add" / "run.json").read_text())["config"]["search"]
        == "tree"
    )
