"""report.html beside report.md: one self-contained page (no scripts, nothing loaded from anywhere)
with the very blocks report.md is written from (agent/report.py), and charts: the candidates or
the best speedup over the iterations, and a roofline of every case under the device's
ceilings."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from mlxport.agent.report import port_report
from mlxport.charts import doc, svg
from mlxport.charts.page import CSS
from mlxport.spec import BenchmarkReport, Datasheet, KernelTask
from mlxport.tools.session import Record


def render_port_html(
    task: KernelTask,
    run: dict[str, Any],
    records: dict[str, Record],
    final: dict,
    ceilings: Datasheet | None,
) -> str:
    figures = [f for f in (_progress(run, records), _roofline(task, final, ceilings)) if f]
    return "\n".join(
        [
            '<!doctype html><html lang="en"><head><meta charset="utf-8">',
            f"<title>mlxport: {escape(task.name)}</title><style>{CSS}</style></head><body><main>",
            doc.html(port_report(task, run, records, final)),
            "<h2>Charts</h2>",
            '<div class="plots">' + "".join(f"<figure>{f}</figure>" for f in figures) + "</div>",
            "</main></body></html>",
        ]
    )


def _progress(run: dict[str, Any], records: dict[str, Record]) -> str:
    """The best speedup by iteration where the backend times (run.json's best_history), else how
    many candidates were compiled and how many of them were correct, by iteration."""
    if not records:
        return ""
    last = max([run.get("iterations") or 0, *(r.iteration for r in records.values())])
    timed = [h for h in run.get("best_history") or [] if h.get("speedup") is not None]
    if timed:
        best = [
            max((h["speedup"] for h in timed if h["iteration"] <= i), default=math.nan)
            for i in range(last + 1)
        ]
        return svg.lines(
            "Best speedup over native, by iteration",
            {"best so far": best},
            x_label="iteration",
            y_label="speedup",
            ref=1.0,
        )
    compiled = [float(sum(r.iteration <= i for r in records.values())) for i in range(last + 1)]
    correct = [
        float(sum(r.correct and r.iteration <= i for r in records.values()))
        for i in range(last + 1)
    ]
    return svg.lines(
        "Candidates by iteration (no timing on this backend)",
        {"compiled": compiled, "correct": correct},
        x_label="iteration",
        y_label="candidates",
        labels={"correct": "of them correct"},
        desc="a candidate counts from the iteration it was compiled in",
    )


def _roofline(task: KernelTask, final: dict, ceilings: Datasheet | None) -> str:
    if not final.get("benchmark") or ceilings is None:
        return ""
    bench = BenchmarkReport.model_validate(final["benchmark"])
    at: dict[float, list[str]] = {}  # intensity -> the cases there
    for case in task.bench_cases():
        nbytes, flops = task.cost_of(case, bench.dtype)
        if flops <= 0 or nbytes <= 0:
            return (
                f"<p>No roofline: the task states no FLOP count (<code>[cost] flops</code> in "
                f"task.toml), so the intensity of {escape(task.case_label(case))} is unknown; it "
                f"moves {nbytes / 1e6:.3g} MB.</p>"
            )
        at.setdefault(float(f"{flops / nbytes:.3g}"), []).append(task.case_label(case))
    cases = [(f"{'; '.join(labels)} {bench.dtype}", x) for x, labels in at.items()]
    timed = next((x for x, labels in at.items() if bench.case in labels), cases[0][1])
    points = [
        ("port" if t is bench.candidate else t.name, timed, t.gflops)
        for t in [bench.candidate, *bench.baselines]
        if t is not None and t.gflops and math.isfinite(t.gflops)
    ]
    what = "measured" if points else "no measurements: the backend does not time"
    return svg.roofline(
        f"Roofline on {ceilings.name} ({what})",
        points,
        bandwidth_gbs=ceilings.memory_bandwidth_gbs,
        peak_gflops=ceilings.fp32_tflops * 1000,
        cases=cases,
        desc="; ".join(f"{label}: {x:.3g} FLOP/byte" for label, x in cases),
    )
