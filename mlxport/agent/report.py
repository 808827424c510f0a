"""What a port's report says, as blocks (charts/doc.py): report.md is their Markdown and
report.html their HTML with charts added (report_html.py), so the two cannot say different
things. Everything comes from the run record, the candidates' records and the final
verification."""

from __future__ import annotations

from typing import Any

from mlxport.charts.doc import Block, Code, Heading, Item, Items, Para, Table, markdown
from mlxport.expr import names_used
from mlxport.spec import BenchmarkReport, CorrectnessReport, KernelTask
from mlxport.spec.results import MODE_LABELS
from mlxport.tools.session import Record
from mlxport.verify.estimate import LIMITS

# A plan node's status as the report reads once the port has ended.
MARKS = {
    "open": "open",
    "active": "in progress when the port ended",
    "done": "done",
    "abandoned": "abandoned",
    "failed": "failed",
}


def report_md(
    task: KernelTask, run: dict[str, Any], records: dict[str, Record], final: dict
) -> str:
    return markdown(port_report(task, run, records, final))


def port_report(
    task: KernelTask, run: dict[str, Any], records: dict[str, Record], final: dict
) -> list[Block]:
    """The report: the run, what was ported from which file, the result with its correctness
    tables, inputs, speed and kernel source, the plan as it ended and every candidate."""
    blocks = [Heading(f"{task.name}: port report", 1), *_run(task, run)]
    best = records.get(final.get("candidate_id") or "")
    if best is None:
        blocks.append(Para(f"**No candidate passed verification.** {_why_not(run)}"))
        others = final.get("rejected", [])[1:]
        if others:
            blocks.append(Items([Item(f"`{r['candidate_id']}` was rejected too") for r in others]))
    else:
        report = CorrectnessReport.model_validate(final["verification"])
        blocks += [
            Para(
                f"Result: candidate `{best.candidate.id}`, **{run['result']['label']}**, against "
                f"{report.golden or 'the reference'}."
            ),
            *_correctness(report, final),
            *_inputs(task, report),
            *_speed(BenchmarkReport.model_validate(final["benchmark"])),
            Heading("Kernel"),
            Code(best.candidate.source, "metal" if best.candidate.language == "msl" else "cuda"),
        ]
    return blocks + _plan(run.get("plan") or []) + _candidates(run, records, final)


def _why_not(run: dict[str, Any]) -> str:
    return (run.get("result") or {}).get("why_not") or "no candidate was verified"


def _run(task: KernelTask, run: dict[str, Any]) -> list[Block]:
    baseline = " (rule-based translator: a non-LLM baseline)" if run["non_llm_baseline"] else ""
    source = task.folder / task.source if task.folder else task.source
    blocks: list[Block] = [
        Items(
            [
                Item(f"ported: kernel `{task.kernel}` of `{source}`" + _described(task)),
                Item(f"model: `{run['model']}`{baseline}"),
                Item(
                    f"stop reason: {run['stop_reason']}; iterations {run['iterations']}; "
                    f"candidates {run['candidates']}"
                ),
                Item(
                    f"tokens in/out: {run['tokens']['input']}/{run['tokens']['output']}; cost "
                    f"${run['cost_usd']:.4f}"
                ),
                Item(f"wall time: {run['wall_seconds']:.1f} s"),
            ]
        )
    ]
    notes = task.folder / "NOTES.md" if task.folder else None
    if notes is not None and notes.is_file():
        lines = [ln[2:] for ln in notes.read_text().splitlines()[2:] if ln.startswith("- ")]
        blocks += [Heading("Making the task"), Items([Item(ln) for ln in lines])]
    return blocks


def _described(task: KernelTask) -> str:
    return f" ({task.description.rstrip('.')})" if task.description else ""


CASE_HEAD = ["case", "kind", "dtype", "verdict", "max abs err", "err norm"]


def _case_row(c) -> list[str]:
    kind = [
        "held-out" if c.heldout else "visible",
        MODE_LABELS[c.mode],
        f"{c.inputs} inputs" if c.inputs != "task" else "",
        "" if c.counted else "a visible case's extents and launch: not counted",
    ]
    verdict = c.verdict if c.verdict == "pass" else f"{c.verdict}: {c.error or c.pattern}"
    err = [f"{c.max_abs:.3g}", f"{c.err_norm:.3g}"] if c.max_abs is not None else ["-", "-"]
    return [c.case, ", ".join(filter(None, kind)), c.dtype, verdict, *err]


def _correctness(report: CorrectnessReport, final: dict) -> list[Block]:
    blocks: list[Block] = [Heading("Correctness")]
    checked = [c for c in report.cases if c.mode != "op"]
    for seed in dict.fromkeys(c.seed for c in checked):
        blocks += [
            Para(f"Seed {seed}:" if seed is not None else "All seeds:"),
            Table(CASE_HEAD, [_case_row(c) for c in checked if c.seed == seed]),
        ]
    op = [c for c in report.cases if c.mode == "op"]
    if op:
        notes = "".join(
            f" {n[0].upper()}{n[1:]}." for n in (final.get("op") or {}).get("notes", [])
        )
        blocks += [
            Heading("The op as shipped", 3),
            Para(
                "kernel.py imported and called as a user calls it, at sizes no case of the task "
                f"has (test_kernel.py replays them).{notes}"
            ),
            Table(CASE_HEAD, [_case_row(c) for c in op]),
        ]
    return blocks


def _inputs(task: KernelTask, report: CorrectnessReport) -> list[Block]:
    """How the inputs were drawn (each input's own distribution or domain, and the others the
    verification drew floats from) and which sizes drive which extents."""
    from mlxport.tasks.inputs import DISTRIBUTIONS

    rows = [[t.name, t.dtype, f"[{', '.join(map(str, t.shape))}]", _drawn(t)] for t in task.inputs]
    used = dict.fromkeys(c.inputs for c in report.cases)
    skipped = [d for d in DISTRIBUTIONS if d not in used]
    drawn = (
        "Floats drawn at random were drawn from: "
        + "; ".join(f"{d} ({DISTRIBUTIONS[d]})" for d in used)
        + "."
        + (
            f" Not run: {', '.join(skipped)} (the golden is not finite there: outside what "
            f"the kernel computes)."
            if skipped
            else ""
        )
    )
    blocks: list[Block] = [
        Heading("Inputs"),
        Table(["input", "dtype", "shape", "drawn from"], rows),
        Para(drawn),
    ]
    sizes: dict[str, list[str]] = {}
    for t in task.inputs + task.outputs:
        for d in t.shape:
            for n in sorted(names_used(d)):
                sizes.setdefault(n, []).append(t.name)
    if sizes:
        drives = "; ".join(f"{n}: {', '.join(dict.fromkeys(ts))}" for n, ts in sizes.items())
        blocks.append(Para(f"Sizes and the extents they drive: {drives}."))
    return blocks


def _drawn(t) -> str:
    init = t.init
    if init.kind == "normal":
        return f"normal, mean {init.mean:g}, std {init.std:g}"
    if init.kind == "uniform":
        return f"uniform in [{init.low:g}, {init.high:g})"
    if init.kind == "randint":
        return f"integers in [{init.low}, {init.high})"
    if init.kind == "full":
        return f"all {init.value:g} (as the host fills it)"
    return f"0, 1, 2, ... from {init.low}"


def _speed(bench: BenchmarkReport) -> list[Block]:
    blocks: list[Block] = [Heading("Speed")]
    if bench.candidate is None and bench.estimated_us is not None:
        return [
            *blocks,
            Para(f"Not timed ({bench.backend} backend)."),
            Code(bench.estimate),
            Para(LIMITS),
        ]
    if bench.candidate is None:
        return [*blocks, Para(f"Not timed ({bench.backend} backend). {bench.estimate}")]
    c = bench.candidate
    rows = [["candidate", f"{c.median_us:.1f}", f"{c.spread:.0%}", f"{c.gbs or 0:.0f}", "1.00x"]]
    rows += [
        [b.name, f"{b.median_us:.1f}", f"{b.spread:.0%}", f"{b.gbs or 0:.0f}"]
        + [f"{bench.speedups[b.name]:.2f}x"]
        for b in bench.baselines
    ]
    blocks += [
        Para(
            f"Device: {bench.device}; case {bench.case}, {bench.dtype}"
            + (f"; times are {bench.timing_basis}." if bench.timing_basis else ".")
        ),
        Table(["kernel", "median (us)", "spread", "GB/s", "speedup"], rows),
    ]
    if c.roofline_fraction:
        blocks.append(
            Para(
                f"The candidate moves {c.roofline_fraction:.0%} of the "
                f"{bench.bandwidth_basis or 'peak bandwidth'}."
            )
        )
    if bench.flags:
        blocks.append(Items([Item(f) for f in bench.flags]))
    return blocks


def _plan(nodes: list[dict[str, Any]]) -> list[Block]:
    if not nodes:
        return [Heading("Plan"), Para("No plan was kept.")]
    children: dict[str | None, list[dict]] = {}
    for n in nodes:
        children.setdefault(n.get("parent"), []).append(n)

    def items(parent: str | None) -> list[Item]:
        return [Item(_plan_node(n), items(n["id"])) for n in children.get(parent, [])]

    return [Heading("Plan, as it ended"), Items(items(None))]


def _plan_node(n: dict[str, Any]) -> str:
    rating = (
        f"gain {n.get('expected_gain') or '?'}, difficulty {n.get('difficulty', 0.5):.1f}, "
        f"confidence {n.get('confidence', 0.5):.1f}"
    )
    tried = (
        f" (tried {', '.join(f'`{c}`' for c in n['candidates'])})" if n.get("candidates") else ""
    )
    outcome = f" → {n['outcome']}" if n.get("outcome") else ""
    status = MARKS.get(n["status"], n["status"])
    return f"**{n['id']}** {n['idea']} [{status}; {rating}]{tried}{outcome}"


def _rejection(entry: dict[str, Any]) -> str:
    if entry.get("reason"):
        return entry["reason"]
    report = CorrectnessReport.model_validate(entry["report"])
    bad = next((c for c in report.cases if c.verdict != "pass"), None)
    return f"{bad.verdict} at {bad.label} {bad.dtype}" if bad else "failed"


def _candidates(run: dict[str, Any], records: dict[str, Record], final: dict) -> list[Block]:
    if not records:
        return [Heading("Candidates"), Para("No candidate was compiled.")]
    became_best = {}
    for h in run.get("best_history") or []:
        became_best.setdefault(h["candidate"], h["iteration"])
    rejected = {r["candidate_id"]: r for r in final.get("rejected", [])}
    rows = []
    for cid, r in sorted(records.items(), key=lambda kv: kv[1].iteration):
        compiled = "-" if r.compile is None else "yes" if r.compile.ok else "no"
        correct = (
            "-"
            if r.correctness is None
            else "pass"
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
        finally_ = (
            "verified"
            if cid == final.get("candidate_id")
            else "rejected"
            + (f": {rejected[cid]['reason']}" if rejected[cid].get("reason") else "")
            if cid in rejected
            else "-"
        )
        rows.append(
            [f"`{cid}`", str(r.iteration), compiled, correct[:160], speed]
            + [str(became_best.get(cid, "-")), finally_[:160]]
        )
    speed = (
        "speedup vs native"
        if any(r.speedup is not None for r in records.values())
        else ("speed (simulator: ESTIMATE, not measured)")
    )
    head = ["candidate", "compiled at iteration", "compiles", "correctness", speed]
    return [
        Heading("Candidates"),
        Para(
            "An iteration is one model turn; a candidate is compiled in one and checked in a later "
            "one, where it may become the best (run.json's best_history)."
        ),
        Table(head + ["best from iteration", "final verification"], rows),
    ]
