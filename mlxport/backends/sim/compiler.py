"""The host C++ compiler the simulator builds with: finding one that compiles its dialect, the
flags that make host arithmetic round as Metal's does, and running it in the sandbox
(mlxport.backends.confine) with limits on its memory, CPU time, output and wall time.

The simulator's own headers (``INCLUDE``) and runtime (``RUNTIME_SOURCE``) are what every one of
its translation units is compiled against.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlxport.backends import confine, processes
from mlxport.backends.sim import cache
from mlxport.backends.sim.cache import cache_dir

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"
RUNTIME_SOURCE = HERE / "rt" / "mlxsim_rt.cpp"
OPT_LEVEL = os.environ.get("MLXPORT_SIM_OPT", "-O1")
COMPILE_TIMEOUT = 300.0
# Per compiler process (cc1plus, ld): a template-instantiation bomb ends at these, never at the
# machine's memory: an honest kernel takes well under a second of CPU and 200 MiB, the runtime two
# seconds, so a bomb stops in seconds.
COMPILER_MEMORY = int(os.environ.get("MLXPORT_COMPILER_MEMORY", str(2 << 30)))
COMPILER_CPU_SECONDS = int(os.environ.get("MLXPORT_COMPILER_CPU_SECONDS", "20"))
COMPILER_OUTPUT = 64 << 20  # its diagnostics (and the preprocessor's text)


class CompilerMissing(RuntimeError):
    """No C++ compiler could be found."""


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]
    version: str

    @property
    def is_clang(self) -> bool:
        return "clang" in self.version.lower() or "zig" in " ".join(self.command)

    @property
    def gcc_major(self) -> int | None:
        """GCC's major version (the last number of its first --version line); None for clang."""
        if self.is_clang:
            return None
        m = re.search(r"\s(\d+)\.\d+(?:\.\d+)?\s*$", self.version)
        return int(m.group(1)) if m else None

    def flags(self) -> list[str]:
        # MSL char is signed; plain char is unsigned on aarch64 (Linux), so say it everywhere.
        # MLX compiles metal_kernel sources with fast math off (setFastMathEnabled(false) up to
        # v0.31; math_mode "safe" by default from v0.32.0), where each MSL operation is rounded to
        # its type: a * b + c rounds twice unless the kernel calls fma(). Host compilers fuse it
        # into one FMA wherever the CPU has one (zig's clang targets the native CPU; AVX512-FP16
        # fuses even half arithmetic), so results would depend on the machine: never contract.
        flags = [
            "-std=c++20",
            OPT_LEVEL,
            "-fPIC",
            "-fvisibility=hidden",
            "-w",
            "-fsigned-char",
            "-ffp-contract=off",
            # Ubuntu's GCC fortifies by default when optimising: the C library's printf and memcpy
            # become inline wrappers that clash with the executor's printf and call __*_chk
            "-U_FORTIFY_SOURCE",
        ]
        # MSL rounds every half operation to half; clang keeps float excess precision otherwise, and
        # so does GCC from 13 under -std=c++NN (GCC 12 has no excess precision for C++ at all).
        if self.is_clang:
            flags += ["-Xclang", "-ffloat16-excess-precision=none"]
        elif (self.gcc_major or 0) >= 13:
            flags += ["-fexcess-precision=16"]
        return flags

    def no_error_limit(self) -> str:
        return "-ferror-limit=0" if self.is_clang else "-fmax-errors=0"


SYSTEM_COMPILERS = ("c++", "g++", "clang++")
_PROBE = (
    "using half = _Float16;\nstatic_assert(sizeof(half) == 2);\n"
    "#include <source_location>\nint main() {}\n"
)


def find_compiler() -> Compiler:
    """``$CXX`` when set; else the system's C++ compiler (``c++``, ``g++``, ``clang++``: the first
    that compiles C++20 with ``_Float16``, GCC 12 or clang 16 on); else the zig toolchain of the
    ``ziglang`` package (``pip install 'mlxport[zig]'``) on machines without one."""
    return _find_compiler(os.environ.get("CXX", ""), os.environ.get("PATH", ""))


@functools.cache
def _find_compiler(cxx: str, path: str) -> Compiler:
    if cxx:
        return _probe(tuple(shlex.split(cxx)), check=False)
    tried = []
    for name in SYSTEM_COMPILERS:
        if shutil.which(name, path=path):
            try:
                return _probe((name,), check=True)
            except CompilerMissing as e:
                tried.append(str(e))
    try:
        import ziglang  # noqa: F401
    except ImportError as e:
        why = f" ({'; '.join(tried)})" if tried else ""
        raise CompilerMissing(
            "no C++20 compiler for the simulator" + why + ": install g++ 12+ or clang++ 16+, "
            "or pip install 'mlxport[zig]', or set CXX"
        ) from e
    return _probe((sys.executable, "-m", "ziglang", "c++"), check=False)


def _probe(command: tuple[str, ...], *, check: bool) -> Compiler:
    """The compiler's version; with ``check``, also that it compiles the simulator's C++ dialect
    (in the sandbox it always runs in)."""
    try:
        out = run([*command, "--version"], "the compiler's version", timeout=120)
    except (OSError, BuildError) as e:
        raise CompilerMissing(f"the C++ compiler {' '.join(command)} does not run: {e}") from e
    if out.returncode != 0:
        raise CompilerMissing(
            f"the C++ compiler {' '.join(command)} failed: {out.stderr.strip()[:300]}"
        )
    cc = Compiler(command, out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown")
    if check:
        with tempfile.TemporaryDirectory(prefix="mlxsim-probe-") as tmp:
            cpp = Path(tmp) / "probe.cpp"
            cpp.write_text(_PROBE)
            try:
                done = run([*command, *cc.flags(), "-fsyntax-only", str(cpp)], "a probe")
            except BuildError as e:
                raise CompilerMissing(f"{command[0]} ({cc.version}) does not run: {e}") from e
        if done.returncode != 0:
            raise CompilerMissing(
                f"{command[0]} ({cc.version}) does not compile C++20 with _Float16"
            )
    return cc


class BuildError(RuntimeError):
    """The compiler ran past a limit (time, memory, CPU, output), or the simulator's own runtime
    does not compile."""


class LimitError(BuildError):
    """The compiler ran past one of its limits: the same text would again."""


def compiler_env(home: str | None = None) -> dict[str, str]:
    """The compiler's environment: the allowlisted names of any sandboxed process (no API key or
    token); zig keeps its caches under mlxport's, so no lock on the user's ~/.cache/zig (another
    program's build) can stall a compile; the C locale keeps GCC's quotes ASCII in the
    diagnostics models and people read; ``home``: its HOME and TMPDIR."""
    zig = str(_zig_cache())
    env = confine.worker_env(
        {"ZIG_GLOBAL_CACHE_DIR": zig, "ZIG_LOCAL_CACHE_DIR": zig, "LC_ALL": "C"}
    )
    if home:
        env.update(HOME=home, TMPDIR=home)
    return env


def _zig_cache() -> Path:
    return cache_dir().parent / "zig"


# Options whose next argument is a path the compiler reads.
_PATH_OPTIONS = ("-I", "-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-L")
_OUT_OF_MEMORY = re.compile(
    r"out of memory|virtual memory exhausted|Cannot allocate memory|std::bad_alloc|"
    r"LLVM ERROR: .*memory"
)
_CPU = re.compile(r"CPU time limit exceeded|SIGXCPU")


def _paths(cmd: list[str]) -> tuple[list[str], list[str]]:
    """What a compiler command names: (paths it reads, folders it writes into: its output's)."""
    reads, writes = [], []
    for prev, arg in zip(["", *cmd], cmd, strict=False):
        if prev in ("-o", "-MF"):
            writes.append(str(Path(arg).resolve().parent))
            continue
        path = None
        if prev in _PATH_OPTIONS:
            path = arg
        elif arg.startswith("-I") and len(arg) > 2:
            path = arg[2:]
        elif arg.startswith("/"):
            path = arg
        if path is not None and os.path.exists(path):
            reads.append(str(Path(path).resolve()))
    return reads, writes


def _located(cmd: list[str]) -> tuple[list[str], list[str]]:
    """The command with its program found on this PATH (the sandbox's PATH may not see it), and
    what of the compiler's install the sandbox must see: the folder it was found in and, where
    it lies outside the system folders (/opt/llvm...), its install."""
    found = shutil.which(cmd[0])
    if not found:
        return cmd, []
    real = Path(found).resolve()
    reads = [str(Path(found).absolute().parent)]
    if not str(real).startswith("/usr/"):
        reads.append(str(real.parent.parent))
    return [str(Path(found).absolute()), *cmd[1:]], reads


def run(
    cmd: list[str],
    what: str,
    *,
    timeout: float = COMPILE_TIMEOUT,
    writes: list[str] | None = None,
    reads: list[str] | None = None,
    cpu_seconds: int | None = None,
    output_bytes: int = COMPILER_OUTPUT,
    action: str = "compiling",
) -> subprocess.CompletedProcess[str]:
    """Run a compiler command in the sandbox: it sees the system, the compiler, mlxport's headers
    and the paths its command names (and ``reads``), and writes only into the folder of its
    output (``writes``: those folders instead; a scratch folder where there is no output); no
    secrets in its environment, no stdin, limits on memory and CPU time per process
    (MLXPORT_COMPILER_MEMORY, MLXPORT_COMPILER_CPU_SECONDS), on its output and on wall time
    (``timeout``; ``cpu_seconds`` for a longer build of mlxport's own; ``output_bytes``, its
    diagnostics and what it prints). Past a limit: BuildError, naming it (``action`` and ``what``:
    what was being done)."""
    cpu = cpu_seconds or COMPILER_CPU_SECONDS
    named, outputs = _paths(cmd)
    cmd, install = _located(cmd)
    with tempfile.TemporaryDirectory(prefix="mlxsim-cc-") as scratch:
        own = list(writes if writes is not None else outputs) or [scratch]
        zig = any("ziglang" in part for part in cmd[:3])
        if zig:
            _zig_cache().mkdir(parents=True, exist_ok=True)
        view = confine.View(
            reads=[*install, *named, *(reads or [])],
            writes=[*dict.fromkeys(own), *([str(_zig_cache())] if zig else [])],
        )
        limits = confine.Limits(memory=COMPILER_MEMORY, cpu=cpu)
        done = processes.run(
            cmd,
            view,
            limits,
            env=compiler_env(own[0]),
            timeout=timeout,
            output_bytes=output_bytes,
            cwd=own[0],
        )
    if done.limit == "time":
        raise LimitError(f"{action} {what} took over {timeout:g} s")
    if done.limit == "output":
        raise LimitError(
            f"{action} {what} printed over {output_bytes >> 20} MiB (macros or templates "
            "expanding without end?); stopped"
        )
    failed = done.returncode != 0
    if failed and (_OUT_OF_MEMORY.search(done.stderr) or done.signal == "SIGKILL"):
        raise LimitError(
            f"{action} {what} needed over {COMPILER_MEMORY >> 20} MiB of memory, the "
            "compiler's limit (MLXPORT_COMPILER_MEMORY): templates instantiated without end?"
        )
    if failed and (_CPU.search(done.stderr) or done.signal == "SIGXCPU"):
        raise LimitError(
            f"{action} {what} used over {cpu} s of CPU, the compiler's limit "
            "(MLXPORT_COMPILER_CPU_SECONDS): templates instantiated without end?"
        )
    return subprocess.CompletedProcess(cmd, done.returncode, done.stdout, done.stderr)


def limits_line() -> str:
    """The compiler's confinement, as doctor prints it."""
    return (
        f"compiler: sandboxed as workers are (starting its own passes), {COMPILER_MEMORY >> 20} "
        f"MiB and {COMPILER_CPU_SECONDS} s of CPU a process, {COMPILE_TIMEOUT:g} s in all, "
        f"{COMPILER_OUTPUT >> 20} MiB of output, no secrets, writes only its output"
    )


@functools.cache
def syntax_log(text: str, include: tuple[Path, ...]) -> str:
    """The compiler's diagnostics for one translation unit, checked but not compiled (nothing of it
    is built or run): what is read off them is compile-time facts."""
    cc = find_compiler()
    with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
        cpp = Path(tmpdir) / "probe.cpp"
        cpp.write_text(text)
        dirs = [arg for d in include for arg in ("-I", str(d))]
        return run(
            [*cc.command, *cc.flags(), "-fsyntax-only", cc.no_error_limit(), *dirs, str(cpp)],
            "a constant",
        ).stderr


# What Metal's compiler predefines for the language version MLX compiles with on macOS 15 (3.2,
# C++14-based), so that `#ifdef __METAL_VERSION__` and the like read in the simulator as on a GPU.
METAL_MACROS = {
    "__METAL_VERSION__": "320",
    "__METAL__": "1",
    "__METAL_MACOS__": "1",
    "__HAVE_BFLOAT__": "1",
    "__AIR64__": "1",
    "__APPLE__": "1",
    "__clang__": "1",
    "__GNUC__": "4",
    "__GNUC_MINOR__": "2",
    "__GNUC_PATCHLEVEL__": "1",
    "__cplusplus": "201402L",
}
# The host compiler's predefined macros that describe types and their limits, which the C
# library's macros expand to (FLT_MAX, INT_MAX) and every compiler defines alike; its others (the
# CPU, the system, the compiler and its version, C++20's features) are not Metal's.
_SHARED_MACROS = re.compile(
    r"__(?:FLT|DBL|LDBL|BFLT|INT|UINT|SIZE|PTRDIFF|CHAR|SCHAR|SHRT|WCHAR|WINT|LONG|INTMAX|UINTMAX|"
    r"SIG_ATOMIC|INTPTR|UINTPTR|SIZEOF|BYTE_ORDER|ORDER_|FLOAT_WORD_ORDER|BIGGEST_ALIGNMENT|"
    r"STDC|CHAR16|CHAR32|GCC_IEC_559|FLT_EVAL|DEC|ATOMIC_)\w*"
)
# Macros the C and C++ libraries define that name them (glibc, libstdc++, libc++).
_LIBRARY_MACROS = ("__GLIBC__", "__GLIBC_MINOR__", "__GNU_LIBRARY__", "__GLIBCXX__")
_LIBRARY_MACROS += ("_GLIBCXX_RELEASE", "_LIBCPP_VERSION", "__USE_GNU")


def metal_prelude(cc: Compiler) -> str:
    """What goes between the simulator's headers and a candidate's text: the host compiler's own
    predefined macros undefined and Metal's defined, so that the candidate sees the macros a
    Metal compile has, not the host's."""
    names = sorted(n for n in _predefined(cc) if n not in METAL_MACROS) + list(_LIBRARY_MACROS)
    return "".join(f"#undef {n}\n" for n in [*names, *METAL_MACROS]) + "".join(
        f"#define {k} {v}\n" for k, v in METAL_MACROS.items()
    )


@functools.cache
def _predefined(cc: Compiler) -> frozenset[str]:
    """The names the compiler predefines with the simulator's flags, less _SHARED_MACROS; kept
    on disk per compiler and flags, used while it matches the hash recorded with it."""
    key = cache.digest("predefined", " ".join(cc.flags()), cc.version, " ".join(cc.command))
    record = cache_dir() / f"predefined-{key}.txt"
    kept = cache.read_verified(record)
    if kept is None:
        with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmp:
            empty = Path(tmp) / "empty.cpp"
            empty.write_text("")
            out = run([*cc.command, *cc.flags(), "-dM", "-E", str(empty)], "an empty file")
        if out.returncode != 0:
            raise BuildError(f"the compiler's predefined macros: {out.stderr.strip()[:300]}")
        names = sorted({m.group(1) for m in re.finditer(r"^#define (\w+)", out.stdout, re.M)})
        kept = ("\n".join(names) + "\n").encode()
        cache.publish_bytes(kept, record)
    return frozenset(n for n in kept.decode().split() if not _SHARED_MACROS.fullmatch(n))
