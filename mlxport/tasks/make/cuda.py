"""A task from a bare .cu file: the user's kernel, its cases, and the kernel itself as the golden.

The stages, each returning what the next takes: the file read and the kernel picked
(`kernel.read_kernel`), its parameters classified (`kernel.classify`), the original run at each
case (`cases.CaseRunner`: the host code evaluated to the launch, buffer extents from the host
code, ``--shape`` or a measuring run), the arrays named (`tensors.arrays`), and task.toml's
content assembled here. Held-out cases are odd sizes the original itself runs at; where it does
not, a note says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends.cuda_cpu import CudaExecutor
from mlxport.spec import KernelTask
from mlxport.tasks.make.cases import CaseRunner, label
from mlxport.tasks.make.derived import derived_params
from mlxport.tasks.make.domains import given_domains, integer_domains
from mlxport.tasks.make.kernel import CudaTaskError, KernelFile, Signature, classify, read_kernel
from mlxport.tasks.make.tensors import Arrays, arrays, launches, name_measured
from mlxport.tasks.request import TaskRequest
from mlxport.translate.host.values import HostEvalError

TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4, "norm": 1e-4},
    "float16": {"atol": 2e-3, "rtol": 1e-2, "norm": 5e-3},
    "bfloat16": {"atol": 1e-2, "rtol": 5e-2, "norm": 2e-2},
}
INCLUDE = "include"  # the task folder's copy of the headers its kernel reads from -I folders


@dataclass
class Built:
    task: dict[str, Any]  # task.toml's content
    notes: list[str] = field(default_factory=list)
    source: str = ""  # kernel.cu: the file with its local headers inlined
    # headers the kernel reads from -I folders: their path under the task's include/ -> the file
    headers: dict[str, Path] = field(default_factory=dict)


def from_cuda(
    request: TaskRequest,
    *,
    executor: CudaExecutor | None = None,
    heldout: int = 3,
    on_progress: Callable[[str], None] | None = None,
) -> Built:
    """The content of task.toml for the request's kernel, run at its cases; ``on_progress`` hears
    each case as the original starts running at it."""
    if not request.cases:
        raise CudaTaskError(
            "no case to run the kernel at: pass --case with the sizes, e.g. --case 'N=4096'"
        )
    executor = executor or CudaExecutor()
    kf = read_kernel(request, executor)
    sig = classify(kf, request, executor)
    runner = CaseRunner(kf, sig, request, executor)
    notes = _reading_notes(kf, sig)
    say = on_progress or (lambda _: None)
    visible = []
    for c in request.cases:
        say(f"running the original {kf.info.name} at {label(c)}")
        visible.append(runner.case(c))
    held, bounds = _heldout(runner, request.cases, visible, heldout, notes, say)
    name_measured(kf.info, runner.buffer_shapes, runner.roles, [c for c, _ in visible + held])
    notes += runner.partial.values()
    domains, said = integer_domains(runner, visible + held, given_domains(request.inputs))
    notes += said
    found = arrays(runner, visible[0][0], sig.dtypes, domains)
    derived = derived_params(runner, request.cases + bounds, np.random.default_rng(0))
    for param in found.params:
        if param["name"] in derived:
            param["expr"] = derived[param["name"]]
            notes.append(
                f"{param['name']} is what the host code computes: {derived[param['name']]}"
            )
    task = _task(request, kf, sig, found, runner, visible, held)
    KernelTask.model_validate({k: v for k, v in task.items() if v is not None})
    return Built(task, notes, kf.text, kf.headers)


def _heldout(
    runner: CaseRunner,
    cases: list[dict],
    visible: list[tuple],
    count: int,
    notes: list[str],
    say: Callable[[str], None],
) -> tuple[list[tuple], list[dict]]:
    """The held-out cases the original supports that change what they claim: one at twice the
    largest visible size along every size, one with every size odd, then each size made odd alone
    (up to ``count`` in all); a case with the extents and launch of a visible one is left out."""
    held, bounds = [], []
    for bound, why in runner.heldout_candidates(cases)[: max(count, 0)]:
        say(f"running the original at {label(bound)}, a held-out case with {why}")
        try:
            run = runner.case(bound, heldout=True)
        except (CudaTaskError, HostEvalError) as e:
            notes.append(
                f"no held-out case with {why}: the original kernel does not support it ({e})"
            )
            continue
        if any(runner.same_extents(run, v) for v in visible):
            notes.append(f"no held-out case with {why}: it changes no extent and no launch size")
            continue
        held.append(run)
        bounds.append(bound)
    return held, bounds


def _reading_notes(kf: KernelFile, sig: Signature) -> list[str]:
    name = kf.path.name
    notes = [
        f"dropped #include <{h}>: nothing of it runs in device code"
        for h in kf.source.dropped_includes
    ]
    notes += [
        f"{p.name} ({p.type}, {sig.zeroed[p.name]} bytes) is a struct passed by value, which the "
        f"host fills at run time: the original runs with it all zero bytes"
        for p in kf.info.params
        if p.name in sig.zeroed
    ]
    notes += [f"kernel.cu holds {name} with its local header {h} inlined" for h in kf.inlined]
    notes += [
        f'#include "{h}" is not found next to {name} or in an -I folder: left out'
        for h in kf.missing
    ]
    return notes


def _task(
    request: TaskRequest,
    kf: KernelFile,
    sig: Signature,
    found: Arrays,
    runner: CaseRunner,
    visible: list[tuple],
    held: list[tuple],
) -> dict[str, Any]:
    info = kf.info
    extents = " + ".join(
        "*".join(f"({d})" for d in runner.buffer_shapes[p.name])
        for p in info.params
        if p.is_pointer
    )
    return {
        "name": request.name or _identifier(info.name),
        "kernel": info.name,
        "source": "kernel.cu",
        "reference": None,
        "description": (
            f"{info.name} from {kf.path.name}, checked against the original kernel on the CPU "
            f"executor"
        ),
        "dtypes": sig.dtypes,
        "inputs": found.inputs,
        "outputs": found.outputs,
        "params": found.params,
        "tolerance": {d: TOLERANCE.get(d, TOLERANCE["float32"]) for d in sig.dtypes},
        "cases": {"visible": [c for c, _ in visible], "heldout": [c for c, _ in held]},
        "cost": {"bytes": f"({extents}) * itemsize"},
        "tags": ["user-kernel"],
        "original": {
            "args": found.args,
            "results": found.results,
            "launches": launches(runner, visible + held),
            "include": [INCLUDE] if kf.headers else [],
            "zeroed": sig.zeroed,
            "made_with": made_with(request),
            "bound": sorted({k for c in request.cases for k in c}),
        },
    }


MADE_WITH = ("kernel", "shapes", "grid", "block", "shared_bytes", "template")


def made_with(request: TaskRequest) -> dict[str, Any]:
    """The flags a launch at another case needs again."""
    return {k: v for k in MADE_WITH if (v := getattr(request, k))}


def _identifier(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else f"k_{s}"


__all__ = ["Built", "CudaTaskError", "from_cuda", "label"]
