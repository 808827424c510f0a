"""What a compiled kernel object calls and what data it defines, read off its ELF symbol table.

A kernel's translation unit may call the runtime, the C math library and a handful of functions
C++ itself needs; everything else (``fopen``, ``system``, ``getenv``, ``fork``...) is not kernel
code. Reading the symbols of the object the compiler made is what makes this hold however the
call is spelled: through a macro, a declaration written by hand or a builtin that lowers to it.
No dependency: a small reader of ELF64/ELF32 section headers and symbol tables (Linux and the
BSDs; Mach-O, on macOS, is not read, and callers skip the check there).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

SHT_SYMTAB, SHT_DYNSYM, SHT_SYMTAB_SHNDX = 2, 11, 18
SHF_WRITE, SHF_ALLOC = 0x1, 0x2
SHN_UNDEF, SHN_ABS, SHN_COMMON, SHN_XINDEX, SHN_LORESERVE = 0, 0xFFF1, 0xFFF2, 0xFFFF, 0xFF00
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_TLS = 0, 1, 2, 3, 4, 5, 6


class NotElf(ValueError):
    """The file is not an ELF object (a Mach-O one on macOS, say)."""


@dataclass(frozen=True)
class Symbol:
    name: str
    binding: int  # STB_*
    kind: int  # STT_*
    section: str | None  # None: undefined; "" for absolute and common symbols
    # data the program may change: a writable allocated section (not RELRO), or common
    writable: bool
    size: int

    @property
    def undefined(self) -> bool:
        return self.section is None

    @property
    def weak(self) -> bool:
        return self.binding == STB_WEAK


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    entsize: int


def read_symbols(path: str | Path, *, dynamic: bool = False) -> list[Symbol]:
    """Every named symbol of the object's static symbol table (``.symtab``), or of its dynamic
    one (``.dynsym``) with ``dynamic``. Raises NotElf for anything but an ELF file."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 52:
        raise NotElf(f"{path} is not an ELF file")
    wide = {1: False, 2: True}.get(data[4])
    order = {1: "<", 2: ">"}.get(data[5])
    if wide is None or order is None:
        raise NotElf(f"{path}: unknown ELF class or byte order")
    try:
        return _symbols(data, wide, order, SHT_DYNSYM if dynamic else SHT_SYMTAB)
    except (struct.error, IndexError, ValueError) as e:
        raise NotElf(f"{path}: malformed ELF ({e})") from e


def _symbols(data: bytes, wide: bool, order: str, table: int) -> list[Symbol]:
    if wide:
        (shoff,) = struct.unpack_from(order + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x3A)
        sh_fmt, sym_fmt = order + "IIQQQQIIQQ", order + "IBBHQQ"
    else:
        (shoff,) = struct.unpack_from(order + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x2E)
        sh_fmt, sym_fmt = order + "IIIIIIIIII", order + "IIIBBH"
    if shoff == 0:
        return []

    def header(k: int) -> tuple:
        return struct.unpack_from(sh_fmt, data, shoff + k * shentsize)

    first = header(0)
    if shnum == 0:  # more sections than fit in e_shnum: the count is in section 0's sh_size
        shnum = first[5]
    if shstrndx == SHN_XINDEX:
        shstrndx = first[6]
    raw = [header(k) for k in range(shnum)]
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize) in both classes
    names_at = raw[shstrndx][4]
    sections = [
        _Section(_cstr(data, names_at + h[0]), h[1], h[2], h[4], h[5], h[6], h[9]) for h in raw
    ]
    out: list[Symbol] = []
    for index, sec in enumerate(sections):
        if sec.type != table or not sec.entsize:
            continue
        strtab = sections[sec.link].offset
        xindex = next((s for s in sections if s.type == SHT_SYMTAB_SHNDX and s.link == index), None)
        for k in range(1, sec.size // sec.entsize):  # entry 0 is the null symbol
            at = sec.offset + k * sec.entsize
            if wide:
                st_name, st_info, _other, st_shndx, _value, st_size = struct.unpack_from(
                    sym_fmt, data, at
                )
            else:
                st_name, _value, st_size, st_info, _other, st_shndx = struct.unpack_from(
                    sym_fmt, data, at
                )
            name = _cstr(data, strtab + st_name)
            kind = st_info & 0xF
            if not name or kind in (STT_SECTION, STT_FILE):
                continue
            if st_shndx == SHN_XINDEX and xindex is not None:
                (st_shndx,) = struct.unpack_from(order + "I", data, xindex.offset + 4 * k)
            if st_shndx == SHN_UNDEF:
                section, writable = None, False
            elif st_shndx == SHN_COMMON or kind == STT_COMMON:
                section, writable = "", True
            elif st_shndx >= SHN_LORESERVE and st_shndx != SHN_XINDEX:
                section, writable = "", False
            else:
                s = sections[st_shndx]
                section = s.name
                # RELRO (.data.rel.ro) is read-only once loaded
                writable = (
                    bool(s.flags & SHF_WRITE)
                    and bool(s.flags & SHF_ALLOC)
                    and not s.name.startswith(".data.rel.ro")
                )
            out.append(Symbol(name, st_info >> 4, kind, section, writable, st_size))
    return out


def _cstr(data: bytes, at: int) -> str:
    end = data.index(b"\0", at)
    return data[at:end].decode()


def defined(path: str | Path) -> set[str]:
    """The object's defined symbols that other objects can link against (global and weak)."""
    return {s.name for s in read_symbols(path) if not s.undefined and s.binding != STB_LOCAL}


# ---------------------------------------------------------------- what kernel code may call

# The C math library (C17 7.12 and the usual extensions): what <cmath> calls under MSL's and
# CUDA's math functions. Each name stands for its double, float (-f) and long double (-l) forms.
_LIBM_BASE = (
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cbrt",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "expm1",
    "fabs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "frexp",
    "hypot",
    "ilogb",
    "ldexp",
    "lgamma",
    "llrint",
    "llround",
    "log",
    "log10",
    "log1p",
    "log2",
    "logb",
    "lrint",
    "lround",
    "modf",
    "nan",
    "nearbyint",
    "nextafter",
    "nexttoward",
    "pow",
    "remainder",
    "remquo",
    "rint",
    "round",
    "scalbln",
    "scalbn",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "tgamma",
    "trunc",
    "exp10",
    "sincos",
    "significand",
    "gamma",
    "j0",
    "j1",
    "jn",
    "y0",
    "y1",
    "yn",
    "lgamma_r",
)
LIBM = frozenset(n + suffix for n in _LIBM_BASE for suffix in ("", "f", "l")) | frozenset(
    # glibc's finite-math entry points and the classification helpers <cmath> may call
    [
        "__isnan",
        "__isnanf",
        "__isinf",
        "__isinff",
        "__finite",
        "__finitef",
        "__fpclassify",
        "__fpclassifyf",
        "__signbit",
        "__signbitf",
        "__exp_finite",
        "__expf_finite",
        "__log_finite",
        "__logf_finite",
        "__pow_finite",
        "__powf_finite",
        "__sincosf",
        "__sincos",
    ]
)
# Memory and string builtins the compiler emits for copies and fills (aggregate copies, zeroed
# arrays, std::memcpy in bit casts), and its fortified forms.
MEMORY = frozenset(
    [
        "memcpy",
        "memmove",
        "memset",
        "memcmp",
        "bcmp",
        "__memcpy_chk",
        "__memmove_chk",
        "__memset_chk",
        "__bzero",
        "bzero",
    ]
)
# What C++ itself may need of its support library in kernel code (none of it reaches the system):
# the personality and unwinder of exceptions passing through (C++ compiles with exceptions on),
# std::terminate for one leaving a noexcept function, the stack protector's failure handler, a
# pure or deleted virtual called, thread-local storage, and libc++'s handler of a failed
# precondition in the C++ library headers the simulator's own headers include.
LANGUAGE = frozenset(
    [
        "__gxx_personality_v0",
        "_Unwind_Resume",
        "__cxa_begin_catch",
        "__cxa_end_catch",
        "_ZSt9terminatev",
        "__clang_call_terminate",
        "__stack_chk_fail",
        "__stack_chk_guard",
        "__cxa_pure_virtual",
        "__cxa_deleted_virtual",
        "__tls_get_addr",
        "_ZNSt3__122__libcpp_verbose_abortEPKcz",
    ]
)
# GCC's: the linker-made table PIC code addresses data through (a symbol, not a call), and libgcc's
# conversions and comparisons of half and bfloat16 on CPUs without instructions for them (GCC
# compares two widened halves as halves: `float(h) != float(h)` calls __nehf2).
GCC = frozenset(
    [
        "_GLOBAL_OFFSET_TABLE_",
        "__eqhf2",
        "__nehf2",
        "__lthf2",
        "__lehf2",
        "__gthf2",
        "__gehf2",
        "__unordhf2",
        "__extendhfsf2",
        "__extendhfdf2",
        "__truncsfhf2",
        "__truncdfhf2",
        "__extendbfsf2",
        "__truncsfbf2",
        "__truncdfbf2",
        "__trunchfbf2",
    ]
)
KERNEL_LIBRARY = LIBM | MEMORY | LANGUAGE | GCC


def disallowed(needed: set[str], runtime: set[str]) -> list[str]:
    """The symbols of ``needed`` kernel code has no business calling: not defined by the
    simulator's runtime (``runtime``) and not in KERNEL_LIBRARY; sorted, plain C names first."""
    bad = {n for n in needed if n not in runtime and n not in KERNEL_LIBRARY}
    return sorted(bad, key=lambda n: (n.startswith("_Z"), n))


# ---------------------------------------------------------------- names for people

_OPERATORS = {
    "nw": "operator new",
    "na": "operator new[]",
    "dl": "operator delete",
    "da": "operator delete[]",
}
_OPENERS = "INLXJ"  # each of these is closed by an E


def _length(body: str, i: int) -> tuple[int, int]:
    """The length prefix of a source name that starts at ``i``, and where the name begins."""
    j = i
    while j < len(body) and body[j].isdigit():
        j += 1
    return int(body[i:j]), j


def _skip(body: str, i: int) -> int:
    """The index after the balanced encoding (template arguments, say) that opens at ``i``."""
    depth = 0
    while i < len(body):
        c = body[i]
        if c.isdigit():
            n, j = _length(body, i)
            i = j + n
            continue
        if c in _OPENERS:
            depth += 1
        elif c == "E":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def readable(symbol: str) -> tuple[str, list[str]]:
    """A mangled C++ name as a person reads it (enough to recognise, not a full demangler), and
    the identifiers to look for in the source, most specific first: ``_ZN3foo3barEv`` ->
    ("foo::bar", ["bar", "foo"]); a C name is itself. A static local variable
    (``_ZZ4funcvE7counter``) reads as its own name."""
    if not symbol.startswith("_Z"):
        return symbol, [symbol]
    body = symbol[2:]
    if body[:2] in _OPERATORS:
        return _OPERATORS[body[:2]], [_OPERATORS[body[:2]].split()[1].rstrip("[]")]
    if body.startswith("Z"):  # _ZZ <function encoding> E <entity name>: a function's static local
        m = re.search(r"E(\d+)([A-Za-z_]\w*)$", body)
        if m and len(m.group(2)) >= int(m.group(1)):
            name = m.group(2)[: int(m.group(1))]
            return name, [name]
    parts: list[str] = []
    nested = body.startswith("N")
    i = 1 if nested else 0
    while i < len(body) and body[i] in "rVKL":
        i += 1
    while i < len(body):
        c = body[i]
        if c.isdigit():
            n, j = _length(body, i)
            parts.append(body[j : j + n])
            i = j + n
        elif body.startswith("St", i):
            parts.append("std")
            i += 2
        elif c == "S":  # a substitution (S_, S0_...): what it stands for was named before
            j = body.find("_", i)
            i = j + 1 if j > 0 else len(body)
        elif c == "I":
            i = _skip(body, i)
        elif c in "CD" and i + 1 < len(body) and body[i + 1].isdigit() and parts:
            parts.append(("~" if c == "D" else "") + parts[-1])
            i += 2
        elif c == "B":  # an ABI tag (B9nie220108): part of the name's spelling only
            i += 1
            j = i
            while j < len(body) and body[j].isdigit():
                j += 1
            i = j + int(body[i:j] or 0)
        else:
            break
        if not nested:
            break
    shown = [p for p in parts if p and p != "__1"]  # libc++'s inline namespace
    if not shown:
        return symbol, []
    idents = [p.lstrip("~") for p in reversed(shown) if re.fullmatch(r"~?[A-Za-z_]\w*", p)]
    return "::".join(shown), [p for p in idents if p != "std"]
