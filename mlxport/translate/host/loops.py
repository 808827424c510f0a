"""A host loop before a launch in the launch math (llama.cpp's `while (nth < ncols && nth < 1024)
nth *= 2;`): its iterations are decided where every size its condition reads is fixed by the
port's requires (the `case 256:` arm a switch on ncols takes keeps ncols at 256), its assignments
kept as expressions; elsewhere what it changes is unknown, named by the loop, never its value
before the loop."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable

from tree_sitter import Node

from mlxport.cuda_syntax import text, walk
from mlxport.spec import KernelTask
from mlxport.translate.host.cexpr import CExprError, lower

STEPS = 4096  # iterations run at most, as the case evaluator's
LOOPS = ("while_statement", "for_statement", "do_statement")
_JUMPS = ("break_statement", "continue_statement", "return_statement", "goto_statement")
_REQUIRED = re.compile(r"\s*(\w+)\s*==\s*(-?\d+)\s*")


def loop_changes(loop: Node) -> list[str]:
    """The names a loop assigns or steps."""
    out = []
    for n in walk(loop):
        field = {"assignment_expression": "left", "update_expression": "argument"}.get(n.type)
        target = n.child_by_field_name(field) if field else None
        if target is not None and target.type == "identifier":
            out.append(text(target))
    return list(dict.fromkeys(out))


def run_loop(
    loop: Node,
    env: dict,
    apply: Callable[[Node, dict], None],
    condition: Callable[[Node, dict], ast.expr],
    task: KernelTask | None,
) -> str | None:
    """Runs ``loop`` on ``env`` where the port's requires decide its condition every time
    (``apply`` runs one statement, ``condition`` converts the condition at an environment): None,
    or why it is not run (``env`` is then as it was)."""
    cond, body = loop.child_by_field_name("condition"), loop.child_by_field_name("body")
    if any(n.type in _JUMPS for n in walk(loop)) or cond is None or body is None:
        return "which has a jump in it"
    fixed = _fixed(task)
    if not fixed:
        return "which is run only when the program runs"
    init, update = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    run = dict(env)
    if init is not None:
        apply(init, run)
    for step in range(STEPS):
        if step or loop.type != "do_statement":
            try:
                go = _decided(condition(cond, run), task, fixed)
            except CExprError:
                go = None
            if go is None:
                return "whose condition reads a size the port's requires do not fix"
            if not go:
                env.update(run)
                return None
        for s in body.named_children if body.type == "compound_statement" else [body]:
            _step(s, run, apply)
        if update is not None:
            _step(update, run, apply)
    return f"which runs more than {STEPS} times"


def _step(s: Node, env: dict, apply: Callable[[Node, dict], None]) -> None:
    """One statement of the loop: `i++` and `--n` as `i += 1`, the rest as `apply` runs it."""
    e = s.named_children[0] if s.type == "expression_statement" and s.named_children else s
    if e.type == "update_expression":
        name = text(e.child_by_field_name("argument"))
        if name in env and isinstance(env[name], ast.expr):
            op = ast.Add() if "++" in text(e) else ast.Sub()
            env[name] = ast.BinOp(env[name], op, ast.Constant(1))
        return
    apply(s, env)


def _fixed(task: KernelTask | None) -> dict[str, int]:
    """The sizes the port's requires fix (``ncols_x == 256``), by name."""
    if task is None or not task.cases.visible:
        return {}
    return {
        m.group(1): int(m.group(2))
        for rule in task.cases.requires
        if (m := _REQUIRED.fullmatch(rule))
    }


def _decided(cond: ast.expr, task: KernelTask, fixed: dict[str, int]) -> bool | None:
    """The condition's value where it reads only sizes ``fixed`` holds, and numbers."""
    try:
        got = _fold(lower(cond, want_bool=True), {t.name: t.shape for t in task.inputs}, fixed)
    except (CExprError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return None if got is None else bool(got)


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _fold(e: ast.expr, shapes: dict[str, list], fixed: dict[str, int]) -> int | float | None:
    """``e``'s number with each input dimension and param ``fixed`` holds in place; None where it
    reads anything else."""

    def f(n: ast.expr):
        return _fold(n, shapes, fixed)

    if isinstance(e, ast.Constant) and isinstance(e.value, int | float | bool):
        return e.value
    if isinstance(e, ast.Name):
        return fixed.get(e.id)
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute):  # x.shape[1]
        tensor, i = e.value.value, e.slice
        shape = shapes.get(tensor.id) if isinstance(tensor, ast.Name) else None
        dim = shape[i.value] if shape and isinstance(i, ast.Constant) else None
        return dim if isinstance(dim, int) else fixed.get(dim) if dim is not None else None
    parts: list = []
    if isinstance(e, ast.BinOp | ast.Compare):
        ops = [e.op] if isinstance(e, ast.BinOp) else e.ops
        parts = [
            f(e.left),
            *(f(c) for c in ([e.right] if isinstance(e, ast.BinOp) else e.comparators)),
        ]
        if None in parts or any(type(o) not in _OPS for o in ops):
            return None
        if isinstance(e, ast.BinOp):
            return _OPS[type(e.op)](*parts)
        return all(_OPS[type(o)](a, b) for o, a, b in zip(ops, parts, parts[1:], strict=False))
    if isinstance(e, ast.BoolOp):
        parts = [f(v) for v in e.values]
        return None if None in parts else (all if isinstance(e.op, ast.And) else any)(parts)
    if isinstance(e, ast.UnaryOp) and (v := f(e.operand)) is not None:
        return not v if isinstance(e.op, ast.Not) else -v if isinstance(e.op, ast.USub) else None
    if isinstance(e, ast.IfExp) and (t := f(e.test)) is not None:
        return f(e.body) if t else f(e.orelse)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("min", "max"):
        parts = [f(a) for a in e.args]
        return None if None in parts else (min if e.func.id == "min" else max)(parts)
    return None
