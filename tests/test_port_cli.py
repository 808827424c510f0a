"""`mlxport port` as a user runs it: the defaults on the simulator, resume after SIGKILL,
bad input."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from small_tasks import small_task

from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig
from mlxport.tasks import expert_ports, load_task

# Elementwise, a row reduction over SIMD-groups, a threadgroup-memory tile: the suite's three shapes
# of kernel, with thousands of elements each (tests/test_translator.py translates and checks all
# twelve at their own sizes).
DEFAULT_TASKS = ["vector_add", "softmax_rows", "transpose_tiled"]


def test_defaults_turn_three_tasks_into_verified_kernels_whose_tests_pass(tmp_path, written_tests):
    for name in DEFAULT_TASKS:
        # the defaults: rules policy, best backend
        run = run_port(load_task(small_task(name, tmp_path / "tasks")), RunConfig(), tmp_path)
        assert run["result"]["verified"], (
            name,
            run["stop_reason"],
            run["rejected_in_final_verification"],
        )
        assert (
            run["non_llm_baseline"]
            and "non-LLM baseline" in (tmp_path / name / "report.md").read_text()
        )
    tests = [str(tmp_path / name / "test_kernel.py") for name in DEFAULT_TASKS]
    result = written_tests("-q", "-p", "no:cacheprovider", "--import-mode=importlib", *tests)
    assert result.returncode == 0, result.stdout[-3000:]


def _script(tmp_path):
    port = expert_ports(load_task("vector_add"))["msl"]
    args = port.model_dump(mode="json", exclude_defaults=True)
    args.pop("language", None)
    slow = port.model_copy(update={"threadgroup": [64, 1, 1]})
    slow_args = {**args, "threadgroup": [64, 1, 1]}
    turns = [
        {"tool_calls": [{"name": "read_cuda_source", "args": {}}]},
        {"tool_calls": [{"name": "compile_kernel", "args": args}]},
        {"tool_calls": [{"name": "run_correctness", "args": {"candidate_id": port.id}}]},
        {"tool_calls": [{"name": "compile_kernel", "args": slow_args}]},
        {"tool_calls": [{"name": "run_correctness", "args": {"candidate_id": slow.id}}]},
        {"tool_calls": [{"name": "finish", "args": {"candidate_id": port.id}}]},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns))
    return path, port


def _checkpoints(db) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select count(*) from checkpoints").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path, cli):
    script, port = _script(tmp_path)
    out = tmp_path / "out"
    # No extra seeds in the final verification (the session keeps its budget across the resume) and
    # a small vector_add: the kernel is the expert port, and what this test is about is the kill and
    # the resume.
    cmd = [
        sys.executable,
        "-m",
        "mlxport.cli",
        "port",
        "--task",
        str(small_task("vector_add", tmp_path / "tasks")),
        "--backend",
        "sim",
        "--model",
        f"scripted:{script}",
        "--budget",
        "extra_seeds=0",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    db = out / "vector_add" / "checkpoints.sqlite"
    deadline = time.monotonic() + 120
    # prepare, then (reason, tools, assess) x 3: killed after the first candidate was evaluated
    while _checkpoints(db) < 12 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None and _checkpoints(db) >= 12, (
        "the run ended or stalled before it could be killed"
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "vector_add" / "run.json").exists(), (
        "the run finished before it could be killed"
    )
    session = json.loads((out / "vector_add" / "session.json").read_text())["session"]
    result = cli("port", "--resume", session, "--out", str(out), "--json", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    run = json.loads(result.stdout)
    assert (
        run["stop_reason"] == "finish"
        and run["result"]["verified"]
        and run["result"]["candidate_id"] == port.id
    )
    lines = [
        json.loads(x) for x in (out / "vector_add" / "transcript.jsonl").read_text().splitlines()
    ]
    calls = [c["id"] for x in lines if x["type"] == "ai" for c in (x["tool_calls"] or [])]
    # every scripted step ran exactly once across the kill
    assert len(calls) == len(set(calls)) == 6
    assert run["candidates"] == 2


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["missing.cu"], "no such file missing.cu"),
        (["NOT_CUDA"], "does not look like CUDA source"),
        (["BINARY"], "is not UTF-8 text"),
        (["--task", "vector_add", "--model", "bogus:model"], "unknown provider 'bogus'"),
        (
            ["--task", "vector_add", "--model", "anthropic:claude-sonnet-4-5"],
            "pip install 'mlxport[anthropic]'",
        ),
        (
            ["--task", "vector_add", "--model", "openai:gpt-4.1-mini"],
            "no API key for openai: set OPENAI_API_KEY",
        ),
        (["--task", "vector_add", "--budget", "iterations=-3"], "must be at least 1"),
        (["--task", "vector_add", "--budget", "speed=3"], "cannot read budget item 'speed=3'"),
        (["--task", "vector_add", "--out", "/proc/nope"], "cannot write to output folder"),
        (["--task", "vector_add", "--backend", "metal"], "the metal backend is not available here"),
        (["--resume", "no-such-session"], "no session 'no-such-session'"),
    ],
)
def test_bad_input_ends_in_one_sentence(tmp_path, cli, args, fragment):
    (tmp_path / "NOT_CUDA").write_text("def main():\n    print('hello')\n")
    (tmp_path / "BINARY").write_bytes(bytes(range(256)) * 4)
    env = {"OPENAI_API_KEY": "", "MLXPORT_TEST": "1"}
    out = [] if "--out" in args else ["--out", str(tmp_path / "out")]
    result = cli("port", *args, *out, cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("session.json"))  # refused before a session is saved


def test_resuming_a_session_that_died_before_its_first_checkpoint_says_so(tmp_path):
    """The eval runner restarts such a run from scratch: it needs this error, by type."""
    from mlxport.agent import sessions
    from mlxport.agent.port import NoCheckpoint

    task = load_task("vector_add")
    folder = tmp_path / task.name
    folder.mkdir()
    sessions.save(folder, "s1", task.folder, RunConfig(backend="sim"))
    with pytest.raises(NoCheckpoint, match="has no checkpoint"):
        run_port(task, RunConfig(backend="sim"), tmp_path, session="s1", resume=True)


def test_a_long_progress_line_ends_after_a_whole_sentence_and_says_it_was_cut():
    from mlxport.cli.options import clip

    text = "ESTIMATE, not a measurement. " + "This case moves 67.1 MB. " * 40
    cut = clip(text, 120)
    assert cut.endswith("MB. [...] (the whole of it: transcript.jsonl)") and len(cut) < 170
    assert clip("short.", 120) == "short."
    assert clip("word " * 60, 50).startswith("word word") and "[...]" in clip("word " * 60, 50)


LANE_ASM = r"""
__global__ void lane_ids(unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane;
    asm volatile("activemask.b32 %0;" : "=r"(lane));
    if (i < n) out[i] = lane;
}
void launch(unsigned* out, int n) { lane_ids<<<(n + 127) / 128, 128>>>(out, n); }
"""


def test_json_prints_one_record_when_the_golden_cannot_be_built(cli, tmp_path):
    cu = tmp_path / "lane_ids.cu"
    cu.write_text(LANE_ASM)
    r = cli("port", str(cu), "--case", "n=300", "--out", str(tmp_path / "out"), "--json")
    assert r.returncode == 2 and "inline PTX" in r.stderr, r.stderr[-2000:]
    record = json.loads(r.stdout)
    assert record["task"] == "lane_ids" and record["result"]["verified"] is False
    assert "inline PTX" in record["error"] and record["result"]["why_not"] == record["error"]
