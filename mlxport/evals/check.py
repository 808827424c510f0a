"""``mlxport tasks check``: every reference, baseline and the original kernel agree on every case
and dtype."""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from mlxport.spec import CaseResult, KernelTask
from mlxport.tasks import MLX_LOCK, TaskError, expert_ports, make_inputs
from mlxport.verify.compare import axis_names, compare
from mlxport.verify.golden import golden, run_original
from mlxport.verify.references import function_outputs


@dataclass
class CheckRow:
    task: str
    baseline: str
    case: str
    dtype: str
    heldout: bool
    result: CaseResult


def check_task(task: KernelTask, seed: int = 0) -> list[CheckRow]:
    """Run the reference, each baseline and the original kernel (on the CPU executor, where the
    task describes its launch) on every visible and held-out case and dtype, each compared with the
    golden output (the reference in float32, else the original kernel).

    Raises TaskError when the golden itself fails; disagreements are rows.
    """
    rows = []
    expert_ports(task)  # a malformed expert port is a task error
    heldout_ids = {id(c) for c in task.cases.heldout}
    checked = [("reference", task.reference)] if task.reference else []
    if task.baselines is not None:
        checked += [("native", task.baselines.native), ("naive", task.baselines.naive)]
    for case in task.all_cases():
        for dtype in task.dtypes:
            with MLX_LOCK, mx.stream(mx.cpu):
                inputs = make_inputs(task, case, dtype, seed)
            refs = golden(task, inputs, case)
            shapes = task.shapes(case, dtype)
            for spec, ref in zip(task.outputs, refs, strict=True):
                if tuple(ref.shape) != shapes[spec.name]:
                    raise TaskError(
                        f"{task.reference or task.kernel} gives shape {tuple(ref.shape)} for "
                        f"{spec.name}; task.toml says {shapes[spec.name]}"
                    )
            for label, fn in checked:
                outs = function_outputs(task, fn, inputs, case)
                rows.append(
                    CheckRow(
                        task.name,
                        label,
                        task.case_label(case),
                        dtype,
                        id(case) in heldout_ids,
                        _worst(task, outs, refs, case, dtype),
                    )
                )
            if task.original is not None:
                # as the golden, the original is checked against a second run of itself: it runs at
                # this case, gives the task's shapes, and gives the same answer (no race or
                # uninitialized read)
                label = "original" if task.reference is not None else "original, run twice"
                outs = run_original(task, inputs, case)
                rows.append(
                    CheckRow(
                        task.name,
                        label,
                        task.case_label(case),
                        dtype,
                        id(case) in heldout_ids,
                        _worst(task, outs, refs, case, dtype),
                    )
                )
    return rows


def _worst(
    task: KernelTask, outs: list[np.ndarray], refs: list[np.ndarray], case: dict, dtype: str
) -> CaseResult:
    results = [
        compare(
            o,
            r,
            task.tolerance[dtype],
            case=task.case_label(case),
            dtype=dtype,
            axes=axis_names(spec.shape),
        )
        for spec, o, r in zip(task.outputs, outs, refs, strict=True)
    ]
    failed = [r for r in results if r.verdict != "pass"]
    return failed[0] if failed else results[0]
