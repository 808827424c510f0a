"""Workers that run candidate code are confined: no secrets in their environment, a directory of
their own, no new processes, and never alive after mlxport is gone, however it ends (the
escape classes one by one: tests/test_sandbox.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlxport.backends import confine
from mlxport.backends.worker import Worker

ROOT = Path(__file__).resolve().parents[1]
LOCKED = "seccomp: allowlist" in "\n".join(confine.probe())


@pytest.fixture
def probe():
    worker = Worker("tests.workers.probe:handle", memory_bytes=0)
    yield worker
    worker.close()


def test_a_worker_sees_no_secrets_and_runs_in_a_directory_of_its_own(probe, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-workers")
    monkeypatch.setenv("MLXPORT_PROVIDER_TOKEN", "also-secret")
    monkeypatch.setenv(
        "MLXPORT_CACHE", os.environ.get("MLXPORT_CACHE", str(Path.home() / ".cache" / "mlxport"))
    )
    reply, _ = probe.call({"op": "env"})
    assert "OPENAI_API_KEY" not in reply["env"] and "MLXPORT_PROVIDER_TOKEN" not in reply["env"]
    assert "MLXPORT_CACHE" in reply["env"]
    home = Path(reply["cwd"])
    if confine.bwrap().path is not None:
        assert home == Path("/tmp")  # the sandbox's private /tmp, gone with it
    else:
        assert home.name.startswith("mlxport-worker-") and home != ROOT
        probe.close()
        assert not home.exists()


@pytest.mark.skipif(not LOCKED, reason="no seccomp filter on this platform (docs/security.md)")
def test_a_worker_cannot_start_a_process(probe, tmp_path):
    reply, _ = probe.call({"op": "fork"})
    assert "Operation not permitted" in reply.get("refused", ""), reply
    reply, _ = probe.call({"op": "system", "path": str(tmp_path / "pwned")})
    assert reply["status"] != 0 and not (tmp_path / "pwned").exists()


def _workers_of(pid: int) -> list[int]:
    """The worker processes descending from ``pid`` (through bwrap where it runs them)."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                commands[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def descends(p: int) -> bool:
        for _ in range(16):
            p = parents.get(p, 0)
            if p == pid:
                return True
            if p <= 1:
                return False
        return False

    return [p for p, cmd in commands.items() if b"mlxport.backends.worker" in cmd and descends(p)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find the worker")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_mlxport_check_during_an_endless_loop_leaves_no_process(tmp_path, sig):
    candidate = tmp_path / "spin.toml"
    candidate.write_text(
        (ROOT / "mlxport/evals/tasks/vector_add/ports/msl.toml")
        .read_text()
        .replace("out[i] = a[i] + b[i];", "while (a[0] == a[0]) { out[i] = a[i]; }")
    )
    check = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlxport.cli",
            "check",
            str(candidate),
            "--task",
            "vector_add",
            "--backend",
            "sim",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline, workers = time.monotonic() + 120, []
    while not workers and time.monotonic() < deadline and check.poll() is None:
        time.sleep(0.2)
        workers = _workers_of(check.pid)
    assert workers, "mlxport check started no worker"
    time.sleep(1.0)  # the kernel is spinning now
    check.send_signal(sig)
    check.wait(timeout=30)
    deadline = time.monotonic() + 5
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers), (
        f"workers {workers} outlived mlxport check ({sig.name})"
    )


@pytest.mark.hack("reading and writing files outside the worker (macOS)")
@pytest.mark.skipif(sys.platform != "darwin", reason="the Seatbelt profile is macOS's")
def test_a_worker_under_seatbelt_reads_and_writes_only_its_own(probe, tmp_path):
    if confine.seatbelt() is not None:
        pytest.skip(f"no Seatbelt profile here: {confine.seatbelt()}")
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret")
    reply, _ = probe.call({"op": "read", "path": str(secret)})
    assert "refused" in reply, reply
    reply, _ = probe.call({"op": "write", "path": str(tmp_path / "pwned")})
    assert "refused" in reply and not (tmp_path / "pwned").exists()
    reply, _ = probe.call({"op": "fork"})
    assert "refused" in reply, reply
