"""A launch read off the original kernel's launches where the host code cannot be followed
symbolically (a launch through a function pointer, in a switch, sized with std::min or a device
query): a task made from a .cu file records the grid, block, shared bytes and template arguments
the host code gives at every case, and each becomes the simplest expression over the task's params
and input dimensions that gives it at all of them (a constant, E, E * k, ceildiv(E, k),
min(E, k) or max(E, k))."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator

from mlxport.expr import ExprError, evaluate
from mlxport.translate.bind.job import KernelJob
from mlxport.translate.host.binding import atom
from mlxport.translate.host.cexpr import to_expr
from mlxport.translate.host.launch import LaunchPlan

_FACTORS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 3, 6, 12, 24, 48, 96, 192, 384, 768)


def fitted_plan(job: KernelJob) -> LaunchPlan | None:
    """The launch as expressions that reproduce the original's launch at every case of the task,
    None where the task records no launches or some value fits no simple expression."""
    task = job.task
    if task is None or task.original is None or len(task.all_cases()) < 2:
        return None  # one case fixes no formula
    cases = task.all_cases()
    launches = [task.original.launch(task.case_label(c)) for c in cases]
    atoms = list(_atoms(job, cases))
    components: list[ast.expr] = []
    for values in [
        *zip(*[launch.grid for launch in launches], strict=True),
        *zip(*[launch.block for launch in launches], strict=True),
        [launch.shared_bytes for launch in launches],
    ]:
        got = _fit(list(values), atoms)
        if got is None:
            return None
        components.append(got)
    targs: dict[str, ast.expr] = {}
    names = [t.name for t in job.info.template_params]
    for name, values in zip(
        names, zip(*[launch.template for launch in launches], strict=True), strict=False
    ):
        if any(t.kind in ("typename", "class") for t in job.info.template_params if t.name == name):
            continue
        numbers = [_number(v) for v in values]
        got = _fit(numbers, atoms) if all(n is not None for n in numbers) else None
        if got is None:
            return None
        targs[name] = got
    blocks, threads, smem = components[:3], components[3:6], components[6]
    shown = ", ".join(str(to_expr(e)) for e in blocks)
    per_block = " x ".join(str(to_expr(e)) for e in threads)
    note = (
        f"launch read off the original's launches at the task's {len(cases)} cases (the host code "
        f"could not be followed): grid ({shown}) blocks of {per_block} threads; "
        "other sizes follow these formulas"
    )
    return LaunchPlan(
        blocks=blocks,
        threads=threads,
        smem=smem,
        targs=targs,
        kargs={},
        line=job.info.line,
        host="(the task's original launches)",
        notes=[note],
    )


def fitted_dim(job: KernelJob, tensor: str, axis: int) -> ast.expr | None:
    """An output's dimension that no input or param names (a measured extent, a host variable),
    as what gives its size at every case of the task. One case tells only where the file's own
    constants size every buffer (`#define N`: the original binds no name), and then as a number."""
    task = job.task
    if task is None or not task.all_cases():
        return None
    cases = task.all_cases()
    if len(cases) == 1 and (task.original is None or task.original.bound):
        return None
    values = [task.shapes(c, task.dtypes[0])[tensor][axis] for c in cases]
    got = _fit(values, list(_atoms(job, cases)))
    return None if got is None or isinstance(got, ast.Constant) and len(set(values)) > 1 else got


def _atoms(job: KernelJob, cases: list[dict]) -> Iterator[tuple[ast.expr, list[int]]]:
    """Each param and input dimension the port sees, with its value at every case, then their
    products of two to four and their exact quotients."""
    task = job.task
    dtype = task.dtypes[0]
    shapes = [task.shapes(c, dtype) for c in cases]
    single = []
    for t in task.inputs:
        for i in range(len(t.shape)):
            single.append((atom(f"{t.name}.shape[{i}]"), [s[t.name][i] for s in shapes]))
    for p in task.params:
        values = [task.param_values(c)[p.name] for c in cases]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            single.append((ast.Name(p.name), values))
    yield from single
    # products of up to four (attention's B * NH * T * T) while the names are few
    for n in (2, 3, 4) if len(single) <= 8 else (2, 3):
        for group in itertools.combinations_with_replacement(single, n):
            expr, values = group[0]
            for e, v in group[1:]:
                expr, values = (
                    ast.BinOp(expr, ast.Mult(), e),
                    [x * y for x, y in zip(values, v, strict=True)],
                )
            yield expr, values
    for (a, va), (b, vb) in itertools.permutations(single, 2):  # rows = x.shape[0] // ncols
        if all(y > 0 and x % y == 0 for x, y in zip(va, vb, strict=True)):
            yield ast.BinOp(a, ast.FloorDiv(), b), [x // y for x, y in zip(va, vb, strict=True)]


def _fit(values: list[int], atoms: list[tuple[ast.expr, list[int]]]) -> ast.expr | None:
    if len(set(values)) == 1:
        return ast.Constant(values[0])
    for e, v in atoms:
        if v == values:
            return e
    for k in _FACTORS:
        for e, v in atoms:
            if [x * k for x in v] == values:
                return ast.BinOp(e, ast.Mult(), ast.Constant(k))
            if [-(-x // k) for x in v] == values:
                return ast.Call(ast.Name("ceildiv"), [e, ast.Constant(k)], [])
    for k in _FACTORS:  # std::min(cols, 128): a block size capped (or floored) at k
        for fn, pick in (("min", min), ("max", max)):
            for e, v in atoms:
                if [pick(x, k) for x in v] == values:
                    return ast.Call(ast.Name(fn), [e, ast.Constant(k)], [])
    return None


def _number(text: str) -> int | None:
    try:
        v = evaluate(text, {})
    except ExprError:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None
