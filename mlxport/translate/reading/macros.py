"""Preprocessing before the parse: #define collection and bounded expansion of the macros that
define kernels, device functions or launches, so that the grammar sees them as code."""

from __future__ import annotations

import re

from mlxport.cuda_syntax import collapse_spaces
from mlxport.translate.reading.cudafile import CudaReadError, MacroDef

MAX_MACRO_DEPTH = 16
MAX_EXPANDED_BYTES = 8 * 1024 * 1024

# One pass over the text finds comments, string/char literals and preprocessor directive lines;
# each alternative is linear so that unterminated comments or quotes cannot make it quadratic.
_LEX = re.compile(
    rb"//[^\n]*|/\*(?:.*?\*/|.*\Z)|\"(?:[^\"\\\n]|\\.)*\"?|'(?:[^'\\\n]|\\.){0,8}'?"
    rb"|^[ \t]*#(?:[^\n\\]|\\.|\\\n)*",
    re.M | re.S,
)
_DEFINE = re.compile(rb"#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)", re.S)
_KERNEL_MARK = re.compile(rb"__global__|__device__|__launch_bounds__|<<<")
# `#define FLOAT4(x) (reinterpret_cast<float4*>(&(x))[0])`: a store through it is a store to x
_POINTER_CAST = re.compile(
    rb"reinterpret_cast\s*<[^<>]*\*\s*>|\(\s*(?:const\s+)?[A-Za-z_][\w:]*\s*\*\s*\)"
)
_THREAD_INDEX = re.compile(rb"\b(?:threadIdx|blockIdx|blockDim|gridDim)\b")
_IDENT = re.compile(rb"[A-Za-z_]\w*")


def _lex(data: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, bytes]]]:
    """Spans to leave alone (comments, literals, directives) and the directive texts by offset."""
    spans, directives = [], []
    for m in _LEX.finditer(data):
        spans.append((m.start(), m.end()))
        if m.group().lstrip()[:1] == b"#":
            directives.append((m.start(), m.group()))
    return spans, directives


def _collect_macros(data: bytes, directives: list[tuple[int, bytes]]) -> list[MacroDef]:
    out: list[MacroDef] = []
    for offset, text in directives:
        m = _DEFINE.match(text.strip())
        if not m:
            continue
        body = re.sub(rb"\\\r?\n", b" ", m.group(3))
        body = re.sub(rb"//[^\n]*|/\*.*?\*/", b" ", body, flags=re.S).strip()
        params = None
        if m.group(2) is not None:
            params = [
                p.strip().decode("utf-8", "replace")
                for p in m.group(2)[1:-1].split(b",")
                if p.strip()
            ]
            if params and params[-1].endswith("..."):
                params[-1] = params[-1][:-3].strip() or "__VA_ARGS__"
        out.append(
            MacroDef(
                name=m.group(1).decode(),
                params=params,
                body=collapse_spaces(body.decode("utf-8", "replace")),
                line=data.count(b"\n", 0, offset) + 1,
            )
        )
    return out


class _Expander:
    """Bounded expansion of the macros that produce kernels, device functions or launches."""

    def __init__(self, macros: list[MacroDef], name: str, kernels: bool = True):
        self.name = name
        self.macros = {m.name.encode(): m for m in macros}
        self.kernel_macros = (self._kernel_macros() if kernels else {}) | _code_macros(macros)
        self.total = 0

    def _kernel_macros(self) -> dict[bytes, MacroDef]:
        found: dict[bytes, MacroDef] = {}
        for key, m in self.macros.items():
            if _KERNEL_MARK.search(m.body.encode()):
                found[key] = m
        # macros that invoke kernel macros also define kernels (bounded fixed point)
        for _ in range(MAX_MACRO_DEPTH):
            grew = False
            for key, m in self.macros.items():
                if key not in found and any(t in found for t in _IDENT.findall(m.body.encode())):
                    found[key] = m
                    grew = True
            if not grew:
                break
        return found

    def expand(
        self, text: bytes, skip: list[tuple[int, int]], depth: int
    ) -> tuple[bytes, list[tuple]]:
        """Expand kernel-macro uses in `text`; returns new text and (start, end, macro) spans."""
        if depth > MAX_MACRO_DEPTH:
            raise CudaReadError(
                f"{self.name}: macro expansion is nested deeper than {MAX_MACRO_DEPTH} "
                "levels (recursive macro?): simplify the macros that define kernels"
            )
        if not self.kernel_macros:
            return text, []
        out, spans, pos, si = bytearray(), [], 0, 0
        for m in _IDENT.finditer(text):
            if m.start() < pos:
                continue
            while si < len(skip) and skip[si][1] <= m.start():
                si += 1
            if si < len(skip) and skip[si][0] <= m.start():
                continue
            macro = self.kernel_macros.get(m.group())
            if macro is None:
                continue
            end, args = m.end(), None
            if macro.params is not None:
                parsed = _macro_args(text, m.end(), f"{self.name}: macro {macro.name}")
                if parsed is None:
                    continue
                args, end = parsed
            body = _substitute(macro, args or [])
            inner, _ = self.expand(body, _string_spans(body), depth + 1)
            if end < len(text) and text[end : end + 1] == b";" and b"}" in inner[-2:]:
                end += 1  # `DEFINE_KERNEL(x);` leaves a stray `;` that is harmless, but drop it
            self.total += len(inner)
            if self.total > MAX_EXPANDED_BYTES:
                raise CudaReadError(
                    f"{self.name}: macro expansion grows past {MAX_EXPANDED_BYTES // 2**20} MB: "
                    "simplify the macros that define kernels"
                )
            out += text[pos : m.start()]
            start = len(out)
            # keep line numbers: the expansion sits on the invocation's first line
            out += inner.replace(b"\n", b" ") + b"\n" * text.count(b"\n", m.start(), end)
            spans.append((start, len(out), macro.name))
            pos = end
        out += text[pos:]
        return bytes(out), spans


def _code_macros(macros: list[MacroDef]) -> dict[bytes, MacroDef]:
    """Function-like macros that view their argument through a pointer cast, or that name CUDA's
    thread indices (`CUDA_1D_KERNEL_LOOP`): expanded, so that loads and stores through them and
    the loops they make are seen and translated as the code they are."""
    return {
        m.name.encode(): m
        for m in macros
        if m.params is not None
        and (_POINTER_CAST.search(m.body.encode()) or _THREAD_INDEX.search(m.body.encode()))
    }


def expand_casts(data: bytes, name: str = "the source") -> bytes:
    """The text with its pointer-cast and thread-index macros expanded (what the translator
    renders)."""
    skip, directives = _lex(data)
    expanded, _ = _Expander(_collect_macros(data, directives), name, kernels=False).expand(
        data, skip, 0
    )
    return expanded


def _string_spans(text: bytes) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(rb'"(?:[^"\\\n]|\\.)*"', text)]


_ARG_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|[()\[\]{},]')


def _macro_args(text: bytes, pos: int, name: str) -> tuple[list[bytes], int] | None:
    """Arguments of a function-like macro call at `pos` (None when no `(` follows)."""
    m = re.compile(rb"\s*\(").match(text, pos)
    if m is None:
        return None
    depth, args, start = 1, [], m.end()
    for tok in _ARG_TOKEN.finditer(text, m.end()):
        ch = tok.group()
        if ch in (b"(", b"[", b"{"):
            depth += 1
        elif ch in (b")", b"]", b"}"):
            depth -= 1
            if depth == 0:
                args.append(text[start : tok.start()].strip())
                return args, tok.end()
        elif ch == b"," and depth == 1:
            args.append(text[start : tok.start()].strip())
            start = tok.end()
    line = text.count(b"\n", 0, pos) + 1
    raise CudaReadError(f"{name} called at line {line} is not closed: check its parentheses")


def _substitute(macro: MacroDef, args: list[bytes]) -> bytes:
    params = [p.encode() for p in macro.params or []]
    if params and params[-1] == b"__VA_ARGS__" and len(args) > len(params):
        args = args[: len(params) - 1] + [b", ".join(args[len(params) - 1 :])]
    binding = dict(zip(params, args + [b""] * (len(params) - len(args)), strict=False))
    body = macro.body.encode()

    def stringify(m: re.Match) -> bytes:
        arg = binding.get(m.group(1))
        return b'"' + arg.replace(b'"', b'\\"') + b'"' if arg is not None else m.group()

    body = re.sub(rb"(?<!#)#\s*([A-Za-z_]\w*)", stringify, body)
    body = _IDENT.sub(lambda m: binding.get(m.group(), m.group()), body)
    return re.sub(rb"\s*##\s*", b"", body)


def normalize(text: bytes) -> bytes:
    """What the grammar misreads, said in forms it reads, byte offsets kept: ``__align__(N)`` as
    ``alignas(N)``, and the SharedMemory<T> idiom as the extern __shared__ array it is."""
    text = re.sub(rb"__align__\((\s*\w+\s*)\)", lambda m: b"alignas(" + m.group(1) + b")  ", text)
    return _shared_memory_structs(text)


def _shared_memory_structs(text: bytes) -> bytes:
    """``T *s = SharedMemory<T>();``, where the struct's conversion operator returns an
    ``extern __shared__`` array (the CUDA samples' idiom for templated dynamic shared memory), read
    as the ``extern __shared__ T s[];`` it means, padded to keep offsets."""
    names = {
        m.group(1)
        for m in re.finditer(
            rb"\bstruct\s+(\w+)\s*\{(?:[^{}]|\{[^{}]*\})*?operator[^;{]*\*\s*\(\s*\)"
            rb"[^{;]*\{[^{}]*extern\s+__shared__",
            text,
        )
    }
    text = _getpointer_structs(text)
    if not names:
        return text
    pattern = (
        rb"(?m)^(\s*)((?:const\s+)?[\w:]+)\s*\*\s*(\w+)\s*=\s*("
        + b"|".join(names)
        + rb")\s*<[^;]*>\s*\(\s*\)\s*;"
    )
    return re.sub(pattern, _as_extern_shared, text)


def _as_extern_shared(m: re.Match) -> bytes:
    """``T *s = ...;`` (groups: indent, T, s) as ``extern __shared__ T s[];``, padded."""
    new = m.group(1) + b"extern __shared__ " + m.group(2) + b" " + m.group(3) + b"[];"
    return new + b" " * (len(m.group(0)) - len(new)) if len(new) <= len(m.group(0)) else m.group(0)


def _getpointer_structs(text: bytes) -> bytes:
    """``SharedMemory<T> smem; T *s = smem.getPointer();``, where a method of the struct (or of
    each of its specialisations) returns an ``extern __shared__`` array: the array, the object's
    declaration blanked."""
    methods = {
        (m.group(1), m.group(2))
        for m in re.finditer(
            rb"\bstruct\s+(\w+)\s*(?:<[^{;]*>)?\s*\{[^{}]*?\*\s*(\w+)\s*\(\s*\)\s*(?:const\s*)?"
            rb"\{[^{}]*extern\s+__shared__",
            text,
        )
    }
    for struct, method in methods:
        objects = re.findall(rb"(?m)^\s*" + struct + rb"\s*<[^;{}]*>\s+(\w+)\s*;", text)
        for obj in set(objects):
            use = (
                rb"(?m)^(\s*)((?:const\s+)?[\w:]+)\s*\*\s*(\w+)\s*=\s*"
                + obj
                + rb"\s*\.\s*"
                + method
                + rb"\s*\(\s*\)\s*;"
            )
            text, n = re.subn(use, _as_extern_shared, text)
            if n:
                declared = rb"(?m)^(\s*)" + struct + rb"\s*<[^;{}]*>\s+" + obj + rb"\s*;"
                text = re.sub(declared, lambda d: re.sub(rb"\S", b" ", d.group()), text)
    return text


def preprocess(data: bytes, name: str) -> tuple[list[MacroDef], bytes, list[tuple]]:
    """The file's macros, the text to parse, and the (start, end, macro) spans of expansions in
    it."""
    skip, directives = _lex(data)
    macros = _collect_macros(data, directives)
    expanded, spans = _Expander(macros, name).expand(data, skip, 0)
    expanded = normalize(expanded)
    if not re.search(rb"\b__global__\b", expanded):
        expanded = expanded[:65536]  # only to word the "no kernel" error; quick
    return macros, expanded, spans
