"""A task made from a .cu file, at sizes none of its cases has: the host code evaluated there
again (with the flags the task was made with) for the launch and the scalars it computes, and
the original run there, so only sizes the original supports are kept."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlxport.backends.cuda_cpu import CudaExecutor
from mlxport.expr import names_used
from mlxport.spec import KernelTask, OriginalLaunch
from mlxport.tasks.make.cases import CaseRunner, label
from mlxport.tasks.make.kernel import CudaTaskError, classify, read_kernel
from mlxport.tasks.request import TaskRequest
from mlxport.tasks.sizes import doublings, fresh_sizes, power_of_two_dividing, size_names
from mlxport.translate.host.values import HostEvalError


def original_at(
    task: KernelTask,
    bounds: list[dict[str, Any]],
    executor: CudaExecutor,
    runner: CaseRunner | None = None,
) -> tuple[KernelTask, list[dict[str, Any]], list[str]]:
    """(the task with the original's launches at these sizes added, the full cases, why each
    size left out was left out); ``runner``: one `runner_for` made, else one is made here."""
    original = task.original
    runner = runner or runner_for(task, executor)
    known = task.dims() | {p.name for p in task.params} | set(original.bound)
    cases, launches, left = [], list(original.launches), []
    for bound in bounds:
        try:
            case, launch = runner.case(bound, heldout=True)
        except (CudaTaskError, HostEvalError) as e:
            left.append(f"{label(bound)}: {e}")
            continue
        case = {k: v for k, v in case.items() if k in known}
        cases.append(case)
        launches.append(
            OriginalLaunch(
                case=task.case_label(case),
                grid=launch.grid,
                block=launch.block,
                shared_bytes=launch.shared_bytes,
                template=runner.template(launch),
            )
        )
    extended = original.model_copy(update={"launches": launches})
    return task.model_copy(update={"original": extended}), cases, left


def runner_for(task: KernelTask, executor: CudaExecutor) -> CaseRunner:
    """The original of a task made from a .cu file, ready to run at other sizes (with the flags
    the task was made with)."""
    original = task.original
    request = TaskRequest(
        source=task.folder / task.source,
        includes=[task.folder / p for p in original.include],
        cases=[],
        **{"kernel": task.kernel, **original.made_with},
    )
    # a buffer sized as the task's tensor (a measured extent named at the task's cases): measured
    # again, a size where the original reaches less of it would look written whole
    request.shapes = {**_buffer_sizes(task), **request.shapes}
    kf = read_kernel(request, executor)
    bound = set(original.bound)
    runner = CaseRunner(kf, classify(kf, request, executor), request, executor, bound)
    # an output the original writes whole at the task's cases: a size where it writes part of it
    # (a transpose of 67 columns launched on whole tiles of 32) is one it does not support
    runner.whole = {original.results[t.name] for t in task.outputs if t.init.kind != "full"}
    return runner


def _buffer_sizes(task: KernelTask) -> dict[str, str]:
    """Kernel parameter -> its buffer's extent, as the task's tensor shape gives it over the
    names the user binds."""
    original = task.original
    tensors = {t.name: t for t in task.inputs + task.outputs}
    param = {**{v: k for k, v in original.args.items()}, **original.results}
    out = {}
    for name, t in tensors.items():
        used = set().union(*(names_used(str(d)) for d in t.shape))
        if name in param and used <= set(original.bound):
            out[param[name]] = " * ".join(f"({d})" for d in t.shape)
    return out


PROBES = 2  # sizes drawn under one rule before the rule is given up
RULES = 12  # rules tried at most: each runs the original PROBES times


def supported_sizes(
    task: KernelTask, count: int, rng: np.random.Generator, executor: CudaExecutor
) -> tuple[KernelTask, list[dict[str, Any]], list[str]]:
    """Up to ``count`` sizes no case has that the original runs at (`original_at`), drawn freely
    first; where the original refuses those, with the sizes equal at every case kept equal (a
    matmul's inner dimensions), then each size in multiples of 2, 4, 8... (up to what its values
    at the task's cases share), alone and with those kept equal: the rule of the first draws it
    runs at. (the task with the
    original's launches there, the cases, notes saying what was left out and the rule used.)"""
    refused: list[str] = []
    runner = runner_for(task, executor)
    task = _templates_kept(task, runner)
    for multiples, together in _rules(task):
        ruled = task.model_copy(
            update={"cases": task.cases.model_copy(update={"multiples": multiples})}
        )
        probes = fresh_sizes(ruled, PROBES, rng, together)
        if not probes:
            continue
        task, cases, left = original_at(task, probes, executor, runner)
        refused += left
        if not cases:
            continue
        more = [c for c in fresh_sizes(ruled, 2 * count, rng, together) if c not in probes]
        task, extra, left = original_at(task, more[: count - len(cases)], executor, runner)
        refused += left
        rule = _said(multiples, together, task.cases.multiples)
        notes = [f"the original does not run at {r}" for r in refused[:3]]
        notes += [f"so the op was called at sizes {rule}"] if rule else []
        task = _ruled(task, multiples, together) if rule else task
        ran = cases + extra  # a floor one of them is under holds only with the others' sizes
        floors = [
            (n, v)
            for n, v in _floors(task, runner, multiples, together)
            if all(c.get(n, v) >= v for c in ran)
        ]
        notes += [
            f"the original does not run at {n}={v // 2}: the op refuses {n} < {v}"
            for n, v in floors
        ]
        return _floored(task, floors), ran[:count], notes
    return task, [], [f"the original does not run at {r}" for r in refused[:3]]


def _ruled(task: KernelTask, multiples: dict[str, int], together: list[list[str]]) -> KernelTask:
    """The task keeping to the rule the original needed: the op it ships refuses other sizes,
    where the original reads past its buffers or launches nothing."""
    ties = [f"{a} == {b}" for g in together for a, b in zip(g, g[1:], strict=False)]
    cases = task.cases.model_copy(
        update={
            "multiples": {n: m for n, m in multiples.items() if m > 1},
            "requires": list(dict.fromkeys(task.cases.requires + ties)),
        }
    )
    return task.model_copy(update={"cases": cases})


def _floors(
    task: KernelTask, runner: CaseRunner, multiples: dict[str, int], together: list[list[str]]
) -> list[tuple[str, int]]:
    """(size, the smallest value the original runs at) for each size the original refuses at its
    smallest multiple, the others at the first case's values: a GEMV reading 128 columns a warp
    reads past its buffer at 64, and drawn sizes, near the task's, never went there."""
    tied = {n for g in together for n in g}
    first = {k: v for k, v in task.cases.visible[0].items() if k in task.original.bound}
    floors = []
    for n in size_names(task):
        if n in tied or n in task.cases.choices or n not in first or first[n] < 2:
            continue
        m = multiples.get(n, task.cases.multiples.get(n, 1))
        v = m
        while v < first[n] and not _runs(runner, {**first, n: v}):
            v *= 2
        if v > m:
            floors.append((n, min(v, first[n])))
    return floors


def _runs(runner: CaseRunner, bound: dict[str, Any]) -> bool:
    try:
        runner.case(bound, heldout=True)
    except (CudaTaskError, HostEvalError):
        return False
    return True


def _floored(task: KernelTask, floors: list[tuple[str, int]]) -> KernelTask:
    rules = [f"{n} >= {v}" for n, v in floors]
    cases = task.cases.model_copy(
        update={"requires": list(dict.fromkeys(task.cases.requires + rules))}
    )
    return task.model_copy(update={"cases": cases})


def _templates_kept(task: KernelTask, runner: CaseRunner) -> KernelTask:
    """The task with a name the user bound that is a template parameter of the kernel (``bits`` of
    ``pack<bits>``, which the op never takes) drawn only from its values at the task's cases, as
    its held-out cases keep it (`CaseRunner.free_sizes`)."""
    names = {t.name for t in runner.info.template_params} & set(task.original.bound)
    values = {n: sorted({c[n] for c in task.all_cases() if n in c}) for n in names}
    ints = {n: v for n, v in values.items() if v and all(type(x) is int for x in v)}
    choices = {**ints, **task.cases.choices}
    return task.model_copy(update={"cases": task.cases.model_copy(update={"choices": choices})})


def _rules(task: KernelTask) -> list[tuple[dict[str, int], list[list[str]]]]:
    """(multiples, groups of sizes kept equal) to draw under, loosest first, RULES at most. A size
    is taken in multiples of m only where m divides its value at every case."""
    names = [n for n in size_names(task) if n not in task.cases.choices]
    seen = {n: [c[n] for c in task.all_cases()] for n in names}
    top = {n: power_of_two_dividing(seen[n]) for n in names}
    groups: dict[tuple, list[str]] = {}
    for n in names:
        groups.setdefault(tuple(seen[n]), []).append(n)
    together = [g for g in groups.values() if len(g) > 1]
    rules = [
        ({**{n: min(m, top[n]) for n in names if top[n] > 1}, **task.cases.multiples}, tie)
        for m in doublings(max(top.values(), default=1))
        for tie in ([[], together] if together else [[]])
    ]
    return rules[:RULES]


def _said(multiples: dict[str, int], together: list[list[str]], given: dict[str, int]) -> str:
    """The rule sizes were drawn under, in words (what the task itself gives left out)."""
    parts = [f"{n} in multiples of {m}" for n, m in multiples.items() if 1 < m != given.get(n)]
    parts += [" = ".join(g) for g in together]
    return ", ".join(parts)
