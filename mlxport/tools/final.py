"""The final verification: the best candidates, in rank order, on held-out cases and extra seeds,
then as the op a user takes home (the written kernel.py called at sizes no case has). The first
that passes is the result; a candidate that fails them is never the result."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
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
    from mlxport.verify.reverify import check_timed_size

    if session.backend.timing:
        return {"checked": True}
    try:
        with session.device_lock:
            return check_timed_size(
                session.task,
                record.candidate,
                session.backend,
                session.task.bench_cases()[0],
                primary_dtype(session.task),
                session.seed,
            )
    except UserError as e:
        raise Rejected(record.candidate.id, reason=str(e)) from e


POOL = 8  # fresh sizes drawn per op case, among which paths not yet taken are looked for


def op_cases(
    task: KernelTask, candidate: KernelCandidate, seed: int
) -> tuple[KernelTask, list[dict[str, Any]], list[str]]:
    """Sizes no case of the task has, for the op check: OP_CASES of them, and one for each side of
    a size-dependent condition of the candidate (verify/paths.py) that no case takes; with the
    original's launches there, for a task whose golden it is; and notes on what was left out."""
    from mlxport.tasks.sizes import fresh_sizes

    rng = np.random.default_rng(seed)
    pool = fresh_sizes(task, POOL * OP_CASES, rng)
    notes: list[str] = []
    if task.reference is None and task.original is not None:
        from mlxport.tasks.make.at_sizes import original_at
        from mlxport.verify.golden import shared_executor

        task, pool, left = original_at(task, pool, shared_executor())
        notes += [f"left out {n}" for n in left] if len(pool) < OP_CASES else []
    cases = pool[:OP_CASES]
    paths, said = _path_cases(task, candidate, cases, pool[OP_CASES:])
    cases += paths
    notes += said
    if not cases:
        cases = task.cases.visible[:1]
        notes.append("no size of the task varies: the op was called at its first visible case")
    return task, cases, notes


def _path_cases(task, candidate, chosen: list[dict], pool: list[dict]) -> tuple[list, list]:
    """A case from ``pool`` for each side of each size-dependent condition that neither the task's
    cases nor ``chosen`` take, and notes saying which path each runs or that none could."""
    from mlxport.verify.paths import conditions, side

    taken = task.all_cases() + chosen
    extra, notes = [], []
    for cond in conditions(task, candidate):
        sides = {side(cond, task, candidate, c) for c in taken} - {None}
        for want in (True, False):
            if want in sides or not sides:
                continue
            found = next((c for c in pool if side(cond, task, candidate, c) is want), None)
            if found is None:
                notes.append(
                    f"{cond} is {str(want).lower()} at no size drawn: that path did not run"
                )
                continue
            extra.append(found)
            taken.append(found)
            sides.add(want)
            notes.append(
                f"{task.case_label(found)} runs the path where {cond} is {str(want).lower()}"
            )
    return extra, notes


def op_check(session: Session, candidate: KernelCandidate) -> tuple[list[CaseResult], dict]:
    """The candidate written as the op a port ships and called as a user calls it."""
    from mlxport.op import write_op
    from mlxport.op.check import OP_SEED, check_op, golden_cases

    seed = session.seed + OP_SEED
    task, cases, notes = op_cases(session.task, candidate, seed)
    goldens = golden_cases(task, cases, seed)
    with tempfile.TemporaryDirectory(prefix="mlxport-op-") as tmp:
        folder = write_op(Path(tmp) / task.name, task, candidate, label="being verified", model="")
        with session.device_lock:
            results = check_op(folder, task, session.backend, goldens)
    labels = {task.case_label(c) for c in cases}
    launches = [x for x in (task.original.launches if task.original else []) if x.case in labels]
    return results, {
        "cases": cases,
        "seed": seed,
        "launches": [x.model_dump(mode="json") for x in launches],
        "notes": notes,
    }
