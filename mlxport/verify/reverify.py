"""Re-verification: a kernel is checked again where a timing would otherwise rest on trust, at
the timed size before it is timed, and on fresh seeds when its speedup looks too good."""

from __future__ import annotations

from typing import Any

from mlxport.backends.base import Backend
from mlxport.errors import UserError
from mlxport.spec import KernelCandidate, KernelTask
from mlxport.verify.correctness import check_case, run_correctness

SUSPICIOUS_SPEEDUP = 10.0


class WrongAtBenchSize(UserError):
    """The candidate is wrong at the size it would be timed at: its timing would mean nothing."""


class FailedReverification(UserError):
    """A suspiciously large speedup did not survive a second, wider correctness check."""


_REVERIFIED: set[tuple[str, str, int]] = set()  # (backend, candidate id, seed) whose visible cases passed


def check_bench_case(task: KernelTask, candidate: KernelCandidate, backend: Backend, case: dict[str, Any],
                     dtype: str, seed: int) -> None:
    """Timed sizes are checked too: a kernel that only does part of the work at a large size (a
    capped grid, say) would otherwise post a speedup no held-out case contradicts."""
    result = check_case(task, candidate, backend, case, dtype, seed + 424_242)
    if result.verdict != "pass":
        raise WrongAtBenchSize(f"candidate {candidate.id} is wrong at the timed size {result.case} {dtype}: "
                               f"{result.error or result.pattern}; it was not timed")


def reverify(task: KernelTask, candidate: KernelCandidate, backend: Backend, case: dict[str, Any], dtype: str,
             seed: int, speedup: float) -> None:
    """A speedup far above the strongest baseline is more often a kernel that skips work than a
    breakthrough: check every visible case and the timed size again on fresh seeds before it is
    reported."""
    fresh = seed + 777_777
    lead = f"candidate {candidate.id} was {speedup:.1f}x faster than the strongest baseline but failed re-verification"
    try:
        check_bench_case(task, candidate, backend, case, dtype, fresh)
    except WrongAtBenchSize as e:
        raise FailedReverification(f"{lead} at the timed size, so no timing is reported: {e}") from e
    key = (backend.name, candidate.id, fresh)
    if key in _REVERIFIED:  # the same visible cases on the same seeds: one run per candidate is enough
        return
    report = run_correctness(task, candidate, backend, seed=fresh)
    if not report.ok:
        raise FailedReverification(f"{lead}, so no timing is reported: {report.summary()}")
    _REVERIFIED.add(key)
