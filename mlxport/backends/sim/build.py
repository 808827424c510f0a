"""Compiling simulator C++ into shared libraries, cached on disk by content hash.

The runtime (rt/mlxsim_rt.cpp) is compiled once per compiler and flags into an object file;
each kernel is one small translation unit linked with it into ``<hash>.so``. The cache key
covers the kernel text, every header, the runtime source, the flags and the compiler's version,
so editing a header or the runtime, or switching compilers, never reuses a stale library.

The compiler runs in the sandbox and writes only into a private folder; mlxport copies what it
made into the cache and records its content hash (cache.publish_bytes). A cached library or
runtime object is used only while its content matches that hash, and the library's hash travels
with it to the worker, which checks it again before loading it.

Only kernel code is published into the cache (compile_library): the kernel's object may call the
runtime's own API, the C math library and what C++ itself needs (symbols.KERNEL_LIBRARY), read
off its ELF symbol table (object_checks), and an MSL kernel may keep no mutable program-scope or
static data (Metal allows program-scope data only in the constant address space), include nothing
but the <metal_*> headers and hold no inline assembly (source_checks). Anything else is refused
with one sentence naming the symbol or variable and its line.

Include paths: the TU sees mlxport's headers and, through them, the C++ library headers they are
written against (<cstddef>, <cstdint>, <cstring>, <climits>, <limits>, <type_traits>, <new>,
<source_location>, which pull in the libc headers they wrap), so -nostdinc/-nostdinc++ would
break them (and zig's driver adds its libc include directories explicitly either way). What a
kernel can reach through those declarations is what the symbol check governs: a declaration
alone runs nothing, and every call that leaves the kernel is an undefined symbol of its object.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlxport.backends.sim import symbols
from mlxport.backends.sim.cache import (
    cache_dir,
    digest,
    file_digest,
    headers_digest,
    publish,
    read_verified,
    recorded,
)
from mlxport.backends.sim.compiler import (
    COMPILE_TIMEOUT,
    INCLUDE,
    OPT_LEVEL,
    RUNTIME_SOURCE,
    BuildError,
    Compiler,
    find_compiler,
    metal_prelude,
    run,
)
from mlxport.backends.sim.diagnostics import diagnostics, log_line
from mlxport.backends.sim.object_checks import library_problem, object_problem
from mlxport.backends.sim.signature import SimSource
from mlxport.backends.sim.source_checks import (
    NO_ASM,
    expanded_problem,
    inline_assembly,
    msl_data_problem,
    msl_text_problem,
)
from mlxport.spec import Diagnostic


@dataclass
class BuildResult:
    ok: bool
    library: Path | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    log: str = ""
    # the one sentence saying why this is not kernel code, when it is not
    refused: str | None = None
    sha256: str | None = None  # the library's content hash, recorded when it was built


# Raised whenever what is checked before a library is published changes (the allowlist is in the
# key as it is): a library cached by an earlier mlxport was never checked, so it is never reused.
CHECKS = "kernel-code-2"
_CHECKS_KEY = hashlib.sha256(
    "\0".join([CHECKS, *sorted(symbols.KERNEL_LIBRARY)]).encode()
).hexdigest()


def build_kernel(src: SimSource) -> BuildResult:
    """Compile ``src`` into a shared library, or return diagnostics mapped to the candidate."""
    t0 = time.perf_counter()
    if problem := msl_text_problem(src):
        return _refused(problem, t0)
    prelude = NO_ASM + metal_prelude(find_compiler())
    text = src.text.replace('#line 1 "header"\n', prelude + '#line 1 "header"\n', 1)
    result = compile_library(text, (INCLUDE,), language="msl", declared=msl_data_problem(src))
    if not result.ok:
        result.diagnostics = diagnostics(result.log, src)
        if result.refused:
            where = result.diagnostics[0] if result.diagnostics else None
            result.diagnostics = [
                Diagnostic(
                    message=result.refused,
                    where=where.where if where else "generated",
                    line=where.line if where else None,
                )
            ]
    return result


def _refused(problem: tuple[str, str, int | None], t0: float) -> BuildResult:
    sentence, where, line = problem
    return BuildResult(
        False,
        None,
        [Diagnostic(message=sentence, where=where, line=line)],
        seconds=time.perf_counter() - t0,
        refused=sentence,
    )


def compile_library(
    text: str,
    include: tuple[Path, ...],
    *,
    language: str = "cuda",
    declared: tuple[str, str, int | None] | None = None,
) -> BuildResult:
    """Compile one translation unit against the headers in ``include`` and link it with the
    runtime into a cached shared library; on failure the result carries the compiler's log.

    Only kernel code is published: the object may call the runtime, the C math library and what
    C++ itself needs (symbols.KERNEL_LIBRARY), nothing else, and an MSL one (``language``) may
    keep no data it can change between calls (Metal allows program-scope data only in the
    constant address space). Otherwise the result is refused, with one sentence (``refused``)
    and a compiler-style line in ``log`` placing the name in the candidate's text. ``declared``:
    such data found in the source text (sentence, file, line), refused after what the object
    calls."""
    t0 = time.perf_counter()
    if language != "msl" and (asm := inline_assembly(text)):
        # The CUDA text is preprocessed already: every asm statement of the file is a token here.
        sentence, log = asm
        return BuildResult(False, None, seconds=time.perf_counter() - t0, log=log, refused=sentence)
    cc = find_compiler()
    flags = cc.flags()
    # The runtime is linked into every library: a runtime change must rebuild them all.
    key = digest(
        _CHECKS_KEY,
        language,
        text,
        headers_digest(*include),
        file_digest(RUNTIME_SOURCE),
        " ".join(flags),
        cc.version,
        " ".join(cc.command),
    )
    lib = cache_dir() / f"k-{key}.so"
    if sha := recorded(lib):
        return BuildResult(True, lib, seconds=time.perf_counter() - t0, cached=True, sha256=sha)
    rt, rt_bytes = _runtime()
    with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
        cpp = Path(tmpdir) / "kernel.cpp"
        cpp.write_text(text)
        obj = Path(tmpdir) / "kernel.o"
        so = Path(tmpdir) / "kernel.so"
        rt_copy = Path(tmpdir) / "mlxsim_rt.o"  # what the compiler sees: the checked bytes
        rt_copy.write_bytes(rt_bytes)
        dirs = [arg for d in include for arg in ("-I", str(d))]
        if language == "msl" and (refusal := _expanded_refusal([*cc.command, *flags, *dirs], cpp)):
            return BuildResult(False, None, seconds=time.perf_counter() - t0, **refusal)
        out = run([*cc.command, *flags, *dirs, "-c", str(cpp), "-o", str(obj)], "the kernel")
        if out.returncode == 0:
            out = run(
                [*cc.command, *flags, *link_flags(cc), str(rt_copy), str(obj), "-o", str(so)],
                "the kernel",
            )
        if out.returncode != 0:
            return BuildResult(False, None, seconds=time.perf_counter() - t0, log=out.stderr)
        _regular(obj, so)
        refusal = object_problem(obj, rt, text, language, declared)
        if refusal is None and (sentence := library_problem(so, language)):
            refusal = sentence, log_line(None, sentence)
        if refusal:
            sentence, log = refusal
            return BuildResult(
                False, None, seconds=time.perf_counter() - t0, log=log, refused=sentence
            )
        # a refused library is never published
        sha = _publish(_read_output(so), lib)
    return BuildResult(True, lib, seconds=time.perf_counter() - t0, sha256=sha)


# What the preprocessed translation unit of an MSL kernel may come to (about 0.3 MiB, almost all
# of it the simulator's headers): mlxport reads it whole.
PREPROCESSED_BYTES = 16 << 20


def _expanded_refusal(command: list[str], cpp: Path) -> dict | None:
    """The translation unit after the preprocessor, as the compiler will read it (the same text
    in the same sandbox), checked in the candidate's part (source_checks.expanded_problem): the
    BuildResult fields refusing it, or None."""
    out = run(
        [*command, "-E", str(cpp)],
        "the kernel",
        output_bytes=PREPROCESSED_BYTES,
        action="preprocessing",
    )
    if out.returncode != 0:
        return {"log": out.stderr}
    if problem := expanded_problem(out.stdout):
        sentence, where, line = problem
        place = (where, line, 1) if line else None
        return {"log": log_line(place, sentence), "refused": sentence}
    return None


def link_flags(cc: Compiler) -> list[str]:
    """A shared library whose every symbol is defined (-z defs: a template never specialised for
    the types it is built at fails here, named, not when the library is loaded), with its
    read-only data apart from its code (GNU ld merges them on some targets; lld never does). The
    runtime's object goes first on the line, so where both define an inline function the
    runtime's own copy is the one linked."""
    flags = ["-shared", "-Wl,-z,defs"]
    if sys.platform.startswith("linux"):  # ELF linkers (Mach-O's keeps data out of code itself)
        flags.append("-Wl,-z,noexecstack")
        if not any("ziglang" in part for part in cc.command):
            flags.append("-Wl,-z,separate-code")
    return flags


def _publish(data: bytes, final: Path) -> str:
    """Copy what the compiler made into the cache (through cache.publish, which records its
    hash); the hash of the bytes as read here."""
    tmp = final.with_name(f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    publish(tmp, final)
    return hashlib.sha256(data).hexdigest()


def _regular(*paths: Path) -> None:
    """The compiler's outputs are regular files of its folder (never links to elsewhere)."""
    for p in paths:
        if not stat.S_ISREG(os.lstat(p).st_mode):
            raise BuildError(f"the compiler's output {p.name} is not a regular file")


def _read_output(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _runtime() -> tuple[Path, bytes]:
    """The runtime object and its bytes, checked against the hash recorded when it was built."""
    for _ in range(2):
        obj = runtime_object()
        data = read_verified(obj)
        if data is not None:
            return obj, data
    raise BuildError(f"the simulator runtime {obj.name} keeps changing in the cache")


def runtime_object() -> Path:
    """The compiled runtime for the current compiler and flags (built on first use, and again
    whenever the cached one no longer matches its recorded hash)."""
    cc = find_compiler()
    flags = [f for f in cc.flags() if f != OPT_LEVEL] + ["-O2"]
    key = digest(
        RUNTIME_SOURCE.read_text(),
        headers_digest(INCLUDE),
        " ".join(flags),
        cc.version,
        " ".join(cc.command),
    )
    obj = cache_dir() / f"rt-{key}.o"
    if recorded(obj):
        return obj
    t0 = time.perf_counter()
    zig = any("ziglang" in part for part in cc.command)
    sys.stderr.write(
        "mlxport: building the simulator runtime, once for this compiler ("
        + ("up to a few minutes: zig builds its C++ library first" if zig else "seconds")
        + ")\n"
    )
    with tempfile.TemporaryDirectory(prefix="mlxsim-rt-") as tmpdir:
        tmp = Path(tmpdir) / "mlxsim_rt.o"
        out = run(
            [*cc.command, *flags, "-I", str(INCLUDE), "-c", str(RUNTIME_SOURCE), "-o", str(tmp)],
            "the runtime",
            timeout=900.0 if zig else COMPILE_TIMEOUT,
            cpu_seconds=1800 if zig else None,
        )
        if out.returncode != 0:
            raise BuildError(f"the simulator runtime does not compile:\n{out.stderr[-3000:]}")
        if zig:
            # zig builds libc++ at a first link: here, inside the announced wait, not at the first
            # kernel's
            run(
                [*cc.command, *flags, "-shared", str(tmp), "-o", str(tmp.with_suffix(".so"))],
                "the runtime",
                timeout=900.0,
                cpu_seconds=1800,
            )
        _regular(tmp)
        _publish(_read_output(tmp), obj)
    sys.stderr.write(
        f"mlxport: the simulator runtime is built ({time.perf_counter() - t0:.0f} s)\n"
    )
    return obj
