"""The host C++ compiler the simulator builds with: finding one that compiles its dialect, the
flags that make host arithmetic round as Metal's does, and running it under a time limit.

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

from mlxport.backends.sim.cache import cache_dir

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
    """The compiler's version; with ``check``, also that it compiles the simulator's C++ dialect."""
    try:
        out = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=120, env=compiler_env()
        )
    except (OSError, subprocess.TimeoutExpired) as e:
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
            done = subprocess.run(
                [*command, *cc.flags(), "-fsyntax-only", str(cpp)],
                capture_output=True,
                text=True,
                timeout=120,
                env=compiler_env(),
            )
        if done.returncode != 0:
            raise CompilerMissing(
                f"{command[0]} ({cc.version}) does not compile C++20 with _Float16"
            )
    return cc


class BuildError(RuntimeError):
    """The compiler timed out, or the simulator's own runtime does not compile."""


def compiler_env() -> dict[str, str]:
    """The compiler's environment: zig keeps its caches under mlxport's, so no lock on the user's
    ~/.cache/zig (another program's build) can stall a compile; the C locale keeps GCC's quotes
    ASCII in the diagnostics models and people read."""
    zig = str(cache_dir().parent / "zig")
    return {**os.environ, "ZIG_GLOBAL_CACHE_DIR": zig, "ZIG_LOCAL_CACHE_DIR": zig, "LC_ALL": "C"}


def run(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, env=compiler_env()
        )
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"compiling {what} took over {COMPILE_TIMEOUT:g} s") from e


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
