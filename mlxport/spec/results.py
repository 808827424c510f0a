"""What compiling, checking and timing a candidate return. Every result names the backend that
produced it; simulator results never carry timings."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from mlxport.spec.base import Strict


class Diagnostic(Strict):
    severity: Literal["error", "warning", "note"] = "error"
    message: str
    where: Literal["source", "header", "generated"] = "source"
    line: int | None = None  # 1-based line in the candidate's source or header
    column: int | None = None


class CompileResult(Strict):
    backend: str
    ok: bool
    candidate_id: str
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False

    def summary(self) -> str:
        if self.ok:
            return f"compiled on {self.backend}" + (" (cached)" if self.cached else "")
        lines = [f"compile failed on {self.backend}:"]
        for d in self.diagnostics[:8]:
            loc = (
                f"{d.where} line {d.line}" + (f":{d.column}" if d.column else "")
                if d.line
                else d.where
            )
            lines.append(f"  {loc}: {d.message}")
        return "\n".join(lines)


Verdict = Literal["pass", "fail", "error"]
TOGETHER = 8  # calls submitted at once in the final verification's overlap check
# How a case was run: in order; with threads reversed or shuffled; at a size mlxport generated
# (several threadgroups); on outputs poisoned with finite garbage; with TOGETHER calls at once
# (and once more alone on the failing call's fresh inputs); through the written kernel.py.
Mode = Literal[
    "forward", "reversed", "shuffled", "generated", "poisoned", "together", "fresh", "op"
]
MODE_LABELS = {
    "forward": "",
    "reversed": "threads reversed",
    "shuffled": "threads shuffled",
    "generated": "generated: several threadgroups",
    "poisoned": "second poison",
    "together": f"{TOGETHER} calls at once",
    "fresh": "fresh inputs",
    "op": "kernel.py",
}


class CaseResult(Strict):
    case: str  # the case's label, N=4096,C=768
    dtype: str
    verdict: Verdict
    mode: Mode = "forward"
    heldout: bool = False  # a held-out case (never shown to the model)
    inputs: str = "task"  # the distribution its float inputs were drawn from (tasks.inputs)
    # a held-out case with a visible case's extents and launch re-tests it: not counted as one
    counted: bool = True
    max_abs: float | None = None
    max_rel: float | None = None
    err_norm: float | None = None
    mismatches: int = 0
    total: int = 0
    first_mismatch: list[int] | None = None
    got: float | None = None  # output and golden at the first mismatch
    expected: float | None = None
    nan: int = 0
    inf: int = 0
    unwritten: int = 0
    pattern: str = ""
    error: str = ""
    seed: int | None = None  # of the inputs

    @property
    def label(self) -> str:
        """The case as reports name it: ``N=400 (threads shuffled)``, ``N=400 (wide inputs)``."""
        how = [MODE_LABELS[self.mode]] + (
            [f"{self.inputs} inputs"] if self.inputs != "task" else []
        )
        how += [] if self.counted else ["the extents and launch of a visible case: not counted"]
        how = [h for h in how if h]
        return f"{self.case} ({', '.join(how)})" if how else self.case


class CorrectnessReport(Strict):
    backend: str
    candidate_id: str
    task: str
    seeds: list[int]
    heldout: bool = False
    cases: list[CaseResult]
    golden: str = ""  # what the outputs were compared with (verify/golden.py)

    @property
    def ok(self) -> bool:
        return bool(self.cases) and all(c.verdict == "pass" for c in self.cases)

    def summary(self, limit: int = 12) -> str:
        """Compact text for the model: a verdict line, then one line per failing case."""
        bad = [c for c in self.cases if c.verdict != "pass"]
        head = (
            f"{'PASS' if self.ok else 'FAIL'}: {len(self.cases) - len(bad)}/{len(self.cases)} "
            f"cases passed "
            f"on {self.backend} (seed {self.seeds[0]})"
        )
        lines = [head]
        # One line per distinct error, with where else it came; which thread faults first varies
        # from run to run where threadgroups run side by side, so positions do not tell errors
        # apart.
        same: dict[str, list[CaseResult]] = {}
        for c in bad:
            if c.verdict == "error":
                same.setdefault(_error_kind(c.error), []).append(c)
        bad = [c for c in bad if c.verdict != "error" or same[_error_kind(c.error)][0] is c]
        for c in bad[:limit]:
            if c.verdict == "error":
                also = same[_error_kind(c.error)][1:]
                more = (
                    ""
                    if not also
                    else (
                        f" (the same in {len(also)} more case{'s' if len(also) > 1 else ''}: "
                        + ", ".join(f"{o.label} {o.dtype}" for o in also[:4])
                        + (", ..." if len(also) > 4 else "")
                        + ")"
                    )
                )
                lines.append(f"  {c.label} {c.dtype}: ERROR {c.error}{more}")
                continue
            where = (
                f" first at {c.first_mismatch}: got {c.got:.6g}, expected {c.expected:.6g};"
                if c.first_mismatch is not None and c.got is not None
                else ""
            )
            extra = "".join(
                f" {k}={v};"
                for k, v in (("nan", c.nan), ("inf", c.inf), ("unwritten", c.unwritten))
                if v
            )
            sizes = (
                f" max_abs={c.max_abs:.3g} err_norm={c.err_norm:.3g};"
                if c.max_abs is not None
                else ""
            )
            lines.append(f"  {c.label} {c.dtype}: {c.pattern};{where}{sizes}{extra}".rstrip(";"))
        if len(bad) > limit:
            lines.append(f"  ... and {len(bad) - limit} more failing cases")
        if self.ok:
            worst = max(self.cases, key=lambda c: c.err_norm or 0.0)
            lines.append(
                f"  worst: {worst.label} {worst.dtype} max_abs={worst.max_abs:.3g} "
                f"err_norm={worst.err_norm:.3g}"
            )
        return "\n".join(lines)


class CoreFigures(Strict):
    """Per-core figures of an Apple GPU that the simulator's cost estimate charges
    (verify/estimate.py), from the chip table with their sources."""

    gpu_cores: int
    clock_ghz: float
    max_threads_per_core: int
    threadgroup_memory_per_core: int  # bytes
    line_bytes: int  # device-memory cache line
    core_bytes_per_cycle: float  # on-core data path of device loads and stores
    threadgroup_bytes_per_cycle: float
    threadgroup_banks: int
    bank_bytes: int
    simd_function_cycles: float  # throughput of one SIMD-group function on one scheduler
    schedulers_per_core: int  # each issues one SIMD-group's instruction a cycle
    alu_saturation_simdgroups: int  # resident SIMD-groups a core needs to keep its ALUs busy
    dram_latency_ns: float
    threadgroup_latency_ns: float


class Datasheet(Strict):
    """A device's published figures: the ceilings a roofline is drawn against."""

    name: str
    memory_bandwidth_gbs: float
    fp32_tflops: float
    cores: CoreFigures | None = None  # an Apple chip's, for the simulator's cost estimate


class Timing(Strict):
    name: str
    median_us: float
    spread: float  # (p90 - p10) / median
    samples: int
    gbs: float | None = None
    gflops: float | None = None
    roofline_fraction: float | None = None


class BenchmarkReport(Strict):
    backend: str
    device: str
    candidate_id: str
    task: str
    case: str
    dtype: str
    candidate: Timing | None = None  # None on the simulator: it never times
    baselines: list[Timing] = Field(default_factory=list)
    speedups: dict[str, float] = Field(default_factory=dict)
    stable: bool = True
    flags: list[str] = Field(default_factory=list)
    estimate: str = ""  # simulator: the labelled estimate for a named chip, never a timing
    # simulator: the cost model's ESTIMATE in microseconds (verify/estimate.py), not a measurement
    estimated_us: float | None = None
    bandwidth_basis: str = ""  # what roofline_fraction is a fraction of
    timing_basis: str = ""  # how the times were read (backends/timer.py)


def _error_kind(error: str | None) -> str:
    """An error without the thread and threadgroup positions it names."""
    return re.sub(r"\(\d+, ?\d+, ?\d+\)", "(.)", error or "")
