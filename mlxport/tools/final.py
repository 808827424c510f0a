"""The final verification: the best candidates, in rank order, on held-out cases and extra seeds.
The first that passes is the result; a candidate that fails them is never the result."""

from __future__ import annotations

from typing import Any

from mlxport.errors import UserError
from mlxport.tools.session import Session, rank

TRIED = 4  # candidates verified at most, best first


def verify_final(session: Session, chosen: str | None, *, extra_seeds: int) -> dict[str, Any]:
    """The result of a session: the first of ``chosen`` (if correct) and the best correct
    candidates to pass final verification, with its verification and benchmark, and why each
    candidate before it was rejected."""
    from mlxport.verify.benchmark import benchmark, primary_dtype
    from mlxport.verify.correctness import run_correctness
    from mlxport.verify.reverify import check_timed_size

    ranked = [r for r in rank(session.records.values()) if r.correct]
    if chosen in session.records and session.records[chosen].correct:
        ranked = [session.records[chosen]] + [r for r in ranked if r.candidate.id != chosen]
    rejected = []
    for record in ranked[:TRIED]:
        with session.device_lock:
            report = run_correctness(
                session.task,
                record.candidate,
                session.backend,
                seed=session.seed + 50_000,
                heldout=True,
                extra_seeds=extra_seeds,
            )
        if not report.ok:
            rejected.append(
                {"candidate_id": record.candidate.id, "report": report.model_dump(mode="json")}
            )
            continue
        timed = {
            "checked": True
        }  # a timing backend checks the timed size before it times (benchmark)
        if not session.backend.timing:
            try:
                with session.device_lock:
                    timed = check_timed_size(
                        session.task,
                        record.candidate,
                        session.backend,
                        session.task.bench_cases()[0],
                        primary_dtype(session.task),
                        session.seed,
                    )
            except UserError as e:
                rejected.append({"candidate_id": record.candidate.id, "reason": str(e)})
                continue
        bench = record.benchmark
        if bench is None:
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
                rejected.append({"candidate_id": record.candidate.id, "reason": str(e)})
                continue
        return {
            "candidate_id": record.candidate.id,
            "verified": True,
            "backend": session.backend.name,
            "verification": report.model_dump(mode="json"),
            "benchmark": bench.model_dump(mode="json"),
            "timed_size": timed,
            "rejected": rejected,
        }
    return {
        "candidate_id": None,
        "verified": False,
        "backend": session.backend.name,
        "rejected": rejected,
    }
