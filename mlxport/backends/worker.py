"""A persistent worker subprocess that runs untrusted kernel code one request at a time.

A kernel that segfaults, aborts, loops forever or eats memory takes down only its worker: the
caller gets a ``WorkerError`` with one clear sentence and the next request starts a fresh
worker. Used by the simulator and meant for the metal and cuda backends too (no langgraph,
no mlx here).

Protocol (pipes, one request in flight): an 8-byte length, a JSON header, then the raw bytes
of each array the header lists as ``{"dtype": numpy dtype name, "shape": [...]}``. Callers
pass bfloat16 data as uint16 bits and say so in their own header fields.

The child runs ``python -m mlxport.backends.worker <module:function> <memory bytes> <parent pid>``
in a fresh temporary directory with an allowlisted environment, and confines itself before its
first request (mlxport.backends.confine); the function takes ``(header: dict, arrays:
list[np.ndarray])`` and returns the same pair.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends.confine import CPU_SECONDS, lock_down, worker_env

DEFAULT_MEMORY = int(os.environ.get("MLXPORT_WORKER_MEMORY", str(16 << 30)))
_LEN = struct.Struct("<Q")


class WorkerError(RuntimeError):
    """The request failed in the worker: ``kind`` is timeout, crash, memory or error."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------- framing


def _encode(header: dict[str, Any], arrays: list[np.ndarray]) -> list[bytes | memoryview]:
    arrays = [np.ascontiguousarray(a) for a in arrays]
    meta = {
        **header,
        "__arrays__": [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays],
    }
    blob = json.dumps(meta).encode()
    return [_LEN.pack(len(blob)), blob, *(memoryview(a).cast("B") for a in arrays if a.nbytes)]


def _decode_arrays(meta: dict[str, Any], read) -> tuple[dict[str, Any], list[np.ndarray]]:
    arrays = []
    for spec in meta.pop("__arrays__", []):
        dtype = np.dtype(spec["dtype"])
        count = int(np.prod(spec["shape"], dtype=np.int64))
        data = read(count * dtype.itemsize) if count else b""
        arrays.append(np.frombuffer(data, dtype=dtype, count=count).reshape(spec["shape"]))
    return meta, arrays


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 24))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    for part in parts:
        view = memoryview(part)
        while view.nbytes:
            n = os.write(fd, view)
            view = view[n:]


# ---------------------------------------------------------------- parent side


class Worker:
    """A restartable worker process running ``target`` (``"package.module:function"``)."""

    def __init__(
        self, target: str, *, memory_bytes: int = DEFAULT_MEMORY, env: dict[str, str] | None = None
    ):
        self.target = target
        self.memory_bytes = memory_bytes
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._home: str | None = None  # the worker's own temporary directory
        self.restarts = 0
        self._lock = threading.Lock()  # the protocol allows one request in flight

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        if self.proc is not None:
            self.restarts += 1
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        self._home = tempfile.mkdtemp(prefix="mlxport-worker-")
        root = str(Path(__file__).resolve().parents[2])
        env = worker_env(self.env)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["TMPDIR"] = self._home
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlxport.backends.worker",
                self.target,
                str(self.memory_bytes),
                str(os.getpid()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=self._home,
            start_new_session=True,
        )
        return self.proc

    def call(
        self,
        header: dict[str, Any],
        arrays: list[np.ndarray] | None = None,
        *,
        timeout: float = 60.0,
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        """Send one request and wait for its reply; raise WorkerError on timeout or crash. Callers
        on several threads take turns."""
        with self._lock:
            return self._call(header, arrays, timeout)

    def _call(
        self, header: dict[str, Any], arrays: list[np.ndarray] | None, timeout: float
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        proc = self._start()
        deadline = time.monotonic() + timeout
        try:
            _write_all(proc.stdin.fileno(), _encode(header, arrays or []))
            fd = proc.stdout.fileno()
            (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
            meta = json.loads(_read_exact(fd, n, deadline))
            reply, out = _decode_arrays(meta, lambda k: _read_exact(fd, k, deadline))
        except TimeoutError:
            self.kill()
            raise WorkerError("timeout", f"timed out after {timeout:g} s (endless loop?)") from None
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise WorkerError(*self._crash_reason()) from None
        if "__error__" in reply:
            kind = "memory" if reply.get("__kind__") == "MemoryError" else "error"
            raise WorkerError(kind, reply["__error__"])
        return reply, out

    def _crash_reason(self) -> tuple[str, str]:
        code = self.proc.wait(timeout=10) if self.proc else None
        tail = self._stderr_tail()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            why = {
                "SIGSEGV": "segmentation fault: a wild pointer or a stack overflow",
                "SIGBUS": "bus error: a misaligned or unmapped access",
                "SIGABRT": "abort",
                "SIGKILL": "killed, probably for using too much memory",
                "SIGFPE": "arithmetic exception (integer division by zero?)",
                "SIGXCPU": f"it used up the worker's {CPU_SECONDS} s of CPU time",
                "SIGILL": "illegal instruction",
            }.get(name, name)
            msg = f"the kernel crashed the worker process ({name}, {why})"
        else:
            msg = f"the worker process exited unexpectedly (exit code {code})"
        self.proc = None
        return "crash", msg + (f"; its last words: {tail}" if tail else "")

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            lines = [
                ln for ln in self._stderr.read().decode(errors="replace").splitlines() if ln.strip()
            ]
        except OSError:
            return ""
        return " | ".join(lines[-3:])[:600]

    def restart(self) -> None:
        """Stop the process between requests; the next call starts a fresh one."""
        with self._lock:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        self.proc = None
        self._clean()

    def _clean(self) -> None:
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.proc = None
        self._clean()

    def __del__(self) -> None:
        try:  # noqa: SIM105 - at interpreter shutdown even contextlib may be gone
            self.kill()
        except Exception:
            pass


# ---------------------------------------------------------------- child side


def _limit_memory(nbytes: int) -> None:
    if nbytes > 0:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


def serve(target: str, memory_bytes: int, parent: int) -> None:
    """The worker loop: read a request, run the handler, write the reply, until stdin closes."""
    # Keep the protocol on a private descriptor; anything the kernel prints goes to stderr.
    proto_out = os.dup(1)
    os.dup2(2, 1)
    _limit_memory(memory_bytes)
    module, _, name = target.partition(":")
    handler = getattr(importlib.import_module(module), name)
    lock_down(parent)  # after the imports, before any candidate code
    fd_in = 0
    while True:
        try:
            (n,) = _LEN.unpack(_read_exact(fd_in, _LEN.size, None))
        except EOFError:
            return
        meta, arrays = _decode_arrays(
            json.loads(_read_exact(fd_in, n, None)), lambda k: _read_exact(fd_in, k, None)
        )
        try:
            reply, out = handler(meta, arrays)
        except Exception as e:  # the caller gets the reason; the worker lives on
            reply, out = (
                {
                    "__error__": f"{type(e).__name__}: {e}",
                    "__kind__": type(e).__name__,
                    "__traceback__": traceback.format_exc()[-2000:],
                },
                [],
            )
        _write_all(proto_out, _encode(reply, out))


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
