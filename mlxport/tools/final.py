"""The final verification: the best candidates, in rank order, on held-out cases and extra seeds,
then as the op a user takes home (the written kernel.py called at sizes no case has). The first
that passes is the result; a candidate that fails them is never the result."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.errors import UserError
from mlxport.spec import CaseResult, KernelCandidate, KernelTask
from mlxport.tools.session import Session, rank

TRIED = 4  # candidates verified at most, best first
OP_CASES = 3  # fresh sizes the op is called at


class Rejected(Exception):
    """A candidate the final verification turned down, with its report or the reason."""

    def __init__(self, candidate_id: str, **why: Any):
        super().__init__(candidate_id)
        self.entry = {"candidate_id": candidate_id, **why}


def verify_final(
    session: Session,
    chosen: str | None,
    *,
    extra_seeds: int,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The result of a session: the first of ``chosen`` (if correct) and the best correct
    candidates to pass final verification, with its verification and benchmark, and why each
    candidate before it was rejected. ``on_progress`` hears each check as it ends (a line)."""
    ranked = [r for r in rank(session.records.values()) if r.correct]
    if chosen in session.records and session.records[chosen].correct:
        ranked = [session.records[chosen]] + [r for r in ranked if r.candidate.id != chosen]
    rejected = []
    for record in ranked[:TRIED]:
        try:
            return {
                **verified(session, record, extra_seeds, on_progress or (lambda _: None)),
                "rejected": rejected,
            }
        except Rejected as e:
            rejected.append(e.entry)
    return {
        "candidate_id": None,
        "verified": False,
        "backend": session.backend.name,
        "rejected": rejected,
    }


def verified(
    session: Session, record, extra_seeds: int, say: Callable[[str], None]
) -> dict[str, Any]:
    """One candidate through the final verification: held-out cases, extra seeds and the other
    checks, the timed size, the op as shipped, a benchmark; Rejected where it fails one."""
    from mlxport.verify.benchmark import benchmark
    from mlxport.verify.correctness import run_correctness

    cid = record.candidate.id
    task, generated = _with_generated(session, record.candidate)
    with session.device_lock:
        report = run_correctness(
            task,
            record.candidate,
            session.backend,
            seed=session.seed + 50_000,
            heldout=True,
            extra_seeds=extra_seeds,
            generated=generated,
            on_result=lambda r: say(
                f"{cid} {'held-out ' if r.heldout else ''}{r.label} {r.dtype}: {r.verdict}"
            ),
        )
    if not report.ok:
        raise Rejected(cid, report=report.model_dump(mode="json"))
    say(f"{cid} at the timed size")
    timed = _timed_size(session, record)
    say(f"{cid} as kernel.py, called as a user calls it at fresh sizes")
    op_results, op = op_check(session, record.candidate)
    if op["unreached"]:
        raise Rejected(cid, reason=f"not verified: {op['unreached'][0]}")
    report = report.model_copy(update={"cases": report.cases + op_results})
    if not all(r.verdict == "pass" for r in op_results):
        raise Rejected(cid, report=report.model_dump(mode="json"))
    bench = record.benchmark
    if bench is None:
        say(f"{cid} against the baselines")
        try:
            with session.device_lock:
                bench = benchmark(
                    session.task,
                    record.candidate,
                    session.backend,
                    seed=session.seed,
                    chip=session.chip,
                    datasheet=session.datasheet,
                )
        except UserError as e:  # wrong at the timed size, or the timing itself failed
            raise Rejected(cid, reason=str(e)) from e
    return {
        "candidate_id": cid,
        "verified": True,
        "backend": session.backend.name,
        "verification": report.model_dump(mode="json"),
        "benchmark": bench.model_dump(mode="json"),
        "timed_size": timed,
        "op": op,
    }


def _with_generated(session: Session, candidate: KernelCandidate):
    """For a task whose golden is the original kernel: the case of several threadgroups the
    reordered runs want, with the original's launch there (the host code evaluated again)."""
    from mlxport.verify.correctness import generated_case

    task = session.task
    if task.reference is not None or task.original is None or not session.backend.reorders:
        return task, None
    case = generated_case(task, candidate)
    if case is None:
        return task, None
    from mlxport.tasks.make.at_sizes import original_at
    from mlxport.verify.golden import shared_executor

    bound = {k: v for k, v in case.items() if k in task.original.bound} or case
    extended, cases, _ = original_at(task, [bound], shared_executor())
    return (extended, cases[0]) if cases else (task, None)


def _timed_size(session: Session, record) -> dict[str, Any]:
    """The timed size checked where the backend does not time (a timing backend checks it before
    it times)."""
    from mlxport.verify.benchmark import primary_dtype
    from mlxport.verify.reverify import TIMED_SIZE_SECONDS, check_timed_size

    if session.backend.timing:
        return {"checked": True}
    task = session.task
    case = _near_timed(task) if TIMED_SIZE_SECONDS > 0 else task.bench_cases()[0]
    try:
        with session.device_lock:
            return check_timed_size(
                task, record.candidate, session.backend, case, primary_dtype(task), session.seed
            ) | {"drawn": case != task.bench_cases()[0]}
    except UserError as e:
        raise Rejected(record.candidate.id, reason=str(e)) from e


def _near_timed(task: KernelTask) -> dict[str, Any]:
    """The timed size with its sizes drawn afresh below it (`sizes.near`), from the system's
    randomness so no candidate can know them, where the golden is a reference; for a task whose
    golden is the original, the timed size itself (the op check's fresh sizes are those the
    original runs whole at, which a size drawn here need not be)."""
    from mlxport.tasks.sizes import near

    timed = task.bench_cases()[0]
    return timed if task.reference is None else near(task, timed, np.random.default_rng())


REPLAY = 1 << 20  # elements of the largest tensor of a case test_kernel.py replays, at most


@dataclass
class OpCases:
    """Where the op check calls the op: ``fresh`` sizes (every dtype) and a case for each ``path``
    of the candidate no other case takes (the first dtype: a path is the sizes'); the task with the
    original's launches there; notes; and the paths no size under the cap ran."""

    task: KernelTask
    fresh: list[dict[str, Any]]
    paths: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unreached: list[str] = field(default_factory=list)


def op_cases(task: KernelTask, candidate: KernelCandidate, seed: int) -> OpCases:
    """Sizes no case of the task has, for the op check: OP_CASES of them, and one for each side of
    a size-dependent condition of the candidate (verify/paths.py) that no case takes, found by
    moving the sizes as far as PATH_CAP allows; with the original's launches there, for a task
    whose golden it is."""
    from mlxport.verify.correctness import varied
    from mlxport.verify.paths import missing_paths

    task, cases, notes = _fresh(task, np.random.default_rng(seed))
    refused = bool(notes) and not cases
    paths, said = missing_paths(task, candidate, task.all_cases() + cases)
    notes += said
    task, probes, _ = _at_original(task, [c for p in paths for c in p.cases])
    extra, said, unreached = _path_cases(task, candidate, paths, probes, task.all_cases() + cases)
    notes += said
    if not cases and not extra:
        cases = task.cases.visible[:1]
        why = "the original runs at no size drawn" if refused else "no size of the task varies"
        notes.append(f"{why}: the op was called at its first visible case")
    cases = [varied(task, c, seed + i) for i, c in enumerate(cases)]  # eps within its range
    extra = [varied(task, c, seed + 977 + i) for i, c in enumerate(extra)]
    return OpCases(task, cases, extra, notes, unreached)


def _fresh(task: KernelTask, rng: np.random.Generator):
    """(the task, OP_CASES sizes no case has, notes): for a task whose golden is the original,
    sizes it runs at, with the original's launches there (`supported_sizes`)."""
    from mlxport.tasks.sizes import fresh_sizes

    if task.reference is not None or task.original is None:
        return task, fresh_sizes(task, OP_CASES, rng), []
    from mlxport.tasks.make.at_sizes import supported_sizes
    from mlxport.verify.golden import shared_executor

    return supported_sizes(task, OP_CASES, rng, shared_executor())


def _at_original(task: KernelTask, bounds: list[dict[str, Any]]):
    """(the task with the original's launches at ``bounds``, the full cases the original runs
    at, why the others were left out); the task and ``bounds`` as they are where the golden is
    the reference."""
    if task.reference is not None or task.original is None or not bounds:
        return task, bounds, []
    from mlxport.tasks.make.at_sizes import original_at
    from mlxport.verify.golden import shared_executor

    return original_at(task, bounds, shared_executor())


def _path_cases(task, candidate, paths, full: list[dict], taken: list[dict]):
    """A case for each path from ``full`` (the cases the original runs at), unless one chosen
    before takes it too; notes saying which path each runs; and a sentence for each path that no
    case ran."""
    from mlxport.verify.paths import PATH_CAP, side

    extra, notes, unreached = [], [], []
    for path in paths:
        if any(side(path.cond, task, candidate, c) is path.want for c in taken):
            continue
        mine = [c for c in full if any(_within(p, c) for p in path.cases)]
        found = next((c for c in mine if side(path.cond, task, candidate, c) is path.want), None)
        if found is not None:
            extra.append(found)
            taken.append(found)
            notes.append(f"the path where {path.said()} runs at {task.case_label(found)}")
        elif path.beyond and not path.cases:
            unreached.append(
                f"the path where {path.said()} runs only at sizes larger than the check draws (a "
                f"tensor of more than {PATH_CAP} elements, or a visible case's): it never ran"
            )
        else:
            unreached.append(
                f"the path where {path.said()} never ran: the original runs at none of the sizes "
                f"that take it ({', '.join(task.case_label(c) for c in path.cases)})"
            )
    return extra, notes, unreached


def _within(bound: dict[str, Any], case: dict[str, Any]) -> bool:
    return all(case.get(k) == v for k, v in bound.items())


def op_check(session: Session, candidate: KernelCandidate) -> tuple[list[CaseResult], dict]:
    """The candidate written as the op a port ships and called as a user calls it."""
    from mlxport.op import write_op
    from mlxport.op.check import OP_SEED, check_op, golden_cases
    from mlxport.tasks.sizes import extent, size_names
    from mlxport.verify.golden import launch_of

    seed = session.seed + OP_SEED
    found = op_cases(session.task, candidate, seed)
    task, notes = found.task, found.notes
    if found.unreached:
        return [], {"cases": [], "seed": seed, "notes": notes, "unreached": found.unreached}
    goldens = golden_cases(task, found.fresh, seed)
    goldens += golden_cases(task, found.paths, seed + 977, task.dtypes[:1])
    with tempfile.TemporaryDirectory(prefix="mlxport-op-") as tmp:
        folder = write_op(Path(tmp) / task.name, task, candidate, label="being verified", model="")
        with session.device_lock:
            results = check_op(folder, task, session.backend, goldens)
    large = [c for c in found.paths if extent(task, c, size_names(task)) > REPLAY]
    if large:
        notes.append(
            f"{', '.join(task.case_label(c) for c in large)} ran in {task.dtypes[0]} only and is "
            f"too large for test_kernel.py to replay"
        )
    cases = found.fresh + [c for c in found.paths if c not in large]
    launches = []
    for case in cases if task.reference is None and task.original else []:
        with contextlib.suppress(KeyError):  # the original's launch there, for test_kernel.py
            launches.append(launch_of(task, case))
    return results, {
        "cases": cases,
        "cases_rule": task.cases.model_dump(include={"multiples", "requires"}),
        "seed": seed,
        "launches": [x.model_dump(mode="json") for x in launches],
        "notes": notes,
        "unreached": [],
    }
