"""Compiling simulator C++ into shared libraries, cached on disk by content hash.

The runtime (rt/mlxsim_rt.cpp) is compiled once per compiler and flags into an object file;
each kernel is one small translation unit linked with it into ``<hash>.so``. The cache key
covers the kernel text, every header, the runtime source, the flags and the compiler's version,
so editing a header or the runtime, or switching compilers, never reuses a stale library.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlxport.backends.sim.signature import SimSource
from mlxport.spec import Diagnostic

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"
RUNTIME_SOURCE = HERE / "rt" / "mlxsim_rt.cpp"
OPT_LEVEL = os.environ.get("MLXPORT_SIM_OPT", "-O1")
COMPILE_TIMEOUT = 300.0


class CompilerMissing(RuntimeError):
    """No C++ compiler could be found."""


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]
    version: str

    @property
    def is_clang(self) -> bool:
        return "clang" in self.version.lower() or "zig" in " ".join(self.command)

    def flags(self) -> list[str]:
        # MSL char is signed; plain char is unsigned on aarch64 (Linux), so say it everywhere.
        # MLX compiles metal_kernel sources with fast math off (setFastMathEnabled(false) up to
        # v0.31; math_mode "safe" by default from v0.32.0), where each MSL operation is rounded to
        # its type: a * b + c rounds twice unless the kernel calls fma(). Host compilers fuse it into
        # one FMA wherever the CPU has one (zig's clang targets the native CPU; AVX512-FP16 fuses
        # even half arithmetic), so results would depend on the machine: never contract.
        flags = ["-std=c++20", OPT_LEVEL, "-fPIC", "-fvisibility=hidden", "-w", "-fsigned-char", "-ffp-contract=off"]
        if self.is_clang:
            # MSL rounds every half operation to half; clang keeps float excess precision otherwise.
            flags += ["-Xclang", "-ffloat16-excess-precision=none"]
        return flags


@functools.cache
def find_compiler() -> Compiler:
    """``$CXX`` when set, else the zig toolchain shipped as the ``ziglang`` package."""
    if os.environ.get("CXX"):
        command = tuple(shlex.split(os.environ["CXX"]))
    else:
        try:
            import ziglang  # noqa: F401
        except ImportError as e:
            raise CompilerMissing("no C++ compiler: install the ziglang package (pip install ziglang) "
                                  "or set CXX to a C++20 compiler") from e
        command = (sys.executable, "-m", "ziglang", "c++")
    try:
        out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CompilerMissing(f"the C++ compiler {' '.join(command)} does not run: {e}") from e
    if out.returncode != 0:
        raise CompilerMissing(f"the C++ compiler {' '.join(command)} failed: {out.stderr.strip()[:300]}")
    return Compiler(command, out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown")


def cache_dir() -> Path:
    root = os.environ.get("MLXPORT_CACHE")
    path = Path(root) / "sim" if root else Path.home() / ".cache" / "mlxport" / "sim"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def _headers_digest(*dirs: Path) -> str:
    h = hashlib.sha256()
    for d in dirs or (INCLUDE,):
        for p in sorted(f for f in d.rglob("*") if f.is_file()):
            h.update(str(p.relative_to(d)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@functools.cache
def _runtime_digest() -> str:
    return hashlib.sha256(RUNTIME_SOURCE.read_bytes()).hexdigest()


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:24]


class BuildError(RuntimeError):
    """The compiler timed out, or the simulator's own runtime does not compile."""


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"compiling {what} took over {COMPILE_TIMEOUT:g} s") from e


def _publish(tmp: Path, final: Path) -> None:
    os.replace(tmp, final)  # atomic: concurrent builders never see a half-written file


def runtime_object() -> Path:
    """The compiled runtime for the current compiler and flags (built on first use)."""
    cc = find_compiler()
    flags = [f for f in cc.flags() if f != OPT_LEVEL] + ["-O2"]
    key = _digest(RUNTIME_SOURCE.read_text(), _headers_digest(), " ".join(flags), cc.version, " ".join(cc.command))
    obj = cache_dir() / f"rt-{key}.o"
    if obj.exists():
        return obj
    tmp = obj.with_suffix(f".{os.getpid()}.tmp.o")
    out = _run([*cc.command, *flags, "-I", str(INCLUDE), "-c", str(RUNTIME_SOURCE), "-o", str(tmp)], "the runtime")
    if out.returncode != 0:
        raise BuildError(f"the simulator runtime does not compile:\n{out.stderr[-3000:]}")
    _publish(tmp, obj)
    return obj


@dataclass
class BuildResult:
    ok: bool
    library: Path | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    log: str = ""


def build(src: SimSource) -> BuildResult:
    """Compile ``src`` into a shared library, or return diagnostics mapped to the candidate."""
    result = compile_library(src.text, (INCLUDE,))
    if not result.ok:
        result.diagnostics = diagnostics(result.log, src)
    return result


def compile_library(text: str, include: tuple[Path, ...]) -> BuildResult:
    """Compile one translation unit against the headers in ``include`` and link it with the
    runtime into a cached shared library; on failure the result carries the compiler's log."""
    t0 = time.perf_counter()
    cc = find_compiler()
    flags = cc.flags()
    # The runtime is linked into every library: a runtime change must rebuild them all.
    key = _digest(text, _headers_digest(*include), _runtime_digest(), " ".join(flags), cc.version,
                  " ".join(cc.command))
    lib = cache_dir() / f"k-{key}.so"
    if lib.exists():
        return BuildResult(True, lib, seconds=time.perf_counter() - t0, cached=True)
    rt = runtime_object()
    with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
        cpp = Path(tmpdir) / "kernel.cpp"
        cpp.write_text(text)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp.so")
        dirs = [arg for d in include for arg in ("-I", str(d))]
        # -z defs: a function declared but never defined (a template never specialised for the types
        # it is built at) fails here, named, instead of when the library is loaded
        out = _run([*cc.command, *flags, "-shared", "-Wl,-z,defs", *dirs, str(cpp), str(rt), "-o", str(tmp)],
                   "the kernel")
    if out.returncode != 0:
        tmp.unlink(missing_ok=True)
        return BuildResult(False, None, seconds=time.perf_counter() - t0, log=out.stderr)
    _publish(tmp, lib)
    return BuildResult(True, lib, seconds=time.perf_counter() - t0)


@functools.cache
def syntax_log(text: str, include: tuple[Path, ...]) -> str:
    """The compiler's diagnostics for one translation unit, checked but not compiled (nothing of it
    is built or run): what is read off them is compile-time facts."""
    cc = find_compiler()
    with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
        cpp = Path(tmpdir) / "probe.cpp"
        cpp.write_text(text)
        dirs = [arg for d in include for arg in ("-I", str(d))]
        return _run([*cc.command, *cc.flags(), "-fsyntax-only", "-ferror-limit=0", *dirs, str(cpp)],
                    "a constant").stderr


# ---------------------------------------------------------------- diagnostics

_DIAG = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning|note): "
                   r"(?P<msg>.*)$", re.MULTILINE)
_USER_FILES = ("source", "header")


def _pretty(msg: str) -> str:
    """Show checked pointers in compiler messages as the MSL types they stand for."""
    def sub(m: re.Match[str]) -> str:
        return f"{m.group(1) or ''}{m.group(3).lower()} {m.group(2)}*"
    msg = re.sub(r"(?:::)?mlxsim::Ptr<(const )?([^,<>]+(?:<[^<>]*>)?), (?:::)?mlxsim::AS_(\w+)>", sub, msg)
    return msg.replace("mlxsim::", "")


def diagnostics(log: str, src: SimSource) -> list[Diagnostic]:
    """Errors from the compiler log, each placed in the candidate's ``source`` or ``header``.

    An error inside a runtime header (a template instantiated with bad arguments) is placed at
    the candidate line its instantiation notes lead back to.
    """
    entries = [m.groupdict() for m in _DIAG.finditer(log)]
    out: list[Diagnostic] = []
    for i, e in enumerate(entries):
        if e["sev"] not in ("error", "fatal error"):
            continue
        place = e
        if Path(e["file"]).name not in _USER_FILES:
            for n in entries[i + 1:]:
                if n["sev"] != "note":
                    break
                if n["file"] in _USER_FILES:
                    place = n
                    break
        out.append(_diagnostic(place, e["msg"], src, origin=e["file"]))
        if len(out) >= 20:
            break
    if not out:
        tail = [ln for ln in log.strip().splitlines() if ln.strip()][-3:]
        out.append(Diagnostic(message=_pretty(" ".join(tail))[:800] or "compile failed", where="generated"))
    return out


def _diagnostic(place: dict[str, str], msg: str, src: SimSource, origin: str) -> Diagnostic:
    file, line, col = place["file"], int(place["line"]), int(place["col"])
    text = _pretty(msg)
    if file != origin and Path(origin).name not in _USER_FILES:
        text += f" (inside {Path(origin).name})"
    if file in _USER_FILES:
        rewritten = src.body if file == "source" else src.header
        line, col = rewritten.original_position(line, col)
        return Diagnostic(message=text, where=file, line=line, column=col)
    return Diagnostic(message=text, where="generated", line=line, column=col)
