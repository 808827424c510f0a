"""Starting sandboxed processes and ending them: one long-lived thread starts every sandbox
(``spawn``), ``run`` takes a compiler's run to its end under the output and time limits, and
``kill_group`` and ``exit_status`` stop a sandbox and say how it ended."""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from mlxport.backends.confine import OUTPUT_BYTES, Limits, View, bwrap, harden_supervisor, sandboxed

# One long-lived thread starts every long-lived sandbox: bwrap's --die-with-parent is the
# kernel's parent-death signal, which follows the thread that started bwrap, so a sandbox started
# from a short-lived thread (a batch's, LangGraph's) would die with that thread.
_spawner: tuple[int, queue.SimpleQueue] | None = None
_spawn_lock = threading.Lock()


def _serve_spawns(q: queue.SimpleQueue) -> None:
    while True:
        fn, done = q.get()
        try:
            done.set_result(fn())
        except BaseException as e:  # handed to the caller
            done.set_exception(e)


def spawn(fn: Callable[[], Any]) -> Any:
    """``fn()`` (which starts a process) on mlxport's one spawning thread."""
    global _spawner
    with _spawn_lock:
        if _spawner is None or _spawner[0] != os.getpid():
            q: queue.SimpleQueue = queue.SimpleQueue()
            threading.Thread(
                target=_serve_spawns, args=(q,), name="mlxport-spawn", daemon=True
            ).start()
            _spawner = (os.getpid(), q)
        q = _spawner[1]
    done: Future = Future()
    q.put((fn, done))
    return done.result()


def _after_fork() -> None:
    global _spawner, _spawn_lock
    _spawner, _spawn_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str
    limit: str | None = None  # the limit that stopped it: "time", "output"; None otherwise
    signal: str | None = None  # the signal that ended it (SIGKILL, SIGXCPU, ...)


def run(
    argv: list[str],
    view: View,
    limits: Limits,
    *,
    env: dict[str, str],
    timeout: float,
    output_bytes: int = OUTPUT_BYTES,
    cwd: str | None = None,
    profile: str = "compiler",
) -> Finished:
    """Run ``argv`` to its end in the sandbox (a compiler and its passes): stdin is empty, its
    output is kept up to ``output_bytes`` (it is stopped beyond), and after ``timeout`` seconds
    it is stopped with everything it started."""
    harden_supervisor()
    full = sandboxed(argv, view, limits, profile, launcher=True, chdir=cwd)
    proc = subprocess.Popen(
        full,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    fd_out, fd_err = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {fd_out: [], fd_err: []}
    total, limit = 0, None
    deadline = time.monotonic() + timeout
    open_fds = set(chunks)
    try:
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                limit = "time"
                break
            ready, _, _ = select.select(list(open_fds), [], [], left)
            for fd in ready:
                data = os.read(fd, 1 << 16)
                if not data:
                    open_fds.discard(fd)
                    continue
                total += len(data)
                if total > output_bytes:
                    limit = "output"
                    break
                chunks[fd].append(data)
            if limit:
                break
    finally:
        if limit:
            kill_group(proc)
        code = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    out, err = b"".join(chunks[fd_out]), b"".join(chunks[fd_err])
    code, sig = exit_status(code, sandboxed=bwrap().path is not None)
    return Finished(
        code, out.decode(errors="replace"), err.decode(errors="replace"), limit=limit, signal=sig
    )


def kill_group(proc: subprocess.Popen) -> None:
    """Stop a sandbox and all it started: its process group (the sandbox's PID namespace goes
    with bwrap)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()


def exit_status(code: int, *, sandboxed: bool) -> tuple[int, str | None]:
    """(exit code, the signal name that ended it or None): bwrap reports a command killed by
    signal N as exit code 128 + N."""
    number = -code if code < 0 else code - 128 if sandboxed and 128 < code < 128 + 65 else 0
    if not number:
        return code, None
    try:
        return code, signal.Signals(number).name
    except ValueError:
        return code, f"signal {number}"
