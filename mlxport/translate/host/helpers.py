"""Host helper functions evaluated at a case: ``next_power_of_2(ncols)``, ``log2_ceil(n)``.

A helper's body runs statement by statement over numbers (declarations, assignments, ``++``, ``if``,
``while``, ``for``, ``return``) within a step budget; anything else leaves the call unknown, named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlxport.cuda_syntax import declared_name, function_name, text
from mlxport.translate.host.values import Unknown, binop

if TYPE_CHECKING:
    from tree_sitter import Node

    from mlxport.translate.host.evaluate import HostEvaluator

STEPS = 100_000  # a helper looping longer than this is not size arithmetic


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


class _Stuck(Exception):
    def __init__(self, why: str):
        self.why = why


def call_helper(ev: HostEvaluator, fn: Node, args: list[Any]) -> Any:
    """The value ``fn`` returns at ``args``, or Unknown naming why it cannot be evaluated."""
    name, decl = function_name(fn)
    name = name.split("::")[-1]
    if ev.inlining >= 8:  # recursion, or overloads of one name calling each other
        return Unknown(f"{name}() calls itself too deeply to evaluate")
    plist = decl.child_by_field_name("parameters")
    env = {declared_name(p): a for p, a in zip(plist.named_children, args, strict=False)}
    body = fn.child_by_field_name("body")
    ev.inlining += 1
    steps = [STEPS]
    try:
        _block(ev, body, env, steps)
    except _Return as r:
        return r.value
    except _Stuck as s:
        return Unknown(f"{name}() is host code the executor does not evaluate: {s.why}")
    finally:
        ev.inlining -= 1
    return Unknown(f"{name}() returns nothing the executor can evaluate")


def _truth(ev: HostEvaluator, node: Node | None, env: dict) -> bool:
    if node is None:
        return True
    v = ev.value(node, env)
    if not isinstance(v, int | float | bool):
        raise _Stuck(v.why if isinstance(v, Unknown) else f"cannot decide {text(node)}")
    return bool(v)


def _block(ev: HostEvaluator, node: Node | None, env: dict, steps: list[int]) -> None:
    if node is None:
        return
    for stmt in node.named_children if node.type == "compound_statement" else [node]:
        _statement(ev, stmt, env, steps)


def _statement(ev: HostEvaluator, stmt: Node, env: dict, steps: list[int]) -> None:
    _tick(steps)
    t = stmt.type
    if t == "comment":
        return
    if t == "compound_statement":
        _block(ev, stmt, env, steps)
    elif t == "declaration":
        ev.declare(stmt, env)
    elif t == "expression_statement":
        if stmt.named_children:
            _effect(ev, stmt.named_children[0], env)
    elif t == "return_statement":
        raise _Return(ev.value(stmt.named_children[0], env) if stmt.named_children else None)
    elif t == "if_statement":
        cond = stmt.child_by_field_name("condition")
        if _truth(ev, cond, env):
            _block(ev, stmt.child_by_field_name("consequence"), env, steps)
        elif (alt := stmt.child_by_field_name("alternative")) is not None:
            _block(ev, alt.named_children[-1] if alt.type == "else_clause" else alt, env, steps)
    elif t == "while_statement":
        while _truth(ev, stmt.child_by_field_name("condition"), env):
            _block(ev, stmt.child_by_field_name("body"), env, steps)
            _tick(steps)
    elif t == "for_statement":
        init = stmt.child_by_field_name("initializer")
        if init is not None:
            ev.declare(init, env) if init.type == "declaration" else _effect(ev, init, env)
        update = stmt.child_by_field_name("update")
        while _truth(ev, stmt.child_by_field_name("condition"), env):
            _block(ev, stmt.child_by_field_name("body"), env, steps)
            if update is not None:
                _effect(ev, update, env)
            _tick(steps)
    else:
        raise _Stuck(f"{t.replace('_', ' ')} at line {ev.line(stmt)}")


def _tick(steps: list[int]) -> None:
    steps[0] -= 1
    if steps[0] < 0:
        raise _Stuck(f"it runs more than {STEPS} steps")


def _effect(ev: HostEvaluator, expr: Node, env: dict) -> None:
    if expr.type == "update_expression":  # ++n, n--
        name = text(expr.child_by_field_name("argument"))
        if not isinstance(env.get(name), int | float):
            raise _Stuck(f"{text(expr)} changes {name}, which has no value")
        env[name] = binop("+" if "++" in text(expr) else "-", env[name], 1)
    elif expr.type == "comma_expression":
        for part in expr.named_children:
            _effect(ev, part, env)
    elif expr.type == "assignment_expression":
        name, op = (
            text(expr.child_by_field_name("left")),
            text(expr.child_by_field_name("operator")),
        )
        v = ev.value(expr.child_by_field_name("right"), env)
        if op != "=":
            if not isinstance(env.get(name), int | float) or not isinstance(v, int | float):
                raise _Stuck(f"cannot evaluate {text(expr)}")
            v = binop(op[:-1], env[name], v)
        env[name] = v
    else:
        ev.value(expr, env)  # a call for its value only: nothing to keep
