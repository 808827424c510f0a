"""The preprocessor pass over a .cu file for the CPU executor: its own macros, conditionals and
local headers expanded as nvcc would for device code; CUDA's and the C++ library's headers left for
compile time, and unknown system headers dropped."""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path, PurePosixPath

from mlxport.backends.cuda_cpu.source import SourceError
from mlxport.backends.sim.compiler import BuildError, run

# Headers the executor provides (or that are safe to take from the compiler at compile time):
# during preprocessing they expand to nothing, so the user's text is all that is rewritten.
PROVIDED = (
    "cuda_runtime.h",
    "cuda_runtime_api.h",
    "cuda.h",
    "device_launch_parameters.h",
    "device_functions.h",
    "cuda_fp16.h",
    "cuda_bf16.h",
    "cuda_fp16.hpp",
    "cuda_bf16.hpp",
    "vector_types.h",
    "vector_functions.h",
    "math_constants.h",
    "cooperative_groups.h",
    "cooperative_groups/reduce.h",
    "cooperative_groups/scan.h",
    "cub/cub.cuh",
    "cub/block/block_reduce.cuh",
    "cub/warp/warp_reduce.cuh",
    "cuda/barrier",
    "cuda/std/cstdint",
    "stdint.h",
    "cstdint",
    "stddef.h",
    "cstddef",
    "stdio.h",
    "cstdio",
    "assert.h",
    "cassert",
    "math.h",
    "cmath",
    "float.h",
    "cfloat",
    "limits.h",
    "climits",
    "type_traits",
    "limits",
    "stdlib.h",
    "cstdlib",
    "string.h",
    "cstring",
    "utility",
    "algorithm",
)
# The C++ library headers device code may name types from (std::array in a struct, say): left out
# while the file is rewritten, included as themselves when it is compiled.
STANDARD = frozenset(
    {
        "array",
        "atomic",
        "bitset",
        "chrono",
        "complex",
        "deque",
        "functional",
        "initializer_list",
        "iomanip",
        "iostream",
        "iterator",
        "list",
        "map",
        "memory",
        "mutex",
        "new",
        "numeric",
        "optional",
        "random",
        "set",
        "sstream",
        "string",
        "string_view",
        "thread",
        "tuple",
        "unordered_map",
        "unordered_set",
        "variant",
        "vector",
        "fstream",
        "cinttypes",
        "cstdarg",
        "climits",
        "cfloat",
        "cstring",
        "ctime",
        "bit",
        "span",
        "queue",
        "stack",
    }
)
# What nvcc defines for device code; the executor runs as an Ampere-class device.
DEFINES = {
    "__CUDACC__": "1",
    "__NVCC__": "1",
    "__CUDA_ARCH__": "800",
    "CUDART_VERSION": "12040",
    "__CUDACC_VER_MAJOR__": "12",
    "__CUDACC_VER_MINOR__": "4",
}
# clang's, GCC's
_MISSING = re.compile(
    r"fatal error: (?:'([^']+)' file not found|([^\s:]+): No such file or directory)"
)


# What the preprocessed text of a .cu file may come to: mlxport reads and parses all of it.
PREPROCESSED_BYTES = 16 << 20


def preprocess(
    path: Path, compiler: tuple[str, ...], stubs: Path, includes: list[Path] = ()
) -> tuple[str, list[str]]:
    """The file after the preprocessor, and the system headers dropped because nothing provides them
    (each stands in as an empty file of a folder of this call's own). The preprocessor runs in the
    compiler's sandbox: it sees the file's folder, the include folders named and the system, no
    stdin, within the compiler's limits and PREPROCESSED_BYTES of output."""
    dropped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mlxport-dropped-") as tmp:
        cmd = [
            *compiler,
            "-E",
            "-x",
            "c++",
            "-std=c++20",
            "-nostdinc",
            "-nostdinc++",
            "-I",
            str(stubs),
            "-I",
            str(path.parent),
            *[f"-I{p}" for p in includes],
            "-I",
            tmp,
            *[f"-D{k}={v}" for k, v in DEFINES.items()],
            str(path),
        ]
        for _ in range(64):
            done = _run(cmd, path)
            if done.returncode == 0:
                library = _library_headers(done.stdout, stubs)
                return _without_system_headers(done.stdout), library + dropped
            missing = _MISSING.search(done.stderr)
            if not missing:
                raise SourceError(f"{path.name} does not preprocess: {_first_error(done.stderr)}")
            # a system header, or a local one of a library not here (ATen/ATen.h)
            name = missing.group(1) or missing.group(2)
            _stand_in(Path(tmp), name, path)
            dropped.append(name)
    raise SourceError(f"{path.name} includes too many headers the executor does not know")


def _run(cmd: list[str], path: Path):
    try:
        return run(
            cmd,
            f"{path.name}'s preprocessor pass",
            output_bytes=PREPROCESSED_BYTES,
            action="running",
        )
    except BuildError as e:
        raise SourceError(f"{path.name} does not preprocess: {e}") from e


def _stand_in(folder: Path, name: str, path: Path) -> None:
    """An empty file for the missing header ``name`` in ``folder``; a name that leaves the folder
    (absolute, or through ``..``) names a file the sandbox does not show, never stood in for."""
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise SourceError(
            f"{path.name} includes {name}, which is outside its folder and the include folders "
            "(-I): copy the header next to it, or pass its folder with -I"
        )
    stub = folder / rel
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text("")


_LINE_MARK = re.compile(r'^# \d+ "[^"]*"((?: \d)*)$')
_ENTERED = re.compile(r'^# 1 "([^"]*)" 1', re.M)


def _library_headers(text: str, stubs: Path) -> list[str]:
    """The C++ library headers the file includes (their stand-ins entered, by the line markers),
    in order: included as themselves when the kernel is compiled."""
    roots = {str(stubs) + "/", str(stubs.resolve()) + "/"}
    names = [m[len(r) :] for m in _ENTERED.findall(text) for r in roots if m.startswith(r)]
    return list(dict.fromkeys(n for n in names if n in STANDARD and n not in PROVIDED))


def _without_system_headers(text: str) -> str:
    """The preprocessed text with what system headers (flag 3) expanded to left blank, markers kept:
    the compiler's C library is the executor's own at compile time (some compilers search
    /usr/include even with -nostdinc, and its typedefs would then be defined twice)."""
    out, system = [], False
    for ln in text.split("\n"):
        m = _LINE_MARK.match(ln)
        if m:
            system = " 3" in m.group(1)
            out.append(ln)
        else:
            out.append("" if system else ln)
    return "\n".join(out)


def _first_error(stderr: str) -> str:
    line = next((ln for ln in stderr.splitlines() if "error:" in ln), stderr.strip()[:300])
    return line.strip()[:400]


def stub_dir(root: Path) -> Path:
    """Empty stand-ins for the provided headers and the C++ library's, for the preprocessing pass
    only: whatever headers the compiler would find on its own (a CXX that adds -isystem
    /usr/include/c++/13 keeps the C++ library on the search path despite -nostdinc++), the file's
    text alone is expanded, never a library header that needs the C library's macros
    (``__GLIBC_PREREQ``). Kept in a folder named by the list, so that another version's list
    (one more provided header) never shows in this one's."""
    names = (*PROVIDED, *sorted(STANDARD))
    root = root / hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        f = root / name
        if not f.exists():
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("")
    return root
