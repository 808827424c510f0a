"""A small whitelisted evaluator for the expressions in tasks and candidates.

Shapes, grids, threadgroups, template values and dtypes are written as strings such as
``"ceildiv(x.size, 256) * 256"`` or ``"x.dtype"``. They come from task authors and from
LLM-written candidates, so they are parsed with ``ast`` and only a fixed set of node types
is interpreted: nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

from mlxport.errors import UserError

MAX_LENGTH = 1000  # a host if/else-if chain over a size, lowered to + - * min max
MAX_DEPTH = 24
MAX_INT = 2**62

DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "bool",
)


class ExprError(UserError):
    """An expression was refused or could not be evaluated."""


@dataclass(frozen=True)
class Dtype:
    """A dtype name as it appears in expressions (``float16``), comparable and printable."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ArrayInfo:
    """What an expression may see of an input array: shape, dtype, size, ndim."""

    shape: tuple[int, ...]
    dtype: Dtype

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype.name]


ITEMSIZE = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "bool": 1,
}
ARRAY_ATTRS = {"shape", "dtype", "size", "ndim", "itemsize"}


def _ceildiv(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("ceildiv by zero")
    return -(-a // b)


def _sqrt(a: float) -> float:
    if a < 0:
        raise ExprError("sqrt of a negative number")
    return math.sqrt(a)


FUNCTIONS = {"min": min, "max": max, "ceildiv": _ceildiv, "sqrt": _sqrt}
ARITY = {"min": (2, 8), "max": (2, 8), "ceildiv": (2, 2), "sqrt": (1, 1)}

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: _floordiv(a, b),
    ast.Div: lambda a, b: _truediv(a, b),  # a param the host computes: 1 / sqrt(d)
    ast.Mod: lambda a, b: _mod(a, b),
    ast.LShift: lambda a, b: _shift(a, b, 1),  # sizes written as in C: 1 << log2N
    ast.RShift: lambda a, b: _shift(a, b, -1),
}


# A task's requirements on its sizes: Tq <= Tk for a causal attention.
_COMPARE = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}


def _shift(a: int, b: int, sign: int) -> int:
    if not isinstance(a, int) or not isinstance(b, int) or not 0 <= b < 64:
        raise ExprError("shifts take integers and a count from 0 to 63")
    return a << b if sign > 0 else a >> b


def _truediv(a: float, b: float) -> float:
    if b == 0:
        raise ExprError("division by zero")
    return a / b


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("division by zero")
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("modulo by zero")
    return a % b


def parse(text: str) -> ast.expr:
    """Parse and validate an expression; raise ExprError naming what is not allowed."""
    if not isinstance(text, str):
        raise ExprError(f"expected an expression string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression is {len(text)} characters; the limit is {MAX_LENGTH}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise ExprError(f"not a valid expression: {text!r}") from e
    _check(tree.body, 0)
    return tree.body


def _check(node: ast.AST, depth: int) -> None:
    # An explicit walk with a depth cap: refuses deep nesting before anything is evaluated.
    if depth > MAX_DEPTH:
        raise ExprError(f"expression nests deeper than {MAX_DEPTH} levels")
    match node:
        case ast.Constant(value=v):
            if isinstance(v, bool) or (isinstance(v, int) and abs(v) <= MAX_INT):
                return
            if isinstance(v, float):
                return
            raise ExprError(f"constant {v!r} is not allowed (integers, floats and booleans only)")
        case ast.Name(id=name):
            if name.startswith("_"):
                raise ExprError(f"name {name!r} is not allowed")
            return
        case ast.Attribute(value=value, attr=attr):
            if attr not in ARRAY_ATTRS:
                raise ExprError(
                    f"attribute .{attr} is not allowed (only {', '.join(sorted(ARRAY_ATTRS))})"
                )
            if not isinstance(value, ast.Name):
                raise ExprError("attributes are allowed only on input names, e.g. x.shape")
            _check(value, depth + 1)
        case ast.Subscript(value=value, slice=index):
            _check(value, depth + 1)
            _check(index, depth + 1)
        case ast.BinOp(left=left, op=op, right=right):
            if type(op) not in _BINOPS:
                raise ExprError(
                    f"operator {type(op).__name__} is not allowed (+ - * / // % << >> only)"
                )
            _check(left, depth + 1)
            _check(right, depth + 1)
        case ast.UnaryOp(op=ast.USub() | ast.UAdd(), operand=operand):
            _check(operand, depth + 1)
        case ast.Call(func=ast.Name(id=fname), args=args, keywords=[]) if fname in FUNCTIONS:
            lo, hi = ARITY[fname]
            if not lo <= len(args) <= hi:
                raise ExprError(
                    f"{fname}() takes {lo} arguments"
                    if lo == hi
                    else f"{fname}() takes {lo} to {hi} arguments"
                )
            for a in args:
                _check(a, depth + 1)
        case ast.Call():
            raise ExprError(f"calls are not allowed except {', '.join(FUNCTIONS)}")
        case ast.Compare(left=left, ops=[op], comparators=[right]) if type(op) in _COMPARE:
            _check(left, depth + 1)
            _check(right, depth + 1)
        case ast.Tuple(elts=elts) | ast.List(elts=elts):
            if len(elts) > 8:
                raise ExprError("tuples longer than 8 are not allowed")
            for e in elts:
                _check(e, depth + 1)
        case _:
            raise ExprError(f"{type(node).__name__} is not allowed in an expression")


def evaluate(text: str | int | float | bool, names: dict[str, Any]) -> Any:
    """Evaluate ``text`` with ``names`` (ints, floats, bools, ArrayInfo, Dtype) in scope.

    Dtype names (``float32`` ...) are always in scope. Non-string values pass through.
    """
    if isinstance(text, bool | int | float):
        return text
    return _eval(parse(text), {**{d: Dtype(d) for d in DTYPES}, **names})


def _eval(node: ast.AST, names: dict[str, Any]) -> Any:
    match node:
        case ast.Constant(value=v):
            return v
        case ast.Name(id=name):
            if name not in names:
                raise ExprError(
                    f"unknown name {name!r}; known: {', '.join(sorted(names)) or 'none'}"
                )
            return names[name]
        case ast.Attribute(value=value, attr=attr):
            obj = _eval(value, names)
            if not isinstance(obj, ArrayInfo):
                raise ExprError(f".{attr} needs an input array, not {type(obj).__name__}")
            return getattr(obj, attr)
        case ast.Subscript(value=value, slice=index):
            seq, i = _eval(value, names), _eval(index, names)
            if not isinstance(seq, tuple) or not isinstance(i, int) or isinstance(i, bool):
                raise ExprError("only shape[int] subscripts are allowed")
            if not -len(seq) <= i < len(seq):
                raise ExprError(f"index {i} out of range for a shape of {len(seq)} dimensions")
            return seq[i]
        case ast.BinOp(left=left, op=op, right=right):
            a, b = _eval(left, names), _eval(right, names)
            for v in (a, b):
                if not isinstance(v, int | float) or isinstance(v, bool):
                    raise ExprError(f"arithmetic needs numbers, got {type(v).__name__}")
            out = _BINOPS[type(op)](a, b)
            if isinstance(out, int) and abs(out) > MAX_INT:
                raise ExprError("integer result too large")
            return out
        case ast.UnaryOp(op=op, operand=operand):
            v = _eval(operand, names)
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise ExprError("unary minus needs a number")
            return -v if isinstance(op, ast.USub) else v
        case ast.Call(func=ast.Name(id=fname), args=args):
            vals = [_eval(a, names) for a in args]
            if any(not isinstance(v, int | float) or isinstance(v, bool) for v in vals):
                raise ExprError(f"{fname}() needs numbers")
            return FUNCTIONS[fname](*vals)
        case ast.Compare(left=left, ops=[op], comparators=[right]):
            a, b = _eval(left, names), _eval(right, names)
            for v in (a, b):
                if not isinstance(v, int | float) or isinstance(v, bool):
                    raise ExprError(f"comparisons need numbers, got {type(v).__name__}")
            return _COMPARE[type(op)](a, b)
        case ast.Tuple(elts=elts) | ast.List(elts=elts):
            return tuple(_eval(e, names) for e in elts)
    raise ExprError(f"{type(node).__name__} is not allowed in an expression")


def names_used(text: str | int | float | bool) -> set[str]:
    """The bare names an expression refers to (for validation against known dimensions)."""
    if not isinstance(text, str):
        return set()
    return {n.id for n in ast.walk(parse(text)) if isinstance(n, ast.Name)} - set(FUNCTIONS)


def as_int(text: str | int, names: dict[str, Any], what: str) -> int:
    v = evaluate(text, names)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ExprError(f"{what} must be an integer, got {v!r} from {text!r}")
    return v


def as_shape(spec: str | list[str | int], names: dict[str, Any], what: str) -> tuple[int, ...]:
    """A shape given as one expression yielding a tuple, or a list of per-dimension expressions."""
    if isinstance(spec, str):
        v = evaluate(spec, names)
        dims = v if isinstance(v, tuple) else (v,)
    else:
        dims = tuple(evaluate(d, names) for d in spec)
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise ExprError(f"{what}: every dimension must be a non-negative integer, got {dims}")
    return dims


def as_dtype(text: str, names: dict[str, Any], what: str) -> str:
    v = evaluate(text, names)
    if not isinstance(v, Dtype):
        raise ExprError(f"{what} must be a dtype such as float32 or x.dtype, got {v!r}")
    return v.name


def resolve_launch(candidate: dict[str, Any], names: dict[str, Any]) -> dict[str, Any]:
    """A candidate's launch expressions evaluated for inputs of these shapes, dtypes and params:
    its template values (in scope for the rest), output shapes and dtypes, grid (in threads),
    threadgroup and dynamic shared memory. What mlxport verifies is what the written kernel.py
    computes: both call this."""
    names = dict(names)
    template = {k: evaluate(v, names) for k, v in candidate.get("template", {}).items()}
    for k, v in template.items():
        if not isinstance(v, bool | int | Dtype):
            raise ExprError(f"template value {k} must be an int, bool or dtype, got {v!r}")
    names.update(template)
    grid = tuple(as_int(g, names, "grid") for g in candidate["grid"])
    threadgroup = tuple(as_int(t, names, "threadgroup") for t in candidate["threadgroup"])
    if any(v < 1 for v in grid + threadgroup):
        raise ExprError(f"grid {grid} and threadgroup {threadgroup} must be positive")
    return {
        "output_shapes": [
            as_shape(s, names, f"output_shapes[{i}]")
            for i, s in enumerate(candidate["output_shapes"])
        ],
        "output_dtypes": [
            as_dtype(d, names, f"output_dtypes[{i}]")
            for i, d in enumerate(candidate["output_dtypes"])
        ],
        "grid": grid,
        "threadgroup": threadgroup,
        "template": [(k, v.name if isinstance(v, Dtype) else v) for k, v in template.items()],
        "shared_memory": as_int(candidate.get("shared_memory", 0), names, "shared_memory"),
    }
