"""Progress through the long stretches of a port: making a task from a .cu file says each case the
original runs at, the final verification says each case as it is checked and each stage as it
starts (streamed from inside the graph's finalize node), and the CLI's printer says what it still
waits on when nothing else is printed."""

from __future__ import annotations

import io
import shutil
import threading
import time
from pathlib import Path

from rich.console import Console

from mlxport.agent.models import ScriptedModel
from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig
from mlxport.cli.options import Progress
from mlxport.tasks import expert_ports, load_task
from mlxport.tasks.make import TaskRequest, from_cuda

EXAMPLES = Path(__file__).parent / "cuda_exec"
SUITE_TASK = load_task("vector_add")
PORT = expert_ports(SUITE_TASK)["msl"]


def test_making_a_task_says_each_case_the_original_runs_at():
    heard: list[str] = []
    from_cuda(
        TaskRequest(source=EXAMPLES / "causal_scale.cu", cases=[{"T": 48}]),
        heldout=1,
        on_progress=heard.append,
    )
    assert heard[0].startswith("running the original ") and heard[0].endswith(" at T=48")
    assert len(heard) == 2 and "a held-out case with" in heard[1]


def test_the_final_verification_streams_each_case_before_the_port_ends(tmp_path):
    folder = tmp_path / "vector_add"
    shutil.copytree(SUITE_TASK.folder, folder, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (folder / "task.toml").read_text()
    small = "[cases]\nvisible = [{ N = 256 }]\nheldout = [{ N = 7 }]\nbench = [{ N = 4096 }]\n"
    (folder / "task.toml").write_text(toml[: toml.index("[cases]")] + small)
    compile_args = PORT.model_dump(mode="json", exclude_defaults=True)
    compile_args.pop("language", None)
    turns = [
        {"name": "compile_kernel", "args": compile_args},
        {"name": "run_correctness", "args": {"candidate_id": PORT.id}},
        {"name": "finish", "args": {"summary": "done", "candidate_id": PORT.id}},
    ]
    events: list[tuple[str, dict]] = []
    run = run_port(
        load_task(folder),
        RunConfig(backend="sim", extra_seeds=0),
        tmp_path / "out",
        model=ScriptedModel(script=[{"tool_calls": [t]} for t in turns]),
        on_update=lambda node, data: events.append((node, data)),
    )
    assert run["result"]["verified"]
    said = [d["progress"] for n, d in events if n == "progress"]
    final_at = next(i for i, (n, d) in enumerate(events) if n == "finalize" and d.get("final"))
    assert all(n != "progress" for n, _ in events[final_at:])  # heard while it ran, not after
    assert (
        f"{PORT.id} N=256 float32: pass" in said and f"{PORT.id} held-out N=7 float16: pass" in said
    )
    assert any("at the timed size" in s for s in said)
    assert any("as kernel.py, called as a user calls it" in s for s in said)
    checked = report_cases(tmp_path / "out" / "vector_add" / "report.md")
    assert sum(": pass" in s for s in said) == checked  # a line for every case the report lists


def report_cases(report: Path) -> int:
    """The rows of report.md's correctness tables but the op's (checked later, by check_op)."""
    text = report.read_text()
    text = text[text.index("## Correctness") : text.index("### The op as shipped")]
    return sum(1 for line in text.splitlines() if line.startswith("| N="))


def test_the_printer_says_what_it_still_waits_on_when_nothing_is_printed():
    """The graph's listener and the steps of making a task share one printer and its heartbeat."""
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    with Progress(console, quiet=0.0, tick=0.01) as show:
        show.step("running the original at N=7")
        show("assess", {"stop_reason": "finish"})
        deadline = time.monotonic() + 30
        while "wait  the final verification: " not in out.getvalue():
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.01)
        show("progress", {"progress": "abc N=7 float32: pass"})
    lines = out.getvalue().splitlines()
    stop = lines.index("stop  finish")
    assert any(ln.startswith("wait  the final verification: ") for ln in lines[stop:])
    assert "check abc N=7 float32: pass" in lines and "task  running the original at N=7" in lines
    assert not any(t.name.startswith("Progress") for t in threading.enumerate() if t.is_alive())
