"""A task from a bare .cu file: the user's kernel, its cases, and the kernel itself as the golden.

The stages, each returning what the next takes: the file read and the kernel picked
(`kernel.read_kernel`), its parameters classified (`kernel.classify`), the original run at each
case (`cases.CaseRunner`: the host code evaluated to the launch, buffer extents from the host
code, ``--shape`` or a measuring run), the arrays named (`tensors.arrays`), and task.toml's
content assembled here. Held-out cases are odd sizes the original itself runs at; where it does
not, a note says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends.cuda_cpu import CudaExecutor, ExecError
from mlxport.expr import evaluate, names_used
from mlxport.spec import KernelTask
from mlxport.tasks.make.cases import CaseRunner, label
from mlxport.tasks.make.derived import derived_params, given_sizes
from mlxport.tasks.make.domains import integer_domains
from mlxport.tasks.make.kernel import (
    CudaTaskError,
    KernelFile,
    Signature,
    check_bound,
    classify,
    given_domains,
    read_kernel,
)
from mlxport.tasks.make.tensors import Arrays, arrays, launches, name_measured
from mlxport.tasks.request import TaskRequest
from mlxport.tasks.sizes import doublings, in_multiples, moved, power_of_two_dividing
from mlxport.translate.bind.kernel_scope import reachable
from mlxport.translate.host.constants import RuntimeConstant, runtime_constants, with_host_constants
from mlxport.translate.host.values import HostEvalError
from mlxport.translate.translator import arm_requires

ARMS = 3  # held-out cases at most for launches of the original no other case takes
ARM_CAP = 1 << 20  # the product of a held-out case's sizes for an arm, at most (or a visible's)
ARM_LADDER = tuple(sorted({1, 2, 3} | {2**k + d for k in range(2, 31) for d in (0, 1)}))
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
    kf.text, filled = with_host_constants(kf.text)  # the golden reads what the host copies in
    kf.constants, filled_later = _runtime_inputs(kf)
    check_bound(kf, request)
    say = on_progress or (lambda _: None)
    try:
        sig = classify(kf, request, executor)
        runner = CaseRunner(kf, sig, request, executor)
        visible = []
        for c in request.cases:
            say(f"running the original {kf.info.name} at {label(c)}")
            visible.append(runner.case(c))
    except ExecError as e:  # a compiler places a missing `;` at the next line; the reader does not
        raise ExecError("; the reader finds ".join([str(e), *kf.info.warnings[:1]])) from None
    notes = _reading_notes(kf, sig) + filled + filled_later
    notes += dict.fromkeys(launch.arm for _, launch in visible if launch.arm)
    held, bounds = _heldout(runner, request.cases, visible, heldout, notes, say)
    arms, arm_bounds = _arms(runner, request.cases, visible + held, notes)
    held, bounds = held + arms, bounds + arm_bounds
    name_measured(runner, [c for c, _ in visible + held])
    notes += runner.partial.values()
    notes += [
        f"{n} is a null pointer at the case: the op passes the kernel one zero in its place and "
        f"takes no {n}, so a call cannot take the host code's branch for a {n} given"
        for n in sorted(runner.nulls)
    ]
    domains, said = integer_domains(runner, visible + held, given_domains(request.inputs))
    notes += said
    found = arrays(runner, visible[0][0], sig.dtypes, domains)
    derived = derived_params(runner, request.cases + bounds, np.random.default_rng(0))
    bound = {k for c in request.cases for k in c}
    for param in found.params:
        expr = derived.get(param["name"])
        if expr is None and param["name"] not in bound:
            notes.append(
                f"{param['name']} is what the host code computes, by no expression of the sizes "
                f"the op takes: the op takes it as an argument"
            )
        if expr is not None:
            param["expr"] = expr
            fixed = not names_used(expr)
            notes.append(
                f"{param['name']} is fixed at {expr} by the host code: the op does not take it"
                if fixed
                else f"{param['name']} is what the host code computes: {expr}"
            )
    notes += _ranges(found.params, bound)
    task = _task(request, kf, sig, found, runner, visible, held)
    for param in given_sizes(kf.text, task, request.cases):
        found.params.append(param)
        notes.append(
            f"{param['name']}, which the case binds, sizes an output or the launch and no input "
            f"gives it: the op takes it as an argument"
        )
    notes += _arm_contract(kf.text, task, [launch for _, launch in visible])
    KernelTask.model_validate({k: v for k, v in task.items() if v is not None})
    return Built(task, notes, kf.text, kf.headers)


def _runtime_inputs(kf: KernelFile) -> tuple[list[RuntimeConstant], list[str]]:
    """The ``__constant__`` arrays the kernel (or a device function it calls) reads that the host
    fills at run time with values the file does not state: each an input of the op, named after
    it; and the notes saying so, or why one cannot be (the original then reads zeros)."""
    helpers = reachable(kf.cf, kf.info)
    infos = [kf.info] + [d for d in kf.cf.device_functions if d.name in helpers]
    read = set(re.findall(r"\w+", " ".join(k.body for k in infos)))
    taken = {p.name for p in kf.info.params}
    out, notes = [], []
    for c in runtime_constants(kf.text):
        if c.name not in read:
            continue
        problem = c.problem or ("a parameter of the kernel has its name" if c.name in taken else "")
        if problem:
            notes.append(
                f"__constant__ {c.name}, which the host fills at run time, cannot be an input of "
                f"the op ({problem}): the original runs with it all zeros"
            )
            continue
        out.append(c)
        notes.append(
            f"{c.name}, filled by the host at run time, is an input of the op ({c.elements} "
            f"{c.type} values, as declared at line {c.line})"
        )
    return out, notes


def _arm_contract(source: str, task: dict[str, Any], runs: list) -> list[str]:
    """Where the launch the visible cases run sits in a branch of the host code chosen by sizes
    they bind, the task keeps to that branch: its conditions become ``[cases] requires`` (the op
    refuses sizes another branch takes) and a held-out case outside it is left out; the notes
    saying so. ``runs``: the visible cases' launches."""
    made = KernelTask.model_validate({k: v for k, v in task.items() if v is not None})
    # the host code's own evaluation where the translator's cannot follow it (a switch in a macro)
    rules = arm_requires(source, made) or [
        r for r in runs[0].rules if all(r in launch.rules for launch in runs)
    ]
    if not rules:
        return []
    cases = task["cases"]
    cases["requires"] = rules
    notes = [
        f"the op takes only sizes where {' and '.join(rules)}: the branch of the host code the "
        f"case takes; it refuses others, where the host code takes another branch"
    ]
    kept = []
    for case in cases["heldout"]:
        if all(evaluate(r, made.bindings(case, made.dtypes[0])) for r in rules):
            kept.append(case)
            continue
        notes.append(f"held-out case {label(case)} is left out: the host code takes another branch")
        launches = task["original"]["launches"]
        task["original"]["launches"] = [x for x in launches if x["case"] != label(case)]
    cases["heldout"] = kept
    return notes


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
            run, bound, why = _supported(runner, bound, why, cases)
        except (CudaTaskError, HostEvalError) as e:
            notes.append(
                f"no held-out case with {why}: the original kernel does not support it ({e})"
            )
            continue
        if any(runner.same_extents(run, v) for v in visible):
            notes.append(f"no held-out case with {why}: it changes no extent and no launch size")
            continue
        if bound in bounds:  # each size made odd alone can be the case with every size odd
            continue
        held.append(run)
        bounds.append(bound)
    return held, bounds


def _supported(runner: CaseRunner, bound: dict, why: str, cases: list[dict]):
    """The original run at held-out sizes ``bound``; where it does not run there, at those sizes
    rounded up to multiples of 2, 4, 8... (each size as far as its visible values share), as a
    kernel without bounds checks needs; (the run, the sizes, what they are). The first refusal is
    raised where it runs at none."""
    free = [k for k in runner.free_sizes(cases[0]) if k in bound]
    top = {k: power_of_two_dividing([c[k] for c in cases]) for k in free}
    tried, first = [], None
    for m in doublings(max(top.values(), default=1)):
        steps = {k: min(m, top[k]) for k in free}
        sizes = {**bound, **in_multiples({k: bound[k] for k in free}, steps)}
        if sizes in tried:
            continue
        tried.append(sizes)
        try:
            said = why if m == 1 else f"{why}, rounded up to multiples of {m}"
            return runner.case(sizes, heldout=True), sizes, said
        except (CudaTaskError, HostEvalError) as e:
            first = first or e
    raise first


def _ranges(params: list[dict], bound: set[str]) -> list[str]:
    """A range for each float param the user bound (eps, scale), where the held-out cases draw it:
    a decade either side of its value, keeping its sign; the notes saying so."""
    notes = []
    for p in params:
        v = p["default"]
        if p["type"] != "float" or p["name"] not in bound or p.get("expr") or not v:
            continue
        low, high = sorted((float(f"{v / 10:.3g}"), float(f"{v * 10:.3g}")))
        p["range"] = [low, high]
        notes.append(
            f"{p['name']} varies in the held-out cases within [{low:g}, {high:g}], a decade either "
            f"side of its value {v:g} (inferred: set range in task.toml to change it)"
        )
    return notes


def _arms(
    runner: CaseRunner, cases: list[dict], runs: list[tuple], notes: list[str]
) -> tuple[list[tuple], list[dict]]:
    """A held-out case for each launch of the original that no case takes: the host code's own
    branches on the sizes (``threads = cols > 200 ? 256 : 32``, a template argument picked by
    size), told apart by `_arm`; the sizes are moved far (up to ARM_CAP elements) and the
    smallest that takes a new arm is run."""
    names = runner.free_sizes(cases[0])
    if not names:
        return [], []
    seen = {_arm(runner, case, names) for case, _ in runs}
    raw = {_raw(launch) for _, launch in runs}
    cap = max(ARM_CAP, *(math.prod(c[n] for n in names) for c in cases))
    probes = [
        b for b in moved(cases[0], names, ARM_LADDER) if math.prod(b[n] for n in names) <= cap
    ]
    held, bounds = [], []
    for bound in sorted(probes, key=lambda b: math.prod(b[n] for n in names)):
        try:
            launch = runner.launch_at(bound)
        except (CudaTaskError, HostEvalError):
            continue
        if _raw(launch) in raw or len(held) == ARMS:
            continue
        raw.add(_raw(launch))
        arm = _arm(runner, bound, names)
        if arm in seen:
            continue
        seen.add(arm)
        try:
            held.append(runner.case(bound, heldout=True))
        except (CudaTaskError, HostEvalError) as e:
            notes.append(f"no held-out case at {label(bound)}, a launch no case takes: {e}")
            continue
        bounds.append(bound)
        template = launch.template_args
        notes.append(
            f"held-out case {label(bound)} runs the original with block {list(launch.block)}"
            + (f" and template arguments {', '.join(template)}" if template else "")
            + ", a launch of its host code no other case takes"
        )
    return held, bounds


def _raw(launch) -> tuple:
    return *launch.block, *launch.template_args, launch.shared_bytes > 0


def _arm(runner: CaseRunner, bound: dict, names: list[str]) -> tuple | None:
    """An arm of the host code's launch at ``bound``: its block and template arguments, each as the
    number it is, or as the sizes it follows (a value that changes when a size moves one up and,
    above 1, one down: ``min(cols, 128)`` has two arms, not one per cols); and whether shared
    memory is asked."""
    try:
        here = _launched(runner, bound)
        around = [
            (
                n,
                [
                    _launched(runner, {**bound, n: bound[n] + d})
                    for d in (1, -1)[: min(bound[n], 2)]
                ],
            )
            for n in names
        ]
    except (CudaTaskError, HostEvalError):
        return None
    out = []
    for k, v in enumerate(here[:-1]):
        follows = [n for n, moved in around if all(m[k] != v for m in moved)]
        out.append("~" + ",".join(follows) if follows else v)
    return *out, here[-1]


def _launched(runner: CaseRunner, bound: dict) -> tuple:
    """The launch's block and template arguments, then whether it asks for shared memory."""
    launch = runner.launch_at(bound)
    return *launch.block, *launch.template_args, launch.shared_bytes > 0


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
            "constants": found.constants,
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
