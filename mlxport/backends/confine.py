"""What a worker process running candidate code may do: the parent gives it an allowlisted
environment (no API keys or tokens) and a fresh temporary directory; the worker, before it reads a
request, locks itself down: no new processes and no exec (a seccomp filter through libseccomp on
Linux, with no_new_privs), no core dumps, bounded open files and CPU time, and a watchdog that
kills its process group as soon as its parent is gone. docs/security.md says what this prevents
per platform and what it does not. No mlx and no langgraph here.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import resource
import signal
import sys
import threading
import time

from mlxport.redaction import SECRET_NAME

# Names a worker needs (interpreter, libraries, locale, mlxport's own settings, GPU runtimes).
_NAMES = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONNOUSERSITE",
    "LD_LIBRARY_PATH",
    "VIRTUAL_ENV",
    "CXX",
    "SYSTEMROOT",
}
_PREFIXES = (
    "LC_",
    "MLXPORT_",
    "MLX_",
    "METAL_",
    "CUDA_",
    "NVIDIA_",
    "NCCL_",
    "OMP_",
    "OPENBLAS_",
    "MKL_",
    "ZIG_",
)
# per worker process, all requests
CPU_SECONDS = int(os.environ.get("MLXPORT_WORKER_CPU_SECONDS", "3600"))
OPEN_FILES = 256
WATCH_SECONDS = 0.25


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a worker starts with: the allowlisted names of ours, never a secret."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in _NAMES or k.startswith(_PREFIXES)) and not SECRET_NAME.search(k)
    }
    env.update(extra or {})
    return env


# ---------------------------------------------------------------- in the worker

_CLONE_THREAD = 0x00010000
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_MASKED_EQ = 7


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _libseccomp() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def _no_new_processes() -> str:
    """A seccomp filter: fork, vfork, exec and clone without CLONE_THREAD fail with EPERM (threads
    stay allowed); clone3 answers ENOSYS, so the C library falls back to clone for threads."""
    lib = _libseccomp()
    if lib is None:
        return (
            "seccomp: unavailable (libseccomp.so.2 not found)"
            if sys.platform.startswith("linux")
            else f"seccomp: unavailable on {sys.platform}"
        )
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        return "seccomp: unavailable (seccomp_init failed)"
    try:
        deny = _errno_action(errno.EPERM)
        for name in ("fork", "vfork", "execve", "execveat"):
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr >= 0 and lib.seccomp_rule_add_array(ctx, deny, nr, 0, None) != 0:
                return f"seccomp: unavailable (a rule for {name} was refused)"
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        process = _ArgCmp(0, _SCMP_CMP_MASKED_EQ, _CLONE_THREAD, 0)  # (flags & CLONE_THREAD) == 0
        if (
            clone >= 0
            and lib.seccomp_rule_add_array(ctx, deny, clone, 1, ctypes.byref(process)) != 0
        ):
            return "seccomp: unavailable (the clone rule was refused)"
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0:
            lib.seccomp_rule_add_array(ctx, _errno_action(errno.ENOSYS), clone3, 0, None)
        if lib.seccomp_load(ctx) != 0:  # sets no_new_privs first (libseccomp's default)
            return "seccomp: unavailable (the kernel refused the filter)"
    finally:
        lib.seccomp_release(ctx)
    return "seccomp: no fork, no exec (no_new_privs)"


def _limits() -> None:
    for limit, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, OPEN_FILES),
        (resource.RLIMIT_CPU, CPU_SECONDS),
    ):
        with contextlib.suppress(ValueError, OSError):
            soft, hard = resource.getrlimit(limit)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (cap, hard if limit != resource.RLIMIT_CPU else cap + 5))


def _watch_parent(parent: int) -> None:
    """Die with the parent: a thread (it runs while a kernel holds the CPU in C code) that kills
    this worker's process group once the parent is gone, however it went (SIGKILL included)."""

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                with contextlib.suppress(OSError):
                    os.killpg(0, signal.SIGKILL)
                os._exit(1)
            time.sleep(WATCH_SECONDS)

    threading.Thread(target=watch, name="mlxport-parent-watch", daemon=True).start()


def lock_down(parent: int) -> list[str]:
    """Confine this process (a worker); what is in force, as doctor reports it."""
    _watch_parent(parent)
    _limits()
    return [
        _no_new_processes(),
        f"limits: no core dumps, {OPEN_FILES} open files, {CPU_SECONDS} s of CPU",
        "dies with its parent (watchdog)",
    ]


def probe() -> list[str]:
    """What a worker here is confined by: run in a throwaway child, so this process stays as it
    is."""
    import subprocess

    code = (
        "import os, sys; from mlxport.backends import confine; "
        "print('\\n'.join(confine.lock_down(os.getppid())))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env=worker_env({"PYTHONPATH": os.pathsep.join(sys.path)}),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return [f"could not start a worker: {e}"]
    return (
        done.stdout.split("\n")[:-1]
        if done.returncode == 0
        else [f"a worker failed: {done.stderr[-300:]}"]
    )
