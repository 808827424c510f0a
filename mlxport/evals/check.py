"""``mlxport tasks check``: every reference and baseline agrees on every case and dtype."""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx

from mlxport.spec import CaseResult, KernelTask
from mlxport.tasks import TaskError, call, expert_ports, golden, make_inputs, to_numpy
from mlxport.verify.compare import compare


@dataclass
class CheckRow:
    task: str
    baseline: str
    case: str
    dtype: str
    heldout: bool
    result: CaseResult


def check_task(task: KernelTask, seed: int = 0) -> list[CheckRow]:
    """Run the reference and each baseline on every visible and held-out case and dtype (MLX CPU),
    each compared with the golden output (the reference in float32).

    Raises TaskError when the reference itself fails; disagreements are rows.
    """
    rows = []
    expert_ports(task)  # a malformed expert port is a task error
    heldout_ids = {id(c) for c in task.cases.heldout}
    with mx.stream(mx.cpu):
        for case in task.all_cases():
            for dtype in task.dtypes:
                inputs = make_inputs(task, case, dtype, seed)
                refs = golden(task, inputs, case)
                shapes = task.shapes(case, dtype)
                for spec, ref in zip(task.outputs, refs, strict=True):
                    if tuple(ref.shape) != shapes[spec.name]:
                        raise TaskError(f"{task.reference} returned shape {tuple(ref.shape)} for "
                                        f"{spec.name}; task.toml says {shapes[spec.name]}")
                for label, fn in (("reference", task.reference), ("native", task.baselines.native),
                                  ("naive", task.baselines.naive)):
                    outs = call(fn, task, inputs, case)
                    rows.append(CheckRow(task.name, label, task.case_label(case), dtype,
                                         id(case) in heldout_ids,
                                         _worst(task, outs, refs, case, dtype)))
    return rows


def _worst(task: KernelTask, outs: list[mx.array], refs: list[mx.array], case: dict, dtype: str) -> CaseResult:
    results = [compare(to_numpy(o), to_numpy(r), task.tolerance[dtype], case=task.case_label(case), dtype=dtype)
               for o, r in zip(outs, refs, strict=True)]
    failed = [r for r in results if r.verdict != "pass"]
    return failed[0] if failed else results[0]
