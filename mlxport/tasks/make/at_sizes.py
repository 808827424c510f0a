"""A task made from a .cu file, at sizes none of its cases has: the host code evaluated there
again (with the flags the task was made with) for the launch and the scalars it computes, and
the original run there, so only sizes the original supports are kept."""

from __future__ import annotations

from typing import Any

from mlxport.backends.cuda_cpu import CudaExecutor
from mlxport.spec import KernelTask, OriginalLaunch
from mlxport.tasks.make.cases import CaseRunner, label
from mlxport.tasks.make.kernel import CudaTaskError, classify, read_kernel
from mlxport.tasks.request import TaskRequest
from mlxport.translate.host.values import HostEvalError


def original_at(
    task: KernelTask, bounds: list[dict[str, Any]], executor: CudaExecutor
) -> tuple[KernelTask, list[dict[str, Any]], list[str]]:
    """(the task with the original's launches at these sizes added, the full cases, why each
    size left out was left out)."""
    original = task.original
    request = TaskRequest(
        source=task.folder / task.source,
        includes=[task.folder / p for p in original.include],
        cases=bounds,
        **{"kernel": task.kernel, **original.made_with},
    )
    kf = read_kernel(request, executor)
    runner = CaseRunner(kf, classify(kf, request, executor), request, executor)
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
