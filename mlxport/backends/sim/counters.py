"""What a counted simulator run saw a kernel do, for the cost estimate (verify/estimate.py).

A run asked to count (``SimBackend.run(count=...)``) has the runtime (include/mlxsim_counters.h)
group every checked access into the SIMD-group instruction it belongs to and count, for device
memory, the lines each instruction touched and the distinct lines of the whole launch, and for
threadgroup memory, the passes its banks needed; with the runtime's own statistics (barrier rounds,
SIMD-group syncs). Counting costs the accesses of a run that does not count one branch each.
"""

from __future__ import annotations

from typing import Any

# LaunchParams::counts, in the order of counting::Count
COUNTS = (
    "device_instructions",  # SIMD-group memory instructions on device buffers
    "device_lines",  # the lines each touched, summed (transactions)
    "device_lane_accesses",  # lanes taking part in them, summed
    "device_bytes",  # bytes the lanes asked for
    "device_unique_lines",  # distinct lines the launch touched
    "tg_instructions",  # SIMD-group instructions on threadgroup memory
    "tg_wavefronts",  # passes the banks needed for them
    "tg_lane_accesses",
    "tg_bytes",
    "tg_memory_bytes",  # the most threadgroup memory one threadgroup declared
    "simdgroups",  # SIMD-groups launched
    "lanes",  # threads launched
)
# LaunchParams::stats
STATS = ("threadgroups", "switches", "barrier_rounds", "simd_syncs")


def count_request(line_bytes: int, banks: int, bank_bytes: int) -> dict[str, int]:
    """What ``run(count=...)`` takes: the device-memory line and the threadgroup-memory banks to
    count in."""
    for name, v in (("line_bytes", line_bytes), ("banks", banks), ("bank_bytes", bank_bytes)):
        if not (isinstance(v, int) and 0 < v <= 4096):
            raise ValueError(f"{name} must be a positive integer up to 4096, not {v!r}")
    return {"line_bytes": line_bytes, "banks": banks, "bank_bytes": bank_bytes}


def counts_of(reply: dict[str, Any]) -> dict[str, int] | None:
    """The counts a worker's reply carries, by name, or None where the run did not count."""
    if reply.get("counts") is None:
        return None
    return {
        **dict(zip(COUNTS, map(int, reply["counts"]), strict=True)),
        **dict(zip(STATS, map(int, reply["stats"]), strict=True)),
    }
