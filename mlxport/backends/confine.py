"""The sandbox around every process that compiles or runs candidate or user code: simulator and
CPU-executor workers, the reference worker, GPU workers and the C++ compiler.

Layers, each applied where this machine has it (``layers()`` says which, as ``mlxport doctor``
prints them; docs/security.md says what is left without each):

- **Namespaces** (bubblewrap, ``bwrap``): user, PID, mount, network, IPC, UTS and cgroup
  namespaces; a read-only view of only the system (/usr, /lib*), the Python install and venv,
  the mlxport package and what the call names; a private /tmp; a fresh /proc showing only the
  sandbox; no network; uid 65534 with no capabilities; the sandboxed process is PID 1 of its
  namespace, so when it ends everything it started ends; it dies with mlxport
  (``--die-with-parent``) and has its own session (no terminal to inject into).
- **Landlock** (jail.py): the same paths again, enforced by the kernel inside the sandbox or
  without it, no TCP, no signals or ptrace (so no /proc/PID/mem or environ) outside its domain.
- **seccomp** (jail.py): an allowlist of the system calls a worker needs; the compiler's adds
  starting its own passes.
- **Limits**: memory, CPU time, file size, open files, output bytes, no core dumps.
- **An allowlisted environment** (``worker_env``): no API key or token reaches a sandbox.

The supervising mlxport process makes itself undumpable (``harden_supervisor``), so a process of
the same user cannot read its memory or environment through /proc either.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import resource
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlxport.backends import jail
from mlxport.redaction import SECRET_NAME

LINUX = sys.platform.startswith("linux")
MACOS = sys.platform == "darwin"
PACKAGE = Path(__file__).resolve().parents[1]  # .../mlxport
JAIL = Path(jail.__file__).resolve()

# Names a sandboxed process needs (interpreter, libraries, locale, mlxport's own settings, GPU
# runtimes).
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
# mlxport's settings that a sandboxed process reads (the compiler's, the workers', the
# simulator's), and the GPU runtimes' and math libraries' own: exact names, so that a variable of
# any other name (MLXPORT_OPENAI_PASS, a provider's key under a name no pattern knows) stays out.
_NAMES |= {
    "MLXPORT_BWRAP",
    "MLXPORT_CACHE",
    "MLXPORT_COMPILER_CPU_SECONDS",
    "MLXPORT_COMPILER_MEMORY",
    "MLXPORT_GPU_SANDBOX",
    "MLXPORT_KERNEL_BACKEND",
    "MLXPORT_OUTPUT_BYTES",
    "MLXPORT_REFERENCE_SECONDS",
    "MLXPORT_SEATBELT",
    "MLXPORT_SIM_OPT",
    "MLXPORT_SIM_STACK",
    "MLXPORT_SIM_THREADS",
    "MLXPORT_TIMED_SIZE_SECONDS",
    "MLXPORT_WORKER_CPU_SECONDS",
    "MLXPORT_WORKER_MEMORY",
    "LC_ALL",
    "LC_CTYPE",
    "LC_NUMERIC",
    "LC_MESSAGES",
    "ZIG_GLOBAL_CACHE_DIR",
    "ZIG_LOCAL_CACHE_DIR",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
}
# What a GPU worker (backends/gpu_worker.py) reads through MLX and the GPU runtime beneath it: which
# device it sees, where the CUDA toolkit is (NVRTC compiles cuda_kernel sources against its
# headers; libcuda is found through LD_LIBRARY_PATH), the driver's JIT cache and MPS daemon, MLX's
# settings that change what runs (graphs, TF32, buffers), and Metal's validation and capture.
GPU_RUNTIME_NAMES = {
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_DISABLE",
    "CUDA_CACHE_PATH",
    "CUDA_CACHE_MAXSIZE",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_FORCE_PTX_JIT",
    "CUDA_DISABLE_PTX_JIT",
    "CUDA_MPS_PIPE_DIRECTORY",
    "CUDA_MPS_LOG_DIRECTORY",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_TF32_OVERRIDE",
    "MLX_USE_CUDA_GRAPHS",
    "MLX_CUDA_GRAPH_CACHE_SIZE",
    "MLX_CUDA_USE_CUDNN_SPDA",
    "MLX_ENABLE_TF32",
    "MLX_MAX_OPS_PER_BUFFER",
    "MLX_MAX_MB_PER_BUFFER",
    "MLX_DISABLE_COMPILE",
    "MLX_METAL_DEBUG",
    "METAL_DEVICE_WRAPPER_TYPE",
    "METAL_DEBUG_ERROR_MODE",
    "MTL_DEBUG_LAYER",
    "MTL_SHADER_VALIDATION",
    "MTL_CAPTURE_ENABLED",
}
_NAMES |= GPU_RUNTIME_NAMES


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else default


# per worker process, all requests
CPU_SECONDS = _env_int("MLXPORT_WORKER_CPU_SECONDS", 3600)
OPEN_FILES = 256
FILE_BYTES = 1 << 30  # the largest file a sandboxed process may write
OUTPUT_BYTES = _env_int("MLXPORT_OUTPUT_BYTES", 16 << 20)  # what a process may print
TMP_BYTES = 1 << 30  # a sandbox's private /tmp (memory)
WATCH_SECONDS = 0.25


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a sandboxed process starts with: the allowlisted names of ours, never a
    secret."""
    env = {k: v for k, v in os.environ.items() if k in _NAMES and not SECRET_NAME.search(k)}
    env.update(extra or {})
    return env


# ---------------------------------------------------------------- the supervising process

_hardened = False


def harden_supervisor() -> str:
    """This (mlxport's) process: not dumpable, so no process of the same user reads its memory or
    environment through /proc (nor ptraces it); no core dumps (they would hold its API keys)."""
    global _hardened
    if not _hardened:
        with contextlib.suppress(ValueError, OSError):
            _, hard = resource.getrlimit(resource.RLIMIT_CORE)
            resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
        if LINUX:
            import ctypes

            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        _hardened = True
    if LINUX:
        return "mlxport itself: not dumpable (its memory and environment unreadable), no cores"
    return "mlxport itself: no core dumps"


# ---------------------------------------------------------------- bubblewrap


@dataclass(frozen=True)
class Bwrap:
    path: str | None
    why: str  # its version, or why there is none
    features: frozenset[str] = frozenset()


@functools.cache
def _bwrap(setting: str) -> Bwrap:
    if setting == "0":
        return Bwrap(None, "turned off (MLXPORT_BWRAP=0)")
    if not LINUX:
        return Bwrap(None, f"not on {sys.platform}")
    path = shutil.which("bwrap")
    if not path:
        return Bwrap(None, "bwrap not found (apt-get install bubblewrap)")
    try:
        helped = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Bwrap(None, f"bwrap does not run: {e}")
    features = frozenset(re.findall(r"--[a-z0-9-]+", helped.stdout + helped.stderr))
    if "--as-pid-1" not in features or "--die-with-parent" not in features:
        return Bwrap(None, f"{version.stdout.strip()} is too old (no --as-pid-1)")
    found = Bwrap(path, version.stdout.strip() or "bwrap", features)
    try:
        trial = subprocess.run(
            [*_bwrap_args(found, View(), tmp=True), "--", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return Bwrap(None, f"bwrap does not run: {e}")
    if trial.returncode != 0:
        last = (trial.stderr.strip().splitlines() or ["no reason given"])[-1]
        return Bwrap(None, f"bwrap cannot make namespaces here ({last[:200]})")
    return found


def bwrap() -> Bwrap:
    """bubblewrap, where it runs and makes namespaces here (``MLXPORT_BWRAP=0`` turns it off)."""
    return _bwrap(os.environ.get("MLXPORT_BWRAP", "").strip())


@dataclass
class View:
    """What a sandboxed process sees: ``reads`` read-only, ``writes`` writable (host folders of
    its own), ``devices`` (a GPU's nodes); everything else is absent."""

    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)

    def landlock(self) -> dict[str, list[str]]:
        reads = [*system_reads(), *_proc_reads(), *self.reads]
        return {"reads": reads, "writes": list(self.writes), "devices": list(self.devices)}


_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
# What programs read of /etc: the loader's cache, the time zone, Debian's compiler links.
_ETC = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives")
_MACOS = ("/System", "/usr", "/bin", "/Library/Developer", "/Applications/Xcode.app", "/opt")


def _proc_reads() -> list[str]:
    if not LINUX:
        return []
    return ["/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/sys/devices/system/cpu"]


@functools.cache
def python_reads() -> tuple[str, ...]:
    """The Python install and its environment: the prefixes, site-packages, the interpreter."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(str(Path(sys.executable).resolve().parent.parent))
    with contextlib.suppress(AttributeError):
        paths.update(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        paths.add(site.getusersitepackages())
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages", ".zip")):
            paths.add(entry)
    return tuple(sorted(p for p in paths if p and os.path.exists(p)))


def gpu_view() -> tuple[list[str], list[str]]:
    """What a GPU worker needs beyond a CPU one: (reads, devices): the driver's /sys and /proc
    entries, its device nodes (never the disks)."""
    import glob

    devices = sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri"))
    return ["/sys", "/proc/driver"], devices


def system_reads() -> list[str]:
    base = _MACOS if MACOS else _SYSTEM + _ETC
    return [p for p in base if os.path.exists(p)] + list(python_reads()) + [str(PACKAGE)]


def _covered(path: str, by: list[str]) -> bool:
    return any(path == b or path.startswith(b.rstrip("/") + "/") for b in by)


def _bwrap_args(found: Bwrap, view: View, *, tmp: bool) -> list[str]:
    """bwrap's command line for ``view``: fresh namespaces, the system read-only, a private /tmp
    (``tmp``), the view's paths."""
    args = [
        found.path or "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--hostname",
        "mlxport-sandbox",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
    ]
    if "--disable-userns" in found.features:
        args.append("--disable-userns")
    args += ["--proc", "/proc", "--dev", "/dev"]
    bound: list[str] = []
    for top in _SYSTEM:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
            bound.append(top)
    if tmp:
        if "--size" in found.features:
            args += ["--size", str(TMP_BYTES)]
        args += ["--tmpfs", "/tmp"]
    mounts = [(p, "ro") for p in [*_ETC, *python_reads(), str(PACKAGE), *view.reads]]
    mounts += [(p, "rw") for p in view.writes] + [(p, "dev") for p in view.devices]
    for path, mode in sorted(
        {(os.path.abspath(p), m) for p, m in mounts}, key=lambda pm: (pm[0], pm[1])
    ):
        if (mode == "ro" and _covered(path, bound)) or _covered(path, ["/proc"]):
            continue  # bound already, or in the sandbox's own /proc
        flag = {"ro": "--ro-bind-try", "rw": "--bind", "dev": "--dev-bind-try"}[mode]
        args += [flag, path, path]
        if mode == "ro":
            bound.append(path)
    return args


# ---------------------------------------------------------------- starting sandboxed processes


@dataclass(frozen=True)
class Limits:
    memory: int = 0  # bytes of address space (0: none)
    cpu: int = 0  # seconds of CPU time per process
    fsize: int = FILE_BYTES
    nofile: int = 0


def _spec(view: View, limits: Limits, profile: str, namespaces: str) -> dict[str, Any]:
    return {
        **view.landlock(),
        "memory": limits.memory,
        "cpu": limits.cpu,
        "fsize": limits.fsize,
        "nofile": limits.nofile,
        "seccomp": profile,
        "namespaces": namespaces,
    }


def sandboxed(
    argv: list[str],
    view: View,
    limits: Limits,
    profile: str,
    *,
    launcher: bool,
    chdir: str | None = None,
    enclosed: bool = True,
) -> list[str]:
    """``argv`` wrapped in the sandbox: inside bwrap where it runs (Seatbelt on macOS). With
    ``launcher``, argv runs through jail.py, which applies the limits, Landlock and the seccomp
    ``profile`` and then execs it (processes that are not ours: the compiler); without, the spec
    is appended to argv (a worker, which applies it itself after its imports). In bwrap the
    process has a private /tmp; ``chdir``: where it starts. Not ``enclosed``: no namespaces and
    no Landlock (a GPU worker where its driver does not run in them), the rest as ever."""
    found = bwrap() if enclosed else Bwrap(None, "")
    spec = _spec(view, limits, profile, namespaces_line(found) if enclosed else "")
    if not enclosed:
        spec["landlock"] = False
        spec["namespaces"] = f"namespaces: missing for GPU workers: {gpu_sandbox()}"
    if found.path is not None:
        spec["writes"].append("/tmp")  # the sandbox's own
    if launcher:
        python = str(Path(sys.executable).resolve())
        argv = [python, "-I", "-S", str(JAIL), json.dumps(spec), "--", *argv]
    else:
        argv = [*argv, json.dumps(spec)]
    if MACOS and enclosed and profile != "gpu" and seatbelt() is None:
        processes = profile == "compiler"
        return ["sandbox-exec", "-p", seatbelt_profile(view, processes=processes), *argv]
    if found.path is None:
        return argv
    return [
        *_bwrap_args(found, view, tmp=True),
        *(["--chdir", chdir] if chdir else []),
        "--",
        *argv,
    ]


def namespaces_line(found: Bwrap | None = None) -> str:
    found = found or bwrap()
    if found.path is None:
        if MACOS:
            why = seatbelt()
            return (
                "namespaces: none on macOS; a Seatbelt profile (sandbox-exec): reads only the "
                "system, Python and mlxport, writes only its own folder, no network"
                if why is None
                else f"namespaces: none on macOS; Seatbelt missing: {why}"
            )
        return f"namespaces: missing: {found.why}; Landlock and seccomp below still apply"
    return (
        f"namespaces ({found.why}): user, pid, mount, net, ipc, uts, cgroup; sees only the "
        "system, Python and mlxport, read-only"
    )


def seatbelt_profile(view: View, *, processes: bool) -> str:
    """A macOS Seatbelt profile (sandbox-exec) to its documented rules: deny by default; read the
    system, Python and mlxport (and the view's reads); write only the view's own folders; no
    network; start processes only with ``processes`` (a compiler's passes)."""

    def subpaths(paths: list[str]) -> str:
        real = {os.path.realpath(p) for p in paths if os.path.exists(p)}
        return " ".join(f'(subpath "{p}")' for p in sorted(real))

    reads = [*system_reads(), *view.reads, "/private/etc", "/private/var/db/dyld", "/dev"]
    return "\n".join(
        [
            "(version 1)",
            "(deny default)",
            "(allow process-exec process-fork)"
            if processes
            else f"(allow process-exec {subpaths(list(python_reads()))})",
            "(allow signal (target self))",
            "(allow sysctl-read)",
            '(allow file-read-metadata (subpath "/"))',
            "(allow process-info* (target self))",
            f"(allow file-read* file-map-executable {subpaths(reads)})",
            f"(allow file-read* file-write* file-map-executable {subpaths(view.writes)})"
            if view.writes
            else "",
            '(allow file-write-data (literal "/dev/null"))',
        ]
    )


@functools.cache
def _seatbelt(setting: str) -> str | None:
    if setting == "0":
        return "turned off (MLXPORT_SEATBELT=0)"
    if not shutil.which("sandbox-exec"):
        return "sandbox-exec not found"
    with contextlib.suppress(OSError):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="mlxport-seatbelt-") as home:
            view = View(writes=[home])
            code = "import numpy, ctypes, tempfile; tempfile.TemporaryFile().write(b'1')"
            done = subprocess.run(
                ["sandbox-exec", "-p", seatbelt_profile(view, processes=False)]
                + [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=120,
                env=worker_env({"TMPDIR": home, "HOME": home}),
                cwd=home,
            )
        if done.returncode == 0:
            return None
        return f"the profile does not run Python here: {done.stderr.strip()[-200:]}"
    return "sandbox-exec does not run"


def seatbelt() -> str | None:
    """None where the Seatbelt profile runs a worker here (macOS), else why not."""
    if not MACOS:
        return f"not on {sys.platform}"
    return _seatbelt(os.environ.get("MLXPORT_SEATBELT", "").strip())


# ---------------------------------------------------------------- in the worker


def _watch_parent() -> None:
    """Die with the parent: a thread (it runs while a kernel holds the CPU in C code) that kills
    this worker's process group once its parent is gone, however it went (SIGKILL included). In a
    PID namespace the parent is outside it (getppid() is 0) and bwrap's --die-with-parent does
    this instead."""
    first = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != first:
                with contextlib.suppress(OSError):
                    os.killpg(0, signal.SIGKILL)
                os._exit(1)
            time.sleep(WATCH_SECONDS)

    threading.Thread(target=watch, name="mlxport-parent-watch", daemon=True).start()


_LAYERS: list[str] = []


def lock_down(spec: dict[str, Any]) -> list[str]:
    """Confine this process (a worker) as its spec says; what is in force, as doctor reports it."""
    _watch_parent()
    jail.set_limits(cpu=spec.get("cpu", CPU_SECONDS), fsize=spec.get("fsize", 0), nofile=OPEN_FILES)
    layers = [spec.get("namespaces", namespaces_line())]
    if spec.get("landlock", True):
        reads, writes = spec.get("reads", []), spec.get("writes", [])
        layers.append(jail.landlock(reads, writes, spec.get("devices")))
    else:
        layers.append("landlock: missing (off with the namespaces, as above)")
    layers.append(jail.seccomp(spec.get("seccomp", "worker")))
    memory = resource.getrlimit(resource.RLIMIT_AS)[0]
    layers.append(
        "limits: "
        + (f"{memory >> 20} MiB of memory, " if memory != resource.RLIM_INFINITY else "")
        + f"{spec.get('cpu', CPU_SECONDS)} s of CPU, files up to {spec.get('fsize', 0) >> 20} "
        f"MiB, {OPEN_FILES} open files, {OUTPUT_BYTES >> 20} MiB of output, no core dumps"
    )
    layers.append("lifetime: dies with mlxport, and what it started with it")
    _LAYERS[:] = layers
    return layers


def gpu_check(header: dict, arrays: list) -> tuple[dict, list]:
    """A worker target: one small computation on the GPU, under the GPU workers' sandbox."""
    import mlx.core as mx

    x = mx.arange(16, dtype=mx.float32, stream=mx.gpu)
    return {"sum": float(mx.sum(x * 2, stream=mx.gpu).item())}, []


@functools.cache
def _gpu_sandbox(setting: str) -> str | None:
    if setting == "0":
        return "turned off (MLXPORT_GPU_SANDBOX=0)"
    if MACOS:
        return "Metal needs services the Seatbelt profile does not allow"
    if bwrap().path is None and not jail.landlock_abi():
        return None  # nothing to check: the seccomp denylist and limits apply as they are
    from mlxport.backends.worker import Worker, WorkerError

    worker = Worker("mlxport.backends.confine:gpu_check", memory_bytes=0, enclosed=True)
    try:
        reply, _ = worker.call({"op": "check"}, timeout=300)
    except WorkerError as e:
        return f"the GPU does not run in them here ({str(e)[:200]})"
    finally:
        worker.close()
    return None if reply.get("sum") == 240.0 else f"the GPU computed {reply.get('sum')} in them"


def gpu_sandbox() -> str | None:
    """None where a GPU worker runs the GPU inside namespaces and Landlock (checked once, on the
    first GPU worker), else why not: then GPU workers run with seccomp and limits only."""
    return _gpu_sandbox(os.environ.get("MLXPORT_GPU_SANDBOX", "").strip())


def report(header: dict, arrays: list) -> tuple[dict, list]:
    """A worker target (``mlxport.backends.confine:report``): the layers this worker is under."""
    return {"layers": list(_LAYERS), "pid": os.getpid()}, []


def probe(gpu: bool = False) -> list[str]:
    """What confines a worker and the compiler here, layer by layer, read off a real worker;
    ``gpu``: whether a GPU runs inside the sandbox here too (a GPU backend is available)."""
    from mlxport.backends.worker import Worker, WorkerError

    worker = Worker("mlxport.backends.confine:report", memory_bytes=16 << 30)
    try:
        reply, _ = worker.call({"op": "layers"}, timeout=60)
        layers = reply["layers"]
    except WorkerError as e:
        layers = [f"could not start a worker: {e}"]
    finally:
        worker.close()
    from mlxport.backends.sim.compiler import limits_line

    why = gpu_sandbox() if gpu else None
    gpus = (
        "GPU workers: the same, with the GPU's device nodes and a seccomp denylist instead (a "
        "driver's calls are not enumerated)"
        + ("" if gpu else "; checked at the first GPU worker, else seccomp and limits only")
    )
    return [
        *layers,
        gpus if why is None else f"GPU workers: namespaces and Landlock missing: {why}",
        limits_line(),
        "cache: every library's content hash recorded when built and checked before it is loaded",
        harden_supervisor(),
    ]
