"""The op as shipped, checked: the written kernel.py imported and called as a user calls it, at
sizes no case of the task has, against the golden (the reference, or the original kernel on the
CPU executor). The final verification accepts a port only if these pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.backends.base import Backend
from mlxport.op import op_contract_sizes
from mlxport.spec import CaseResult, KernelTask
from mlxport.tasks import MLX_LOCK, make_inputs
from mlxport.verify.compare import axis_names, compare
from mlxport.verify.golden import golden

OP_SEED = 61_000  # added to the session's seed: the op's inputs are none the model saw


def op_params(task: KernelTask, case: dict[str, Any]) -> dict[str, Any]:
    """What a user passes the op at a case: its params, except the sizes its inputs' shapes give
    (kernel.py takes those from the shapes), plus sizes no shape gives."""
    bare = {d for t in task.inputs for d in t.shape if isinstance(d, str) and d.isidentifier()}
    names = task.bindings(case, task.dtypes[0])
    given = {p.name: names[p.name] for p in task.params if p.name not in bare and not p.expr}
    return given | {n: names[n] for n in op_contract_sizes(task) if n not in given}


def golden_cases(
    task: KernelTask, cases: list[dict[str, Any]], seed: int, dtypes: list[str] | None = None
) -> list[dict[str, Any]]:
    """Each case and dtype (the task's, or ``dtypes``) with its inputs (numpy; bfloat16 as
    float32) and golden outputs."""
    out = []
    for ci, case in enumerate(cases):
        for dtype in dtypes or task.dtypes:
            with MLX_LOCK, mx.stream(mx.cpu):
                inputs = make_inputs(task, case, dtype, seed + 131 * ci)
                arrays = {n: _numpy(a) for n, a in inputs.items()}
            out.append(
                {
                    "case": task.case_label(case),
                    "dtype": dtype,
                    "params": op_params(task, case),
                    "inputs": arrays,
                    "outputs": golden(task, inputs, case),
                }
            )
    return out


def check_op(
    folder: Path, task: KernelTask, backend: Backend, goldens: list[dict[str, Any]]
) -> list[CaseResult]:
    """The op in ``folder`` at each golden case, on ``backend``."""
    results = []
    for g in goldens:
        given = [t for t in task.inputs if t.init.kind != "full"]  # the op fills the others
        dtypes = [t.resolve_dtype(g["dtype"]) for t in given]
        arrays = [g["inputs"][t.name] for t in given]
        run = backend.run_op(folder, arrays, dtypes, g["params"])
        results.append(_judge(task, run, g))
    return results


def _judge(task: KernelTask, run, g: dict[str, Any]) -> CaseResult:
    base = {"case": g["case"], "dtype": g["dtype"], "mode": "op", "heldout": True}
    if not run.ok:
        return CaseResult(**base, verdict="error", error=run.error)
    if len(run.outputs) != len(task.outputs):
        error = f"kernel.py returned {len(run.outputs)} outputs; the task has {len(task.outputs)}"
        return CaseResult(**base, verdict="error", error=error)
    worst = None
    for spec, out, ref in zip(task.outputs, run.outputs, g["outputs"], strict=True):
        res = compare(
            np.asarray(out, dtype=np.float64),
            ref,
            task.tolerance[g["dtype"]],
            case=g["case"],
            dtype=g["dtype"],
            axes=axis_names(spec.shape),
        )
        if res.verdict != "pass" and len(task.outputs) > 1:
            res = res.model_copy(update={"pattern": f"output {spec.name}: {res.pattern}"})
        if worst is None or (res.verdict != "pass" and worst.verdict == "pass"):
            worst = res
    return worst.model_copy(update={"mode": "op", "heldout": True})


def _numpy(a: mx.array) -> np.ndarray:
    return np.array(a.astype(mx.float32) if a.dtype == mx.bfloat16 else a)
