"""The values an integer input takes: drawn from a domain, never all zeros.

Integers in a kernel are mostly indices (token ids into an embedding table, bins of a histogram,
offsets) whose range decides what the kernel reads. The domain comes from ``--inputs
'idx:int32[0,V)'`` where the user gives it; else from the original kernel itself, run on the CPU
executor with bounds-checked buffers: values the kernel takes as data (a scan of integers) run at
any value; an index runs up to some bound and faults past it, and that bound is matched with an
expression over the case's sizes (a param, a product of two, a buffer's extent) that holds at a
second case too. An integer input whose domain is neither given nor found is refused.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np

from mlxport.errors import UserError
from mlxport.expr import evaluate
from mlxport.tasks.make.cases import CaseRunner, label
from mlxport.tasks.make.kernel import CudaTaskError, integral, storage
from mlxport.translate.host.values import HostLaunch
from mlxport.translate.reading.cudafile import Param

DATA = 1000  # data-like integers are drawn from [-DATA, DATA) (unsigned: [0, DATA))


def integer_domains(
    runner: CaseRunner, runs: list[tuple[dict, HostLaunch]], given: dict[str, tuple[str, str]]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(input buffer -> its init as task.toml writes it, notes saying where each came from)."""
    sig = runner.sig
    out, notes = {}, []
    for i, p in enumerate(runner.info.params):
        if p.name in sig.zeroed or not p.is_pointer or runner.roles.get(p.name) == "output":
            continue
        if not integral(p, sig.typenames) or p.name in runner.fills:
            continue
        if p.name in given:
            low, high = given[p.name]
            out[p.name] = {"kind": "randint", "low": _value(low), "high": _value(high)}
            notes.append(f"{p.name} takes the values [{low}, {high}) given by --inputs")
            continue
        domain = _found(runner, runs, i, p)
        if domain is None:
            case = label(runs[0][0])
            raise CudaTaskError(
                f"the values of {p.name} (an integer input) decide which elements the kernel "
                f"reads, and no size of the case bounds them at {case}: give them with --inputs "
                f"'{p.name}:{storage(p, sig.typenames)}[0,N)' (and the size of a buffer they "
                f"index that the host code does not size, with --shape)"
            )
        out[p.name] = {"kind": "randint", "low": domain[0], "high": domain[1]}
        notes.append(f"{p.name} takes the values [{domain[0]}, {domain[1]}): {domain[2]}")
    return out, notes


def _found(runner: CaseRunner, runs: list[tuple[dict, HostLaunch]], i: int, p: Param):
    held = storage(p, runner.sig.typenames)
    info = np.iinfo(held)
    size = _compared(runner, p.name, runs[0][0])
    if size is not None and all(_runs(runner, run, i, 0, run[0][size]) for run in runs[:2]):
        # a bin number: drawn from [-1000, 1000) nearly all would fall outside and count nothing
        return 0, size, f"the kernel compares them with {size}"
    lo, hi = (max(info.min, -DATA), min(info.max + 1, DATA))
    if lo < 0 and _runs(runner, runs[0], i, lo, hi):
        return lo, hi, "the original runs at any values, so they are data"
    if _runs(runner, runs[0], i, 0, hi):
        return 0, hi, "the original runs at any values from 0, so they are data"
    case0 = runs[0][0]
    for expr in _bounds(runner, case0):
        if all(_tight(runner, run, i, expr) for run in runs[:2]):
            return 0, expr, "the original reads past a buffer at any larger value"
    return None


def _compared(runner: CaseRunner, buffer: str, case: dict[str, Any]) -> str | None:
    """The size the kernel compares a value it reads from ``buffer`` with (``int b = data[i];
    if (b >= 0 && b < nbins)``: nbins), where one is."""
    body = runner.info.body or ""
    load = rf"{re.escape(buffer)}\s*\[[^\]]*\]"
    values = [load] + [
        rf"\b{re.escape(m)}\b"
        for m in re.findall(rf"\b(\w+)\s*=\s*(?:\(\s*\w+\s*\)\s*)?{load}", body)
    ]
    sizes = {k for k, v in case.items() if isinstance(v, int) and not isinstance(v, bool)}
    for value in values:
        for m in re.finditer(rf"{value}\s*<(?![<=])\s*(\w+)|(\w+)\s*>(?![>=])\s*{value}", body):
            name = m.group(1) or m.group(2)
            if name in sizes:
                return name
    return None


def _bounds(runner: CaseRunner, case: dict[str, Any]) -> list[str]:
    """Expressions an index may be bounded by, smallest value at the case first: a size, a
    product of two, a buffer's extent."""
    names = [k for k, v in case.items() if isinstance(v, int) and not isinstance(v, bool)]
    exprs = [*names, *(f"{a} * {b}" for a, b in itertools.combinations(names, 2))]
    for shape in runner.buffer_shapes.values():
        extent = " * ".join(f"({d})" for d in shape) if len(shape) > 1 else f"({shape[0]})"
        # a buffer's extent, and its rows: an index into a table of V rows of C
        exprs += [extent, *(f"{extent} // {n}" for n in names)]
    values = {}
    for e in dict.fromkeys(exprs):
        try:
            v = evaluate(e, dict(case))
        except (UserError, KeyError):
            continue
        if isinstance(v, int) and v > 1:  # [0, 1) is all zeros: an index into one row
            values.setdefault(e, v)
    return sorted(values, key=values.get)


def _tight(runner: CaseRunner, run: tuple[dict, HostLaunch], i: int, expr: str) -> bool:
    try:
        bound = evaluate(expr, dict(run[0]))
    except (UserError, KeyError):
        return False
    return _runs(runner, run, i, 0, bound) and not _runs(runner, run, i, 0, bound + 1)


def _runs(runner: CaseRunner, run: tuple[dict, HostLaunch], i: int, lo: int, hi: int) -> bool:
    """Whether the original runs with buffer ``i`` drawn from [lo, hi), its extremes included."""
    case, launch = run
    args = runner.args(case, {})
    a = args[i]
    rng = np.random.default_rng(11)
    values = rng.integers(lo, hi, a.size).astype(a.dtype)
    spots = np.linspace(0, a.size - 1, num=min(a.size, 8)).astype(int)
    values[spots] = hi - 1
    values[spots[::2]] = lo
    args[i] = values
    try:
        return runner.run(launch, args).ok
    except UserError:
        return False


def _value(text: str) -> int | str:
    return int(text) if re.fullmatch(r"-?\d+", text) else text
