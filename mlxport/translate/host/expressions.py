"""Expressions of the host code evaluated at a case: numbers and C's arithmetic, names bound by
the case, the code or the file's macros, ``sizeof``, ``dim3``, a few math functions, torch's
tensor makers and the file's one-line helper functions. What cannot be evaluated is an
``Unknown`` saying why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from tree_sitter import Node

from mlxport.cuda_syntax import parse_expr, text, walk
from mlxport.translate.host.helpers import call_helper
from mlxport.translate.host.values import (
    MATH,
    SIZES,
    Buffer,
    Dim3,
    NullPointer,
    Tensor,
    Unknown,
    binop,
    c_math,
    integral,
    number,
)

TYPE_KEY = "<type>"  # env key prefix: a template type parameter bound by the call, e.g. T -> float
TEXT = "<text>"  # env key prefix: a host local's value as an expression over the case's names

_RANDOM = re.compile(r"make_(random|zeros|ones)\w*|make_\w+_float|malloc|calloc")
_TORCH_MAKE = {
    "zeros",
    "empty",
    "ones",
    "full",
    "rand",
    "randn",
    "zeros_like",
    "empty_like",
    "ones_like",
    "full_like",
    "randn_like",
    "rand_like",
}


class HostExpressions:
    """The values of expressions, for an evaluator that has the case (``case``), the file's macros
    (``defines``), a probe of the device code's constants (``probe``), its type aliases
    (``aliases``), file-scope constants (``constants``) and functions (``functions``)."""

    case: dict[str, Any]
    defines: dict[str, str]
    probe: Callable[[str], int | None] | None
    aliases: dict[str, str]
    constants: dict[str, int | float]
    functions: dict[str, Node]

    def value(self, node: Node, env: dict[str, Any]) -> Any:
        """The expression's value at the case: a number or bool, a Dim3, a Buffer or Tensor, the
        tuple of an initializer list, or Unknown saying why not."""
        read = _READERS.get(node.type)
        return read(self, node, env) if read is not None else _cannot(node)

    def compound_literal(self, node: Node, env: dict[str, Any]) -> Any:
        """``dim3{X, Y, 1}``, or ``<<<N, {X, Y, 1}>>>``."""
        value = node.child_by_field_name("value")
        return self.value(value, env) if value is not None else _cannot(node)

    def initializer_list(self, node: Node, env: dict[str, Any]) -> Any:
        """``dim3 block = {X, Y, 1};``: the numbers as a tuple."""
        parts = [self.value(c, env) for c in node.named_children]
        bad = next((v for v in parts if not isinstance(v, int | float)), None)
        if bad is None:
            return tuple(int(v) for v in parts)
        return bad if isinstance(bad, Unknown) else _cannot(node)

    def qualified(self, node: Node, env: dict[str, Any]) -> Any:
        """std::min's name, or a constant of a type or namespace (x128::size)."""
        got = self.name(text(node).split("::")[-1], env)
        return self.name(re.sub(r"\s+", "", text(node)), env) if isinstance(got, Unknown) else got

    def binary(self, node: Node, env: dict[str, Any]) -> Any:
        a, b = (
            self.value(node.child_by_field_name("left"), env),
            self.value(node.child_by_field_name("right"), env),
        )
        op = text(node.child_by_field_name("operator"))
        if isinstance(a, Unknown):
            return a
        if isinstance(b, Unknown):
            return b
        if isinstance(a, Buffer) and isinstance(b, int | float) and op in "+-":
            return a  # x + offset points into x
        if op in ("==", "!=") and NullPointer() in (a, b):
            same = _null_equal(a, b)
            return same if isinstance(same, Unknown) or op == "==" else not same
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return _cannot(node)
        return binop(op, a, b)

    def unary(self, node: Node, env: dict[str, Any]) -> Any:
        v = self.value(node.child_by_field_name("argument"), env)
        op = text(node.child_by_field_name("operator"))
        if isinstance(v, NullPointer) and op in ("!", "not"):
            return True
        if not isinstance(v, int | float):
            return v if isinstance(v, Unknown) else _cannot(node)
        if op == "~":
            return ~int(v)
        return -v if op == "-" else (not v) if op in ("!", "not") else v

    def conditional(self, node: Node, env: dict[str, Any]) -> Any:
        c = self.value(node.child_by_field_name("condition"), env)
        c = False if isinstance(c, NullPointer) else c
        if not isinstance(c, int | float | bool):
            return Unknown(f"cannot decide {text(node)}")
        return self.value(node.child_by_field_name("consequence" if c else "alternative"), env)

    def cast(self, node: Node, env: dict[str, Any]) -> Any:
        v = self.value(node.child_by_field_name("value"), env)
        tt = text(node.child_by_field_name("type"))
        if isinstance(v, int | float) and "*" not in tt:
            if integral(tt) and not math.isfinite(v):  # C leaves it undefined
                return Unknown(f"{text(node)} casts {v} to an integer, which C leaves undefined")
            return int(v) if integral(tt) else float(v)
        return v

    def size_of(self, node: Node, env: dict[str, Any]) -> Any:
        inner = node.child_by_field_name("type") or (
            node.named_children[0] if node.named_children else None
        )
        name = re.sub(r"\s+", " ", text(inner)).strip("() ")
        name = env.get(TYPE_KEY + name, name)
        if name in SIZES:
            return SIZES[name]
        got = self.probe(f"sizeof({name})") if self.probe is not None else None
        alias = self.aliases.get(name)
        if got is None and alias in SIZES:
            got = SIZES[alias]
        return got if got is not None else Unknown(f"the size of {name} is not known")

    def field(self, node: Node, env: dict[str, Any]) -> Any:
        bound = re.sub(r"\s+", "", text(node)).replace("->", ".")
        if bound in self.case:  # --case params.batch=4
            return self.case[bound]
        base = self.value(node.child_by_field_name("argument"), env)
        field_name = text(node.child_by_field_name("field"))
        if isinstance(base, Dim3) and field_name in ("x", "y", "z"):
            return getattr(base, field_name)
        return _cannot(node)

    def new(self, node: Node, env: dict[str, Any]) -> Any:
        decl = node.child_by_field_name("declarator")
        tt = text(node.child_by_field_name("type"))
        if decl is not None and decl.type == "new_declarator":
            n = self.value(decl.named_children[0], env) if decl.named_children else Unknown("new[]")
            if isinstance(n, int | float) and tt in SIZES:
                return Buffer("new", int(n) * SIZES[tt])
        return _cannot(node)

    def address(self, node: Node, env: dict[str, Any]) -> Any:
        """``&x`` is what x is (a buffer, a struct bound by the case); ``*p`` is not known."""
        if not text(node).startswith("&"):
            return _cannot(node)
        return self.value(node.child_by_field_name("argument"), env)

    def name(self, name: str, env: dict[str, Any]) -> Any:
        if name in env:
            return env[name]
        if name in self.case:
            return self.case[name]
        if name in self.defines:
            body = self.defines[name].strip()
            parsed = parse_expr(body)
            return (
                self.value(parsed, env)
                if parsed is not None
                else Unknown(f"the macro {name} is not a number")
            )
        if name == "NULL":
            return NullPointer()
        if name in ("INFINITY", "HUGE_VALF"):
            return math.inf
        if name in ("M_PI",):
            return math.pi
        if name == "C10_WARP_SIZE":  # PyTorch's warp size on CUDA (64 only on ROCm)
            return 32
        # a constant of the device code (x128::size, WARP_SIZE); host variables are never probed
        if (
            self.probe is not None
            and re.fullmatch(r"[A-Z][A-Z0-9_]*|\w+(::\w+)+", name)
            and (got := self.probe(name)) is not None
        ):
            return got
        return Unknown(f"nothing gives {name} a value")

    def call(self, node: Node, env: dict[str, Any]) -> Any:
        name = host_callee(node)
        args = node.child_by_field_name("arguments").named_children
        if name in ("data_ptr", "data", "contiguous", "cuda", "to", "view", "reshape"):
            return self.value(receiver(node), env) if receiver(node) is not None else Unknown(name)
        if name in ("size", "shape") and receiver(node) is not None:
            t = self.value(receiver(node), env)
            i = self.value(args[0], env) if args else None
            if isinstance(t, Tensor) and isinstance(i, int) and i in t.dims:
                return t.dims[i]
            if isinstance(t, Buffer) and t.shape is not None and isinstance(i, int):
                return t.shape[i]
            return Unknown(f"{text(node)} is not known")
        if name in ("numel",) and receiver(node) is not None:
            t = self.value(receiver(node), env)
            if isinstance(t, Buffer) and t.shape is not None:
                return math.prod(t.shape)
            return Unknown(f"{text(node)} is not known")
        if name in _TORCH_MAKE:
            return self.torch(name, node, args, env)
        if name in MATH:
            vals = [self.value(a, env) for a in args]
            bad = next((v for v in vals if not isinstance(v, int | float)), None)
            if bad is not None:
                return bad if isinstance(bad, Unknown) else Unknown(f"cannot evaluate {text(node)}")
            return c_math(name, vals)
        if name in ("dim3", "make_uint3", "make_int3"):
            vals = [self.value(a, env) for a in args]
            return (
                Dim3(*vals)
                if all(isinstance(v, int | float) for v in vals)
                else Unknown(f"{text(node)}")
            )
        if _RANDOM.fullmatch(name):
            n = self.value(args[0], env) if args else None
            scale = 1 if name.startswith("make_") else 1
            return Buffer(
                name,
                int(n) * 4 * scale
                if isinstance(n, int | float) and name.startswith("make_")
                else int(n)
                if isinstance(n, int | float)
                else None,
            )
        # U(epsilon)
        if len(args) == 1 and (name in SIZES or TYPE_KEY + name in env or name in self.aliases):
            v = self.value(args[0], env)
            t = env.get(TYPE_KEY + name, name)
            t = self.aliases.get(t, t)
            return (int(v) if integral(t) else float(v)) if isinstance(v, int | float) else v
        fn = self.functions.get(name)
        if fn is not None:
            return call_helper(self, fn, [self.value(a, env) for a in args])
        return Unknown(f"{name}() is host code the executor does not evaluate")

    def torch(self, name: str, node: Node, args: list[Node], env: dict[str, Any]) -> Any:
        if name.endswith("_like"):
            src = self.value(args[0], env) if args else None
            fill = 0.0 if name.startswith("zeros") else 1.0 if name.startswith("ones") else None
            if isinstance(src, Tensor):
                named = len(src.names) == len(src.dims)
                return Buffer(
                    name,
                    shape=src.shape(),
                    fill=fill,
                    dims=tuple(src.names[i] for i in range(len(src.dims)))
                    if named and src.shape()
                    else None,
                )
            return Buffer(
                name,
                shape=src.shape if isinstance(src, Buffer) else None,
                fill=fill,
                dims=src.dims if isinstance(src, Buffer) else None,
            )
        dims = self.value(args[0], env) if args else None
        shape = (
            tuple(int(d) for d in dims)
            if isinstance(dims, list) and all(isinstance(d, int | float) for d in dims)
            else None
        )
        names = None
        if (
            args
            and args[0].type == "initializer_list"
            and all(c.type == "identifier" and text(c) in self.case for c in args[0].named_children)
        ):
            names = tuple(text(c) for c in args[0].named_children)
        fill = {"zeros": 0.0, "ones": 1.0}.get(name)
        if name == "full" and len(args) > 1:
            v = self.value(args[1], env)
            fill = float(v) if isinstance(v, int | float) else None
        return Buffer(name, shape=shape, fill=fill, dims=names)

    def sized_text(self, node: Node, env: dict[str, Any]) -> str | None:
        """The byte count as an expression over the case's names (sizeof() evaluated), where it is
        one."""
        out = text(node)
        for n in walk(node):
            if n.type == "sizeof_expression":
                v = self.value(n, env)
                if not isinstance(v, int):
                    return None
                out = out.replace(text(n), str(v))
            elif n.type == "identifier" and text(n) in self.case:
                continue  # a global the case binds (`int N;` set from a file) is its name
            elif n.type == "identifier" and text(n) in self.derived:
                return None  # `M = sizeof(real) * N` at file scope: measured, not a number
            elif n.type == "identifier" and text(n) in self.constants:
                out = re.sub(rf"\b{text(n)}\b", str(self.constants[text(n)]), out)
            elif n.type == "identifier" and text(n) not in self.case and env.get(TEXT + text(n)):
                # a local the host computed from the case's names: `mem = N * MN * 4`
                out = re.sub(rf"\b{text(n)}\b", f"({env[TEXT + text(n)]})", out)
            elif (
                n.type == "identifier"
                and text(n) not in self.case
                or n.type in ("call_expression", "field_expression", "conditional_expression")
            ):
                return None
        return re.sub(r"\(\s*(?:size_t|int|long|unsigned)\s*\)", "", out)


def _null_equal(a: Any, b: Any) -> bool | Unknown:
    """Whether a pointer compared with ``nullptr`` is null: none is, of the memory the host made;
    a launcher's parameter no caller gives is not known."""
    other = b if isinstance(a, NullPointer) else a
    if isinstance(other, NullPointer) or other == 0:
        return True
    if isinstance(other, Buffer) and (other.nbytes is not None or other.shape is not None):
        return False
    return Unknown("whether a pointer is null is not known")


def _cannot(node: Node) -> Unknown:
    return Unknown(f"cannot evaluate {text(node)}")


def _inner(ev: HostExpressions, node: Node, env: dict[str, Any]) -> Any:
    return ev.value(node.named_children[-1], env)


_READERS: dict[str, Callable[[HostExpressions, Node, dict[str, Any]], Any]] = {
    "number_literal": lambda ev, node, env: number(text(node)),
    "true": lambda ev, node, env: True,
    "null": lambda ev, node, env: NullPointer(),
    "false": lambda ev, node, env: False,
    "compound_literal_expression": HostExpressions.compound_literal,
    "initializer_list": HostExpressions.initializer_list,
    "parenthesized_expression": _inner,
    "condition_clause": _inner,
    "identifier": lambda ev, node, env: ev.name(text(node), env),
    "qualified_identifier": HostExpressions.qualified,
    "binary_expression": HostExpressions.binary,
    "unary_expression": HostExpressions.unary,
    "conditional_expression": HostExpressions.conditional,
    "cast_expression": HostExpressions.cast,
    "sizeof_expression": HostExpressions.size_of,
    "call_expression": HostExpressions.call,
    "field_expression": HostExpressions.field,
    "new_expression": HostExpressions.new,
    "pointer_expression": HostExpressions.address,
}


def host_callee(call: Node) -> str:
    """The called function's own name: ``size`` of ``x.size(0)``, ``min`` of ``std::min<int>``."""
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    if fn is not None and fn.type == "field_expression":
        fn = fn.child_by_field_name("field")
    return text(fn).split("<")[0].split("::")[-1].strip() if fn is not None else ""


def receiver(call: Node) -> Node | None:
    """The object a method is called on: ``x`` of ``x.size(0)``; None for a plain call."""
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return (
        fn.child_by_field_name("argument")
        if fn is not None and fn.type == "field_expression"
        else None
    )
