"""Only kernel code is published: what a compiled kernel object calls, the data it can write and
the code the loader would run, read off its ELF symbol table and sections (symbols), and the
sentence refusing it with the name's line.

The object may call the runtime's own API, the C math library and what C++ itself needs
(symbols.KERNEL_LIBRARY), nothing else; it holds code only in ``.text`` sections and data only
outside them; nothing of it runs when the library is loaded (no constructor, initialiser or
indirect function); it replaces nothing the runtime calls; and an MSL one defines no data it can
write beyond what the simulator's headers do. The linked library maps nothing both writable and
executable, no data as code, and no executable stack.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

from mlxport.backends.sim import symbols
from mlxport.backends.sim.cache import cache_dir, digest, headers_digest, publish, read_verified
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
# Sections the loader runs (or runs what they point to) when the library is loaded or unloaded.
_LOADER_SECTIONS = (".init", ".fini", ".preinit_array", ".ctors", ".dtors")
_DATA_KINDS = (symbols.STT_OBJECT, symbols.STT_COMMON, symbols.STT_TLS)


@functools.cache
def _runtime_exports(rt: Path) -> frozenset[str]:
    """What the runtime object defines for kernels to call (its path names its content): its API,
    in namespace mlxsim and the ``mlxsim_`` C names; not the C++ library code it instantiates."""
    return frozenset(n for n in symbols.defined(rt) if n.startswith(("_ZN6mlxsim", "mlxsim_")))


@functools.cache
def _runtime_names(rt: Path) -> tuple[frozenset[str], frozenset[str]]:
    """(what the runtime object calls, what it defines for others): a kernel defining a name it
    calls, even weakly, would have the linker bind the runtime's own calls to the kernel's; one
    strongly defining a name the runtime defines weakly (an inline function) would win over it."""
    table = symbols.read_symbols(rt)
    calls = frozenset(s.name for s in table if s.undefined)
    defines = frozenset(s.name for s in table if not s.undefined and s.binding != symbols.STB_LOCAL)
    return calls, defines


def header_data_record() -> Path:
    """Where _header_data keeps its names, per headers, flags and compiler."""
    cc = find_compiler()
    key = digest(headers_digest(INCLUDE), " ".join(cc.flags()), cc.version, " ".join(cc.command))
    return cache_dir() / f"hdr-data-{key}.txt"


@functools.cache
def _header_data() -> frozenset[str]:
    """The mutable data the simulator's own headers define in every kernel (none today), read off
    an object of the headers alone; kept on disk per headers, flags and compiler, and used only
    while it matches the hash recorded when it was written."""
    cc = find_compiler()
    flags = cc.flags()
    record = header_data_record()
    kept = read_verified(record)
    if kept is not None:
        return frozenset(kept.decode().split())
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
    nothing of it may run at load, hold data in code or replace what the runtime calls; an MSL
    object may define no data it can write, beyond what the simulator's headers do, and its text
    declare none (``declared``, read off the source: what the optimiser dropped too)."""
    try:
        table = symbols.read_symbols(obj)
        sections = symbols.read_sections(obj)
    except symbols.NotElf:
        # Mach-O (macOS) objects are not read: the object checks are skipped there (what the MSL
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
    found = (
        _runs_at_load(obj, table, sections)
        or _code_problem(table, sections)
        or _replaces_runtime(table, rt)
    )
    if found:
        return _named(what, *found, text, language)
    if declared:
        sentence, where, line = declared
        return sentence, log_line((where, line or 1, 1), sentence)
    if language == "msl" and (data := _mutable_data(table)):
        return _mutable(what, data, text, language)
    if bad:
        return _calls(what, bad, text, language)
    return None


def _runs_at_load(obj: Path, table, sections) -> tuple[str | None, str] | None:
    """(the name, what it is) of code the loader would run: a constructor or dynamic initialiser
    (init, fini and preinit arrays, .ctors), code placed in .init or .fini, or an indirect
    function, whose resolver the loader calls."""
    entries = symbols.loader_entries(obj)
    for name in entries:
        if not name.startswith("."):
            return name, (
                "runs when the library is loaded (a constructor); kernel code runs only when it "
                "is launched"
            )
    for sec in sections:
        loader = sec.type in symbols.LOADER_ARRAYS or sec.name.startswith(_LOADER_SECTIONS)
        if loader and sec.size:
            return None, (
                "it has code run when the library is loaded (a static constructor, or a variable "
                "initialised at run time); kernel code runs only when it is launched, and Metal's "
                "program-scope data is constant, initialised at compile time"
            )
    for s in table:
        if s.kind == symbols.STT_GNU_IFUNC and not s.undefined:
            return s.name, "is an indirect function, whose resolver runs when the library is loaded"
    return None


def _code_problem(table, sections) -> tuple[str | None, str] | None:
    """Code outside ``.text`` sections, sections both writable and executable, data placed in
    executable code (machine code kept as an array, called through a cast), an executable
    stack."""
    for sec in sections:
        if not sec.executable:
            continue
        if sec.flags & symbols.SHF_WRITE:
            return None, f"its section {sec.name} is both writable and executable"
        if not (sec.name == ".text" or sec.name.startswith(".text.")):
            owner = next((s.name for s in table if s.section == sec.name), None)
            return owner, f"is code placed in section {sec.name}, outside the kernel's code"
    for s in table:
        if s.in_code and (s.kind in _DATA_KINDS or s.writable):
            return s.name, (
                "is data placed in executable code (machine code kept as an array?); only "
                "compiled code goes there"
            )
    stack = next((sec for sec in sections if sec.name == ".note.GNU-stack"), None)
    if stack is None or stack.executable:
        return None, "it asks for an executable stack"
    return None


def _replaces_runtime(table, rt: Path) -> tuple[str, str] | None:
    """A function or variable the kernel defines under a name the runtime calls, or strongly
    under one the runtime defines: the linker would bind the runtime's own calls (its messages,
    its memory) to the kernel's."""
    calls, defines = _runtime_names(rt)
    for s in table:
        if s.undefined or s.binding == symbols.STB_LOCAL:
            continue
        if s.name in calls or s.name in defines and s.binding == symbols.STB_GLOBAL:
            return s.name, "replaces a function or variable of the simulator runtime's own"
    return None


def _mutable_data(table) -> list:
    """Writable data of any name (guard variables too), beyond what the headers define."""
    own = _header_data()
    return [s for s in table if s.writable and not s.undefined and s.name not in own]


def _mutable(what: str, data: list, text: str, language: str) -> tuple[str, str]:
    name = data[0].name
    # a guard variable (_ZGV...) stands for the variable it guards, which is what the text names
    guard = name.startswith("_ZGV") and name[4:5] in tuple("0123456789NZS")
    shown = "_Z" + name[4:] if guard else name
    static_local = shown.startswith("_ZZ")
    readable, idents = symbols.readable(shown)
    hit = locate(text, idents, language)
    place = hit[:3] if hit else None
    at = f" at {place_words(place)}" if place else ""
    kind = "a static local variable" if static_local else "a mutable program-scope variable"
    scope = "static and program-scope data" if static_local else "program-scope data"
    sentence = (
        f"{what}: `{readable}`{at} is {kind}; Metal allows {scope} only in the constant "
        "address space"
    )
    return sentence, log_line(place, sentence)


def _named(what: str, name: str | None, why: str, text: str, language: str) -> tuple[str, str]:
    """The sentence for a finding about ``name`` (or the whole object, where None), placed at
    the name's line when the text has it."""
    if name is None:
        sentence = f"{what}: {why}"
        return sentence, log_line(None, sentence)
    shown, idents = symbols.readable(name)
    hit = locate(text, idents, language)
    place = hit[:3] if hit else None
    at = f" ({place_words(place)})" if place else ""
    sentence = f"{what}: `{shown}`{at} {why}"
    return sentence, log_line(place, sentence)


def library_problem(library: Path, language: str) -> str | None:
    """Why the linked ``library`` may not be loaded: a segment both writable and executable,
    read-only data mapped executable (the linker merged it with the code), or an executable or
    undeclared stack. None where it may (and for libraries that are not ELF)."""
    what = "not a Metal kernel" if language == "msl" else "not device code"
    try:
        segments = symbols.read_segments(library)
        sections = symbols.read_sections(library)
    except symbols.NotElf:
        return None
    stack = [s for s in segments if s.type == symbols.PT_GNU_STACK]
    if not stack or stack[0].flags & symbols.PF_X:
        return f"{what}: the library asks for an executable stack"
    for seg in segments:
        if seg.type != symbols.PT_LOAD or not seg.flags & symbols.PF_X:
            continue
        if seg.flags & symbols.PF_W:
            return f"{what}: the library maps memory both writable and executable"
        for sec in sections:
            inside = seg.address <= sec.address < seg.address + seg.size
            if inside and sec.flags & symbols.SHF_ALLOC and sec.size and not sec.executable:
                return (
                    f"{what}: the linker mapped its data section {sec.name} as executable code "
                    "(link with -z separate-code)"
                )
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
