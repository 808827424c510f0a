"""The branch of the host code a task's cases take, as the op's contract: where the launch the
cases run sits in an `if`/`else` or `switch` arm chosen by sizes the cases bind (``if (ncols <
1024)``, ``switch (K) { case 1024: ... }``), a port carries that arm only, and the sizes another
arm would take are outside it (``[cases] requires``: the op refuses them in one sentence, the
final verification draws none).

The conditions come from the symbolic host function (`launch_sites`), over the task's params; a
condition the case decides by something else (a null pointer, a template argument fixed with
``--template``) names nothing the op takes, and leaves no rule.
"""

from __future__ import annotations

import ast
import copy
import re

from mlxport.errors import UserError
from mlxport.expr import evaluate, names_used, parse
from mlxport.translate.host.cexpr import CExprError, lower
from mlxport.translate.host.symbolic import SiteValues, find_unknown

_FLIP = {
    ast.Lt: ast.GtE,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.GtE: ast.Lt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}


def arm_rules(
    sites: list[SiteValues], cases: list[dict], names: set[str], dims: dict[str, str]
) -> list[str]:
    """The rules (comparisons over ``names``) that the launch site every case in ``cases`` takes
    is reached under: of the sites whose rules hold at every case, those they all share.
    ``dims``: an input's dimension as the size that names it (``x.shape[1]``: ``ncols``)."""
    per_site = [_site_rules(s, names, dims) for s in sites]
    taken = [rules for rules in per_site if all(_holds(r, c) for r in rules for c in cases)]
    if not taken:
        return []
    return [r for r in taken[0] if all(r in rules for rules in taken[1:])]


def _site_rules(site: SiteValues, names: set[str], dims: dict[str, str]) -> list[str]:
    out: list[str] = []
    for cond in site.conds:
        if find_unknown(cond) is not None:
            continue  # decided by what the op does not take (a null pointer, --template)
        for c in _conjuncts(copy.deepcopy(cond)):
            rule = _rule(c, dims)
            if rule is not None and names_used(rule) and names_used(rule) <= names:
                out.append(rule)
    return list(dict.fromkeys(out))


def _conjuncts(c: ast.expr) -> list[ast.expr]:
    """``a && b`` and ``!(a || b)`` as their parts; ``!(x < n)`` as ``x >= n``."""
    if isinstance(c, ast.BoolOp) and isinstance(c.op, ast.And):
        return [p for v in c.values for p in _conjuncts(v)]
    if isinstance(c, ast.UnaryOp) and isinstance(c.op, ast.Not):
        inner = c.operand
        if isinstance(inner, ast.UnaryOp) and isinstance(inner.op, ast.Not):
            return _conjuncts(inner.operand)
        if isinstance(inner, ast.BoolOp) and isinstance(inner.op, ast.Or):
            return [p for v in inner.values for p in _conjuncts(ast.UnaryOp(ast.Not(), v))]
        if isinstance(inner, ast.Compare) and len(inner.ops) == 1:
            flipped = _FLIP[type(inner.ops[0])]()
            return [ast.Compare(inner.left, [flipped], inner.comparators)]
    return [c]


def _rule(c: ast.expr, dims: dict[str, str]) -> str | None:
    """A comparison in the expression language: as written where both sides lower to arithmetic,
    else the condition's 0/1 indicator equal to 1 (a switch arm of several labels)."""
    try:
        if isinstance(c, ast.Compare) and len(c.ops) == 1:
            out = ast.Compare(lower(c.left), c.ops, [lower(c.comparators[0])])
        else:
            out = ast.Compare(lower(c), [ast.Eq()], [ast.Constant(1)])  # its 0/1 indicator
        text = re.sub(r"\w+\.shape\[\d+\]", lambda m: dims.get(m[0], m[0]), ast.unparse(out))
        parse(text)
    except (CExprError, UserError, KeyError, TypeError, AttributeError):
        return None
    return text


def _holds(rule: str, case: dict) -> bool:
    try:
        return bool(evaluate(rule, case))
    except UserError:
        return False
