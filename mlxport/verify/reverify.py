"""Re-verification: a kernel is checked again where a timing would otherwise rest on trust, at
the timed size before it is timed, and on fresh seeds when its speedup looks too good."""

from __future__ import annotations

import os
import time
from typing import Any

from mlxport.backends.base import Backend
from mlxport.errors import UserError
from mlxport.spec import KernelCandidate, KernelTask
from mlxport.verify.correctness import check_case, run_correctness

SUSPICIOUS_SPEEDUP = 10.0
TIMED_SIZE_SECONDS = float(
    os.environ.get("MLXPORT_TIMED_SIZE_SECONDS", "120")
)  # the simulator's budget for it


class WrongAtBenchSize(UserError):
    """The candidate is wrong at the size it would be timed at: its timing would mean nothing."""


class FailedReverification(UserError):
    """A suspiciously large speedup did not survive a second, wider correctness check."""


_REVERIFIED: set[tuple[str, str, int]] = (
    set()
)  # (backend, candidate id, seed) whose visible cases passed


def check_bench_case(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    case: dict[str, Any],
    dtype: str,
    seed: int,
) -> None:
    """Timed sizes are checked too: a kernel that only does part of the work at a large size (a
    capped grid, say) would otherwise post a speedup no held-out case contradicts."""
    result = check_case(task, candidate, backend, case, dtype, seed + 424_242)
    if result.verdict != "pass":
        raise WrongAtBenchSize(
            f"candidate {candidate.id} is wrong at the timed size {result.case} {dtype}: "
            f"{result.error or result.pattern}; it was not timed"
        )


def check_timed_size(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    case: dict[str, Any],
    dtype: str,
    seed: int,
    budget: float = TIMED_SIZE_SECONDS,
) -> dict[str, Any]:
    """The timed size on a backend that does not time (the simulator), where it fits ``budget``
    seconds, judged from the largest visible case scaled by work: the result says whether it was
    checked and why not. Wrong there raises WrongAtBenchSize."""
    label = {"case": task.case_label(case), "dtype": dtype}
    if budget <= 0:
        return {**label, "checked": False, "why": "the budget is 0 s (MLXPORT_TIMED_SIZE_SECONDS)"}
    work = _work(task, case, dtype)
    visible = max(task.cases.visible, key=lambda c: _work(task, c, dtype))
    t0 = time.perf_counter()
    check_case(task, candidate, backend, visible, dtype, seed, timeout=max(budget, 1.0))
    estimate = (time.perf_counter() - t0) * work / max(_work(task, visible, dtype), 1)
    if estimate > budget:
        return {
            **label,
            "checked": False,
            "why": f"{backend.name} would take about {estimate:.0f} s, over the "
            f"{budget:g} s budget (MLXPORT_TIMED_SIZE_SECONDS)",
        }
    result = check_case(
        task, candidate, backend, case, dtype, seed + 424_242, timeout=max(budget, 1.0)
    )
    if result.verdict == "error" and "timed out" in result.error:
        return {
            **label,
            "checked": False,
            "why": f"it ran past the {budget:g} s budget (MLXPORT_TIMED_SIZE_SECONDS)",
        }
    if result.verdict != "pass":
        raise WrongAtBenchSize(
            f"candidate {candidate.id} is wrong at the timed size {result.case} {dtype}: "
            f"{result.error or result.pattern}"
        )
    return {**label, "checked": True}


def _work(task: KernelTask, case: dict[str, Any], dtype: str) -> int:
    nbytes, flops = task.cost_of(case, dtype)
    return max(nbytes, flops, 1)


def verdict_label(final: dict[str, Any]) -> str:
    """What a final result may be called: "verified" names its backend and, where the timed size
    was not checked, says so."""
    if not final.get("verified"):
        return "no candidate passed verification"
    cases = (final.get("verification") or {}).get("cases", [])
    held = [c for c in cases if c.get("heldout") and c.get("mode") == "forward"]
    if held and not any(c.get("counted", True) for c in held):
        return (
            f"verified on {final['backend']} at the task's cases and the op's fresh sizes; no "
            f"held-out case changes an extent or the launch"
        )
    timed = final.get("timed_size") or {}
    if timed.get("checked", True):
        size = "a size drawn near the timed one" if timed.get("drawn") else "the timed size"
        return f"verified on {final['backend']} (held-out sizes, extra seeds and {size})"
    return (
        f"verified on {final['backend']} at the held-out sizes and extra seeds; the timed size "
        f"{timed['case']} was not checked: {timed['why']}"
    )


def reverify(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    case: dict[str, Any],
    dtype: str,
    seed: int,
    speedup: float,
) -> None:
    """A speedup far above the strongest baseline is more often a kernel that skips work than a
    breakthrough: check every visible case and the timed size again on fresh seeds before it is
    reported."""
    fresh = seed + 777_777
    lead = (
        f"candidate {candidate.id} was {speedup:.1f}x faster than the strongest baseline but "
        f"failed re-verification"
    )
    try:
        check_bench_case(task, candidate, backend, case, dtype, fresh)
    except WrongAtBenchSize as e:
        raise FailedReverification(
            f"{lead} at the timed size, so no timing is reported: {e}"
        ) from e
    key = (backend.name, candidate.id, fresh)
    if (
        key in _REVERIFIED
    ):  # the same visible cases on the same seeds: one run per candidate is enough
        return
    report = run_correctness(task, candidate, backend, seed=fresh)
    if not report.ok:
        raise FailedReverification(f"{lead}, so no timing is reported: {report.summary()}")
    _REVERIFIED.add(key)
