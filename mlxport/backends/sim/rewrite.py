"""Source rewriting that turns MSL kernel text into C++ the simulator runtime compiles.

MSL differs from C++ mostly in its address spaces, so the rewrite is token based and small:

- ``[const] device|constant|threadgroup T*`` becomes ``::mlxsim::Ptr<[const] T, AS>``, a
  bounds-checked pointer; ``thread T*`` becomes a plain pointer, and a C-style cast to one,
  ``(thread T*)x``, ``(T*)(::mlxsim::PtrOnly)x``, which takes no integer and no checked pointer's
  own storage; ``AS T&`` drops the keyword.
- ``threadgroup T name[A][B];`` becomes a handle bound to per-threadgroup storage (one array
  shared by the group's lanes, as on the GPU), numbered by a slot per declaration.
- ``&p[i]`` (or ``&(p[i])``) of a buffer or pointer in an address space becomes ``(p + (i))``,
  a checked pointer too (a plain address would escape the bounds, written-mask and race checks),
  and ``&*p`` (or ``&(*p)``) becomes ``p``; ``&r`` of a reference declared in an address
  space (``device float& r``) becomes ``ns::address_in<space>(&r)``, a checked pointer too, as
  ``&r.x`` of a member does;
- ``[const] auto* p`` becomes ``auto p``: what it points into may be a checked pointer, which
  ``auto*`` cannot deduce (its constness comes with the deduced type);
- program-scope ``constant`` variables become ``const``; ``reinterpret_cast`` to a rewritten
  pointer becomes ``static_cast`` (Ptr converts explicitly); ``1.0h`` becomes ``half(1.0)``;
  ``#include <metal_*>`` lines are blanked.

The simulator's own names are written through ``ns``, an alias of its namespace that the
candidate cannot know (signature.runtime_alias), so that the candidate's own text naming the
runtime (whose internals hand out raw addresses) is told apart and refused
(source_checks.expanded_problem). Every edit keeps the number of lines, so ``#line`` markers keep
compiler lines exact; columns are mapped back through the recorded edits.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

SPACES = ("device", "constant", "threadgroup", "thread")
_AS_ENUM = {"device": "AS_DEVICE", "constant": "AS_CONSTANT", "threadgroup": "AS_THREADGROUP"}
_QUALIFIERS = ("const", "volatile")
_DECL_STOP = {";", "=", ",", ")", "[", "{", "(", "}"}
SYNC_FUNCTIONS = {
    "threadgroup_barrier",
    "simdgroup_barrier",
    "simdgroup_load",
    "simdgroup_store",
    "simdgroup_multiply",
    "simdgroup_multiply_accumulate",
    "make_filled_simdgroup_matrix",
}

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>(?:0[xX][0-9a-fA-F']+|(?:\d[\d']*\.?[\d']*|\.\d[\d']*)(?:[eE][+-]?\d+)?)[a-zA-Z_]*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<punct>::|->|&&|\|\||<<=|>>=|[-+*/%&|^!=<>]=|\+\+|--|.)
""",
    re.VERBOSE | re.DOTALL,
)
_METAL_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<metal_\w+>[^\n]*", re.MULTILINE)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    """Significant tokens (no whitespace, no comments) with their offsets."""
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "punct"
        if kind not in ("ws", "comment"):
            out.append(Token(kind, m.group(), m.start(), m.end()))
    return out


@dataclass
class Rewritten:
    """Rewritten text plus the edits that produced it, to map compiler positions back."""

    original: str
    text: str
    edits: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, replacement)
    slots: int = 0  # threadgroup declarations numbered so far (slot ids are global to a kernel)
    sync: bool = False  # uses barriers, SIMD-group functions or simdgroup_matrix (needs fibers)
    # program-scope `constant` arrays: the runtime knows their extents, so a pointer into one
    # is checked like one into a buffer
    constant_arrays: tuple[str, ...] = ()

    def original_position(self, line: int, column: int) -> tuple[int, int]:
        """Map a 1-based (line, column) in ``text`` to the same place in ``original``."""
        out_offset = _offset(self.text, line, column)
        in_offset = out_offset
        shift = 0
        for start, end, repl in self.edits:
            out_start = start + shift
            if out_offset < out_start:
                break
            if out_offset < out_start + len(repl):
                in_offset = start
                break
            shift += len(repl) - (end - start)
            in_offset = out_offset - shift
        return _line_col(self.original, in_offset)


def _offset(text: str, line: int, column: int) -> int:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    line = max(1, min(line, len(starts)))
    return min(starts[line - 1] + max(column, 1) - 1, len(text))


def _line_col(text: str, offset: int) -> tuple[int, int]:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    i = bisect.bisect_right(starts, offset) - 1
    return i + 1, offset - starts[i] + 1


_POINTER = re.compile(
    r"\b(?:device|constant|threadgroup)\s+(?:const\s+)?[\w:<>, ]+?\s*\*\s*(?:const\s+)?(\w+)"
)
_TG_ARRAY = re.compile(r"\bthreadgroup\s+(?:const\s+)?[\w:<>, ]+?\s+(\w+)\s*\[[^\]\[]*\]\s*[;=]")
_OPERAND_END = frozenset({")", "]", "++", "--"})  # a & after these is binary
_MEMBER = frozenset({".", "->", "[", "("})  # &p[i].x, &p[i][j], &p[i](): not an element's address


class _Rewriter:
    def __init__(
        self, text: str, slot_base: int, pointers: frozenset[str], ns: str, program_scope: bool
    ):
        self.text = text
        self.program_scope = program_scope
        self.ns = ns
        self.toks = tokenize(text)
        # names whose elements live in checked memory: buffers, pointers and 1-D arrays in an
        # address space
        self.pointers = pointers | set(_POINTER.findall(text)) | set(_TG_ARRAY.findall(text))
        self.edits: list[tuple[int, int, str]] = []
        # references declared in an address space, by name: `&r` of one is a checked pointer
        self.references: dict[str, str] = {}
        self.slot = slot_base
        self.sync = False
        self.constant_arrays: list[str] = []

    def edit(self, start: int, end: int, repl: str) -> None:
        # Keep the line count: compiler lines must stay those of the candidate's text.
        self.edits.append((start, end, repl + "\n" * self.text.count("\n", start, end)))

    def run(self) -> None:
        for m in _METAL_INCLUDE.finditer(self.text):
            self.edit(m.start(), m.end(), "")
        toks = self.toks
        i = 0
        while i < len(toks):
            t = toks[i]
            if t.kind == "ident":
                self._note_sync(i)
                if t.text in SPACES:
                    i = self._space(i)
                    continue
                if t.text in ("reinterpret_cast", "const_cast") and self._cast_to_space(i):
                    self.edit(t.start, t.end, "static_cast")
                if t.text == "auto" and i + 1 < len(toks) and toks[i + 1].text == "*":
                    self.edit(toks[i + 1].start, toks[i + 1].end, "")
                    if i and toks[i - 1].text == "const":
                        self.edit(toks[i - 1].start, toks[i - 1].end, "")
            elif t.kind == "number" and t.text[-1] in "hH" and not t.text.startswith(("0x", "0X")):
                self.edit(t.start, t.end, f"half({t.text[:-1]})")
            elif t.text == "&":
                self._address_of(i)
            i += 1
        self._plain_structs()

    def _plain_structs(self) -> None:
        """In each ``struct S { float x, y[2]; };`` whose body is only member declarations (in the
        header or the kernel body), declare it plain where its members are: a thread pointer may
        read such a struct's bits as numbers (``*(thread uint2*)&s``), since no member can hold
        an address (the compiler checks each member's type; any other struct stays refused). A
        member alias, since a struct local to the kernel has no name at namespace scope."""
        toks = self.toks
        for i, t in enumerate(toks):
            if (
                t.text == "struct"
                and (i == 0 or toks[i - 1].text != ">")  # a template's name is no type
                and i + 2 < len(toks)
                and toks[i + 1].kind == "ident"
                and toks[i + 2].text == "{"
            ):
                close = _matching(toks, i + 2, "{", "}")
                members = _member_names(toks[i + 3 : close])
                if members:
                    each = " && ".join(
                        f"{self.ns}::plain_value<decltype({m})>::value" for m in members
                    )
                    plain = f"{self.ns}::PlainOf<{toks[i + 1].text}, ({each})>"
                    end = toks[close]
                    self.edit(end.start, end.start, f" using mlxsim_plain = {plain}; ")

    def _address_of(self, i: int) -> None:
        toks = self.toks
        prev = toks[i - 1] if i else None
        if prev is not None and (
            prev.kind in ("ident", "number") and prev.text != "return" or prev.text in _OPERAND_END
        ):
            return  # a binary &
        if i + 1 < len(toks) and toks[i + 1].text == "*":
            # &*p is p: a checked pointer stays one
            self.edit(toks[i].start, toks[i + 1].end, "")
            return
        parens = 0  # &(p[i]) is &p[i]
        while i + 1 + parens < len(toks) and toks[i + 1 + parens].text == "(":
            parens += 1
        name = i + 1 + parens
        if parens and self._star_in_parens(name, parens):
            # &(*p) is p
            self.edit(toks[i].start, toks[i].end, "")
            self.edit(toks[name].start, toks[name].end, "")
            return
        if self._reference_address(i, name, parens):
            return
        if name + 1 >= len(toks) or toks[name].text not in self.pointers:
            return
        if toks[name + 1].text != "[":
            return
        close = _matching(toks, name + 1, "[", "]")
        after = toks[close + 1 : close + 1 + parens]
        if len(after) < parens or any(t.text != ")" for t in after):
            return
        if close + 1 + parens < len(toks) and toks[close + 1 + parens].text in _MEMBER:
            return
        if parens and close + 1 < len(toks) and toks[close + 1].text in _MEMBER:
            return
        self.edit(toks[i].start, toks[i].end, "(")
        self.edit(toks[name + 1].start, toks[name + 1].end, " + (")
        self.edit(toks[close].start, toks[close].end, "))")

    def _reference_address(self, amp: int, name: int, parens: int) -> bool:
        """``&r`` (or ``&(r)``) of a reference declared in an address space becomes
        ``ns::address_in<space>(&r)``, a checked pointer as ``&p[i]`` is (a plain address would
        reach past the buffer's end); whether it was rewritten."""
        toks = self.toks
        space = self.references.get(toks[name].text) if name < len(toks) else None
        after = name + 1 + parens
        if space is None or any(t.text != ")" for t in toks[name + 1 : after]):
            return False
        last = name
        if after < len(toks) and toks[after].text in (*_MEMBER, "::"):
            # &v.x of a vector or struct the reference names: its member's address is checked too
            member = after + 1
            if not (
                parens == 0
                and toks[after].text == "."
                and member < len(toks)
                and toks[member].kind == "ident"
                and (member + 1 >= len(toks) or toks[member + 1].text not in ("(", "[", *_MEMBER))
            ):
                return False
            last = member
        at = f"{self.ns}::address_in<{self.ns}::{_AS_ENUM[space]}>(&"
        self.edit(toks[amp].start, toks[amp].end, at)
        self.edit(toks[last].start, toks[last].end, f"{toks[last].text})")
        return True

    def _star_in_parens(self, star: int, parens: int) -> bool:
        """Whether ``toks[star:]`` is ``* name`` and then ``parens`` closing parentheses."""
        toks = self.toks
        end = star + 2 + parens
        return (
            end <= len(toks)
            and toks[star].text == "*"
            and toks[star + 1].kind == "ident"
            and all(t.text == ")" for t in toks[star + 2 : end])
        )

    def _note_sync(self, i: int) -> None:
        name = self.toks[i].text
        if name in SYNC_FUNCTIONS or name.startswith(("simd_", "quad_")):
            self.sync = True

    def _cast_to_space(self, i: int) -> bool:
        toks = self.toks
        if i + 1 >= len(toks) or toks[i + 1].text != "<":
            return False
        for t in toks[i + 2 : i + 12]:
            if t.text == ">":
                return False
            if t.text in SPACES:
                return True
        return False

    def _space(self, i: int) -> int:
        """Rewrite the declaration around address-space keyword ``toks[i]``; return the next
        index."""
        toks, space = self.toks, self.toks[i].text
        start_i = i
        cv = []
        if i > 0 and toks[i - 1].text in _QUALIFIERS and not self._edited(toks[i - 1].start):
            start_i = i - 1
            cv.append(toks[i - 1].text)
        j, depth, type_toks = i + 1, 0, []
        while j < len(toks):
            tx = toks[j].text
            if tx == "<":
                depth += 1
            elif tx == ">":
                depth -= 1
            elif tx == ">>":
                depth -= 2
            elif depth <= 0 and (tx in ("*", "&", "&&") or tx in _DECL_STOP):
                break
            if depth <= 0 and tx in _QUALIFIERS:
                cv.append(tx)
            else:
                type_toks.append(toks[j])
            j += 1
        if j >= len(toks):
            return i + 1
        stop = toks[j].text
        if stop == "*":
            self._pointer(toks[start_i].start, toks[j].end, space, cv, type_toks)
            if space == "thread" and self._is_cast(start_i, j):
                self.edit(toks[j + 1].start, toks[j + 1].end, f")({self.ns}::PtrOnly)")
            return j + 1
        if stop in ("&", "&&"):
            self.edit(toks[i].start, toks[i].end, "")
            if space != "thread" and j + 1 < len(toks) and toks[j + 1].kind == "ident":
                self.references[toks[j + 1].text] = space
            return j + 1
        if space == "threadgroup":
            return self._threadgroup_decl(start_i, i, type_toks, j)
        if space == "constant":
            has_const = any(t.text in ("const", "constexpr") for t in toks[max(0, i - 2) : j])
            if stop == "[" and toks[j - 1].kind == "ident" and self._at_program_scope(i):
                self.constant_arrays.append(toks[j - 1].text)
            self.edit(toks[i].start, toks[i].end, "" if has_const else "const")
        else:
            self.edit(toks[i].start, toks[i].end, "")
        return i + 1

    def _at_program_scope(self, i: int) -> bool:
        """Whether ``toks[i]`` is outside every brace of a header (a function's local
        ``constant`` array is no program-scope name)."""
        if not self.program_scope:
            return False
        opened = sum(t.text == "{" for t in self.toks[:i])
        return opened == sum(t.text == "}" for t in self.toks[:i])

    def _is_cast(self, first: int, star: int) -> bool:
        """Whether the type from ``toks[first]`` to the ``*`` at ``star`` is a C-style cast's:
        in parentheses of its own, not a call's or a declaration's (``f(thread float*)``)."""
        toks = self.toks
        if first < 1 or toks[first - 1].text != "(" or star + 1 >= len(toks):
            return False
        if toks[star + 1].text != ")":
            return False
        before = toks[first - 2] if first >= 2 else None
        return (
            before is None
            or before.text == "return"
            or (before.kind == "punct" and before.text not in (")", "]"))
        )

    def _edited(self, offset: int) -> bool:
        return any(s <= offset < e for s, e, _ in self.edits)

    def _pointer(
        self, start: int, end: int, space: str, cv: list[str], type_toks: list[Token]
    ) -> None:
        pointee = (
            " ".join(dict.fromkeys(cv)) + (" " if cv else "") + " ".join(t.text for t in type_toks)
        )
        if space == "thread":
            self.edit(start, end, f"{pointee}*")
        else:
            self.edit(start, end, f"{self.ns}::Ptr<{pointee}, {self.ns}::{_AS_ENUM[space]}>")

    def _threadgroup_decl(self, start_i: int, i: int, type_toks: list[Token], j: int) -> int:
        """``threadgroup T a[N], b;`` -> handles to per-threadgroup storage; returns the index
        after ``;``."""
        toks = self.toks
        if not type_toks or type_toks[-1].kind != "ident":
            self.edit(toks[i].start, toks[i].end, "")
            return i + 1
        name_tok = type_toks[-1]
        base = " ".join(t.text for t in type_toks[:-1])
        decls = []
        k = j
        name = name_tok.text
        while True:
            dims = []
            while k < len(toks) and toks[k].text == "[":
                close = _matching(toks, k, "[", "]")
                dims.append(self.text[toks[k].end : toks[close].start].strip())
                k = close + 1
            decls.append(self._tg_handle(base, name, dims))
            if k + 1 < len(toks) and toks[k].text == "," and toks[k + 1].kind == "ident":
                name = toks[k + 1].text
                k += 2
                continue
            break
        first = start_i
        if first > 0 and toks[first - 1].text == "static":
            first -= 1
        end = toks[k].end if k < len(toks) and toks[k].text == ";" else toks[k - 1].end
        self.edit(toks[first].start, end, " ".join(decls))
        return k + 1

    def _tg_handle(self, base: str, name: str, dims: list[str]) -> str:
        slot = self.slot
        self.slot += 1
        if not dims:
            return f'auto& {name} = *{self.ns}::tg_scalar<{base}>({slot}, "{name}");'
        extents = ", ".join(f"({d})" for d in dims)
        return f'auto {name} = {self.ns}::tg_array<{base}, {extents}>({slot}, "{name}");'


def _matching(toks: list[Token], k: int, open_: str, close: str) -> int:
    depth = 0
    for m in range(k, len(toks)):
        if toks[m].text == open_:
            depth += 1
        elif toks[m].text == close:
            depth -= 1
            if depth == 0:
                return m
    return len(toks) - 1


_NOT_A_MEMBER_LIST = {
    "*",
    "&",
    "&&",
    "(",
    ":",
    "{",
    "operator",
    "template",
    "union",
    "struct",
    "class",
    "static",
    "using",
    "typedef",
    "friend",
    "virtual",
    "enum",
}


def _member_names(body: list[Token]) -> list[str]:
    """The members a struct body of plain declarations (``T a, b[N] = v;``) declares; none where
    it holds anything else (functions, pointers, references, nested types, bit-fields)."""
    if not body or any(t.text in _NOT_A_MEMBER_LIST for t in body) or body[-1].text != ";":
        return []
    names, declarator, depth = [], [], 0
    for t in body:
        if t.text == "[":
            depth += 1
        elif t.text == "]":
            depth -= 1
        if depth == 0 and t.text in (",", ";"):
            idents = [d for d in _before_initializer(declarator) if d.kind == "ident"]
            if not idents:
                return []
            names.append(idents[-1].text)
            declarator = []
        else:
            declarator.append(t)
    return names


def _before_initializer(declarator: list[Token]) -> list[Token]:
    """A declarator's tokens before its ``=`` and array bounds: the type and the name."""
    out = []
    for t in declarator:
        if t.text in ("=", "["):
            break
        out.append(t)
    return out


def rewrite_msl(
    text: str,
    slot_base: int = 0,
    pointers: frozenset[str] = frozenset(),
    ns: str = "::mlxsim",
    program_scope: bool = False,
) -> Rewritten:
    """Rewrite MSL ``text`` (a kernel body, or a header: ``program_scope``) into simulator C++;
    ``pointers`` names the kernel's buffers, ``ns`` the simulator's namespace."""
    rw = _Rewriter(text, slot_base, pointers, ns, program_scope)
    rw.run()
    edits = sorted(rw.edits)
    out, pos = [], 0
    for start, end, repl in edits:
        if start < pos:  # overlapping edit (should not happen); keep the first
            continue
        out.append(text[pos:start])
        out.append(repl)
        pos = end
    out.append(text[pos:])
    return Rewritten(text, "".join(out), edits, rw.slot, rw.sync, tuple(rw.constant_arrays))
