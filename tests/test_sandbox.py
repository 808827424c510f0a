"""The sandbox holds when candidate code gets past the checks: one test per escape class, each
run by a kernel library built without mlxport's checks (tests/workers/hostile.cpp) inside the
simulator's real worker, with namespaces (bubblewrap) and without them (Landlock and seccomp
alone); then the compiler's limits, the output cap and the cache's hashes, and honest ports
passing all the while."""

import contextlib
import ctypes
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mlxport.backends import confine, jail
from mlxport.backends.worker import Worker

HERE = Path(__file__).resolve().parent
LINUX = sys.platform.startswith("linux")
MODES = [
    pytest.param(
        "namespaces",
        marks=pytest.mark.skipif(
            confine.bwrap().path is None, reason=f"no bubblewrap: {confine.bwrap().why}"
        ),
    ),
    pytest.param(
        "landlock+seccomp",
        marks=pytest.mark.skipif(jail.landlock_abi() < 6, reason="no Landlock ABI 6 here"),
    ),
]
pytestmark = pytest.mark.skipif(not LINUX, reason="the Linux sandbox (macOS: test_confinement.py)")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile") / "hostile.so"
    subprocess.run(
        ["c++", "-std=c++17", "-O1", "-fPIC", "-shared", str(HERE / "workers/hostile.cpp")]
        + ["-o", str(out)],
        check=True,
    )
    return out, hashlib.sha256(out.read_bytes()).hexdigest()


@contextlib.contextmanager
def mode(name: str):
    """Workers started inside start in this mode: with namespaces, or Landlock and seccomp only."""
    with pytest.MonkeyPatch.context() as mp:
        if name != "namespaces":
            mp.setenv("MLXPORT_BWRAP", "0")
        yield


@pytest.fixture(scope="module", params=MODES)
def kernel(request, library):
    """Run one hostile operation (``"read /etc/x"``) as a kernel in a sim worker; its outcome."""
    worker = Worker("mlxport.backends.sim.runner:handle")
    path, sha = library

    def attempt(op: str) -> str:
        slots = [{"role": "input", "name": op, "space": "device", "elem_size": 1}]
        header = {"op": "run", "slots": slots, "grid": [1, 1, 1], "threadgroup": [1, 1, 1]}
        header.update(fibers=0, threads=1)
        with mode(request.param):
            reply, _ = worker.call(
                header, [np.zeros(8, np.uint8)], timeout=30, files={"library": (sha, path)}
            )
        return reply["error"]

    attempt.worker = worker
    attempt.mode = request.param
    yield attempt
    worker.close()


@pytest.fixture
def sibling():
    """A process of the same user, not sandboxed: what a worker must not touch."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


REFUSED = ("Permission denied", "No such file", "Operation not permitted", "No such process")


@pytest.mark.hack("another process's /proc/PID/mem or environ")
def test_a_kernel_cannot_open_another_processs_memory_or_environment(kernel, sibling, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sandbox-test-not-a-key")
    for pid in (os.getpid(), sibling.pid):
        assert kernel(f"poke /proc/{pid}/mem").startswith(REFUSED)
        environ = kernel(f"read /proc/{pid}/environ")
        assert environ.startswith(REFUSED) and "sk-sandbox" not in environ
        assert kernel(f"ptrace {pid}").startswith(REFUSED)
        assert kernel(f"vmread {pid}").startswith(REFUSED)
    # mlxport itself is not dumpable: even a process of its user outside any sandbox cannot
    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE


@pytest.mark.hack("kill(2) of an unrelated process")
def test_a_kernel_cannot_kill_an_unrelated_process(kernel, sibling):
    assert kernel(f"kill {sibling.pid}").startswith(REFUSED)
    time.sleep(0.1)
    assert sibling.poll() is None


@pytest.mark.hack("writing the compile cache")
def test_a_kernel_cannot_write_the_cache(kernel):
    from mlxport.backends.sim.cache import cache_dir

    target = cache_dir() / "k-000000000000000000000000.so"
    assert kernel(f"write {target}").startswith((*REFUSED, "Read-only"))
    assert not target.exists()


@pytest.mark.hack("writing outside its own folder")
def test_a_kernel_cannot_write_outside_its_folder(kernel, tmp_path):
    for target in (tmp_path / "pwned", Path.home() / "mlxport-pwned", HERE / "pwned"):
        assert kernel(f"write {target}").startswith((*REFUSED, "Read-only")), target
        assert not target.exists()
    assert kernel("write pwned") == "written"  # its own folder, gone with the worker


@pytest.mark.hack("reading files outside what it needs")
def test_a_kernel_cannot_read_a_file_outside_its_view(kernel, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret")
    for path in (secret, Path.home() / ".bashrc", "/etc/shadow"):
        got = kernel(f"read {path}")
        assert got.startswith(REFUSED) and "the-secret" not in got, (path, got)


@pytest.mark.hack("network connections")
def test_a_kernel_cannot_connect_to_a_local_port(kernel):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        assert kernel(f"connect {server.getsockname()[1]}").startswith(REFUSED)
        with pytest.raises(TimeoutError):
            server.accept()


@pytest.mark.hack("fork or exec")
def test_a_kernel_cannot_start_a_process(kernel, tmp_path):
    assert kernel("linger 300").startswith(REFUSED)
    # exec replaces nothing: the worker answers
    assert kernel(f"exec touch {tmp_path / 'pwned'}").startswith(REFUSED)
    assert not (tmp_path / "pwned").exists()


def _sleepers(seconds: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == (
                b"sleep\0" + seconds.encode() + b"\0"
            ):
                found.append(int(entry.name))
    return found


@pytest.mark.hack("a process outliving the run")
@pytest.mark.skipif(confine.bwrap().path is None, reason="needs PID namespaces (bubblewrap)")
def test_nothing_a_compiler_starts_outlives_it(tmp_path):
    """The compiler may start processes (its passes): whatever it leaves ends with it, since it is
    PID 1 of its namespace. A compiler that detaches `sleep 313` into its own session:"""
    from mlxport.backends.sim import compiler

    done = compiler.run(["/bin/sh", "-c", "setsid sleep 313 & echo started"], "a detacher")
    assert done.stdout.strip() == "started"
    time.sleep(0.3)
    assert not _sleepers("313")


@pytest.mark.hack("output flood (huge printf)")
def test_printing_past_the_output_cap_stops_the_worker(kernel):
    from mlxport.backends.worker import WorkerError

    with pytest.raises(WorkerError, match=r"printed over \d+ MiB, the output limit"):
        kernel("print 64")
    assert kernel("write fine") == "written"  # a fresh worker serves the next request


@pytest.mark.hack("compiler resource exhaustion (template bomb)")
def test_a_template_bomb_ends_at_the_compilers_memory_limit(tmp_path):
    """2^24 instantiations would take the compiler many GiB and minutes; in its sandbox it stops
    at its memory limit (set low here) within seconds, and mlxport's own memory never grows."""
    header = (
        "template <int N, int K> constexpr int bomb() {\n"
        "  if constexpr (N == 0) return 1;\n"
        "  else return bomb<N - 1, 2 * K>() + bomb<N - 1, 2 * K + 1>();\n}\n"
    )
    code = f"""
import resource, sys, time
from mlxport.backends import get_backend
from tests.test_adversarial import gelu, gelu_inputs
candidate = gelu("out[i] = y + 0.0f * bomb<24, 0>();").model_copy(update={{"header": {header!r}}})
t0 = time.perf_counter()
result = get_backend("sim").compile(candidate, gelu_inputs())
print(result.ok, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(result.diagnostics[0].message if result.diagnostics else "")
"""
    env = {**os.environ, "MLXPORT_COMPILER_MEMORY": str(384 << 20)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=HERE.parent,
    )
    first, message = done.stdout.strip().splitlines()[-2:]
    ok, seconds, peak_kib = first.split()
    assert ok == "False" and "needed over 384 MiB of memory" in message, done.stdout + done.stderr
    assert float(seconds) < 60 and int(peak_kib) < 400 << 10


@pytest.mark.hack("compiler reads secrets or hangs on /dev/stdin")
def test_the_compiler_sees_no_secret_and_no_stdin(tmp_path, monkeypatch):
    from mlxport.backends.sim import compiler

    monkeypatch.setenv("OPENAI_API_KEY", "sk-compiler-test-not-a-key")
    cpp = tmp_path / "peek.cpp"
    cpp.write_text(
        '#include "/dev/stdin"\n'
        f'#include "/proc/{os.getpid()}/environ"\n'
        '#include "/proc/self/environ"\n'
        f'#include "{Path.home() / ".bashrc"}"\n'
    )
    cc = compiler.find_compiler()
    t0 = time.perf_counter()
    done = compiler.run([*cc.command, "-fsyntax-only", str(cpp)], "a peek", timeout=60)
    assert time.perf_counter() - t0 < 30
    assert done.returncode != 0 and "sk-compiler" not in done.stdout + done.stderr


@pytest.mark.hack("cache poisoning (a cached library replaced)")
def test_a_replaced_cached_library_is_never_loaded(tmp_path, monkeypatch, library):
    """Whatever replaced a cached library (a process outside the sandbox: workers cannot), its
    content no longer matches the hash recorded when it was built: a backend that built it
    refuses to send it to a worker, a fresh one builds it again, and the honest port passes."""
    from mlxport.backends.sim import SimBackend
    from mlxport.tasks import expert_ports, load_task
    from mlxport.verify.correctness import run_correctness

    monkeypatch.setenv("MLXPORT_CACHE", str(tmp_path / "cache"))
    task = load_task("vector_add")
    port = expert_ports(task)["msl"]
    sim = SimBackend()
    try:
        assert run_correctness(task, port, sim, seed=5).ok
        libs = sorted((tmp_path / "cache" / "sim").glob("k-*.so"))
        assert libs
        evil = library[0].read_bytes()
        for lib in libs:
            lib.write_bytes(evil)
        # the worker holds its own checked copies; a fresh worker is sent the library again
        sim._worker.restart()
        report = run_correctness(task, port, sim, seed=5)
        assert not report.ok and "changed since it was built" in report.summary()
    finally:
        sim.close()
    fresh = SimBackend()
    try:
        assert run_correctness(task, port, fresh, seed=5).ok
        assert all(lib.read_bytes() != evil for lib in libs)  # built again
    finally:
        fresh.close()


def test_a_worker_under_the_sandbox_reports_every_layer():
    layers = confine.probe()
    text = "\n".join(layers)
    if confine.bwrap().path is not None:
        assert "namespaces (bubblewrap" in text
    if jail.landlock_abi():
        assert "landlock ABI" in text
    assert "seccomp: allowlist" in text and "limits:" in text and "cache:" in text


def test_honest_ports_pass_in_both_modes(kernel):
    """The worker that ran the attacks above, in the same mode, runs honest ports: a kernel with
    barriers, and the CPU executor's original CUDA as the golden."""
    from mlxport.backends.sim import SimBackend
    from mlxport.tasks import expert_ports, load_task
    from mlxport.verify.correctness import run_correctness

    sim = SimBackend()
    sim._worker.close()
    sim._worker = kernel.worker
    with mode(kernel.mode):
        for name in ("softmax_rows", "layernorm"):
            task = load_task(name)
            assert run_correctness(task, expert_ports(task)["msl"], sim, seed=2).ok, name
