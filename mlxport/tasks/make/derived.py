"""Scalars the host code computes from the sizes, as expressions: flash attention's host passes
``Tc = ceil(N / Bc)`` and ``softmax_scale = 1 / sqrt(d)``, so an op called at another N must
compute them as the host does rather than keep the value of the case it was made at.

The host code is evaluated (not run) at the task's cases and at sizes drawn around them; a
scalar that stays constant (``const int Bc = 32``) is fixed at its value, one that changes with
the sizes is matched against a small grammar of expressions over the sizes the user bound and the
constants' values, simplest first. One that no expression matches at every sample stays a
parameter the caller gives.

Sizes the user bound that no input or kernel parameter carries but an output's shape or the
launch needs (`given_sizes`) become params the caller gives, as the original's host takes them.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from mlxport.errors import UserError
from mlxport.expr import evaluate, names_used
from mlxport.spec import KernelTask
from mlxport.tasks.make.cases import CaseRunner
from mlxport.tasks.sizes import apart
from mlxport.translate.host.values import HostEvalError
from mlxport.translate.translator import case_bound_names

SAMPLES = 8  # sizes drawn besides the task's cases
ROUNDS = 4  # rounds of names the launch needs, at most
FACTORS = (2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def derived_params(
    runner: CaseRunner, bounds: list[dict[str, Any]], rng: np.random.Generator
) -> dict[str, str]:
    """Param name -> the expression the host code computes it by, for every scalar parameter of
    the kernel that the user did not bind: a constant the host fixes (``const int Bc = 32``) as
    its value, so the op never takes it from its caller; one that changes with the sizes as the
    simplest expression that gives it at every sample."""
    sizes = sorted({k for b in bounds for k, v in b.items() if _int(v)})
    floats = sorted({k for b in bounds for k, v in b.items() if isinstance(v, float)})
    probes = _probes(bounds, sizes, floats, rng)
    samples = [s for s in (_scalars(runner, b) for b in probes) if s]
    if not samples:
        return {}
    bound = {k for b in bounds for k in b}
    names = [p.name for p in runner.info.params if not p.is_pointer and p.name not in bound]
    # what the op can compute from: its params and the sizes its arrays' shapes give
    known = {p.name for p in runner.info.params if not p.is_pointer}
    known |= {n for shape in runner.buffer_shapes.values() for d in shape for n in names_used(d)}
    names = [n for n in names if all(n in v for _, v in samples)]
    if len(samples) < 3 and sizes:
        return {}  # too few samples to tell a constant from a size
    fixed = {n: samples[0][1][n] for n in names if len({s[1][n] for s in samples}) == 1}
    out = {n: repr(v) for n, v in fixed.items()}
    # constants by value: two the host sets alike (Bc = Br = 32) cannot be told apart by name
    literals = [str(v) for v in dict.fromkeys(fixed.values()) if _int(v) and v > 1]
    for name in (n for n in names if n not in fixed):
        if any(isinstance(v[name], bool) for _, v in samples):
            continue
        scope = [b for b, _ in samples]
        wanted = [v[name] for _, v in samples]
        forms = _forms(
            [n for n in sizes if n in known], [n for n in floats if n in known], literals
        )
        expr = next((e for e in forms if _fits(e, scope, wanted)), None)
        if expr is not None:
            out[name] = expr
    return out


def given_sizes(source: str, task: dict[str, Any], bounds: list[dict[str, Any]]) -> list[dict]:
    """Params for the integers the user bound that an output's shape or the launch needs and no
    input or param of ``task`` (task.toml's content) gives: a reduction's ``blocks`` partial
    sums, a grid of ``B`` by ``NH`` blocks over flat buffers. The op takes each from its caller,
    as the original's host code does, rather than keep the value of the case it was made at.
    The launch's are those the translator finds it needs, a round at a time (a name resolved
    can uncover the next)."""
    first = bounds[0]
    names = [k for k in first if k.isidentifier() and all(_int(b.get(k)) for b in bounds)]
    have = {p["name"] for p in task["params"]}
    in_inputs = {n for t in task["inputs"] for d in t["shape"] for n in names_used(str(d))}
    in_outputs = {n for t in task["outputs"] for d in t["shape"] for n in names_used(str(d))}
    out = [n for n in names if n in in_outputs and n not in have | in_inputs]
    for _ in range(ROUNDS):
        params = task["params"] + [_size(n, first) for n in out]
        made = KernelTask.model_validate(
            {k: v for k, v in {**task, "params": params}.items() if v is not None}
        )
        more = [n for n in case_bound_names(source, made) if n in names and n not in have]
        if not set(more) - set(out):
            break
        out += [n for n in more if n not in out]
    return [_size(n, first) for n in out]


def _size(name: str, case: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "type": "int", "default": case[name]}


def _probes(
    bounds: list[dict], sizes: list[str], floats: list[str], rng: np.random.Generator
) -> list[dict]:
    """The task's cases and SAMPLES more around them, sizes bound to different names at different
    values (an N and a d both 64 at the visible case cannot tell ceildiv(N, 32) from
    ceildiv(d, 32)), floats the user bound scaled (a host's ``1 / scale`` is no constant)."""
    out = list(bounds)
    for _ in range(SAMPLES):
        base = dict(bounds[int(rng.integers(len(bounds)))])
        drawn = {}
        for n in sizes:
            if n in base and _int(base[n]) and base[n] > 1:
                drawn[n] = int(rng.integers(max(1, base[n] // 2), 2 * base[n] + 1))
        scaled = {n: base[n] * float(rng.uniform(0.5, 2.0)) for n in floats if n in base}
        out.append({**base, **apart(drawn, dict.fromkeys(drawn, 1)), **scaled})
    return out


def _scalars(runner: CaseRunner, bound: dict[str, Any]) -> tuple[dict, dict] | None:
    try:
        launch = runner.launch_at(bound)
    except (UserError, HostEvalError):
        return None
    values = {
        p.name: a.value
        for p, a in zip(runner.info.params, launch.args, strict=False)
        if not p.is_pointer and isinstance(a.value, int | float)
    }
    return bound, values


def _forms(sizes: list[str], floats: list[str], constants: list[str]):
    """Candidate expressions, simplest first."""
    ks = list(dict.fromkeys([*constants, *map(str, FACTORS)]))
    yield from sizes
    for a in floats:
        yield from (f"1.0 / {a}", f"{a} * {a}", f"sqrt({a})")
    for a, b in itertools.combinations_with_replacement(sizes, 2):
        yield f"{a} * {b}"
    for a in sizes:
        for k in ks:
            yield from (f"ceildiv({a}, {k})", f"{a} // {k}", f"{a} * {k}")
        yield from (f"1 / sqrt({a})", f"1.0 / {a}", f"sqrt({a})", f"{a} - 1", f"{a} + 1")
    for a, b in itertools.combinations_with_replacement(sizes, 2):
        for k in ks:
            yield from (f"ceildiv({a} * {b}, {k})", f"{a} * {b} // {k}")
    for a, b, c in itertools.combinations_with_replacement(sizes, 3):
        yield f"{a} * {b} * {c}"


def _fits(expr: str, scopes: list[dict], wanted: list[Any]) -> bool:
    for scope, want in zip(scopes, wanted, strict=True):
        try:
            got = evaluate(expr, scope)
        except (UserError, KeyError):
            return False
        if isinstance(want, int) and not isinstance(got, int):
            return False
        if not math.isclose(got, want, rel_tol=1e-6, abs_tol=0.0):
            return False
    return True


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
