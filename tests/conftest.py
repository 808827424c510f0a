import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Ports in tests leave the simulator's timed-size check out (the default budget is 120 s), and say
# so in their result; tests/test_adversarial.py checks the timed size with budgets of its own.
os.environ.setdefault("MLXPORT_TIMED_SIZE_SECONDS", "0")


def run_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 300,
    env: dict | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    """Run the real ``mlxport`` entry point in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "mlxport.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        input=input,
    )


@pytest.fixture
def cli():
    return run_cli


def run_written_tests(*args: str | Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` in a subprocess, for the test files a port writes (test_kernel.py).
    They need pytest alone, so the third-party plugins of this venv (langsmith's, hypothesis',
    anyio's) are not loaded: loading them, and assertion-rewriting their modules, takes seconds on
    every start."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


@pytest.fixture
def written_tests():
    return run_written_tests


# ---------------------------------------------------------------- kinds of hacks rejected


def pytest_runtest_setup(item):
    for mark in item.iter_markers("hack"):
        item.user_properties.append(("hack", mark.args[0]))


def pytest_terminal_summary(terminalreporter):
    """`pytest tests/test_adversarial.py` ends with how many kinds of hacks were rejected."""
    kinds: dict[str, bool] = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            for key, kind in getattr(report, "user_properties", ()):
                if key == "hack" and report.when in ("call", "setup"):
                    ok = outcome == "passed" and report.when == "call"
                    kinds[kind] = kinds.get(kind, True) and ok
    if kinds:
        rejected = sum(kinds.values())
        terminalreporter.write_line(
            f"adversarial: {rejected} of {len(kinds)} kinds of hacks rejected"
        )
        for kind, ok in sorted(kinds.items()):
            if not ok:
                terminalreporter.write_line(f"  not shown rejected: {kind}")


def ported_msl(tmp_path: Path, source: str, cases: list[dict]):
    """The rule-based MSL translation of the task made from the .cu ``source``, checked on the
    simulator at every case, held-out ones included."""
    import textwrap

    from mlxport.backends import get_backend
    from mlxport.tasks import load_task
    from mlxport.tasks.make import TaskRequest, from_cuda, write_task
    from mlxport.translate.translator import translate_task
    from mlxport.verify.correctness import run_correctness

    path = tmp_path / "kernel_src.cu"
    path.write_text(textwrap.dedent(source))
    built = from_cuda(TaskRequest(source=path, cases=cases), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    translation = translate_task(task, "msl")
    report = run_correctness(task, translation.candidate, get_backend("sim"), heldout=True)
    assert report.ok, report.summary()
    return translation
