"""``benchmark``: time a candidate against every baseline of its task, side by side.

On a backend with timing (metal, cuda) the measurement runs in the backend's worker process:
warm-up, then many synchronised runs rotating over several input sets, candidate and baselines
interleaved in rounds so drift on a shared machine hits them alike. The simulator never times:
it reports a cost estimate for a named Apple chip from what the candidate did at the bench case
(verify/estimate.py), labelled as such, and no estimate for a candidate wrong there. Timings that
would rest on trust are checked first (verify/reverify.py).
"""

from __future__ import annotations

import statistics
from typing import Any

from mlxport.backends.base import Backend
from mlxport.spec import BenchmarkReport, Datasheet, KernelCandidate, KernelTask, Timing
from mlxport.verify.estimate import LABEL, estimate, roofline_floor
from mlxport.verify.reverify import SUSPICIOUS_SPEEDUP, check_bench_case, reverify

SPREAD_LIMIT = 0.25  # (p90 - p10) / median above this: measure again


def primary_dtype(task: KernelTask) -> str:
    """The dtype speed is judged in: half precision where the task has it, as models run."""
    for d in ("bfloat16", "float16", "float32"):
        if d in task.dtypes:
            return d
    return task.dtypes[0]


def stats(
    name: str, samples: list[float], nbytes: int, flops: int, peak_gbs: float | None
) -> Timing:
    s = sorted(samples)
    med = statistics.median(s)
    p10, p90 = s[int(0.1 * (len(s) - 1))], s[int(0.9 * (len(s) - 1))]
    gbs = nbytes / med / 1e9 if med > 0 else None
    return Timing(
        name=name,
        median_us=med * 1e6,
        spread=(p90 - p10) / med if med > 0 else 0.0,
        samples=len(s),
        gbs=gbs,
        gflops=flops / med / 1e9 if med > 0 and flops else None,
        roofline_fraction=gbs / peak_gbs if gbs and peak_gbs else None,
    )


def benchmark(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    *,
    case: dict[str, Any] | None = None,
    dtype: str | None = None,
    seed: int = 0,
    iters: int = 30,
    warmup: int = 5,
    chip: Datasheet | None = None,
    datasheet: Datasheet | None = None,
    baselines: bool = True,
) -> BenchmarkReport:
    """``chip``: the Apple chip a simulator estimate is for; ``datasheet``: this device's published
    figures, which an uncalibrated GPU's roofline fraction is of; without ``baselines`` only the
    candidate is timed (a search comparing candidates with each other), so nothing is a speedup.
    On a backend that counts, a candidate wrong at ``case`` raises WrongAtBenchSize."""
    case = case if case is not None else task.bench_cases()[0]
    dtype = dtype or primary_dtype(task)
    nbytes, flops = task.cost_of(case, dtype)
    info = backend.device_info(datasheet)
    base = dict(
        backend=backend.name,
        device=str(info.get("device_name", backend.name)),
        candidate_id=candidate.id,
        task=task.name,
        case=task.case_label(case),
        dtype=dtype,
        bandwidth_basis=str(info.get("bandwidth_basis", "")),
        timing_basis=str(info.get("timing_basis", "")),
    )
    if not backend.timing:
        if chip is None:
            return BenchmarkReport(**base, estimate=f"{backend.name} does not time kernels")
        if not backend.counts or chip.cores is None:
            return BenchmarkReport(**base, estimate=roofline_estimate(nbytes, flops, chip))
        found = estimate(task, candidate, backend, chip, case, dtype, seed)
        text = found.text
        if found.us is None:
            text += f". {roofline_estimate(nbytes, flops, chip)}"
        return BenchmarkReport(**base, estimate=text, estimated_us=found.us)
    check_bench_case(task, candidate, backend, case, dtype, seed)
    samples = backend.measure(
        task, candidate, case, dtype, seed=seed, warmup=warmup, iters=iters, baselines=baselines
    )
    report = _report(base, samples, nbytes, flops, info.get("bandwidth_gbs"))
    if not report.stable:
        samples = backend.measure(
            task,
            candidate,
            case,
            dtype,
            seed=seed + 1,
            warmup=warmup,
            iters=iters * 2,
            baselines=baselines,
        )
        report = _report(base, samples, nbytes, flops, info.get("bandwidth_gbs"))
    strongest = min(report.speedups.values(), default=0.0)
    if strongest > SUSPICIOUS_SPEEDUP:
        reverify(task, candidate, backend, case, dtype, seed, strongest)
        samples = backend.measure(
            task, candidate, case, dtype, seed=seed + 2, warmup=warmup, iters=iters
        )
        report = _report(base, samples, nbytes, flops, info.get("bandwidth_gbs"))
        report.flags.append(
            f"{strongest:.1f}x over the strongest baseline is above {SUSPICIOUS_SPEEDUP:g}x, so it "
            f"was "
            f"re-verified (every visible case and the timed size, fresh seeds) and re-timed on "
            f"fresh inputs: {min(report.speedups.values(), default=0.0):.1f}x"
        )
    return report


def _report(
    base: dict, samples: dict[str, list[float]], nbytes: int, flops: int, peak_gbs: float | None
) -> BenchmarkReport:
    cand = stats("candidate", samples["candidate"], nbytes, flops, peak_gbs)
    baselines = [
        stats(k, v, nbytes, flops, peak_gbs) for k, v in samples.items() if k != "candidate"
    ]
    speedups = {b.name: b.median_us / cand.median_us for b in baselines}
    stable = all(t.spread <= SPREAD_LIMIT for t in [cand, *baselines])
    return BenchmarkReport(
        **base,
        candidate=cand,
        baselines=baselines,
        speedups=speedups,
        stable=stable,
        flags=[] if stable else ["timings spread widely; the machine may be busy"],
    )


def roofline_estimate(nbytes: int, flops: int, chip: Datasheet) -> str:
    """The task's floor on ``chip``: the same for every candidate of the case."""
    floor, bound = roofline_floor(nbytes, flops, chip)
    return (
        f"{LABEL}, the task's floor rather than this candidate's: on {chip.name} "
        f"({chip.memory_bandwidth_gbs:g} GB/s, {chip.fp32_tflops:g} FP32 TFLOPS) this case moves "
        f"{nbytes / 1e6:.3g} MB and does {flops / 1e9:.3g} GFLOP, so no candidate runs it faster "
        f"than {floor * 1e6:.1f} us ({bound}-bound roofline floor)."
    )


def summary(report: BenchmarkReport) -> str:
    """Compact text for the model."""
    if report.candidate is None:
        return f"{report.task} {report.case} {report.dtype} on {report.backend}: {report.estimate}"
    c = report.candidate
    basis = f" ({report.timing_basis})" if report.timing_basis else ""
    lines = [
        f"{report.task} {report.case} {report.dtype} on {report.device}{basis}: candidate "
        f"{c.median_us:.1f} us "
        f"(spread {c.spread:.0%})"
        + (f", {c.gbs:.0f} GB/s" if c.gbs else "")
        + (
            f", {c.roofline_fraction:.0%} of the {report.bandwidth_basis or 'peak bandwidth'}"
            if c.roofline_fraction
            else ""
        )
    ]
    for b in report.baselines:
        lines.append(f"  {b.name}: {b.median_us:.1f} us -> speedup {report.speedups[b.name]:.2f}x")
    lines += [f"  note: {f}" for f in report.flags]
    return "\n".join(lines)
