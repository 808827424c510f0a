"""C integer expressions (host launch math) -> mlxport's expression language.

Expressions are held as Python ``ast`` trees: C `/` on integers becomes `//`, casts are dropped,
`(a + b - 1) / b` becomes ``ceildiv(a, b)``, and conditions (`c ? a : b`, comparisons) become
min/max or 0/1 indicator arithmetic, since the expression language has neither. (Back to C, for a
body-local constant: `bind.scalars`.)
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable

from tree_sitter import Node

from mlxport.cuda_syntax import parse_expr, text
from mlxport.translate.host.values import truncated

__all__ = ["CExprError", "CToAst", "const_value", "lower", "simplify", "to_expr"]

TYPE_SIZES = {
    "float": 4,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "uint32_t": 4,
    "int32_t": 4,
    "double": 8,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "nv_bfloat16": 2,
    "bfloat16": 2,
    "char": 1,
    "unsigned char": 1,
    "uint8_t": 1,
    "int8_t": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "half2": 4,
    "__half2": 4,
    "__nv_bfloat162": 4,
    "float2": 8,
    "float4": 16,
    "int4": 16,
    "int2": 8,
    "uint4": 16,
    "uint2": 8,
    "long long": 8,
    "unsigned long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "long": 8,
    "bool": 1,
    "double2": 16,
}
# name -> (parameters, or None for an object-like macro; body)
Macros = dict[str, tuple[list[str] | None, str]]
_CEILDIV_NAMES = {
    "ceildiv",
    "ceil_div",
    "cdiv",
    "div_up",
    "divup",
    "DIV_UP",
    "DIVUP",
    "CEIL_DIV",
    "CEILDIV",
    "div_round_up",
    "DIV_ROUND_UP",
    "round_up_div",
    "iDivUp",
    "ceilDiv",
    "cuda_ceil_div",
}
_MINMAX = {
    "min": "min",
    "max": "max",
    "std::min": "min",
    "std::max": "max",
    "fminf": "min",
    "fmaxf": "max",
    "MIN": "min",
    "MAX": "max",
    "umin": "min",
    "umax": "max",
}


class CExprError(ValueError):
    """A host expression cannot be expressed: ``what`` names the construct."""

    def __init__(self, what: str, line: int = 0):
        super().__init__(what)
        self.what = what
        self.line = line


class CaseBound(CExprError):
    """A host value the task's cases bind that no param or input of the task gives."""

    def __init__(self, name: str, line: int = 0):
        super().__init__(
            f"host value `{name}` (the case binds it; no task param or input gives it)", line
        )
        self.name = name


def num(v: int | bool) -> ast.expr:
    return ast.Constant(v)


def const_value(e: ast.expr) -> int | bool | None:
    return e.value if isinstance(e, ast.Constant) and isinstance(e.value, int | bool) else None


class CToAst:
    """Converts tree-sitter C expression nodes using an environment of host names.

    ``lookup(name)`` returns an ast for a name (a host variable, a bound parameter) or None;
    object-like and function-like #defines are expanded from ``macros``; ``type_size(t)`` gives
    sizeof for a type name (template types map to ``x.itemsize``).
    """

    def __init__(
        self,
        lookup: Callable[[str], ast.expr | None],
        macros: Macros,
        type_size: Callable[[str], ast.expr | None],
    ):
        self.lookup = lookup
        self.macros = macros
        self.type_size = type_size
        self.depth = 0

    def text(self, src: str, line: int = 0) -> ast.expr:
        node = parse_expr(src)
        if node is None:
            raise CExprError(f"expression {src!r}", line)
        return self.node(node, line)

    def node(self, n: Node, line: int = 0) -> ast.expr:
        self.depth += 1
        try:
            if self.depth > 64:
                raise CExprError("deeply nested host expression", line)
            return self._node(n, line)
        finally:
            self.depth -= 1

    def _node(self, n: Node, line: int) -> ast.expr:
        t = n.type
        if t == "number_literal":
            return _number(text(n), line)
        if t in ("true", "false"):
            return num(t == "true")
        if t in ("identifier", "qualified_identifier"):
            return self.name(text(n).replace(" ", ""), line)
        if t == "field_expression" and text(n.child_by_field_name("operator")) == ".":
            return self.name(re.sub(r"\s+", "", text(n)), line)  # a dim3's grid.x
        if t == "parenthesized_expression":
            return self.node(n.named_children[-1], line)
        if t == "cast_expression":
            return self.node(n.child_by_field_name("value"), line)
        if t == "binary_expression":
            return self.binary(n, line)
        if t == "unary_expression":
            op = text(n.child_by_field_name("operator"))
            arg = self.node(n.child_by_field_name("argument"), line)
            if op == "-":
                return ast.UnaryOp(ast.USub(), arg)
            if op == "+":
                return arg
            if op in ("!", "not"):
                return ast.UnaryOp(ast.Not(), arg)
            raise CExprError(f"operator {op} in a host expression", line)
        if t == "conditional_expression":
            return ast.IfExp(
                self.node(n.child_by_field_name("condition"), line),
                self.node(n.child_by_field_name("consequence"), line),
                self.node(n.child_by_field_name("alternative"), line),
            )
        if t == "sizeof_expression":
            inner = n.child_by_field_name("type") or n.child_by_field_name("value")
            name = re.sub(r"\s+", " ", text(inner)).strip("() ")
            size = TYPE_SIZES.get(name)
            if size is not None:
                return num(size)
            got = self.type_size(name)
            if got is None:
                raise CExprError(f"sizeof({name})", line)
            return got
        if t == "call_expression":
            return self.call(n, line)
        if t == "field_expression" and n.child_by_field_name("field").type == "field_identifier":
            # a field of a host dim3 or struct (`block.x`, `dimsA.x`) the lookup knows
            return self.name(re.sub(r"\s+", "", text(n)).replace("->", "."), line)
        raise CExprError(f"{t.replace('_', ' ')} `{_short(text(n))}` in a host expression", line)

    def name(self, name: str, line: int) -> ast.expr:
        got = self.lookup(name)
        if got is not None:
            return copy.deepcopy(got)
        macro = self.macros.get(name)
        if macro is not None and macro[0] is None:
            return self.text(macro[1], line)
        raise CExprError(f"host value `{name}`", line)

    def binary(self, n: Node, line: int) -> ast.expr:
        op = text(n.child_by_field_name("operator"))
        if op == "&":
            return self.mask(n, line)
        a = self.node(n.child_by_field_name("left"), line)
        b = self.node(n.child_by_field_name("right"), line)
        ops = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.FloorDiv, "%": ast.Mod}
        if op in ops:
            return ast.BinOp(a, ops[op](), b)
        cmps = {
            "<": ast.Lt,
            "<=": ast.LtE,
            ">": ast.Gt,
            ">=": ast.GtE,
            "==": ast.Eq,
            "!=": ast.NotEq,
        }
        if op in cmps:
            return ast.Compare(a, [cmps[op]()], [b])
        if op in ("&&", "||", "and", "or"):
            return ast.BoolOp(ast.And() if op in ("&&", "and") else ast.Or(), [a, b])
        if op in ("<<", ">>") and isinstance(const_value(b), int) and 0 <= const_value(b) < 64:
            factor = num(2 ** int(const_value(b)))
            return ast.BinOp(a, ast.Mult() if op == "<<" else ast.FloorDiv(), factor)
        if op in ("<<", ">>"):
            return ast.BinOp(a, ast.LShift() if op == "<<" else ast.RShift(), b)
        raise CExprError(f"operator {op} in a host expression", line)

    def mask(self, n: Node, line: int) -> ast.expr:
        """``x & ~(m - 1)`` (x down to a multiple of m: GGML_PAD), ``x & (m - 1)`` (x % m)."""
        right = _uncast(n.child_by_field_name("right"))
        neg = right.type == "unary_expression" and text(right.children[0]) == "~"
        low = const_value(simplify(self.node(right.named_children[-1] if neg else right, line)))
        if type(low) is not int or low < 0 or low & (low + 1):  # m a power of two
            raise CExprError("operator & in a host expression", line)
        a, m = self.node(n.child_by_field_name("left"), line), num(low + 1)
        return (
            ast.BinOp(ast.BinOp(a, ast.FloorDiv(), m), ast.Mult(), m)
            if neg
            else ast.BinOp(a, ast.Mod(), m)
        )

    def call(self, n: Node, line: int) -> ast.expr:
        fn = n.child_by_field_name("function")
        args = [c for c in n.child_by_field_name("arguments").named_children if c.type != "comment"]
        if fn.type == "field_expression":
            return self.method(fn, args, line)
        name = text(
            fn.child_by_field_name("name") if fn.type == "template_function" else fn
        ).replace(" ", "")
        name = re.sub(r"<[^<>()]*>$", "", name)  # std::min<int64_t>(a, b) is min(a, b)
        if name in ("ceil", "ceilf", "std::ceil") and len(args) == 1:
            quotient = _uncast(args[0])
            if (
                quotient.type == "binary_expression"
                and text(quotient.child_by_field_name("operator")) == "/"
            ):
                return ast.Call(
                    ast.Name("ceildiv"),
                    [
                        self.node(quotient.child_by_field_name("left"), line),
                        self.node(quotient.child_by_field_name("right"), line),
                    ],
                    [],
                )
        if (
            name
            in (
                "static_cast",
                "reinterpret_cast",
                "int",
                "size_t",
                "int64_t",
                "unsigned",
                "long",
                "dim3x",
            )
            and len(args) == 1
        ):
            return self.node(args[0], line)
        if name in _MINMAX and len(args) == 2:
            return ast.Call(ast.Name(_MINMAX[name]), [self.node(a, line) for a in args], [])
        if name in _CEILDIV_NAMES and len(args) == 2:
            return ast.Call(ast.Name("ceildiv"), [self.node(a, line) for a in args], [])
        macro = self.macros.get(name)
        if macro is not None and macro[0] is not None and len(macro[0]) == len(args):
            body = macro[1]
            for p, a in zip(macro[0], args, strict=True):
                body = re.sub(rf"\b{re.escape(p)}\b", f"({text(a)})", body)
            return self.text(body, line)
        raise CExprError(f"call to {name}() in a host expression", line)

    def method(self, fn: Node, args: list[Node], line: int) -> ast.expr:
        """A torch tensor's sizes: ``x.size(i)`` is ``x.shape[i]``, ``x.numel()`` is ``x.size``."""
        receiver = self.node(fn.child_by_field_name("argument"), line)
        field = text(fn.child_by_field_name("field"))
        if not isinstance(receiver, ast.Name):
            raise CExprError(
                f"call to {field}() on `{_short(text(fn))}` in a host expression", line
            )
        if field in ("size", "sizes") and len(args) == 1:
            index = self.node(args[0], line)
            return ast.Subscript(ast.Attribute(receiver, "shape"), index)
        if field == "numel" and not args:
            return ast.Attribute(receiver, "size")
        if field in ("dim", "ndimension") and not args:
            return ast.Attribute(receiver, "ndim")
        raise CExprError(f"call to {field}() on `{_short(text(fn))}` in a host expression", line)


def _uncast(n: Node) -> Node:
    while n.type in ("parenthesized_expression", "cast_expression"):
        n = (
            n.named_children[-1]
            if n.type == "parenthesized_expression"
            else n.child_by_field_name("value")
        )
    return n


def _short(s: str) -> str:
    s = re.sub(r"\s+", " ", s)
    return s if len(s) <= 40 else s[:37] + "..."


def _number(lit: str, line: int) -> ast.expr:
    s = lit.replace("'", "")
    body = re.sub(r"[uUlL]+$", "", s)
    try:
        return num(int(body, 0))
    except ValueError:
        pass
    try:
        return ast.Constant(float(re.sub(r"[fF]$", "", s)))
    except ValueError as e:
        raise CExprError(f"number {lit}", line) from e


def _same(a: ast.expr, b: ast.expr) -> bool:
    return ast.dump(a) == ast.dump(b)


def simplify(e: ast.expr) -> ast.expr:
    """Constant folding and the few algebraic rewrites that keep launch math readable."""
    for _ in range(8):
        before = ast.dump(e)
        e = _simplify(e)
        if ast.dump(e) == before:
            break
    return e


def _simplify(e: ast.expr) -> ast.expr:
    if isinstance(e, ast.BinOp):
        a, b = _simplify(e.left), _simplify(e.right)
        return _binop(a, e.op, b)
    if isinstance(e, ast.UnaryOp):
        v = _simplify(e.operand)
        if (
            isinstance(e.op, ast.USub)
            and isinstance(const_value(v), int)
            and not isinstance(v.value, bool)
        ):
            return num(-v.value)
        if isinstance(e.op, ast.Not) and isinstance(const_value(v), bool | int):
            return num(not v.value)
        return ast.UnaryOp(e.op, v)
    if isinstance(e, ast.Call):
        args = [_simplify(a) for a in e.args]
        vals = [const_value(a) for a in args]
        fname = e.func.id if isinstance(e.func, ast.Name) else ""
        if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            if fname == "min":
                return num(min(vals))
            if fname == "max":
                return num(max(vals))
            if fname == "ceildiv" and vals[1]:
                return num(-(-vals[0] // vals[1]))
        if fname == "ceildiv" and vals[1] == 1:
            return args[0]
        if fname in ("min", "max") and len(args) == 2 and _same(args[0], args[1]):
            return args[0]
        return ast.Call(e.func, args, [])
    if isinstance(e, ast.IfExp):
        return ast.IfExp(_simplify(e.test), _simplify(e.body), _simplify(e.orelse))
    if isinstance(e, ast.Compare):
        a, b = _simplify(e.left), _simplify(e.comparators[0])
        va, vb = const_value(a), const_value(b)
        if isinstance(va, int) and isinstance(vb, int):
            ops = {
                ast.Lt: va < vb,
                ast.LtE: va <= vb,
                ast.Gt: va > vb,
                ast.GtE: va >= vb,
                ast.Eq: va == vb,
                ast.NotEq: va != vb,
            }
            return num(ops[type(e.ops[0])])
        return ast.Compare(a, e.ops, [b])
    if isinstance(e, ast.BoolOp):
        vals = [_simplify(v) for v in e.values]
        return ast.BoolOp(e.op, vals)
    return e


def _binop(a: ast.expr, op: ast.operator, b: ast.expr) -> ast.expr:
    va, vb = const_value(a), const_value(b)
    ints = isinstance(va, int) and isinstance(vb, int)
    if ints:
        if isinstance(op, ast.Add):
            return num(va + vb)
        if isinstance(op, ast.Sub):
            return num(va - vb)
        if isinstance(op, ast.Mult):
            return num(va * vb)
        if isinstance(op, ast.FloorDiv) and vb:
            return num(truncated(va, vb))  # C truncates
        if isinstance(op, ast.Mod) and vb:
            return num(va - vb * truncated(va, vb))
        if isinstance(op, ast.LShift | ast.RShift) and 0 <= vb < 64:
            return num(va << vb if isinstance(op, ast.LShift) else va >> vb)
    if isinstance(op, ast.Mult):
        if va == 1:
            return b
        if vb == 1:
            return a
        if va == 0 or vb == 0:
            return num(0)
    if isinstance(op, ast.Add | ast.Sub) and vb == 0:
        return a
    if isinstance(op, ast.Sub) and _same(a, b):
        return num(0)
    if isinstance(op, ast.Add) and va == 0:
        return b
    if isinstance(op, ast.FloorDiv) and vb == 1:
        return a
    # (a + c1) - c2 -> a + (c1 - c2)
    if (
        isinstance(op, ast.Sub | ast.Add)
        and isinstance(vb, int)
        and isinstance(a, ast.BinOp)
        and isinstance(a.op, ast.Add)
        and isinstance(const_value(a.right), int)
    ):
        c = a.right.value + (vb if isinstance(op, ast.Add) else -vb)
        return _binop(a.left, ast.Add(), num(c)) if c >= 0 else _binop(a.left, ast.Sub(), num(-c))
    # (a + (b - 1)) // b -> ceildiv(a, b)
    if isinstance(op, ast.FloorDiv) and isinstance(a, ast.BinOp) and isinstance(a.op, ast.Add):
        inner = a.right
        if isinstance(vb, int) and const_value(inner) == vb - 1:
            return ast.Call(ast.Name("ceildiv"), [a.left, b], [])
        if (
            isinstance(inner, ast.BinOp)
            and isinstance(inner.op, ast.Sub)
            and const_value(inner.right) == 1
            and _same(inner.left, b)
        ):
            return ast.Call(ast.Name("ceildiv"), [a.left, b], [])
    if (
        isinstance(op, ast.FloorDiv)
        and isinstance(a, ast.BinOp)
        and isinstance(a.op, ast.Sub)
        and const_value(a.right) == 1
        and isinstance(a.left, ast.BinOp)
        and isinstance(a.left.op, ast.Add)
        and _same(a.left.right, b)
    ):
        return ast.Call(ast.Name("ceildiv"), [a.left.left, b], [])
    # (x * k) // x -> k (sizeof(T) * 128 // sizeof(T))
    if isinstance(op, ast.FloorDiv) and isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mult):
        if _same(a.left, b):
            return a.right
        if _same(a.right, b):
            return a.left
    # (a * k) // k -> a
    if (
        isinstance(op, ast.FloorDiv)
        and isinstance(a, ast.BinOp)
        and isinstance(a.op, ast.Mult)
        and isinstance(vb, int)
        and const_value(a.right) == vb
    ):
        return a.left
    return ast.BinOp(a, op, b)


def lower(e: ast.expr, *, want_bool: bool = False) -> ast.expr:
    """Replace conditions by min/max or 0/1 indicators; raises CExprError if a bool value leaks
    into arithmetic (the expression language cannot test a bool)."""
    e = simplify(e)
    out = _lower(e, want_bool)
    return simplify(out)


def _is_boolish(e: ast.expr) -> bool:
    return (
        isinstance(e, ast.Compare | ast.BoolOp)
        or (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not))
        or (isinstance(e, ast.Constant) and isinstance(e.value, bool))
    )


def _lower(e: ast.expr, want_bool: bool) -> ast.expr:
    if isinstance(e, ast.IfExp):
        return _select(e, want_bool)
    if _is_boolish(e) and not want_bool:
        return _indicator(e)
    if isinstance(e, ast.BinOp):
        return ast.BinOp(_lower(e.left, False), e.op, _lower(e.right, False))
    if isinstance(e, ast.Call):
        return ast.Call(e.func, [_lower(a, False) for a in e.args], [])
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return ast.UnaryOp(e.op, _lower(e.operand, False))
    return e


def _select(e: ast.IfExp, want_bool: bool) -> ast.expr:
    test, a, b = e.test, e.body, e.orelse
    if _same(a, b):
        return _lower(a, want_bool)
    # c1 ? a : (c2 ? a : x)  ->  (c1 || c2) ? a : x
    if isinstance(b, ast.IfExp) and _same(b.body, a):
        return _select(ast.IfExp(ast.BoolOp(ast.Or(), [test, b.test]), a, b.orelse), want_bool)
    ca, cb = const_value(a), const_value(b)
    if isinstance(ca, bool) and isinstance(cb, bool):
        if ca and not cb and isinstance(test, ast.Name):
            return test  # a bool parameter used directly
        if ca and not cb:
            return _lower(test, want_bool) if want_bool else _indicator(test)
        raise CExprError("a negated bool condition in a template argument")
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right, op = test.left, test.comparators[0], test.ops[0]
        lt = isinstance(op, ast.Lt | ast.LtE)
        gt = isinstance(op, ast.Gt | ast.GtE)
        if (lt or gt) and _same(left, a) and _same(right, b):
            return ast.Call(
                ast.Name("min" if lt else "max"), [_lower(a, False), _lower(b, False)], []
            )
        if (lt or gt) and _same(left, b) and _same(right, a):
            return ast.Call(
                ast.Name("max" if lt else "min"), [_lower(b, False), _lower(a, False)], []
            )
        # v < c ? c : min(v, M)  ->  max(c, min(v, M))  (the usual clamp)
        if lt and _same(right, a) and isinstance(b, ast.IfExp | ast.Call):
            inner = _lower(b, False)
            if (
                isinstance(inner, ast.Call)
                and inner.func.id == "min"
                and _same(inner.args[0], left)
                and isinstance(const_value(a), int)
                and isinstance(const_value(inner.args[1]), int)
                and const_value(a) <= const_value(inner.args[1])
            ):
                return ast.Call(ast.Name("max"), [a, inner], [])
    if isinstance(test, ast.Name):
        raise CExprError(f"a choice on the bool `{test.id}` in launch arithmetic")
    ind, la, lb = _indicator(test), _lower(a, False), _lower(b, False)
    if isinstance(lb, ast.Constant | ast.Name):
        return ast.BinOp(lb, ast.Add(), ast.BinOp(ind, ast.Mult(), ast.BinOp(la, ast.Sub(), lb)))
    rest = ast.BinOp(ast.BinOp(num(1), ast.Sub(), ind), ast.Mult(), lb)  # else-if chains: b once
    return ast.BinOp(ast.BinOp(ind, ast.Mult(), la), ast.Add(), rest)


def _clip01(e: ast.expr) -> ast.expr:
    return ast.Call(ast.Name("min"), [num(1), ast.Call(ast.Name("max"), [num(0), e], [])], [])


def _indicator(c: ast.expr) -> ast.expr:
    """1 when the integer condition holds, else 0, in + - * min max only."""
    c = simplify(c)
    if isinstance(c, ast.Constant):
        return num(int(bool(c.value)))
    if isinstance(c, ast.Compare) and len(c.ops) == 1:
        a, b, op = _lower(c.left, False), _lower(c.comparators[0], False), c.ops[0]

        def diff(x: ast.expr, y: ast.expr, plus: int = 0) -> ast.expr:
            return simplify(ast.BinOp(ast.BinOp(x, ast.Sub(), y), ast.Add(), num(plus)))

        if isinstance(op, ast.Lt):
            return _clip01(diff(b, a))
        if isinstance(op, ast.LtE):
            return _clip01(diff(b, a, 1))
        if isinstance(op, ast.Gt):
            return _clip01(diff(a, b))
        if isinstance(op, ast.GtE):
            return _clip01(diff(a, b, 1))
        absd = ast.Call(ast.Name("max"), [diff(a, b), diff(b, a)], [])
        ne = ast.Call(ast.Name("min"), [num(1), absd], [])
        return ne if isinstance(op, ast.NotEq) else ast.BinOp(num(1), ast.Sub(), ne)
    if isinstance(c, ast.BoolOp):
        parts = [_indicator(v) for v in c.values]
        out = parts[0]
        for p in parts[1:]:
            out = (
                ast.BinOp(out, ast.Mult(), p)
                if isinstance(c.op, ast.And)
                else ast.Call(ast.Name("min"), [num(1), ast.BinOp(out, ast.Add(), p)], [])
            )
        return out
    if isinstance(c, ast.UnaryOp) and isinstance(c.op, ast.Not):
        return ast.BinOp(num(1), ast.Sub(), _indicator(c.operand))
    if isinstance(c, ast.Name):
        raise CExprError(f"a condition on the bool `{c.id}` in launch arithmetic")
    # an integer used as a condition: nonzero
    return ast.Call(
        ast.Name("min"),
        [
            num(1),
            ast.Call(
                ast.Name("max"), [_lower(c, False), ast.UnaryOp(ast.USub(), _lower(c, False))], []
            ),
        ],
        [],
    )


def to_expr(e: ast.expr) -> str | int | bool:
    """The expression-language form: a plain int/bool when constant, else a string."""
    v = const_value(e)
    if v is not None:
        return v
    out = ast.unparse(e)
    plain = out.replace("<<", "").replace(">>", "")  # shifts are in the language, comparisons not
    words = (" if ", " and ", " or ", "not ", "==", "!=")
    if "/" in out.replace("//", "") or any(w in out for w in words) or "<" in plain or ">" in plain:
        raise CExprError(f"launch expression {out!r} needs operators the expression language lacks")
    if isinstance(e, ast.Constant):
        raise CExprError(f"non-integer launch value {out}")
    return out
