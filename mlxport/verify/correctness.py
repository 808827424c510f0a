"""``run_correctness``: run a candidate on fresh inputs for every case and dtype of a task.

Tolerances, shapes and the reference always come from the task, never from the model.
Held-out cases and extra seeds run only in the final verification.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.backends.base import Backend, RunResult, output_budget
from mlxport.errors import UserError
from mlxport.spec import CaseResult, CorrectnessReport, KernelCandidate, KernelTask
from mlxport.spec.results import TOGETHER
from mlxport.tasks import MLX_LOCK, TaskError, make_inputs
from mlxport.tasks.inputs import DISTRIBUTIONS
from mlxport.verify.compare import axis_names, compare
from mlxport.verify.golden import golden, golden_name


def new_seed() -> int:
    return secrets.randbelow(2**31)


def kernel_args(
    task: KernelTask, candidate: KernelCandidate, inputs: dict[str, mx.array], case: dict[str, Any]
) -> dict[str, Any]:
    """Everything the candidate may name: task inputs as arrays, params as Python scalars. The
    kernel receives ``candidate.input_names``; the rest is in scope for launch expressions."""
    available: dict[str, Any] = {**inputs, **task.param_values(case)}
    unknown = [n for n in candidate.input_names if n not in available]
    if unknown:
        raise TaskError(
            f"candidate input(s) {', '.join(unknown)} are not inputs or params of task {task.name} "
            f"(it has {', '.join(available)})"
        )
    return available


def output_order(task: KernelTask, candidate: KernelCandidate) -> list[int]:
    """Index of each task output among the candidate's outputs: by name, else by position."""
    names = [t.name for t in task.outputs]
    if all(n in candidate.output_names for n in names):
        return [candidate.output_names.index(n) for n in names]
    if len(candidate.output_names) == len(names):
        return list(range(len(names)))
    raise TaskError(
        f"candidate outputs {candidate.output_names} do not match task outputs {names}: "
        f"name them as the task does"
    )


@dataclass(frozen=True)
class Run:
    """One case to run in every dtype it applies to."""

    seed: int
    ci: int  # the case's index among the cases checked
    case: dict[str, Any]
    mode: str | None = None  # None: in order; else a mode of CaseResult
    inputs: str = "task"  # the distribution floats are drawn from (tasks.inputs.DISTRIBUTIONS)

    @property
    def after_forward(self) -> bool:
        """Runs only where the same case passed in order: else that is what is wrong."""
        return self.mode not in (None, "generated") or self.inputs != "task"


def run_correctness(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    *,
    seed: int | None = None,
    heldout: bool = False,
    extra_seeds: int = 0,
    timeout: float = 120.0,
    stop_after: int | None = None,
    generated: dict[str, Any] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> CorrectnessReport:
    """Check ``candidate`` on every visible case and dtype (plus, when ``heldout``, the held-out
    cases with their float params varied, extra seeds, other input distributions, reordered
    threads, poisoned outputs). ``stop_after`` ends early after that many failing cases.
    ``generated``: the case of several threadgroups the reordered runs use where no case of the
    task has them (default: ``generated_case``; a task whose golden is the original kernel needs
    one with its launch, which tools/final.py makes). ``on_result`` hears each case's result as it
    comes."""
    seed = new_seed() if seed is None else seed
    seeds = [seed] + [seed + 7919 * (i + 1) for i in range(extra_seeds if heldout else 0)]
    cases = task.all_cases() if heldout else list(task.cases.visible)
    if heldout:
        cases = [varied(task, c, seed + ci) for ci, c in enumerate(cases)]
    runs = [Run(s, ci, case) for s in seeds for ci, case in enumerate(cases)]
    if heldout:
        runs += _final_runs(task, candidate, backend, cases, seed, generated)
    order = output_order(task, candidate)
    results: list[CaseResult] = []
    passed: dict[tuple[int, int, str], int] = {}  # -> the golden's non-finite elements
    for run in runs:
        for dtype in _dtypes(task, run):
            key = (run.seed, run.ci, dtype)
            if run.after_forward and key not in passed:
                continue
            result, nonfinite = _checked(
                task, candidate, backend, run, dtype, order, timeout, passed.get(key)
            )
            if result is None:
                continue
            results.append(result)
            if on_result:
                on_result(result)
            if result.verdict == "pass" and not run.after_forward:
                passed[key] = nonfinite
            if stop_after and sum(r.verdict != "pass" for r in results) >= stop_after:
                return _report(task, candidate, backend, seeds, heldout, results)
    return _report(task, candidate, backend, seeds, heldout, _counted(task, candidate, results))


def _counted(task: KernelTask, candidate: KernelCandidate, results: list[CaseResult]):
    """Held-out results whose case has the tensor shapes and the launch of a visible case re-test
    that case: marked not counted."""
    from mlxport.tasks import case_infos

    def key(case: dict[str, Any]) -> tuple:
        try:
            launch = candidate.launch(case_infos(task, case, task.dtypes[0]))
        except UserError:
            return ("?", task.case_label(case))
        shapes = task.shapes(case, task.dtypes[0])
        return (tuple(sorted(shapes.items())), launch.grid, launch.threadgroup)

    visible = {key(c) for c in task.cases.visible}
    cases = {task.case_label(c): c for c in task.all_cases()}
    return [
        r.model_copy(update={"counted": False})
        if r.heldout and r.case in cases and key(cases[r.case]) in visible
        else r
        for r in results
    ]


def _final_runs(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    cases: list[dict[str, Any]],
    seed: int,
    generated: dict[str, Any] | None,
) -> list[Run]:
    """The final verification's runs beyond every case in order, each on fresh inputs."""
    visible = range(len(task.cases.visible))
    runs = [
        Run(seed, ci, cases[ci], inputs=d) for ci in visible for d in DISTRIBUTIONS if d != "task"
    ]
    if backend.reorders:
        # The simulator runs threads in a fixed order, so a missing barrier can happen to work: the
        # visible cases run again with threads and threadgroups reversed and shuffled, the
        # held-out ones shuffled in the first dtype (they bring sizes of several tiles, where a
        # kernel walks tiles), and one with several threadgroups along x, generated if no case
        # of the task has that.
        reordered = list(range(len(cases)))
        if _several_threadgroups(task, candidate, cases) is None and (
            extra := generated or generated_case(task, candidate)
        ):
            cases.append(extra)
            reordered.append(len(cases) - 1)
            runs.append(Run(seed, len(cases) - 1, extra, "generated"))
        runs += [
            Run(seed, ci, cases[ci], mode)
            for mode in ("reversed", "shuffled")
            for ci in reordered
            if mode == "shuffled" or ci in visible
        ]
    # Poisoned with NaN, a kernel folding what an output held into its result (max(out, y)) can
    # be right by luck: the visible cases run again on outputs holding finite garbage.
    runs += [Run(seed, ci, cases[ci], "poisoned") for ci in visible]
    if backend.overlaps:
        # On a GPU, independent calls may run at once: a kernel keeping state between calls in
        # module globals passes alone and mixes calls in a model.
        runs += [Run(seed, ci, cases[ci], "together") for ci in visible]
    return runs


def _dtypes(task: KernelTask, run: Run) -> list[str]:
    """What reordered, generated and other-distribution runs look for does not depend on the
    dtype: they run in the first. Poisoned runs run in every dtype (a kernel could read its output
    first in one dtype only)."""
    if run.inputs != "task":
        return task.dtypes[:1]
    if run.mode in ("reversed", "shuffled", "generated") and run.ci >= len(task.cases.visible):
        return task.dtypes[:1]
    return list(task.dtypes)


# Inputs of another scale or conditioning than the task's tolerance is for: judged for gross
# errors only (NaN or infinity where the golden is finite, an error norm over 1e-2).
GROSS = ("wide", "rows")
_MODE_SEEDS = {None: 0, "generated": 0, "reversed": 1, "shuffled": 2, "poisoned": 3, "together": 4}


def _checked(
    task, candidate, backend, run: Run, dtype: str, order, timeout, nonfinite: int | None
) -> tuple[CaseResult | None, int]:
    """One run at one dtype, on inputs drawn for it alone (a reordered or poisoned run's inputs are
    not the forward run's, so a kernel cannot replay what it saw), and its golden's non-finite
    elements; None where the run says nothing (a generated case that fails; inputs outside what
    the kernel computes: more of the golden not finite than on the task's own inputs, nonfinite)."""
    extra = _MODE_SEEDS[run.mode] * 50_021 + list(DISTRIBUTIONS).index(run.inputs) * 60_013
    input_seed = run.seed + 101 * run.ci + extra
    prepared = _prepared(task, run.case, dtype, input_seed, run.inputs)
    bad = sum(int((~np.isfinite(g)).sum()) for g in prepared[1])
    if run.inputs != "task" and bad > (nonfinite or 0):
        return None, bad
    # A reordered run that hangs (a spin on another threadgroup's flag) need not wait long.
    limit = min(timeout, 30.0) if run.mode in ("reversed", "shuffled") else timeout
    result = _check_case(
        task,
        candidate,
        backend,
        run.case,
        dtype,
        input_seed,
        order,
        limit,
        run.mode,
        prepared,
        elementwise=run.inputs not in GROSS,
    )
    if run.mode == "generated" and result.verdict != "pass":
        return None, bad  # a size of mlxport's choosing, not the task's: it only serves reordering
    return result.model_copy(
        update={
            "seed": run.seed,
            "mode": run.mode if result.mode == "forward" and run.mode else result.mode,
            "heldout": run.ci >= len(task.cases.visible) and run.mode != "generated",
            "inputs": run.inputs,
        }
    ), bad


def varied(task: KernelTask, case: dict[str, Any], seed: int) -> dict[str, Any]:
    """A held-out case with each float param that has a range drawn within it (log-uniform where
    the range is positive: eps from 1e-6 to 1e-2)."""
    if case in task.cases.visible:
        return case
    rng = np.random.default_rng(seed)
    out = dict(case)
    for p in task.params:
        if p.range is None:
            continue
        lo, hi = p.range
        value = math.exp(rng.uniform(math.log(lo), math.log(hi))) if lo > 0 else rng.uniform(lo, hi)
        out[p.name] = float(f"{value:.3g}")  # a value a report can show
    return out


def _groups(task: KernelTask, candidate: KernelCandidate, case: dict[str, Any]) -> tuple[int, int]:
    """(threadgroups along x, threadgroups in all) of the candidate's launch at ``case``."""
    from mlxport.tasks import case_infos

    launch = candidate.launch(case_infos(task, case, task.dtypes[0]))
    per = [-(-g // max(t, 1)) for g, t in zip(launch.grid, launch.threadgroup, strict=True)]
    return per[0], per[0] * per[1] * per[2]


def _size(task: KernelTask, case: dict[str, Any]) -> int:
    return max(math.prod(s) for s in task.shapes(case, task.dtypes[0]).values())


def _several_threadgroups(
    task: KernelTask, candidate: KernelCandidate, cases: list[dict[str, Any]]
) -> int | None:
    """The index of the smallest case whose launch has several threadgroups along x, if any."""
    found = []
    for ci, case in enumerate(cases):
        try:
            if _groups(task, candidate, case)[0] >= 2:
                found.append((_size(task, case), ci))
        except UserError:
            continue
    return min(found)[1] if found else None


GENERATED_LIMIT = 1 << 22  # elements of the largest tensor of a generated case


def generated_case(task: KernelTask, candidate: KernelCandidate) -> dict[str, Any] | None:
    """A case with several threadgroups along x when the task's cases have one each: the smallest
    visible case with one of the dimensions that vary between the task's cases doubled until it
    does (every dimension if none varies), and its tensors under GENERATED_LIMIT elements."""
    cases = task.all_cases()
    dims = task.dims()  # names the shapes use: doubling anything else changes no size
    ints = [
        k
        for k, v in cases[0].items()
        if isinstance(v, int) and not isinstance(v, bool) and k in dims
    ]
    free = [k for k in ints if len({c.get(k) for c in cases}) > 1] or ints
    base = min(task.cases.visible, key=lambda c: _size(task, c))
    for name in free:
        case = dict(base)
        for _ in range(24):
            case[name] = max(2 * case[name], 2)
            try:
                if _size(task, case) > GENERATED_LIMIT:
                    break
                if _groups(task, candidate, case)[0] >= 2:
                    return case
            except UserError:
                break
    return None


def _report(task, candidate, backend, seeds, heldout, results) -> CorrectnessReport:
    return CorrectnessReport(
        backend=backend.name,
        candidate_id=candidate.id,
        task=task.name,
        seeds=seeds,
        heldout=heldout,
        cases=results,
        golden=golden_name(task),
    )


def _wrong_dtypes(
    task: KernelTask,
    candidate: KernelCandidate,
    inputs: dict[str, mx.array],
    case: dict[str, Any],
    dtype: str,
    order: list[int],
) -> str:
    """An output in another dtype than the task's would change what callers get back."""
    from mlxport.tasks import arg_infos

    got = candidate.launch(arg_infos(task, inputs, case)).output_dtypes
    for spec, idx in zip(task.outputs, order, strict=True):
        want = spec.resolve_dtype(dtype)
        if idx < len(got) and got[idx] != want:
            return (
                f"output {spec.name} is {got[idx]} but the task's is {want}: set output_dtypes "
                f"accordingly"
            )
    return ""


def check_case(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    case: dict[str, Any],
    dtype: str,
    seed: int,
    timeout: float = 600.0,
) -> CaseResult:
    """One case and dtype, as run_correctness checks it."""
    return _check_case(
        task, candidate, backend, case, dtype, seed, output_order(task, candidate), timeout
    )


def run_judged(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    case: dict[str, Any],
    dtype: str,
    seed: int,
    timeout: float = 600.0,
    **options: Any,
) -> tuple[CaseResult, RunResult | None]:
    """One case and dtype run alone with ``options`` for the backend's run (``count=...``) and
    judged as run_correctness judges it, with the run itself (None where it never launched)."""
    label = task.case_label(case)
    inputs, refs = _prepared(task, case, dtype, seed)
    order = output_order(task, candidate)
    try:
        wrong = _wrong_dtypes(task, candidate, inputs, case, dtype, order)
    except UserError as e:
        return CaseResult(case=label, dtype=dtype, verdict="error", error=str(e)), None
    if wrong:
        return CaseResult(case=label, dtype=dtype, verdict="fail", pattern=wrong), None
    args = kernel_args(task, candidate, inputs, case)
    run = backend.run(candidate, args, timeout=timeout, output_bytes=output_budget(refs), **options)
    return _judge(task, run, refs, order, label, dtype), run


REVERSED_HINT = (
    "right with threads in order but not with threads and threadgroups run {order}, so the "
    "result depends on the order of unsynchronised threads (a missing threadgroup_barrier, threads "
    "racing on one element, or one threadgroup waiting for another)"
)
POISON_HINT = (
    "right on outputs that start as NaN but not on outputs that start as other garbage, so the "
    "kernel "
    "reads an output before writing it: write each element before reading it, or set init_value"
)
TOGETHER_HINT = (
    f"right alone but not when {TOGETHER} calls on different inputs run in one evaluation, which "
    f"MLX "
    "may run at once on the GPU: the calls share state outside their own buffers (module-scope "
    "__device__ variables used as scratch or counters); keep per-call scratch in an extra output "
    "(init_value zeroes it)"
)
# What a failure in each mode says about the kernel.
HINTS = {
    "reversed": REVERSED_HINT.format(order="in reverse order"),
    "shuffled": REVERSED_HINT.format(order="in a shuffled order"),
    "poisoned": POISON_HINT,
    "together": TOGETHER_HINT,
}


def _prepared(
    task: KernelTask, case: dict[str, Any], dtype: str, seed: int, dist: str = "task"
) -> tuple[dict, list[np.ndarray]]:
    """Inputs for a case and the golden outputs on them."""
    with MLX_LOCK, mx.stream(mx.cpu):
        inputs = make_inputs(task, case, dtype, seed, dist)
    return inputs, golden(task, inputs, case)


def _check_case(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    case: dict[str, Any],
    dtype: str,
    seed: int,
    order: list[int],
    timeout: float,
    mode: str | None = None,
    prepared: tuple[dict, list[np.ndarray]] | None = None,
    elementwise: bool = True,
) -> CaseResult:
    """One case and dtype: alone, or (``mode``) with threads reversed, or together with more calls
    on fresh inputs of the same case."""
    hint = HINTS.get(mode or "", "")
    label = task.case_label(case)
    sets = [prepared or _prepared(task, case, dtype, seed)]
    if mode == "together":
        sets += [_prepared(task, case, dtype, seed + 7907 * j) for j in range(1, TOGETHER)]
    try:
        wrong = _wrong_dtypes(task, candidate, sets[0][0], case, dtype, order)
    except UserError as e:
        return CaseResult(case=label, dtype=dtype, verdict="error", error=str(e))
    if wrong:
        return CaseResult(case=label, dtype=dtype, verdict="fail", pattern=wrong)
    args = [kernel_args(task, candidate, inputs, case) for inputs, _ in sets]
    if mode == "together":
        runs = backend.run_together(candidate, args, timeout=timeout * TOGETHER)
    else:
        runs = [
            backend.run(
                candidate,
                args[0],
                timeout=timeout,
                order=mode if mode in ("reversed", "shuffled") else "forward",
                poison="finite" if mode == "poisoned" else "nan",
                output_bytes=output_budget(sets[0][1]),
            )
        ]
    results = [
        _judge(task, run, refs, order, label, dtype, elementwise)
        for run, (_, refs) in zip(runs, sets, strict=True)
    ]
    worst = next((r for r in results if r.verdict != "pass"), results[0])
    if worst.verdict == "fail" and (
        grid_hint := _grid_in_threadgroups(task, candidate, sets[0][0], case, worst)
    ):
        worst = worst.model_copy(update={"pattern": f"{worst.pattern}; {grid_hint}"})
    if worst.verdict == "pass" or not hint:
        return worst
    k = results.index(worst)
    if mode == "together":
        # Blame running together only if the failing inputs pass alone: every call's inputs are
        # fresh, and a kernel can simply be wrong on them.
        alone = _judge(
            task, backend.run(candidate, args[k], timeout=timeout), sets[k][1], order, label, dtype
        )
        if alone.verdict != "pass":
            return alone.model_copy(update={"mode": "fresh"})
    if worst.verdict == "error":
        return worst.model_copy(update={"error": f"{worst.error}; {hint}"})
    return worst.model_copy(update={"pattern": f"{worst.pattern}; {hint}"})


def _grid_in_threadgroups(
    task: KernelTask,
    candidate: KernelCandidate,
    inputs: dict[str, mx.array],
    case: dict[str, Any],
    result: CaseResult,
) -> str:
    """The hint for the commonest launch mistake: a grid counted in threadgroups writes one
    threadgroup's share of the output."""
    from mlxport.tasks import arg_infos

    if not result.unwritten or not result.total:
        return ""
    try:
        launch = candidate.launch(arg_infos(task, inputs, case))
    except UserError:
        return ""
    per_group = math.prod(launch.threadgroup)
    written = result.total - result.unwritten
    if per_group > 1 and written and abs(written * per_group - result.total) < per_group:
        return (
            f"only 1/{per_group} of the output was written: `grid` counts threads, not "
            f"threadgroups "
            f"(MLX dispatches grid threads in groups of `threadgroup`), so multiply it by the "
            f"threadgroup size"
        )
    return ""


def _judge(
    task: KernelTask,
    run: RunResult,
    refs: list[np.ndarray],
    order: list[int],
    label: str,
    dtype: str,
    elementwise: bool = True,
) -> CaseResult:
    """One run's outputs against the goldens: the worst output's result."""
    if not run.ok:
        return CaseResult(
            case=label, dtype=dtype, verdict="error", error=run.error or "unknown failure"
        )
    worst = None
    for spec, ref, idx in zip(task.outputs, refs, order, strict=True):
        if idx >= len(run.outputs):
            return CaseResult(
                case=label,
                dtype=dtype,
                verdict="error",
                error=f"kernel produced {len(run.outputs)} outputs",
            )
        unwritten = run.unwritten[idx] if idx < len(run.unwritten) else None
        out = np.asarray(run.outputs[idx], dtype=np.float64)
        res = compare(
            out,
            ref,
            task.tolerance[dtype],
            case=label,
            dtype=dtype,
            unwritten=unwritten,
            axes=axis_names(spec.shape),
            elementwise=elementwise,
        )
        if res.verdict != "pass" and len(order) > 1:
            res = res.model_copy(update={"pattern": f"output {spec.name}: {res.pattern}"})
        if worst is None or (res.verdict != "pass" and worst.verdict == "pass"):
            worst = res
    return worst
