"""The values of host code evaluated at a case (a buffer the host makes, a tensor, a dim3, a
launch and its arguments, what stays unknown and why) and C's arithmetic on them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from mlxport.errors import UserError

SIZES = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "short": 2,
    "unsigned short": 2,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "nv_bfloat16": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "float": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "long": 8,
    "unsigned long": 8,
    "long long": 8,
    "unsigned long long": 8,
    "size_t": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "double": 8,
    "float2": 8,
    "half2": 4,
    "__half2": 4,
    "float4": 16,
    "int4": 16,
    "uint4": 16,
    "double2": 16,
    "float3": 12,
    "int2": 8,
    "uint": 4,
    "uchar": 1,
    "ushort": 2,
    "ulong": 8,
    "int8_t": 1,
    "uint8_t": 1,
    "int16_t": 2,
    "uint16_t": 2,
}
MATH = {
    "sqrt": math.sqrt,
    "sqrtf": math.sqrt,
    "ceil": math.ceil,
    "ceilf": math.ceil,
    "floor": math.floor,
    "floorf": math.floor,
    "log2": math.log2,
    "log2f": math.log2,
    "log": math.log,
    "logf": math.log,
    "exp": math.exp,
    "expf": math.exp,
    "pow": math.pow,
    "powf": math.pow,
    "fabs": abs,
    "abs": abs,
    "fabsf": abs,
    "min": min,
    "max": max,
    "fmin": min,
    "fmax": max,
    "fminf": min,
    "fmaxf": max,
    "rsqrt": lambda x: 1 / math.sqrt(x),
    "round": round,
    "roundf": round,
}


def c_math(name: str, vals: list) -> Any:
    """``MATH[name](*vals)`` as C's <math.h> gives it where Python's math raises: log2(0) is
    -inf, sqrt(-1) NaN, an overflow infinite, floor(inf) inf."""
    try:
        return MATH[name](*vals)
    except (ValueError, OverflowError, ZeroDivisionError) as e:
        x = float(vals[0]) if vals else math.nan
        if name.startswith("log"):
            return -math.inf if x == 0 else math.nan
        if name.startswith(("ceil", "floor", "round")):
            return x
        if name.startswith(("exp", "rsqrt")):
            return math.inf if isinstance(e, OverflowError) or x == 0 else math.nan
        if name.startswith("pow") and isinstance(e, OverflowError):
            odd = float(vals[1]).is_integer() and int(vals[1]) % 2 == 1
            return -math.inf if x < 0 and odd else math.inf
        if name.startswith("pow") and x == 0:
            return math.inf
        return math.nan


class HostEvalError(UserError):
    """The host code does not give a launch of the kernel at this case; the message says which name
    to bind (with --case) or which flag sets what is missing."""


@dataclass
class Buffer:
    """Memory the host made: where (a name), how big (bytes, or a tensor's shape), its first value;
    ``size_text`` (the byte count as written) and ``dims`` (the shape as the case's names) where
    the host states them in names the case binds."""

    name: str
    nbytes: int | None = None
    shape: tuple[int, ...] | None = None
    fill: float | None = None  # torch::zeros / full / ones: the initial value
    size_text: str | None = None
    dims: tuple[str, ...] | None = None

    def elements(self, itemsize: int) -> int | None:
        if self.shape is not None:
            return math.prod(self.shape)
        return self.nbytes // itemsize if self.nbytes is not None else None


@dataclass
class Tensor:
    """A torch tensor parameter: dims learnt as ``x.size(i)`` is bound to a case name."""

    name: str
    dims: dict[int, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # the case name bound to each dim

    def shape(self) -> tuple[int, ...] | None:
        return (
            tuple(self.dims[i] for i in range(len(self.dims)))
            if sorted(self.dims) == list(range(len(self.dims))) and self.dims
            else None
        )


@dataclass
class Dim3:
    x: int
    y: int = 1
    z: int = 1

    def tuple(self) -> tuple[int, int, int]:
        return (int(self.x), int(self.y), int(self.z))


@dataclass
class Unknown:
    """A value the host code computes from something the case does not give."""

    why: str


@dataclass(frozen=True)
class NullPointer:
    """``nullptr``, ``NULL``: a pointer the host passes as none (an optional input left out)."""


@dataclass
class HostArg:
    text: str
    value: Any  # a number for scalars; a Buffer, Tensor or Unknown for pointers


@dataclass
class HostLaunch:
    kernel: str
    line: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    template_args: list[str]
    args: list[HostArg]
    arm: str = ""  # which branch of an `if` or `switch` the launch is in, where the case decides
    rules: list[str] = field(default_factory=list)  # `K == 256`: the sizes that take that branch


def integral(type_text: str) -> bool:
    return not any(w in type_text for w in ("float", "double", "auto", "half"))


def number(lit: str) -> int | float:
    s = (
        lit.replace("'", "").rstrip("uUlLfF")
        if not lit.lower().startswith("0x")
        else lit.rstrip("uUlL")
    )
    if lit.lower().startswith("0x"):
        return int(s, 16)
    if re.fullmatch(r"0[0-7]+", s):
        return int(s, 8)
    try:
        return int(s)
    except ValueError:
        return float(s if not lit.endswith(("f", "F")) else lit.rstrip("fF"))


def truncated(a: int, b: int) -> int:
    """C's integer quotient (towards zero), exact at any size."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def binop(op: str, a: float, b: float) -> float | int | bool:
    """``a op b`` as C computes it on 64-bit host values; a result past 64 bits (what a
    hostile file's repeated squaring makes, unbounded in Python) is refused."""
    out = _binop(op, a, b)
    if isinstance(out, int) and not -(2**64) < out < 2**64:
        raise HostEvalError(f"the host code's {op} passes 64 bits at this case: bind smaller sizes")
    return out


def _binop(op: str, a: float, b: float) -> float | int | bool:
    both_int = isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool)
    match op:
        case "+":
            return a + b
        case "-":
            return a - b
        case "*":
            return a * b
        case "/" | "%" if b == 0:
            raise HostEvalError(
                f"the host code takes {'a remainder' if op == '%' else 'a quotient'} by zero at "
                "this case: bind other sizes with --case"
            )
        case "/":
            return truncated(a, b) if both_int else a / b  # C truncates towards zero
        case "%":
            return a - b * truncated(a, b) if both_int else math.fmod(a, b)
        case "<<" | ">>" if not 0 <= int(b) < 64:
            raise HostEvalError(f"the host code shifts by {int(b)} bits at this case")
        case "<<":
            return int(a) << int(b)
        case ">>":
            return int(a) >> int(b)
        case "&":
            return int(a) & int(b)
        case "|":
            return int(a) | int(b)
        case "^":
            return int(a) ^ int(b)
        case "<":
            return a < b
        case ">":
            return a > b
        case "<=":
            return a <= b
        case ">=":
            return a >= b
        case "==":
            return a == b
        case "!=":
            return a != b
        case "&&" | "and":
            return bool(a) and bool(b)
        case "||" | "or":
            return bool(a) or bool(b)
    raise HostEvalError(f"operator {op} is not evaluated in host code")
