"""The paths a candidate takes at different sizes, so a verification can run each one.

A kernel often has one path for some sizes and another for others: a launch that picks its
threadgroup by the row length (``min(1024, ceildiv(C, 128) * 32)``), a float4 body taken only
when ``C % 4 == 0``. A candidate checked at cases that all take one path says nothing of the
other. The conditions that depend on the sizes alone are read here: the arms of ``min`` and
``max`` in its launch expressions, and the ``if`` and ``?:`` conditions of its body over
``x_shape``, params, template values and the locals set from them. Each is an expression of
mlxport's language (``x.shape[1] % 4 == 0``), evaluated at a case to the side it takes.
"""

from __future__ import annotations

import ast
import contextlib
import re
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node

from mlxport.cuda_syntax import parse, text, walk
from mlxport.errors import UserError
from mlxport.expr import evaluate, resolve_launch
from mlxport.spec import KernelCandidate, KernelTask

_BINARY = {"+", "-", "*", "%", "<<", ">>", "<", "<=", ">", ">=", "==", "!="}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_CASTS = {"uint", "int", "uint32_t", "int32_t", "size_t", "ulong", "long", "ushort", "short"}


def conditions(task: KernelTask, candidate: KernelCandidate) -> list[str]:
    """Each size-only condition of the candidate, as an expression over what its launch
    expressions see (inputs' shapes, params, template values)."""
    out = list(_launch_conditions(candidate))
    out += _body_conditions(task, candidate)
    return list(dict.fromkeys(out))


def side(cond: str, task: KernelTask, candidate: KernelCandidate, case: dict[str, Any]):
    """The side ``cond`` takes at ``case`` (True or False), or None where it cannot be told."""
    from mlxport.tasks import case_infos

    try:
        names = case_infos(task, case, task.dtypes[0])
        names.update(dict(resolve_launch(candidate.model_dump(), names)["template"]))
        value = evaluate(cond, names)
    except (UserError, KeyError, ValueError, TypeError):
        return None
    return value if isinstance(value, bool) else None


PATH_CAP = 1 << 23  # elements of the largest tensor at a case drawn to run a path (or a visible
# case's, where that is larger): a grid capped at 4096 blocks of 256 threads, 4 elements each, runs
# its grid-stride loop only past 4M elements
TRIES = 3  # cases kept per path, smallest first (the original may refuse some)


@dataclass
class Path:
    """One side of a size-dependent condition that no case takes yet, and the cases under the cap
    that take it (smallest first); ``beyond``: sizes above the cap take it, none below."""

    cond: str
    want: bool
    cases: list[dict[str, Any]] = field(default_factory=list)
    beyond: bool = False

    def said(self) -> str:
        return f"{self.cond} is {str(self.want).lower()}"


def missing_paths(
    task: KernelTask, candidate: KernelCandidate, taken: list[dict[str, Any]]
) -> tuple[list[Path], list[str]]:
    """The sides of the candidate's size-dependent conditions that no case of ``taken`` takes,
    each with the sizes that take it (`tasks.sizes.probe_sizes`, moved from the first visible
    case); and notes on the sides no size the op accepts takes (not a path of the op)."""
    from mlxport.tasks.sizes import extent, probe_sizes, size_names

    probes = None
    cap = max(PATH_CAP, *(extent(task, c, size_names(task)) for c in task.cases.visible))
    out, notes = [], []
    for cond in conditions(task, candidate):
        sides = {side(cond, task, candidate, c) for c in taken} - {None}
        if not sides:
            continue
        for want in {True, False} - sides:
            if probes is None:
                probes = probe_sizes(task, task.cases.visible[0])
            path = _reach(task, candidate, Path(cond, want), probes, cap)
            if path.cases or path.beyond:
                out.append(path)
            else:
                notes.append(f"{path.said()} at no size the op accepts: that path never runs")
    return out, notes


def _reach(task, candidate, path: Path, probes: list[tuple[int, dict]], cap: int) -> Path:
    for size, case in probes:
        if side(path.cond, task, candidate, complete(task, case)) is not path.want:
            continue
        if size > cap:
            path.beyond = True
            break
        path.cases.append(case)
        if len(path.cases) == TRIES:
            break
    return path


def complete(task: KernelTask, case: dict[str, Any]) -> dict[str, Any]:
    """``case`` with the params the host code computes from the sizes (``expr``) computed."""
    out = dict(case)
    for p in task.params:
        if p.expr:
            with contextlib.suppress(UserError, ValueError, KeyError):
                out[p.name] = evaluate(p.expr, task.bindings(out, task.dtypes[0]))
    return out


def _launch_conditions(candidate: KernelCandidate):
    exprs = [*candidate.grid, *candidate.threadgroup, *candidate.template.values()]
    for e in (x for x in exprs if isinstance(x, str)):
        for node in ast.walk(ast.parse(e, mode="eval")):
            picks = isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("min", "max")
            if picks and len(node.args) == 2:
                a, b = (ast.unparse(x) for x in node.args)
                yield f"{a} <= {b}"


def _body_conditions(task: KernelTask, candidate: KernelCandidate) -> list[str]:
    names = {t.name for t in task.inputs}
    known = {p.name for p in task.params} | set(candidate.template)
    tree = parse(candidate.source.encode()).root_node
    local: dict[str, str] = {}
    out = []
    for node in walk(tree, limit=20_000):
        if node.type == "init_declarator":
            _local(node, names, known, local)
        if node.type in ("if_statement", "conditional_expression"):
            cond = node.child_by_field_name("condition")
            for part in _atoms(cond):
                got = _expr(part, names, known, local)
                if got is not None and _sized(got):
                    out.append(got)
    return out


def _local(decl: Node, inputs: set[str], known: set[str], local: dict[str, str]) -> None:
    """``const uint C = uint(x_shape[1]);``: C stands for x.shape[1] from here on."""
    name = decl.child_by_field_name("declarator")
    value = decl.child_by_field_name("value")
    if name is None or value is None or name.type != "identifier":
        return
    got = _expr(value, inputs, known, local)
    if got is not None and _sized(got):
        local[text(name)] = got


def _atoms(node: Node | None):
    """The comparisons a condition is made of (``a && b`` is two)."""
    if node is None:
        return
    if node.type in ("parenthesized_expression", "condition_clause"):
        for child in node.named_children:
            yield from _atoms(child)
        return
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) in (
        "&&",
        "||",
    ):
        yield from _atoms(node.child_by_field_name("left"))
        yield from _atoms(node.child_by_field_name("right"))
        return
    if node.type == "unary_expression" and text(node.child_by_field_name("operator")) == "!":
        yield from _atoms(node.child_by_field_name("argument"))
        return
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) in _COMPARE:
        yield node


def _expr(node: Node | None, inputs: set[str], known: set[str], local: dict[str, str]):
    """The C expression as mlxport's expression language, or None where it is not over sizes."""
    if node is None:
        return None
    kind = node.type
    if kind == "number_literal":
        digits = re.fullmatch(r"(\d+)[uUlL]*", text(node))
        return digits.group(1) if digits else None
    if kind == "identifier":
        name = text(node)
        if name in local:
            return f"({local[name]})"
        return name if name in known else None
    if kind == "subscript_expression":
        base = text(node.child_by_field_name("argument"))
        index = node.child_by_field_name("indices") or node.child_by_field_name("index")
        index_text = text(index).strip("[]") if index is not None else ""
        if base.endswith("_shape") and base[: -len("_shape")] in inputs and index_text.isdigit():
            return f"{base[: -len('_shape')]}.shape[{index_text}]"
        return None
    if kind in ("parenthesized_expression",):
        inner = node.named_children[0] if node.named_children else None
        got = _expr(inner, inputs, known, local)
        return f"({got})" if got is not None else None
    if kind in ("call_expression", "cast_expression", "function_cast_expression"):
        target = text(node.child_by_field_name("function") or node.child_by_field_name("type"))
        args = node.child_by_field_name("arguments") or node.child_by_field_name("value")
        if target.strip() not in _CASTS or args is None:
            return None
        inner = args.named_children[0] if args.type == "argument_list" else args
        return _expr(inner, inputs, known, local)
    if kind == "binary_expression":
        op = text(node.child_by_field_name("operator"))
        if op not in _BINARY and op != "/":
            return None
        a = _expr(node.child_by_field_name("left"), inputs, known, local)
        b = _expr(node.child_by_field_name("right"), inputs, known, local)
        if a is None or b is None:
            return None
        return f"{a} {'//' if op == '/' else op} {b}"
    return None


def _sized(expr: str) -> bool:
    """Whether an expression reads a size (not constants alone)."""
    return bool(re.search(r"[A-Za-z_]", expr))
