"""Only kernel code is published: what a compiled kernel object calls and the data it can write,
read off its ELF symbol table (symbols), and the sentence refusing it with the name's line.

The object may call the runtime's own API, the C math library and what C++ itself needs
(symbols.KERNEL_LIBRARY), nothing else; an MSL one may define no data it can write beyond what
the simulator's headers do.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

from mlxport.backends.sim import symbols
from mlxport.backends.sim.cache import cache_dir, digest, headers_digest, publish
from mlxport.backends.sim.compiler import INCLUDE, BuildError, find_compiler, run
from mlxport.backends.sim.diagnostics import locate, log_line, place_words

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
    key = digest(headers_digest(INCLUDE), " ".join(flags), cc.version, " ".join(cc.command))
    record = cache_dir() / f"hdr-data-{key}.txt"
    if record.exists():
        return frozenset(record.read_text().split())
    with tempfile.TemporaryDirectory(prefix="mlxsim-") as tmpdir:
        cpp = Path(tmpdir) / "probe.cpp"
        cpp.write_text('#include "msl_runtime.h"\n')
        obj = Path(tmpdir) / "probe.o"
        out = run(
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
    publish(tmp, record)
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
            return sentence, log_line((where, line or 1, 1), sentence)
        return None
    what = "not a Metal kernel" if language == "msl" else "not device code"
    needed = {s.name.split("@")[0] for s in table if s.undefined}
    bad = symbols.disallowed(needed, _runtime_exports(rt))
    calls = [n for n in bad if n not in _STATIC_INIT]
    if calls:
        return _calls(what, calls, text, language)
    if declared:
        sentence, where, line = declared
        return sentence, log_line((where, line or 1, 1), sentence)
    if language == "msl":
        own = _header_data()
        data = [
            s for s in table if s.writable and s.name not in own and not s.name.startswith("_ZGV")
        ]
        if data:
            name, idents = symbols.readable(data[0].name)
            static_local = data[0].name.startswith("_ZZ")
            hit = locate(text, idents, language)
            place = hit[:3] if hit else None
            at = f" at {place_words(place)}" if place else ""
            kind = "a static local variable" if static_local else "a mutable program-scope variable"
            scope = "static and program-scope data" if static_local else "program-scope data"
            sentence = (
                f"{what}: `{name}`{at} is {kind}; Metal allows {scope} only in the constant "
                "address space"
            )
            return sentence, log_line(place, sentence)
    if bad:
        return _calls(what, bad, text, language)
    return None


def _calls(what: str, names: list[str], text: str, language: str) -> tuple[str, str]:
    """The sentence naming what the object calls that kernel code may not: the first in the text
    first, with its place."""
    found = []
    for n in names[:20]:
        shown, idents = symbols.readable(n)
        hit = locate(text, idents, language, call=True)
        found.append((hit[3] if hit else len(text), shown, hit[:3] if hit else None))
    found.sort(key=lambda f: f[0])
    _, shown, place = found[0]
    sentence = f"{what}: calls `{shown}`" + (f" ({place_words(place)})" if place else "")
    if names[0] in _STATIC_INIT:
        sentence += (
            ", C++'s support for a static variable initialised at run time or destroyed at exit"
        )
    others = list(dict.fromkeys(f"`{s}`" for _, s, _ in found[1:] if s != shown))
    if others:
        sentence += ", and also " + ", ".join(others[:3]) + (" and more" if len(others) > 3 else "")
    return sentence, log_line(place, f"{what}: calls `{shown}`")
