"""report.html beside report.md: one self-contained page (no scripts, nothing loaded from anywhere)
with the plan tree, every candidate's correctness and speed over the iterations, and a roofline
of the port and its baselines under the device's ceilings."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from mlxport.charts import svg
from mlxport.charts.page import CSS
from mlxport.spec import BenchmarkReport, Datasheet, KernelTask
from mlxport.tools.session import Record

MARKS = {
    "open": "open",
    "active": "working on",
    "done": "done",
    "abandoned": "abandoned",
    "failed": "failed",
}


def render_port_html(
    task: KernelTask,
    run: dict[str, Any],
    records: dict[str, Record],
    final: dict,
    ceilings: Datasheet | None,
) -> str:
    res = run["result"]
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        f"<title>mlxport: {escape(task.name)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>{escape(task.name)}: port report</h1><dl class=setup>",
    ]
    model = run["model"] + (
        " (rule-based translator: a non-LLM baseline)" if run["non_llm_baseline"] else ""
    )
    setup = [
        ("model", model),
        (
            "result",
            f"{res['label']}: {res['candidate_id']}"
            if res["verified"]
            else f"no verified kernel: {res['why_not']}",
        ),
        ("stop reason", f"{run['stop_reason']} after {run['iterations']} iterations"),
        ("search", (run.get("config") or {}).get("search", "linear")),
        ("candidates", str(run["candidates"])),
    ]
    parts += [f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in setup] + ["</dl>"]
    parts += ["<h2>Plan</h2>", _plan(run.get("plan") or [])]
    parts += ["<h2>Candidates</h2>", _candidates(records), '<div class="plots">']
    parts += [
        f"<figure>{fig}</figure>"
        for fig in (_progress(records), _roofline(task, final, ceilings))
        if fig
    ]
    parts += ["</div></main></body></html>"]
    return "\n".join(parts)


def _plan(nodes: list[dict[str, Any]]) -> str:
    if not nodes:
        return "<p>No plan was kept.</p>"
    children: dict[str | None, list[dict]] = {}
    for n in nodes:
        children.setdefault(n.get("parent"), []).append(n)

    def tree(parent: str | None) -> str:
        items = []
        for n in children.get(parent, []):
            rating = (
                f"gain {n.get('expected_gain') or '?'}, difficulty {n.get('difficulty', 0.5):.1f}, "
                f"confidence {n.get('confidence', 0.5):.1f}"
            )
            outcome = f" &rarr; {escape(n['outcome'])}" if n.get("outcome") else ""
            tried = f" (tried {escape(', '.join(n['candidates']))})" if n.get("candidates") else ""
            items.append(
                f"<li><b>{escape(n['id'])}</b> {escape(n['idea'])} "
                f"[{MARKS.get(n['status'], n['status'])}; "
                f"{escape(rating)}]{tried}{outcome}{tree(n['id'])}</li>"
            )
        return f"<ul>{''.join(items)}</ul>" if items else ""

    return tree(None)


def _candidates(records: dict[str, Record]) -> str:
    rows = [
        "<table><thead><tr><th>candidate</th><th>iteration</th><th>compiled</th><th>correctness</th>"
        "<th>speedup vs native (simulator: ESTIMATE, not measured)</th></tr></thead><tbody>"
    ]
    for cid, r in sorted(records.items(), key=lambda kv: kv[1].iteration):
        compiled = "-" if r.compile is None else "yes" if r.compile.ok else "no"
        correct = (
            "-"
            if r.correctness is None
            else "PASS"
            if r.correct
            else (r.refuted or r.correctness.summary().splitlines()[0])
        )
        speed = (
            f"{r.speedup:.2f}x"
            if r.speedup is not None
            else f"ESTIMATE {r.estimated_us:.1f} us"
            if r.estimated_us is not None
            else "-"
        )
        rows.append(
            f"<tr><td><code>{escape(cid)}</code></td><td>{r.iteration}</td><td>{compiled}</td>"
            f"<td>{escape(correct[:160])}</td><td>{speed}</td></tr>"
        )
    return "".join(rows) + "</tbody></table>"


def _progress(records: dict[str, Record]) -> str:
    if not records:
        return ""
    last = max(r.iteration for r in records.values())
    speed = [
        max(
            (r.speedup or 0.0 for r in records.values() if r.correct and r.iteration <= i),
            default=0.0,
        )
        for i in range(last + 1)
    ]
    if any(speed):
        return svg.lines(
            "Best verified speedup over native, by iteration",
            {"best so far": speed},
            x_label="iteration",
            y_label="speedup",
            ref=1.0,
        )
    correct = [
        float(sum(r.correct and r.iteration <= i for r in records.values()))
        for i in range(last + 1)
    ]
    tried = [float(sum(r.iteration <= i for r in records.values())) for i in range(last + 1)]
    return svg.lines(
        "Candidates by iteration (no timing on this backend)",
        {"candidates": tried, "correct": correct},
        x_label="iteration",
        y_label="count",
    )


def _roofline(task: KernelTask, final: dict, ceilings: Datasheet | None) -> str:
    if not final.get("benchmark") or ceilings is None:
        return ""
    bench = BenchmarkReport.model_validate(final["benchmark"])
    case = next((c for c in task.bench_cases() if task.case_label(c) == bench.case), None)
    if case is None:
        return ""
    nbytes, flops = task.cost_of(case, bench.dtype)
    intensity = max(flops, 1) / max(nbytes, 1)
    points = [
        ("port" if t is bench.candidate else t.name, intensity, t.gflops)
        for t in [bench.candidate, *bench.baselines]
        if t is not None and t.gflops and math.isfinite(t.gflops)
    ]
    what = "measured" if points else "no measurements: the backend does not time"
    return svg.roofline(
        f"Roofline on {ceilings.name} ({what})",
        points,
        bandwidth_gbs=ceilings.memory_bandwidth_gbs,
        peak_gflops=ceilings.fp32_tflops * 1000,
        intensity=intensity,
        desc=f"{bench.case} {bench.dtype}: {intensity:.3g} FLOP/byte",
    )
