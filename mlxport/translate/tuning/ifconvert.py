"""Branches turned into selects: the tuning search's ``selects=1`` knob (CUDA).

An ``if`` inside a loop whose arms only update a thread's floating-point scalars, as softmax's
online update does::

    if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; }
    else       { s += __expf(v - m); }

costs a branch per element; the compiler keeps it because each arm holds a special-function call.
The rewrite evaluates the condition once, as the loop did, and then both arms on copies of what
they update, and keeps the taken arm's values. A math function called once in each arm is called
once, on the taken arm's argument::

    { const bool mlxsel_if = (v > m); const float mlxsel_f0 = __expf(mlxsel_if ? (m - v) : (v - m));
      float mlxsel_a_s = s; float mlxsel_a_m = m;
      { mlxsel_a_s = mlxsel_a_s * mlxsel_f0 + 1.0f; mlxsel_a_m = v; }
      float mlxsel_b_s = s; float mlxsel_b_m = m; { mlxsel_b_s += mlxsel_f0; }
      s = mlxsel_if ? mlxsel_a_s : mlxsel_b_s; m = mlxsel_if ? mlxsel_a_m : mlxsel_b_m; }

The taken arm runs the same operations on the same values, so every result is the same bit for
bit; the other arm's are thrown away. That is only safe where evaluating the other arm can do
nothing else, so an arm may hold only assignments to the kernel's float or double scalars (not
const, static, shared, arrays, pointers or references) of arithmetic on names and literals, casts
and CUDA's math functions: no element, field or pointer read (it could fault on the other arm's
values), no other call, no division or remainder (an integer one traps), no nested branch or
declaration. The scalar is the one the ``if`` sees (the nearest declaration before it in a block
around it). A call is made once only for a float math function (``__expf``, ``expf``: ``exp``'s type
follows its argument's) called once in each arm, inside and around no other call, on arguments
naming nothing its arm assigned before it. The rewrite keeps the statement on its own lines, so
every line of the source keeps its number (the other knobs name lines), and is left undone where
that would change what the text says: comments, line continuations, ``__LINE__``, lambdas.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import (
    ancestors,
    bare_callee,
    declared_name,
    identifiers,
    parse,
    reading_source,
    text,
    walk,
)
from mlxport.errors import UserError
from mlxport.translate.bind.kernel_scope import kernel_node, pick_kernel
from mlxport.translate.reading.cudafile import CudaFile
from mlxport.translate.reading.macros import normalize

MAX_STATEMENTS = 4  # an arm's; a long arm is work on both paths
# CUDA's math functions: double and float (``expf``), and the float intrinsics (``__expf``).
_BASES = frozenset(
    {
        "exp",
        "exp2",
        "exp10",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sin",
        "cos",
        "tan",
        "sinh",
        "cosh",
        "tanh",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sqrt",
        "rsqrt",
        "cbrt",
        "pow",
        "fabs",
        "fmin",
        "fmax",
        "fma",
        "floor",
        "ceil",
        "trunc",
        "round",
        "rint",
        "erf",
        "erfc",
        "copysign",
        "hypot",
    }
)
_MATH = re.compile(
    r"^(__expf|__exp10f|__logf|__log2f|__log10f|__sinf|__cosf|__tanf|__powf|__saturatef|__fmul_r[nzud]|"
    r"__fadd_r[nzud]|__fsub_r[nzud]|__fmaf_r[nzud]|__frcp_r[nzud]|__fsqrt_r[nzud]|__frsqrt_rn|"
    rf"({'|'.join(sorted(_BASES))})f?)$"
)
_FLOATS = frozenset({"float", "double"})
_QUALIFIERS = frozenset(
    {
        "const",
        "constexpr",
        "static",
        "__shared__",
        "extern",
        "volatile",
        "__device__",
        "__constant__",
    }
)
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[fFlLuU]*")
_LOOPS = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
_PURE = frozenset(
    {
        "identifier",
        "number_literal",
        "true",
        "false",
        "binary_expression",
        "unary_expression",
        "parenthesized_expression",
        "conditional_expression",
        "cast_expression",
        "call_expression",
        "argument_list",
        "type_descriptor",
        "primitive_type",
        "type_identifier",
        "comment",
    }
)


def if_converted(source: str, cf: CudaFile, kernel: str) -> str | None:
    """The source with every such branch of the kernel's loops turned into selects, or None where
    there is none."""
    raw = source.encode("utf-8", "replace")
    data = normalize(raw)  # what the translator parses, offsets kept
    with reading_source(data):
        root = parse(data).root_node
        try:
            kn = kernel_node(root, pick_kernel(cf, kernel))
        except UserError:  # a kernel defined by a macro
            return None
        body = kn.child_by_field_name("body")
        if body is None or any(
            n.type == "identifier" and text(n).startswith("mlxsel_") for n in walk(root)
        ):
            return None
        macros = {m.name: m.body for m in cf.macros}
        edits = [
            (n.start_byte, n.end_byte, new)
            for n in walk(body)
            if n.type == "if_statement"
            if any(a.type in _LOOPS for a in ancestors(n) if body.start_byte <= a.start_byte)
            if (new := _selects(raw, n, body, macros)) is not None
        ]
    if not edits:
        return None
    out = raw
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new.encode() + b"\n" * raw[start:end].count(b"\n") + out[end:]
    return out.decode("utf-8", "replace")


def _declared_type(node: Node, name: str, body: Node) -> str | None:
    """The type of the declaration of ``name`` that ``node`` sees (the nearest before it in a block
    around it), when that is a float or double scalar of the kernel's own (not a parameter, a
    variable of the file, const, static, shared or volatile); None otherwise."""
    cur = node
    while cur != body and cur.parent is not None:
        block = cur.parent
        init = block.child_by_field_name("initializer") if block.type == "for_statement" else None
        if init is not None and name in identifiers(init):
            return None
        if block.type == "compound_statement":
            for d in reversed([c for c in block.named_children if c.end_byte <= cur.start_byte]):
                if d.type != "declaration":
                    continue
                for x in d.children_by_field_name("declarator"):
                    if declared_name(x) != name:
                        continue
                    plain = (
                        x.type == "identifier"
                        or x.type == "init_declarator"
                        and x.child_by_field_name("declarator").type == "identifier"
                    )
                    kind = text(d.child_by_field_name("type"))
                    return (
                        kind
                        if plain
                        and kind in _FLOATS
                        and not {text(c) for c in d.children} & _QUALIFIERS
                        else None
                    )
        cur = block
    return None


def _selects(raw: bytes, node: Node, body: Node, macros: dict[str, str]) -> str | None:
    cond = node.child_by_field_name("condition")
    while cond is not None and cond.type == "condition_clause" and len(cond.named_children) == 1:
        cond = cond.named_children[0]
    written = raw[node.start_byte : node.end_byte]
    if (
        cond is None
        or cond.type in ("condition_clause", "declaration", "init_declarator")
        or any(text(c) == "constexpr" for c in node.children)
        or b"\\\n" in written
        or b"\r" in written.replace(b"\r\n", b"")
        or any(
            n.type.startswith("preproc")
            or n.type in ("comment", "lambda_expression", "ERROR")
            or n.is_missing
            or n.type == "identifier"
            and text(n) in ("__LINE__", "__COUNTER__", "__FILE__")
            for n in walk(node)
        )
    ):
        return None  # what would read otherwise on one line, or on the if's first line
    alternative = node.child_by_field_name("alternative")
    if alternative is not None and alternative.type == "else_clause":
        alternative = next((c for c in alternative.named_children if c.type != "comment"), None)
        if alternative is None:
            return None
    arms = [_statements(node.child_by_field_name("consequence"))] + (
        [_statements(alternative)] if alternative is not None else [[]]
    )
    if any(a is None for a in arms):
        return None
    targets: list[list[str]] = []
    scalars: dict[str, str] = {}
    for arm in arms:
        names = []
        for st in arm:
            name = _target(st)
            kind = _declared_type(node, name, body) if name is not None else None
            if kind is None or not _pure(st, macros):
                return None
            scalars[name] = kind
            names.append(name)
        targets.append(names)
    assigned = list(dict.fromkeys(n for names in targets for n in names))
    hoisted, replaced = _hoisted(arms, targets)
    parts = [f"const bool mlxsel_if = ({_slice(raw, cond)});"]
    parts += [
        f"const float mlxsel_f{i} = {fn}({_selected(args)});"
        for i, (fn, args) in enumerate(hoisted)
    ]
    for arm, side in zip(arms, "ab", strict=True):
        parts += [f"{scalars[n]} mlxsel_{side}_{n} = {n};" for n in assigned]
        parts.append(
            "{ " + " ".join(_renamed(raw, st, set(assigned), side, replaced) for st in arm) + " }"
        )
    parts += [f"{n} = mlxsel_if ? mlxsel_a_{n} : mlxsel_b_{n};" for n in assigned]
    return "{ " + " ".join(parts) + " }"


def _selected(args: list[tuple[str, str]]) -> str:
    """A hoisted call's arguments, each chosen between the two arms' by the condition."""
    return ", ".join(f"mlxsel_if ? ({a}) : ({b})" for a, b in args)


def _statements(node: Node | None) -> list[Node] | None:
    """An arm's statements (a block's, or the one statement), each an expression statement."""
    if node is None:
        return None
    stmts = (
        [c for c in node.named_children if c.type != "comment"]
        if node.type == "compound_statement"
        else [node]
    )
    if not 0 < len(stmts) <= MAX_STATEMENTS or any(
        s.type != "expression_statement" or not s.named_children for s in stmts
    ):
        return None
    return stmts


def _target(statement: Node) -> str | None:
    """The name a statement assigns (``x = e``, ``x += e``, ``x++``), or None."""
    expr = statement.named_children[0]
    field = (
        "left"
        if expr.type == "assignment_expression"
        else "argument"
        if expr.type == "update_expression"
        else None
    )
    target = expr.child_by_field_name(field) if field else None
    if target is None or target.type != "identifier":
        return None
    if expr.type == "assignment_expression" and text(expr.child_by_field_name("operator")) in (
        "/=",
        "%=",
    ):
        return None
    return text(target)


def _pure(statement: Node, macros: dict[str, str]) -> bool:
    """Whether the statement does nothing but assign its target: arithmetic on names, literals and
    numeric macros, casts and math calls, no division or remainder, nothing read through memory."""
    expr = statement.named_children[0]
    value = expr.child_by_field_name("right") if expr.type == "assignment_expression" else None
    for n in walk(value) if value is not None else []:
        if not n.is_named:
            continue
        op = (
            text(n.child_by_field_name("operator"))
            if n.type in ("binary_expression", "unary_expression")
            else ""
        )
        if (
            n.type not in _PURE
            or n.type == "binary_expression"
            and op in ("/", "%")
            or n.type == "unary_expression"
            and op not in ("-", "+", "!", "~")
            or n.type == "call_expression"
            and (
                n.child_by_field_name("function").type != "identifier"
                or not _MATH.match(bare_callee(n))
            )
            or n.type == "identifier"
            and text(n) in macros
            and not _NUMBER.fullmatch(macros[text(n)].strip())
        ):
            return False  # a macro could read memory
    return True


def _hoisted(arms: list[list[Node]], targets: list[list[str]]):
    """(function, [(arm a's argument, arm b's)]) for each math function each arm calls once, with
    arguments naming nothing the arm assigned before the call; and each call's node id: its
    index."""
    if not arms[1]:
        return [], {}
    calls = [[c for st in arm for c in walk(st) if c.type == "call_expression"] for arm in arms]
    out, replaced = [], {}
    for fn in dict.fromkeys(bare_callee(c) for c in calls[0]):
        mine = [[c for c in cs if bare_callee(c) == fn] for cs in calls]
        if any(len(m) != 1 or not _alone(m[0]) for m in mine) or not (
            fn.startswith("__") or fn.endswith("f") and fn[:-1] in _BASES
        ):
            # a float function (exp's type follows its argument's), neither inside nor around a call
            continue
        args = [
            [a for a in m[0].child_by_field_name("arguments").named_children if a.type != "comment"]
            for m in mine
        ]
        if len(args[0]) != len(args[1]) or any(
            identifiers(m[0]) & set(_before(arm, names, m[0]))
            for arm, names, m in zip(arms, targets, mine, strict=True)
        ):
            continue
        replaced.update({m[0].id: len(out) for m in mine})
        out.append((fn, [(text(a), text(b)) for a, b in zip(*args, strict=True)]))
    return out, replaced


def _alone(call: Node) -> bool:
    """Whether a call holds no other call and sits in none."""
    if any(c.type == "call_expression" and c != call for c in walk(call)):
        return False
    up = call.parent
    while up is not None and up.type != "expression_statement":
        if up.type == "call_expression":
            return False
        up = up.parent
    return True


def _before(arm: list[Node], names: list[str], call: Node) -> list[str]:
    """What the arm assigns before the statement holding ``call``."""
    at = next(i for i, st in enumerate(arm) if st.start_byte <= call.start_byte < st.end_byte)
    return names[:at]


def _renamed(
    raw: bytes, statement: Node, assigned: set[str], side: str, replaced: dict[int, int]
) -> str:
    edits = [
        (n.start_byte, n.end_byte, f"mlxsel_f{replaced[n.id]}")
        for n in walk(statement)
        if n.type == "call_expression" and n.id in replaced
    ]
    inside = [(s, e) for s, e, _ in edits]
    edits += [
        (n.start_byte, n.end_byte, f"mlxsel_{side}_{text(n)}")
        for n in walk(statement)
        if n.type == "identifier"
        and text(n) in assigned
        and not any(s <= n.start_byte < e for s, e in inside)
    ]
    out, at = [], statement.start_byte
    for s, e, new in sorted(edits):
        out += [raw[at:s].decode("utf-8", "replace"), new]
        at = e
    return ("".join(out) + raw[at : statement.end_byte].decode("utf-8", "replace")).replace(
        "\n", " "
    )


def _slice(raw: bytes, node: Node) -> str:
    return raw[node.start_byte : node.end_byte].decode("utf-8", "replace").replace("\n", " ")
