"""Compiling simulator C++ into shared libraries, cached on disk by content hash.

The runtime (rt/mlxsim_rt.cpp) is compiled once per compiler and flags into an object file;
each kernel is one small translation unit linked with it into ``<hash>.so``. The cache key
covers the kernel text, every header, the runtime source, the flags and the compiler's version,
so editing a header or the runtime, or switching compilers, never reuses a stale library.

Only kernel code is published into the cache (compile_library): the kernel's object may call the
runtime's own API, the C math library and what C++ itself needs (symbols.KERNEL_LIBRARY), read
off its ELF symbol table, and an MSL kernel may keep no mutable program-scope or static data
(Metal allows program-scope data only in the constant address space), include nothing but the
<metal_*> headers and hold no inline assembly (build, msl_text_problem). Anything else is refused
with one sentence naming the symbol or variable and its line.

Include paths: the TU sees mlxport's headers and, through them, the C++ library headers they are
written against (<cstddef>, <cstdint>, <cstring>, <climits>, <limits>, <type_traits>, <new>,
<source_location>, which pull in the libc headers they wrap), so -nostdinc/-nostdinc++ would
break them (and zig's driver adds its libc include directories explicitly either way). What a
kernel can reach through those declarations is what the symbol check governs: a declaration
alone runs nothing, and every call that leaves the kernel is an undefined symbol of its object.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlxport.backends.base import cache_root
from mlxport.backends.sim import symbols
from mlxport.backends.sim.rewrite import tokenize
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
        # its type: a * b + c rounds twice unless the kernel calls fma(). Host compilers fuse it into
        # one FMA wherever the CPU has one (zig's clang targets the native CPU; AVX512-FP16 fuses
        # even half arithmetic), so results would depend on the machine: never contract.
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
_PROBE = "using half = _Float16;\nstatic_assert(sizeof(half) == 2);\n#include <source_location>\nint main() {}\n"


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


def cache_dir() -> Path:
    path = cache_root() / "sim"
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


def compiler_env() -> dict[str, str]:
    """The compiler's environment: zig keeps its caches under mlxport's, so no lock on the user's
    ~/.cache/zig (another program's build) can stall a compile; the C locale keeps GCC's quotes
    ASCII in the diagnostics models and people read."""
    zig = str(cache_dir().parent / "zig")
    return {**os.environ, "ZIG_GLOBAL_CACHE_DIR": zig, "ZIG_LOCAL_CACHE_DIR": zig, "LC_ALL": "C"}


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, env=compiler_env()
        )
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"compiling {what} took over {COMPILE_TIMEOUT:g} s") from e


def _publish(tmp: Path, final: Path) -> None:
    os.replace(tmp, final)  # atomic: concurrent builders never see a half-written file


def runtime_object() -> Path:
    """The compiled runtime for the current compiler and flags (built on first use)."""
    cc = find_compiler()
    flags = [f for f in cc.flags() if f != OPT_LEVEL] + ["-O2"]
    key = _digest(
        RUNTIME_SOURCE.read_text(),
        _headers_digest(),
        " ".join(flags),
        cc.version,
        " ".join(cc.command),
    )
    obj = cache_dir() / f"rt-{key}.o"
    if obj.exists():
        return obj
    tmp = obj.with_suffix(f".{os.getpid()}.tmp.o")
    t0 = time.perf_counter()
    zig = any("ziglang" in part for part in cc.command)
    sys.stderr.write(
        "mlxport: building the simulator runtime, once for this compiler ("
        + ("up to a few minutes: zig builds its C++ library first" if zig else "seconds")
        + ")\n"
    )
    out = _run(
        [*cc.command, *flags, "-I", str(INCLUDE), "-c", str(RUNTIME_SOURCE), "-o", str(tmp)],
        "the runtime",
    )
    if out.returncode != 0:
        raise BuildError(f"the simulator runtime does not compile:\n{out.stderr[-3000:]}")
    if zig:  # zig builds libc++ at a first link: here, inside the announced wait, not at the first kernel's
        _run(
            [*cc.command, *flags, "-shared", str(tmp), "-o", str(tmp.with_suffix(".so"))],
            "the runtime",
        )
        tmp.with_suffix(".so").unlink(missing_ok=True)
    _publish(tmp, obj)
    sys.stderr.write(
        f"mlxport: the simulator runtime is built ({time.perf_counter() - t0:.0f} s)\n"
    )
    return obj


@dataclass
class BuildResult:
    ok: bool
    library: Path | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    log: str = ""
    refused: str | None = (
        None  # the one sentence saying why this is not kernel code, when it is not
    )


# Raised whenever what is checked before a library is published changes (the allowlist is in the
# key as it is): a library cached by an earlier mlxport was never checked, so it is never reused.
CHECKS = "kernel-code-1"
_CHECKS_KEY = hashlib.sha256(
    "\0".join([CHECKS, *sorted(symbols.KERNEL_LIBRARY)]).encode()
).hexdigest()


def build(src: SimSource) -> BuildResult:
    """Compile ``src`` into a shared library, or return diagnostics mapped to the candidate."""
    t0 = time.perf_counter()
    if problem := msl_text_problem(src):
        return _refused(problem, t0)
    text = src.text.replace('#line 1 "header"\n', _NO_ASM + '#line 1 "header"\n', 1)
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
    such data found in the source text (sentence, file, line), refused after what the object calls."""
    t0 = time.perf_counter()
    if language != "msl" and (asm := _inline_assembly(text)):
        # The CUDA text is preprocessed already: every asm statement of the file is a token here.
        sentence, log = asm
        return BuildResult(False, None, seconds=time.perf_counter() - t0, log=log, refused=sentence)
    cc = find_compiler()
    flags = cc.flags()
    # The runtime is linked into every library: a runtime change must rebuild them all.
    key = _digest(
        _CHECKS_KEY,
        language,
        text,
        _headers_digest(*include),
        _runtime_digest(),
        " ".join(flags),
        cc.version,
        " ".join(cc.command),
    )
    lib = cache_dir() / f"k-{key}.so"
    if lib.exists():
        return BuildResult(True, lib, seconds=time.perf_counter() - t0, cached=True)
    rt = runtime_object()
    tmp = lib.with_suffix(f".{os.getpid()}.tmp.so")
    try:
        with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
            cpp = Path(tmpdir) / "kernel.cpp"
            cpp.write_text(text)
            obj = Path(tmpdir) / "kernel.o"
            dirs = [arg for d in include for arg in ("-I", str(d))]
            out = _run([*cc.command, *flags, *dirs, "-c", str(cpp), "-o", str(obj)], "the kernel")
            if out.returncode == 0:
                # -z defs: a function declared but never defined (a template never specialised for
                # the types it is built at) fails here, named, instead of when the library is loaded
                out = _run(
                    [
                        *cc.command,
                        *flags,
                        "-shared",
                        "-Wl,-z,defs",
                        str(obj),
                        str(rt),
                        "-o",
                        str(tmp),
                    ],
                    "the kernel",
                )
            if out.returncode != 0:
                return BuildResult(False, None, seconds=time.perf_counter() - t0, log=out.stderr)
            if refusal := object_problem(obj, rt, text, language, declared):
                sentence, log = refusal
                return BuildResult(
                    False, None, seconds=time.perf_counter() - t0, log=log, refused=sentence
                )
        _publish(tmp, lib)
    finally:
        tmp.unlink(missing_ok=True)  # never left behind, and a refused library is never published
    return BuildResult(True, lib, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------- only kernel code

# C++ machinery behind variables with dynamic initialisation or destructors: in an MSL kernel it
# means data kept between calls, which is named as such rather than as these calls.
_STATIC_INIT = frozenset(
    [
        "__cxa_atexit",
        "__cxa_guard_acquire",
        "__cxa_guard_release",
        "__cxa_guard_abort",
        "__cxa_thread_atexit",
        "__cxa_thread_atexit_impl",
        "__dso_handle",
    ]
)


@functools.cache
def _runtime_exports(rt: Path) -> frozenset[str]:
    """What the runtime object defines for kernels to call (its path names its content): its API,
    in namespace mlxsim and the ``mlxsim_`` C names; not the C++ library code it instantiates."""
    return frozenset(n for n in symbols.defined(rt) if n.startswith(("_ZN6mlxsim", "mlxsim_")))


@functools.cache
def _header_data() -> frozenset[str]:
    """The mutable data the simulator's own headers define in every kernel (none today), read off
    an object of the headers alone; kept on disk per headers, flags and compiler."""
    cc = find_compiler()
    flags = cc.flags()
    key = _digest(_headers_digest(INCLUDE), " ".join(flags), cc.version, " ".join(cc.command))
    record = cache_dir() / f"hdr-data-{key}.txt"
    if record.exists():
        return frozenset(record.read_text().split())
    with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
        cpp = Path(tmpdir) / "probe.cpp"
        cpp.write_text('#include "msl_runtime.h"\n')
        obj = Path(tmpdir) / "probe.o"
        out = _run(
            [*cc.command, *flags, "-I", str(INCLUDE), "-c", str(cpp), "-o", str(obj)],
            "the simulator headers",
        )
        if out.returncode != 0:
            raise BuildError(f"the simulator headers do not compile:\n{out.stderr[-3000:]}")
        try:
            names = sorted(s.name for s in symbols.read_symbols(obj) if s.writable)
        except symbols.NotElf:
            names = []
    tmp = record.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("\n".join(names) + "\n")
    _publish(tmp, record)
    return frozenset(names)


def object_problem(
    obj: Path,
    rt: Path,
    text: str,
    language: str,
    declared: tuple[str, str, int | None] | None = None,
) -> tuple[str, str] | None:
    """Why the compiled kernel object ``obj`` is not kernel code: (the sentence, a compiler-style
    log line placing it), or None when it is. The object's undefined symbols must be the
    runtime's own or symbols.KERNEL_LIBRARY (weak ones too: a weak reference still binds at load);
    an MSL object may define no data it can write, beyond what the simulator's headers do, and
    its text declare none (``declared``, read off the source: what the optimiser dropped too)."""
    try:
        table = symbols.read_symbols(obj)
    except symbols.NotElf:
        # Mach-O (macOS) objects are not read: the symbol checks are skipped there (what the MSL
        # text declares is still refused). Linux, where the simulator and the CPU executor run in
        # CI, is always checked.
        if declared:
            sentence, where, line = declared
            return sentence, _log_line((where, line or 1, 1), sentence)
        return None
    what = "not a Metal kernel" if language == "msl" else "not device code"
    needed = {s.name.split("@")[0] for s in table if s.undefined}
    bad = symbols.disallowed(needed, _runtime_exports(rt))
    calls = [n for n in bad if n not in _STATIC_INIT]
    if calls:
        return _calls(what, calls, text, language)
    if declared:
        sentence, where, line = declared
        return sentence, _log_line((where, line or 1, 1), sentence)
    if language == "msl":
        own = _header_data()
        data = [
            s for s in table if s.writable and s.name not in own and not s.name.startswith("_ZGV")
        ]
        if data:
            name, idents = symbols.readable(data[0].name)
            static_local = data[0].name.startswith("_ZZ")
            hit = _locate(text, idents, language)
            place = hit[:3] if hit else None
            at = f" at {_place_words(place)}" if place else ""
            kind = "a static local variable" if static_local else "a mutable program-scope variable"
            scope = "static and program-scope data" if static_local else "program-scope data"
            sentence = f"{what}: `{name}`{at} is {kind}; Metal allows {scope} only in the constant address space"
            return sentence, _log_line(place, sentence)
    if bad:
        return _calls(what, bad, text, language)
    return None


def _calls(what: str, names: list[str], text: str, language: str) -> tuple[str, str]:
    """The sentence naming what the object calls that kernel code may not: the first in the text
    first, with its place."""
    found = []
    for n in names[:20]:
        shown, idents = symbols.readable(n)
        hit = _locate(text, idents, language, call=True)
        found.append((hit[3] if hit else len(text), shown, hit[:3] if hit else None))
    found.sort(key=lambda f: f[0])
    _, shown, place = found[0]
    sentence = f"{what}: calls `{shown}`" + (f" ({_place_words(place)})" if place else "")
    if names[0] in _STATIC_INIT:
        sentence += (
            ", C++'s support for a static variable initialised at run time or destroyed at exit"
        )
    others = list(dict.fromkeys(f"`{s}`" for _, s, _ in found[1:] if s != shown))
    if others:
        sentence += ", and also " + ", ".join(others[:3]) + (" and more" if len(others) > 3 else "")
    return sentence, _log_line(place, f"{what}: calls `{shown}`")


def _inline_assembly(text: str) -> tuple[str, str] | None:
    """Inline assembly in the user's part of a CUDA translation unit: PTX, which the CPU cannot run,
    or the host's own instructions, which no check here sees (a system call needs no symbol)."""
    for ident in ASM_KEYWORDS:
        if ident in text and (hit := _locate(text, [ident], "cuda")):
            where = f" ({_place_words(hit[:3])})"
            return (
                f"not device code: inline assembly (`{ident}`{where}), which the CPU executor does not run",
                _log_line(hit[:3], f"inline asm (`{ident}`) is not run by the CPU executor"),
            )
    return None


def _place_words(place: tuple[str, int, int]) -> str:
    file, line, _ = place
    if file in _USER_FILES:
        return f"line {line} of the {file}"
    return f"line {line} of {Path(file).name}"


def _log_line(place: tuple[str, int, int] | None, message: str) -> str:
    """A compiler-style error line, so the callers' diagnostics place it as any compile error."""
    if place is None:
        return f"kernel.cpp:1:1: error: {message}\n"
    file, line, col = place
    return f"{file}:{line}:{col}: error: {message}\n"


_MARKER = re.compile(r'^[ \t]*#[ \t]*(?:line[ \t]+)?(\d+)[ \t]+"((?:\\.|[^"\\\n])*)"', re.MULTILINE)
_CALL_BEFORE = {
    "(",
    ",",
    "=",
    ";",
    "{",
    "}",
    ":",
    "?",
    "!",
    "+",
    "-",
    "/",
    "%",
    "|",
    "^",
    "[",
    "<",
    ">",
    "return",
    "&&",
    "||",
    "==",
    "!=",
    "<=",
    ">=",
    "+=",
    "-=",
    "*=",
    "/=",
    "::",
}


def _locate(
    text: str, idents: list[str], language: str, call: bool = False
) -> tuple[str, int, int, int] | None:
    """Where one of ``idents`` (most specific first) appears in the user's part of ``text``:
    (file as its line marker names it, line, column, offset in ``text``), a call site preferred
    when ``call``. The
    user's part is the candidate's header and source for MSL, the files of the .cu otherwise."""
    markers = [
        (m.start(), int(m.group(1)), m.group(2), text.count("\n", 0, m.start()))
        for m in _MARKER.finditer(text)
    ]
    if not markers:
        return None
    marker_at = [m[0] for m in markers]
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def place(offset: int) -> tuple[str, int, int, int] | None:
        k = bisect.bisect_right(marker_at, offset) - 1
        if k < 0:
            return None
        _, number, file, marker_line = markers[k]
        if language == "msl" and file not in _USER_FILES:
            return None
        if language != "msl" and (file.startswith("<") or file == "generated"):
            return None
        line = bisect.bisect_right(starts, offset) - 1
        return file, number + line - marker_line - 1, offset - starts[line] + 1, offset

    toks = _tokens(text)
    for ident in idents:
        hits = [
            (i, p)
            for i, t in enumerate(toks)
            if t.kind == "ident" and t.text == ident and (p := place(t.start)) is not None
        ]
        if not hits:
            continue
        if call:
            for i, p in hits:
                before = toks[i - 1].text if i else ";"
                if i + 1 < len(toks) and toks[i + 1].text == "(" and before in _CALL_BEFORE:
                    return p
        return hits[0][1]
    return None


@functools.lru_cache(maxsize=4)
def _tokens(text: str) -> list:
    return tokenize(text)


# Preprocessor directives an MSL kernel may not hold: an #include of anything but a <metal_*> header
# (the system's headers are not Metal's), and a macro named as the inline-assembly keywords (which
# the compile defines away, below). Directives never come out of a macro, so reading them off the
# text (lines spliced, `%:` read as `#`) finds them all.
_DIRECTIVE = re.compile(
    r"^[ \t]*(?:#|%:)[ \t]*(include|include_next|import|embed|define|undef)\b[ \t]*(\S*)",
    re.MULTILINE,
)
ASM_KEYWORDS = ("asm", "__asm", "__asm__")
# After the simulator's own headers, inline assembly spelled through a macro (``__as##m__``) is a
# name that does not compile: Metal has no inline assembly, and on the simulator it would be the
# host's instructions, out of reach of every check here.
_NO_ASM = "".join(f"#define {k} __inline_assembly_is_not_metal\n" for k in ASM_KEYWORDS)


def msl_text_problem(src: SimSource) -> tuple[str, str, int | None] | None:
    """What in an MSL candidate's own text is not Metal whatever it compiles to: an #include of
    anything but a <metal_*> header, inline assembly, a macro named ``asm``. (sentence, where,
    line) or None."""
    for where, rewritten in (("header", src.header), ("source", src.body)):
        text = rewritten.original
        spliced = text.replace("\\\r\n", "").replace("\\\n", "")
        for m in _DIRECTIVE.finditer(spliced):
            directive, target = m.group(1), m.group(2)
            line = _spliced_line(text, m.start())
            if directive in ("define", "undef"):
                name = re.match(r"\w*", target).group()
                if name in ASM_KEYWORDS:
                    return (
                        f"not a Metal kernel: #{directive} {name} (line {line} of the {where}); Metal has no "
                        "inline assembly",
                        where,
                        line,
                    )
                continue
            if directive == "include" and re.fullmatch(r"<metal_\w+>", target):
                continue
            return (
                f"not a Metal kernel: includes {target or 'a file'} (line {line} of the {where}); a Metal "
                "kernel includes only the <metal_*> headers",
                where,
                line,
            )
        for t in tokenize(text):
            if t.kind == "ident" and t.text in ASM_KEYWORDS:
                line = text.count("\n", 0, t.start) + 1
                return (
                    f"not a Metal kernel: inline assembly (`{t.text}`, line {line} of the {where}); Metal "
                    "has none",
                    where,
                    line,
                )
    return None


_CONST = frozenset({"const", "constexpr"})
_STATIC = frozenset({"static", "thread_local"})
_NAMES = ("identifier", "field_identifier", "qualified_identifier")


def msl_data_problem(src: SimSource) -> tuple[str, str, int | None] | None:
    """A mutable program-scope variable, static data member or ``static`` local in an MSL
    candidate's text, as declared (used or not, which the object check cannot tell once the
    optimiser dropped it): (sentence, where, line) or None. Read on the rewritten text, where
    ``constant`` is ``const``; declarations the parser cannot read whole are left to the object
    check, which sees what any macro made of them."""
    from mlxport.cuda_syntax import parse

    for where, rewritten in (("header", src.header), ("source", src.body)):
        code = (
            rewritten.text
            if where == "header"
            else "void mlxport_body() {" + rewritten.text + "\n}"
        )
        found = _mutable_declaration(parse(code.encode()).root_node, program=where == "header")
        if found:
            name, line, static_local = found
            kind = "a static local variable" if static_local else "a mutable program-scope variable"
            scope = "static and program-scope data" if static_local else "program-scope data"
            return (
                f"not a Metal kernel: `{name}` at line {line} of the {where} is {kind}; Metal allows {scope} "
                "only in the constant address space",
                where,
                line,
            )
    return None


def cuda_state_problem(header: str, body: str) -> str | None:
    """A CUDA candidate keeps no state between calls: a mutable ``__device__`` (or other
    program-scope) variable, or a ``static`` local, is shared by calls MLX runs at once and lets a
    kernel replay an earlier call's answer when its inputs come back. The sentence, or None."""
    from mlxport.cuda_syntax import parse

    for where, code in (("header", header), ("source", "void mlxport_body() {" + body + "\n}")):
        found = _mutable_declaration(
            parse(code.encode()).root_node, program=where == "header", safe=_CUDA_SAFE
        )
        if found:
            name, line, static_local = found
            kind = "a static local variable" if static_local else "a mutable __device__ variable"
            return (
                f"not a stateless kernel: `{name}` at line {line} of the {where} is {kind}, which keeps state "
                "between calls (calls MLX runs at once share it, and a kernel could replay an earlier answer "
                "from it); keep per-call scratch in an extra output (init_value zeroes it)"
            )
    return None


_CUDA_SAFE = frozenset(
    {"const", "constexpr", "__constant__", "__shared__"}
)  # read-only, or per block


def _mutable_declaration(
    node, program: bool, safe: frozenset[str] = _CONST
) -> tuple[str, int, bool] | None:
    """(name, line, whether a static local) of the first mutable static-storage variable under ``node``."""
    for child in node.named_children:
        kind = child.type
        if kind == "ERROR" or child.has_error:
            continue
        if kind in ("declaration", "field_declaration"):
            words = {
                c.text.decode()
                for c in child.named_children
                if c.type in ("type_qualifier", "storage_class_specifier")
            }
            static = bool(words & _STATIC)
            member = kind == "field_declaration"
            keeps = static if (member or not program) else "extern" not in words
            if keeps and not words & safe:
                for d in child.children_by_field_name("declarator"):
                    if _is_variable(d):
                        return _declared_name(d), d.start_point[0] + 1, not program and not member
        if kind in ("function_definition", "lambda_expression"):
            found = _mutable_declaration(child, program=False, safe=safe)
        else:
            found = _mutable_declaration(child, program, safe)
        if found:
            return found
    return None


def _is_variable(d) -> bool:
    """Whether a declarator declares an object (not a function; a pointer to one is an object)."""
    from mlxport.cuda_syntax import inner_declarator

    for _ in range(16):
        if d is None:
            return False
        if d.type in ("init_declarator", "array_declarator") or d.type in _NAMES:
            return True
        if d.type == "function_declarator":
            inner = d.child_by_field_name("declarator")
            return inner is not None and inner.type == "parenthesized_declarator"
        if d.type not in (
            "pointer_declarator",
            "reference_declarator",
            "attributed_declarator",
            "parenthesized_declarator",
        ):
            return False
        d = inner_declarator(d)
    return False


def _declared_name(d) -> str:
    from mlxport.cuda_syntax import walk

    return next((n.text.decode() for n in walk(d) if n.type in _NAMES), "?")


def _spliced_line(text: str, offset: int) -> int:
    """The line of ``text`` where ``offset`` of its spliced form (backslash-newlines removed) is."""
    removed = 0
    for m in re.finditer(r"\\\r?\n", text):
        if m.start() - removed > offset:
            break
        removed += len(m.group())
    return text.count("\n", 0, offset + removed) + 1


@functools.cache
def syntax_log(text: str, include: tuple[Path, ...]) -> str:
    """The compiler's diagnostics for one translation unit, checked but not compiled (nothing of it
    is built or run): what is read off them is compile-time facts."""
    cc = find_compiler()
    with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
        cpp = Path(tmpdir) / "probe.cpp"
        cpp.write_text(text)
        dirs = [arg for d in include for arg in ("-I", str(d))]
        return _run(
            [*cc.command, *cc.flags(), "-fsyntax-only", cc.no_error_limit(), *dirs, str(cpp)],
            "a constant",
        ).stderr


# ---------------------------------------------------------------- diagnostics

_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning|note): "
    r"(?P<msg>.*)$",
    re.MULTILINE,
)
_USER_FILES = ("source", "header")


def _pretty(msg: str) -> str:
    """Show checked pointers in compiler messages as the MSL types they stand for."""

    def sub(m: re.Match[str]) -> str:
        return f"{m.group(1) or ''}{m.group(3).lower()} {m.group(2)}*"

    msg = re.sub(
        r"(?:::)?mlxsim::Ptr<(const )?([^,<>]+(?:<[^<>]*>)?), (?:::)?mlxsim::AS_(\w+)>", sub, msg
    )
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
            for n in entries[i + 1 :]:
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
        out.append(
            Diagnostic(message=_pretty(" ".join(tail))[:800] or "compile failed", where="generated")
        )
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
