"""The simulator's cost estimate of one candidate on a named Apple GPU: an ESTIMATE, never a timing.

The candidate runs on the simulator at the task's bench case with counting on
(backends/sim/counters.py), and only if its outputs are right there does it get an estimate: a
candidate wrong at the bench case raises WrongAtBenchSize, as a timed one does. Where the bench case
would take the simulator longer than its budget (MLXPORT_TIMED_SIZE_SECONDS), the largest visible
case is counted and scaled to the bench case by the task's bytes, and the text says so.

The model, with the per-core figures of chips.toml [cost_model] and their sources:
- DRAM: the distinct lines the launch touched at the chip's bandwidth, slowed where too few bytes
  are in flight to cover DRAM latency (Little's law: the resident SIMD-groups of the cores the
  launch fills, each with one memory instruction of the size its lanes asked for in flight);
- ALU: the task's FLOP formula at the FP32 peak, slowed below the resident SIMD-groups a core needs;
- the core: each line of each SIMD-group memory instruction through the on-core data path, each
  pass of the threadgroup-memory banks, each SIMD-group function, and each barrier (the
  threadgroup-memory latency, overlapped by the core's other resident threadgroups), over the cores
  the launch fills.
The estimate is max(DRAM, ALU) + core: any count that drops makes it drop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mlxport.backends.base import Backend
from mlxport.backends.sim.counters import count_request
from mlxport.spec import CoreFigures, Datasheet, KernelCandidate, KernelTask, Launch
from mlxport.tasks import case_infos
from mlxport.verify import reverify
from mlxport.verify.correctness import run_judged
from mlxport.verify.reverify import WrongAtBenchSize

LABEL = "ESTIMATE, not a measurement"
LIMITS = (
    "What the estimate cannot see: caches (DRAM is charged once for each distinct line a launch "
    "touches, as if every line were fetched once, and the load/store path for every line of every "
    "SIMD-group memory instruction, as if nothing were reused from L1); registers (occupancy "
    "assumes a kernel light enough for the most threads a core holds, so spills and register-bound "
    "occupancy are invisible); instruction costs beyond its counts (arithmetic, conversions and "
    "address math are only the task's FLOP formula at the chip's peak); latency hiding inside a "
    "thread (independent loads one thread issues back to back count as one in flight); divergence "
    "outside memory accesses; launch overhead and kernels running side by side. Its figures are "
    "measurements of M1/M2 (the bank layout, 32 banks of 4 bytes, is an assumption) and the clock "
    "is derived from the FP32 peak, all from the chip table (chips.toml [cost_model])."
)
# Counts that grow with the work, scaled when a smaller case stands in for the bench case.
_EXTENSIVE = (
    "device_instructions",
    "device_lines",
    "device_lane_accesses",
    "device_bytes",
    "device_unique_lines",
    "tg_instructions",
    "tg_wavefronts",
    "tg_lane_accesses",
    "tg_bytes",
    "simdgroups",
    "lanes",
    "barrier_rounds",
    "simd_syncs",
)


@dataclass(frozen=True)
class Cost:
    """The model's answer for one launch: seconds per resource and what bounds them."""

    dram_s: float
    alu_s: float
    lsu_s: float  # device-memory lines through the on-core data path
    tg_s: float  # threadgroup-memory bank passes
    simd_s: float  # SIMD-group functions
    barrier_s: float
    hidden: float  # the fraction of DRAM latency the bytes in flight cover
    threads: int  # a full threadgroup's
    per_core: int  # threadgroups a core can hold
    resident: int  # SIMD-groups resident on a core that the launch fills
    max_resident: int
    cores_used: int

    @property
    def core_s(self) -> float:
        return self.lsu_s + self.tg_s + self.simd_s + self.barrier_s

    @property
    def us(self) -> float:
        return (max(self.dram_s, self.alu_s) + self.core_s) * 1e6


@dataclass(frozen=True)
class Estimate:
    us: float | None  # None: no estimate, and ``text`` says why
    text: str


def launch_shape(launch: Launch) -> tuple[int, int]:
    """(threads of a full threadgroup, threadgroups) of a launch, as MLX dispatches it."""
    size = [min(t, g) for t, g in zip(launch.threadgroup, launch.grid, strict=True)]
    groups = [math.ceil(g / t) for g, t in zip(launch.grid, size, strict=True)]
    return math.prod(size), math.prod(groups)


def cost(counts: dict[str, int], launch: Launch, flops: int, chip: Datasheet) -> Cost:
    """The model (this module's docstring) applied to one launch's counts on ``chip``."""
    f = _figures(chip)
    threads, groups = launch_shape(launch)
    simdgroups = math.ceil(threads / 32)
    per_core = min(
        f.max_threads_per_core // (simdgroups * 32),
        f.threadgroup_memory_per_core // counts["tg_memory_bytes"]
        if counts["tg_memory_bytes"]
        else groups,
    )
    per_core = max(1, per_core)
    cores_used = max(1, min(f.gpu_cores, groups))
    resident_groups = max(1, min(per_core, math.ceil(groups / f.gpu_cores)))
    resident = resident_groups * simdgroups
    hz = f.clock_ghz * 1e9
    bandwidth = chip.memory_bandwidth_gbs * 1e9
    per_instruction = counts["device_bytes"] / max(counts["device_instructions"], 1)
    hidden = min(
        1.0, cores_used * resident * per_instruction / (bandwidth * f.dram_latency_ns * 1e-9)
    )
    busy = min(1.0, resident / f.alu_saturation_simdgroups)
    core_hz = cores_used * hz
    wavefront = f.threadgroup_banks * f.bank_bytes
    return Cost(
        dram_s=counts["device_unique_lines"] * f.line_bytes / (bandwidth * max(hidden, 1e-9)),
        alu_s=flops / (chip.fp32_tflops * 1e12 * busy),
        lsu_s=counts["device_lines"] * f.line_bytes / f.core_bytes_per_cycle / core_hz,
        tg_s=counts["tg_wavefronts"] * wavefront / f.threadgroup_bytes_per_cycle / core_hz,
        simd_s=counts["simd_syncs"] * f.simd_function_cycles / f.schedulers_per_core / core_hz,
        barrier_s=counts["barrier_rounds"]
        * f.threadgroup_latency_ns
        * f.clock_ghz
        / resident_groups
        / core_hz,
        hidden=hidden,
        threads=threads,
        per_core=per_core,
        resident=resident,
        max_resident=f.max_threads_per_core // 32,
        cores_used=cores_used,
    )


def estimate(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    chip: Datasheet,
    case: dict[str, Any],
    dtype: str,
    seed: int,
    budget: float | None = None,
) -> Estimate:
    """The candidate's estimate at ``case`` on ``chip`` (this module's docstring); raises
    WrongAtBenchSize where it is wrong at the case it ran at."""
    budget = reverify.TIMED_SIZE_SECONDS if budget is None else budget
    label = task.case_label(case)
    if budget <= 0:
        return Estimate(
            None,
            f"no estimate of this candidate: the simulator's budget for the bench case is 0 s "
            f"(MLXPORT_TIMED_SIZE_SECONDS), so {label} was not run",
        )
    visible = max(task.cases.visible, key=lambda c: _work(task, c, dtype))
    first = visible if _work(task, visible, dtype) < _work(task, case, dtype) else case
    ran = _counted(task, candidate, backend, chip, first, dtype, seed, budget)
    if ran is None:
        return Estimate(
            None,
            f"no estimate of this candidate: the simulator ran past its {budget:g} s budget "
            f"(MLXPORT_TIMED_SIZE_SECONDS) at {task.case_label(first)}",
        )
    counts, elements, seconds = ran
    scale, why = 1.0, ""
    if first is not case:
        seconds *= _work(task, case, dtype) / _work(task, first, dtype)
        at_case = None
        if seconds <= budget:
            at_case = _counted(task, candidate, backend, chip, case, dtype, seed, budget)
        if at_case is not None:
            counts, elements, _ = at_case
        else:
            scale = _work(task, case, dtype) / _work(task, first, dtype)
            why = (
                f"counted at {task.case_label(first)} and scaled {scale:.3g}x by the task's bytes, "
                f"since {label} would take the simulator about {seconds:.0f} s, over its "
                f"{budget:g} s budget (MLXPORT_TIMED_SIZE_SECONDS); whether the candidate is right "
                f"at {label} was not checked"
            )
    counts = {k: v * scale if k in _EXTENSIVE else v for k, v in counts.items()}
    elements = round(elements * scale)
    launch = candidate.launch(case_infos(task, case, dtype))
    nbytes, flops = task.cost_of(case, dtype)
    c = cost(counts, launch, flops, chip)
    floor = roofline_floor(nbytes, flops, chip)
    return Estimate(c.us, describe(c, counts, chip, f"{label} {dtype}", elements, floor, why))


def _counted(
    task: KernelTask,
    candidate: KernelCandidate,
    backend: Backend,
    chip: Datasheet,
    case: dict[str, Any],
    dtype: str,
    seed: int,
    budget: float,
) -> tuple[dict[str, int], int, float] | None:
    """The counts of one run at ``case``, its output elements and the seconds the run took; None
    where it ran past the budget. Raises WrongAtBenchSize where it is wrong there."""
    f = _figures(chip)
    request = count_request(f.line_bytes, f.threadgroup_banks, f.bank_bytes)
    result, run = run_judged(
        task, candidate, backend, case, dtype, seed + 424_242, max(budget, 1.0), count=request
    )
    if result.verdict == "error" and "timed out" in (result.error or ""):
        return None
    if result.verdict != "pass" or run is None or run.counts is None:
        raise WrongAtBenchSize(
            f"candidate {candidate.id} is wrong at {result.case} {dtype}, where it was run for its "
            f"estimate: {result.error or result.pattern or 'no counts came back'}; it gets no "
            f"estimate"
        )
    return run.counts, sum(o.size for o in run.outputs), run.seconds


def _figures(chip: Datasheet) -> CoreFigures:
    if chip.cores is None:
        raise ValueError(f"the chip table has no per-core figures for {chip.name}")
    return chip.cores


def _work(task: KernelTask, case: dict[str, Any], dtype: str) -> int:
    nbytes, flops = task.cost_of(case, dtype)
    return max(nbytes, flops, 1)


def roofline_floor(nbytes: int, flops: int, chip: Datasheet) -> tuple[float, str]:
    """Seconds no kernel moving ``nbytes`` and doing ``flops`` beats on ``chip``, and its bound."""
    t_mem = nbytes / (chip.memory_bandwidth_gbs * 1e9)
    t_alu = flops / (chip.fp32_tflops * 1e12) if flops else 0.0
    return max(t_mem, t_alu), "memory" if t_mem >= t_alu else "compute"


def describe(
    c: Cost,
    counts: dict[str, float],
    chip: Datasheet,
    where: str,
    elements: int,
    floor: tuple[float, str],
    scaled: str = "",
) -> str:
    """The estimate in words for the model: the number, what it is made of, and its label."""
    f = _figures(chip)
    line = f.line_bytes
    per = max(elements, 1)
    instructions = max(counts["device_instructions"], 1)
    lines = [
        f"{LABEL}: about {c.us:.1f} us on {chip.name} ({f.gpu_cores} cores, "
        f"{chip.memory_bandwidth_gbs:g} GB/s) at {where}, from the simulator's counts of what this "
        f"candidate did there"
        + (f" ({scaled})" if scaled else "")
        + f"; the task's {floor[1]}-bound roofline floor is {floor[0] * 1e6:.1f} us.",
        f"  device memory: {counts['device_unique_lines'] * line / 1e6:.3g} MB touched (distinct "
        f"{line} B lines), {counts['device_lines'] * line / 1e6:.3g} MB moved by "
        f"{counts['device_instructions']:.4g} SIMD-group loads and stores "
        f"({counts['device_lines'] / instructions:.2f} lines each, "
        f"{counts['device_bytes'] / max(counts['device_lines'] * line, 1):.0%} of each line used, "
        f"{counts['device_lane_accesses'] / instructions:.1f} of 32 lanes active)",
        _threadgroup_line(counts, f),
        f"  occupancy: threadgroups of {c.threads} threads and {counts['tg_memory_bytes']:.0f} B "
        f"of threadgroup memory, {c.per_core} a core; {c.resident} of {c.max_resident} SIMD-groups "
        f"resident on each of {c.cores_used} cores; "
        f"{counts['lanes'] / max(counts['simdgroups'], 1):.1f} of 32 lanes launched a SIMD-group",
        f"  per output element: {counts['barrier_rounds'] / per:.3g} barriers (a threadgroup's), "
        f"{counts['simd_syncs'] / per:.3g} SIMD-group functions (a SIMD-group's)",
        f"  split: DRAM {c.dram_s * 1e6:.1f} us ({c.hidden:.0%} of its latency covered), ALU "
        f"{c.alu_s * 1e6:.1f} us, load/store {c.lsu_s * 1e6:.1f} us, threadgroup memory "
        f"{c.tg_s * 1e6:.1f} us, SIMD-group functions {c.simd_s * 1e6:.1f} us, barriers "
        f"{c.barrier_s * 1e6:.1f} us. It cannot see caches, registers, instruction latencies or "
        f"loads a thread overlaps; a measurement on a Mac settles it.",
    ]
    return "\n".join(x for x in lines if x)


def _threadgroup_line(counts: dict[str, float], f: CoreFigures) -> str:
    if not counts["tg_instructions"]:
        return "  threadgroup memory: no accesses"
    n = counts["tg_instructions"]
    return (
        f"  threadgroup memory: {n:.4g} SIMD-group instructions needing "
        f"{counts['tg_wavefronts'] / n:.2f} passes of the {f.threadgroup_banks} banks each "
        f"(1 is conflict-free), {counts['tg_lane_accesses'] / n:.1f} of 32 lanes active"
    )
