"""``__constant__`` memory the host fills: ``cudaMemcpyToSymbol(coeffs, h, sizeof(h))`` from a host
array whose values the host code states (``float h[4] = {1, 2, 3, 4};``, no size of the case in
them) is ``__constant__ float coeffs[4] = {1, 2, 3, 4};``. Written into the declaration, the values
reach the original kernel run on the CPU executor (which never runs host code) and the translation
(a constant array in the header) alike.

One the host fills from values the file does not state (a filter it reads or computes at run time)
is a `RuntimeConstant`: an input of the task named after it, which the original's launch on the
executor is filled from and the translation takes as a buffer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from mlxport.cuda_syntax import declared_name, parse, text, walk
from mlxport.translate.host.evaluate import HostEvaluator
from mlxport.translate.host.expressions import host_callee
from mlxport.translate.host.values import SIZES, integral
from mlxport.translate.reading.macros import preprocess

_COPIES = ("cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync")


@dataclass(frozen=True)
class Filled:
    """A ``__constant__`` declaration given the values the host copies into it."""

    name: str
    declaration: Node  # the init-less declarator of the __constant__ global
    values: list[int | float]
    line: int  # of the copy


def with_host_constants(source: str) -> tuple[str, list[str]]:
    """The source with each ``__constant__`` the host fills from stated values initialized with
    them in its declaration (lines kept), and a note for each."""
    data = source.encode()
    root = parse(data).root_node
    edits, notes = [], []
    for f in _filled(root, data):
        decl = f.declaration
        typ = text(decl.parent.child_by_field_name("type"))
        values = ", ".join(_literal(v, typ) for v in f.values)
        init = f" = {{{values}}}" if decl.type == "array_declarator" else f" = {values}"
        edits.append((decl.end_byte, init.encode()))
        notes.append(
            f"__constant__ {f.name} holds the values the host copies into it at line {f.line} "
            f"(cudaMemcpyToSymbol), written into its declaration"
        )
    for at, insert in sorted(edits, reverse=True):
        data = data[:at] + insert + data[at:]
    return data.decode(), notes


# the element types a runtime constant may have as an input (the task's dtype of each)
FLOAT_DTYPES = {
    "float": "float32",
    "double": "float32",
    "half": "float16",
    "__half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
}


@dataclass(frozen=True)
class RuntimeConstant:
    """A ``__constant__`` global the host fills at run time with values the file does not state."""

    name: str
    type: str  # its element type, as declared
    elements: int  # as declared; 0 where it cannot be an input
    line: int  # of its declaration
    problem: str = ""  # why it cannot be an input of the task; "" where it can

    @property
    def dtype(self) -> str:
        return FLOAT_DTYPES.get(self.type, "float32")


def runtime_constants(source: str) -> list[RuntimeConstant]:
    """The ``__constant__`` globals of ``source`` declared without values (after
    `with_host_constants`, those the host fills from values the file does not state), each with
    why it cannot be an input where it cannot: an array of floats at file scope of a size the file
    states can."""
    if "__constant__" not in source:
        return []
    data = source.encode()
    root = parse(data).root_node
    macros, _, _ = preprocess(data, "the source")
    ev = HostEvaluator(root, {}, {m.name: m.body for m in macros if m.params is None}, data)
    out = []
    for name, decl in _constant_declarators(root).items():
        typ = re.sub(r"\b(const|volatile)\b", "", text(decl.parent.child_by_field_name("type")))
        typ = " ".join(typ.split())
        sizes = _sizes(ev, decl)
        problem = _input_problem(decl, typ, sizes)
        elements = 0 if problem else sizes[0]
        out.append(RuntimeConstant(name, typ, elements, ev.line(decl), problem))
    return out


def _sizes(ev: HostEvaluator, declarator: Node) -> list[int | None]:
    """The declared size of each dimension of an array, outermost first (None: not stated)."""
    out: list[int | None] = []
    while declarator is not None and declarator.type == "array_declarator":
        size = declarator.child_by_field_name("size")
        n = ev.value(size, ev.constants) if size is not None else None
        out.insert(0, int(n) if isinstance(n, int | float) and n > 0 else None)
        declarator = declarator.child_by_field_name("declarator")
    return out


def _input_problem(decl: Node, typ: str, sizes: list[int | None]) -> str:
    if decl.parent.parent is None or decl.parent.parent.type != "translation_unit":
        return "it is declared inside a namespace: declare it at file scope"
    if not sizes:
        return "it is one value, not an array: declare it as an array of one element"
    if len(sizes) > 1:
        return f"it has {len(sizes)} dimensions: declare it as a flat array"
    if sizes[0] is None:
        return "its size is no number the file states: declare it with one"
    if typ not in FLOAT_DTYPES:
        return f"its elements are {typ}, not floating point: only float arrays become inputs"
    return ""


def _filled(root: Node, data: bytes) -> list[Filled]:
    constants = _constant_declarators(root)
    if not constants:
        return []
    macros, _, _ = preprocess(data, "the source")
    ev = HostEvaluator(root, {}, {m.name: m.body for m in macros if m.params is None}, data)
    out: dict[str, Filled] = {}
    for call in walk(root):
        if call.type != "call_expression" or host_callee(call) not in _COPIES:
            continue
        args = call.child_by_field_name("arguments").named_children
        name = text(args[0]).strip() if args else ""
        if name not in constants or len(args) < 3 or name in out:
            continue
        if len(args) > 3 and ev.value(args[3], {}) != 0:
            continue  # a copy at an offset fills part of it
        values = _copied(ev, call, args, text(constants[name].parent.child_by_field_name("type")))
        if values is not None and len(values) <= _elements(ev, constants[name]):
            out[name] = Filled(name, constants[name], values, ev.line(call))
    return list(out.values())


def _constant_declarators(root: Node) -> dict[str, Node]:
    """File-scope ``__constant__`` globals declared without values: name -> declarator."""
    out = {}
    for n in walk(root, stop=frozenset({"function_definition"})):
        if n.type != "declaration" or "__constant__" not in {
            text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")
        }:
            continue
        for d in n.children_by_field_name("declarator"):
            if d.type in ("identifier", "array_declarator"):
                out[declared_name(d)] = d
    return out


def _copied(ev: HostEvaluator, call: Node, args: list[Node], typ: str) -> list[Any] | None:
    """The numbers the copy moves, where the host code states them all and their byte count."""
    env = _file_scope(ev) | ev.scope_before(call)
    got = ev.value(args[1], env)
    values = list(got) if isinstance(got, list | tuple) else [got]
    if not values or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        return None
    size = SIZES.get(re.sub(r"\bconst\b", "", typ).strip())
    nbytes = ev.value(args[2], env)
    whole = re.fullmatch(r"sizeof\s*\(?\s*(\w+)\s*\)?", text(args[2]).strip())
    if whole and whole.group(1) == text(args[1]).strip().lstrip("&").strip():
        return values  # sizeof(h): all of h
    return values if size and nbytes == size * len(values) else None


def _file_scope(ev: HostEvaluator) -> dict[str, Any]:
    """What the file-scope declarations give (arrays included: ``static const float h[] = ...``)."""
    env: dict[str, Any] = {}
    for c in ev.root.named_children:
        if c.type == "declaration" and "__constant__" not in text(c):
            ev.execute(c, env)
    return env


def _elements(ev: HostEvaluator, declarator: Node) -> int:
    if declarator.type != "array_declarator":
        return 1
    size = declarator.child_by_field_name("size")
    n = ev.value(size, ev.constants) if size is not None else None
    return int(n) if isinstance(n, int | float) else 0


def _literal(v: int | float, typ: str) -> str:
    if integral(typ):
        return str(int(v))
    return f"{float(v)!r}" + ("" if "double" in typ else "f")
