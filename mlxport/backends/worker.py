"""A persistent worker subprocess that runs untrusted kernel code one request at a time.

A kernel that segfaults, aborts, loops forever or eats memory takes down only its worker: the
caller gets a ``WorkerError`` with one clear sentence and the next request starts a fresh
worker. Used by the simulator, the CPU executor, the reference and the GPU backends (no
langgraph, no mlx here).

Protocol (pipes, one request in flight): an 8-byte length, a JSON header, then the raw bytes
of each array the header lists as ``{"dtype": numpy dtype name, "shape": [...]}``. Callers
pass bfloat16 data as uint16 bits and say so in their own header fields.

The child runs ``python -m mlxport.backends.worker <module:function> <memory bytes> <spec>`` in
the sandbox (mlxport.backends.confine: namespaces, a private directory, an allowlisted
environment) and confines itself further before its first request (Landlock, seccomp, limits:
the spec); the function takes ``(header: dict, arrays: list[np.ndarray])`` and returns the same
pair. Files a request needs (a compiled library) are sent in the request with the content hash
recorded when they were built, checked on both sides: the worker sees no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import math
import os
import re
import resource
import select
import shutil
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

from mlxport.backends import confine, processes
from mlxport.backends.confine import CPU_SECONDS, OUTPUT_BYTES, Limits, View, worker_env

DEFAULT_MEMORY = int(os.environ.get("MLXPORT_WORKER_MEMORY", str(16 << 30)))
_LEN = struct.Struct("<Q")
HEADER_BYTES = 64 << 20  # the most a reply's JSON header may take
TAIL_BYTES = 64 << 10  # of a worker's output, what is kept for its last words


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
    for dtype, shape in _array_specs(meta.pop("__arrays__", [])):
        count = int(np.prod(shape, dtype=np.int64))
        data = read(count * dtype.itemsize) if count else b""
        arrays.append(np.frombuffer(data, dtype=dtype, count=count).reshape(shape))
    return meta, arrays


class MalformedReply(ValueError):
    """A message that no honest peer sends: a kernel past the checks may write on the pipe."""


def _array_specs(specs: Any) -> list[tuple[np.dtype, tuple[int, ...]]]:
    """The (dtype, shape) of each array a message lists, each a plain number type or plain bytes
    (never an object, a string or a record) and a shape of a few non-negative ints that fits 64
    bits."""
    if not isinstance(specs, list):
        raise MalformedReply("its array list is not a list")
    out = []
    for spec in specs:
        name = spec.get("dtype") if isinstance(spec, dict) else None
        shape = spec.get("shape") if isinstance(spec, dict) else None
        try:
            dtype = np.dtype(name) if isinstance(name, str) and len(name) < 8 else None
        except TypeError:
            dtype = None
        # "V": plain bytes (a struct passed by value), never a record with fields
        if dtype is None or dtype.kind not in "biufcV" or dtype.fields or dtype.shape:
            raise MalformedReply(f"an array's dtype is {shown(repr(name)[:40])}, not a number type")
        if not isinstance(shape, list) or len(shape) > 32 or not all(_count(d) for d in shape):
            raise MalformedReply(f"an array's shape is {shown(repr(shape)[:60])}")
        if math.prod(shape) * dtype.itemsize >= 1 << 62:
            raise MalformedReply("an array is over 2^62 bytes")
        out.append((dtype, tuple(shape)))
    return out


def _count(d: Any) -> bool:
    return type(d) is int and 0 <= d < 1 << 62


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """A worker's text as it may reach the user: without control characters (a terminal's escape
    sequences, a carriage return overwriting a line)."""
    return _CONTROL.sub("", text)


def malformed(why: str) -> WorkerError:
    """The failure of a run whose worker replied what it could not have honestly."""
    return WorkerError("crash", f"the worker's reply is malformed: {why}")


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


def _reply_header(blob: bytes) -> dict[str, Any]:
    """A reply's JSON header: an object listing its arrays."""
    try:
        meta = json.loads(blob)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedReply("its header is not JSON") from None
    if not isinstance(meta, dict):
        raise MalformedReply("its header is not a JSON object")
    meta.setdefault("__arrays__", [])
    return meta


# ---------------------------------------------------------------- parent side


class _Output:
    """A worker's output (stderr, where a kernel's printf goes): drained by a thread, its last
    TAIL_BYTES kept; past ``cap`` bytes the worker is stopped (``stop``), so neither mlxport's
    memory nor the disk grows with what a kernel prints."""

    def __init__(self, fd: int, cap: int, stop):
        self.total = 0
        self.over = False
        self._tail = bytearray()
        self._fd, self._cap, self._stop = fd, cap, stop
        self._thread = threading.Thread(
            target=self._drain, name="mlxport-worker-output", daemon=True
        )
        self._thread.start()

    def _drain(self) -> None:
        try:
            while data := os.read(self._fd, 1 << 16):
                self.total += len(data)
                self._tail += data
                del self._tail[:-TAIL_BYTES]
                if self.total > self._cap and not self.over:
                    self.over = True
                    self._stop()
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def tail(self, wait: float = 0.0) -> str:
        self._thread.join(wait)
        lines = [ln for ln in self._tail.decode(errors="replace").splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[:600]


def _module_dirs(target: str) -> list[str]:
    """The folder of the handler's top-level package (or module), which the sandbox must see."""
    top = target.partition(":")[0].split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    return [str(Path(spec.origin).resolve())] if spec.origin else []


class Worker:
    """A restartable worker process running ``target`` (``"package.module:function"``) in the
    sandbox. ``reads``: folders it may read beyond the system, Python and mlxport (a task's);
    ``profile``: its seccomp profile, ``worker`` (an allowlist) or ``gpu`` (GPU drivers' calls are
    not enumerated: a denylist, and the GPU's device nodes), by default from the target."""

    def __init__(
        self,
        target: str,
        *,
        memory_bytes: int = DEFAULT_MEMORY,
        env: dict[str, str] | None = None,
        reads: tuple[str, ...] = (),
        profile: str | None = None,
        enclosed: bool | None = None,
    ):
        self.target = target
        self.memory_bytes = memory_bytes
        self.env = env
        self.reads: set[str] = {str(Path(r).resolve()) for r in reads}
        gpu = target.startswith(("mlxport.backends.gpu_worker", "mlxport.backends.confine:gpu"))
        self.profile = profile or ("gpu" if gpu else "worker")
        # in namespaces and Landlock: always, but a GPU worker only where the GPU runs in them
        self.enclosed = enclosed
        self.proc: subprocess.Popen[bytes] | None = None
        self._output: _Output | None = None
        self._home: str | None = None  # the worker's own temporary directory, outside bwrap
        self._bwrapped = False
        self._held: set[str] = set()  # content hashes of the files the running process holds
        self.restarts = 0
        self._lock = threading.Lock()  # the protocol allows one request in flight

    def _view(self) -> View:
        reads = [*self.reads, *_module_dirs(self.target)]
        devices: list[str] = []
        if self.profile == "gpu":
            more, devices = confine.gpu_view()
            reads += more
        return View(reads=reads, writes=[self._home] if self._home else [], devices=devices)

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        if self.proc is not None:
            self.restarts += 1
            self._reap()
        confine.harden_supervisor()
        enclosed = self.enclosed
        if enclosed is None:
            enclosed = self.profile != "gpu" or confine.gpu_sandbox() is None
        self._bwrapped = enclosed and confine.bwrap().path is not None
        # In bwrap the worker's directory is its private /tmp; elsewhere a folder of its own.
        self._home = None if self._bwrapped else tempfile.mkdtemp(prefix="mlxport-worker-")
        home = "/tmp" if self._bwrapped else self._home
        root = str(Path(__file__).resolve().parents[2])
        env = worker_env(self.env)
        paths = [root, *(str(Path(d).parent) for d in _module_dirs(self.target))]
        paths += env["PYTHONPATH"].split(os.pathsep) if env.get("PYTHONPATH") else []
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env.update(TMPDIR=home, HOME=home, PYTHONDONTWRITEBYTECODE="1")
        limits = Limits(memory=self.memory_bytes, cpu=CPU_SECONDS)
        argv = [
            sys.executable,
            "-m",
            "mlxport.backends.worker",
            self.target,
            str(self.memory_bytes),
        ]
        argv = confine.sandboxed(
            argv, self._view(), limits, self.profile, launcher=False, chdir=home, enclosed=enclosed
        )
        read_end, write_end = os.pipe()

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=write_end,
                env=env,
                cwd=self._home,
                start_new_session=True,
            )

        try:
            self.proc = processes.spawn(start)
        finally:
            os.close(write_end)
        proc = self.proc
        self._output = _Output(read_end, OUTPUT_BYTES, lambda: processes.kill_group(proc))
        self._held = set()
        return self.proc

    def call(
        self,
        header: dict[str, Any],
        arrays: list[np.ndarray] | None = None,
        *,
        timeout: float = 60.0,
        files: dict[str, tuple[str, Path]] | None = None,
        reads: tuple[str | Path, ...] = (),
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        """Send one request and wait for its reply; raise WorkerError on timeout or crash. Callers
        on several threads take turns. ``files``: header field -> (content hash, path): the file
        is read here, checked against the hash and sent (once per worker process); the handler
        finds the field set to the worker's own copy. ``reads``: folders the request needs to
        read (a worker that cannot yet is restarted seeing them too)."""
        with self._lock:
            wanted = {str(Path(r).resolve()) for r in reads} - self.reads
            if wanted:
                self.reads |= wanted
                self.kill()
            return self._call(header, arrays, timeout, files or {})

    def _call(
        self,
        header: dict[str, Any],
        arrays: list[np.ndarray] | None,
        timeout: float,
        files: dict[str, tuple[str, Path]],
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        proc = self._start()
        arrays = list(arrays or [])
        sent = []
        for sha, path in files.values():
            if sha not in self._held:
                arrays.append(np.frombuffer(_verified(path, sha), dtype=np.uint8))
                sent.append(sha)
        header = {
            **header,
            "__files__": {n: sha for n, (sha, _) in files.items()},
            "__sent__": sent,
        }
        budget = (1 << 30) + 4 * sum(a.nbytes for a in arrays)
        deadline = time.monotonic() + timeout
        try:
            _write_all(proc.stdin.fileno(), _encode(header, arrays))
            self._held.update(sent)
            fd = proc.stdout.fileno()
            (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
            if n > HEADER_BYTES:
                self.kill()
                raise WorkerError("crash", f"the worker replied with a {n}-byte header (garbage)")
            meta = _reply_header(_read_exact(fd, n, deadline))
            size = sum(
                math.prod(shape) * t.itemsize for t, shape in _array_specs(meta["__arrays__"])
            )
            if size > budget:
                self.kill()
                raise WorkerError("crash", f"the worker replied with {size} bytes, over {budget}")
            reply, out = _decode_arrays(meta, lambda k: _read_exact(fd, k, deadline))
        except MalformedReply as e:
            self.kill()
            raise malformed(str(e)) from None
        except TimeoutError:
            self.kill()
            raise WorkerError("timeout", f"timed out after {timeout:g} s (endless loop?)") from None
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise WorkerError(*self._crash_reason()) from None
        if "__error__" in reply:
            if reply.get("__kind__") == "FileError":
                self._held.difference_update(sent)
            kind = "memory" if reply.get("__kind__") == "MemoryError" else "error"
            raise WorkerError(kind, shown(str(reply["__error__"])))
        return reply, out

    def _crash_reason(self) -> tuple[str, str]:
        code = self.proc.wait(timeout=10) if self.proc else None
        over = self._output is not None and self._output.over
        tail = self._output.tail(wait=1.0) if self._output else ""
        name = None
        if code is not None:
            code, name = processes.exit_status(code, sandboxed=self._bwrapped)
        if over:
            msg = (
                f"the kernel printed over {OUTPUT_BYTES >> 20} MiB, the output limit "
                "(MLXPORT_OUTPUT_BYTES): the worker was stopped"
            )
        elif name is not None:
            why = {
                "SIGSEGV": "segmentation fault: a wild pointer or a stack overflow",
                "SIGBUS": "bus error: a misaligned or unmapped access",
                "SIGABRT": "abort",
                "SIGKILL": "killed, probably for using too much memory",
                "SIGFPE": "arithmetic exception (integer division by zero?)",
                "SIGXCPU": f"it used up the worker's {CPU_SECONDS} s of CPU time",
                "SIGXFSZ": "it wrote a file over the size limit",
                "SIGILL": "illegal instruction",
                "SIGSYS": "a system call the sandbox does not allow",
            }.get(name, name)
            msg = f"the kernel crashed the worker process ({name}, {why})"
        else:
            msg = f"the worker process exited unexpectedly (exit code {code})"
        self._reap()
        self.proc = None
        return "crash", msg + (f"; its last words: {tail}" if tail else "")

    def _reap(self) -> None:
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
        self._clean()

    def restart(self) -> None:
        """Stop the process between requests; the next call starts a fresh one."""
        with self._lock:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            processes.kill_group(self.proc)
            self.proc.wait()
        self._reap()
        self.proc = None

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
        self._reap()
        self.proc = None

    def __del__(self) -> None:
        try:  # noqa: SIM105 - at interpreter shutdown even contextlib may be gone
            self.kill()
        except Exception:
            pass


def _verified(path: Path, sha: str) -> bytes:
    """The file's bytes, if their SHA-256 is ``sha`` (recorded when it was built)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    except OSError as e:
        raise WorkerError("error", f"{Path(path).name} cannot be read: {e}") from None
    if hashlib.sha256(data).hexdigest() != sha:
        raise WorkerError(
            "error",
            f"{Path(path).name} changed since it was built (its content hash is not the one "
            "recorded then): it is not loaded",
        )
    return data


# ---------------------------------------------------------------- child side


class FileError(RuntimeError):
    """A file sent with a request could not be kept."""


def _limit_memory(nbytes: int) -> None:
    if nbytes > 0:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


def _keep_files(meta: dict[str, Any], arrays: list[np.ndarray]) -> None:
    """Write the files sent with a request into this worker's directory (each checked against its
    hash) and point the header's fields at them."""
    sent = meta.pop("__sent__", [])
    if sent:
        blobs, arrays[:] = arrays[-len(sent) :], arrays[: -len(sent)]
        for sha, blob in zip(sent, blobs, strict=True):
            data = blob.tobytes()
            if hashlib.sha256(data).hexdigest() != sha:
                raise FileError("a file sent to the worker does not match its hash")
            path = f"f-{sha}.so"
            if not os.path.exists(path):
                fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o500)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(path + ".tmp", path)
    for name, sha in meta.pop("__files__", {}).items():
        path = os.path.abspath(f"f-{sha}.so")
        if not os.path.exists(path):
            raise FileError(f"the worker does not hold the file for {name}")
        meta[name] = path


def serve(target: str, memory_bytes: int, spec: dict[str, Any]) -> None:
    """The worker loop: read a request, run the handler, write the reply, until stdin closes."""
    # Keep the protocol on a private descriptor; anything the kernel prints goes to stderr.
    proto_out = os.dup(1)
    os.dup2(2, 1)
    _limit_memory(memory_bytes)
    module, _, name = target.partition(":")
    handler = getattr(importlib.import_module(module), name)
    confine.lock_down(spec)  # after the imports, before any candidate code
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
            _keep_files(meta, arrays)
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
    serve(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))
