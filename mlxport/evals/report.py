"""Eval reports from the run records alone: ``report.md`` and a self-contained ``report.html``
(inline CSS and SVG; it fetches nothing)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from mlxport.charts import svg
from mlxport.charts.page import CSS
from mlxport.errors import UserError
from mlxport.evals import metrics as M
from mlxport.evals.runner import PER_RUN, load_errors, load_manifest, load_runs
from mlxport.redaction import write_text

BUDGET_FIELDS = (
    ("max_iterations", "iterations"),
    ("patience", "patience"),
    ("max_tokens", "tokens"),
    ("max_cost", "cost USD"),
    ("max_wall_seconds", "wall s"),
    ("max_consecutive_errors", "errors in a row"),
    ("target_speedup", "target speedup"),
    ("extra_seeds", "extra verification seeds"),
)


@dataclass
class Eval:
    out: Path
    models: list[str]
    tasks: list[str]
    seeds: int
    config: dict[str, Any]
    created: str
    runs: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    per_task: dict[str, dict[str, dict[str, Any]]]

    @property
    def timed(self) -> bool:
        return M.all_timed(self.rows)

    @property
    def na(self) -> str:
        return next(
            (r["timing"] for r in self.rows if r["runs"] and r["timing"] != "measured"),
            M.UNTIMED_NA,
        )

    def label(self, model: str, baseline_note: bool = False) -> str:
        text = M.label(model)
        return f"{text} ({M.RULES_NOTE})" if baseline_note and M.is_baseline(model) else text


def collect(out: Path) -> Eval:
    runs = load_runs(out)
    manifest = load_manifest(out)
    if manifest is None and not runs:
        raise UserError(
            f"no eval runs under {out}: run `mlxport eval --out {out}` first, or pass the eval's "
            f"folder"
        )
    if manifest is None:  # rebuilt from the run records alone
        config = {k: v for k, v in runs[0].get("config", {}).items() if k not in PER_RUN}
        manifest = {
            "models": list(dict.fromkeys(r["model"] for r in runs)),
            "tasks": sorted({r["task"] for r in runs}),
            "seeds": 1 + max(r.get("seed") or 0 for r in runs),
            "config": config,
            "created": "",
        }
    models = list(dict.fromkeys(["rules", *manifest["models"], *(r["model"] for r in runs)]))
    tasks = list(dict.fromkeys([*manifest["tasks"], *(r["task"] for r in runs)]))
    rows = M.leaderboard(
        runs,
        models,
        expected_per_model=len(tasks) * manifest["seeds"],
        tasks=tasks,
        seeds=manifest["seeds"],
    )
    return Eval(
        out,
        models,
        tasks,
        manifest["seeds"],
        manifest["config"],
        manifest.get("created", ""),
        runs,
        load_errors(out),
        rows,
        M.per_task(runs),
    )


def build_reports(out: Path) -> tuple[Path, Path]:
    """Write ``out/report.md`` and ``out/report.html`` from the run records; return both paths."""
    ev = collect(Path(out))
    md, html = ev.out / "report.md", ev.out / "report.html"
    write_text(md, markdown(ev))
    write_text(html, render_html(ev))
    return md, html


# ---------------------------------------------------------------- formatting


def pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.0%}"


def ci_pct(ci: tuple[float, float] | None) -> str:
    return "" if not ci or math.isnan(ci[0]) else f" [{ci[0]:.0%}–{ci[1]:.0%}]"


def times(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.2f}x"


def ci_times(ci: tuple[float, float] | None) -> str:
    return "" if not ci or math.isnan(ci[0]) else f" [{ci[0]:.2f}–{ci[1]:.2f}]"


def num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def usd(x: float) -> str:
    return f"${x:.4f}" if x < 1 else f"${x:.2f}"


def reasons(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "–"


def fast(row: dict[str, Any], b: str) -> str:
    f = row["fast_p"][b]
    if f["1"] is None:
        return "n/a"
    return " / ".join(pct(f[p]) for p in ("1", "1.5", "2"))


# ---------------------------------------------------------------- tables (shared by both formats)


def setup(ev: Eval) -> list[tuple[str, str]]:
    budget = ", ".join(
        f"{name} {ev.config.get(key)}"
        for key, name in BUDGET_FIELDS
        if ev.config.get(key) is not None
    )
    versions = (ev.runs[0].get("versions") or {}) if ev.runs else {}
    host = (ev.runs[0].get("host") or {}) if ev.runs else {}
    return [
        ("backend", str(ev.config.get("backend"))),
        ("budget (identical for every model)", budget),
        ("tasks", f"{len(ev.tasks)}: {', '.join(ev.tasks)}"),
        ("seeds per task", str(ev.seeds)),
        ("runs finished", f"{len(ev.runs)} of {len(ev.models) * len(ev.tasks) * ev.seeds}"),
        ("models", ", ".join(ev.label(m, True) for m in ev.models)),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v)),
        ("host", f"{host.get('platform', '?')}, Python {host.get('python', '?')}"),
        ("started", ev.created or "–"),
        ("report written", time.strftime("%Y-%m-%d %H:%M:%S")),
    ]


def leaderboard_table(ev: Eval) -> tuple[list[str], list[list[str]]]:
    head = [
        "#",
        "model",
        "runs",
        "fast_0 (verified) [95% CI]",
        "correct@1",
        "correct@k [95% CI]",
        "geomean vs native [95% CI]",
        "fast_1 / 1.5 / 2 vs native",
        "geomean vs naive",
        "fast_1 / 1.5 / 2 vs naive",
        "timing",
    ]
    mixed = (
        len({r["timing"] for r in ev.rows if r["runs"]}) > 1
    )  # else the note above the table says it
    body = []
    for i, r in enumerate(ev.rows, 1):
        missing = f" ({r['missing_runs']} missing)" if r["missing_runs"] else ""
        body.append(
            [
                str(i),
                ev.label(r["model"], True),
                f"{r['runs']}{missing}",
                pct(r["fast_0"]) + ci_pct(r["ci"]["fast_0"]),
                pct(r["correct@1"]),
                f"{pct(r['correct@k'])} (k={r['k']})" + ci_pct(r["ci"]["correct@k"]),
                times(r["geomean"]["native"]) + ci_times(r["ci"].get("geomean_native")),
                fast(r, "native"),
                times(r["geomean"]["naive"]) + ci_times(r["ci"].get("geomean_naive")),
                fast(r, "naive"),
                r["timing"],
            ]
        )
    return (head, body) if mixed else (head[:-1], [row[:-1] for row in body])


def behaviour_table(ev: Eval) -> tuple[list[str], list[list[str]]]:
    head = [
        "model",
        "candidates",
        "compile failures",
        "tool errors",
        "tokens in",
        "tokens out",
        "cost",
        "wall (total / median run)",
        "iterations (mean)",
        "iterations to best (median)",
        "stop reasons",
    ]
    body = []
    for r in ev.rows:
        body.append(
            [
                ev.label(r["model"], True),
                str(r["candidates"]),
                f"{r['compile_failures']} ({pct(r['compile_failure_rate'])})",
                f"{r['tool_errors']} of {r['tool_calls']} calls ({pct(r['tool_error_rate'])})",
                f"{r['tokens_in']:,}",
                f"{r['tokens_out']:,}",
                usd(r["cost_usd"]),
                f"{num(r['wall_seconds'])} s / {num(r['median_wall_seconds'])} s",
                num(r["mean_iterations"]),
                num(r["median_iterations_to_best"], "{:g}"),
                reasons(r["stop_reasons"]),
            ]
        )
    return head, body


def task_table(ev: Eval, task: str) -> tuple[list[str], list[list[str]]]:
    head = [
        "model",
        "verified seeds",
        "speedup vs native",
        "speedup vs naive",
        "iterations",
        "iterations to best",
        "candidates",
        "compile failures",
        "tool errors",
        "tokens in / out",
        "cost",
        "wall",
        "stop",
    ]
    body = []
    cells = ev.per_task.get(task, {})
    for m in [r["model"] for r in ev.rows]:
        c = cells.get(m)
        if c is None:
            body.append([ev.label(m, True), "not run"] + ["–"] * (len(head) - 2))
            continue
        speed = [
            times(c["speedup"][b]) if c["timing"] == "measured" else "n/a" for b in M.BASELINES
        ]
        to_best = ", ".join("–" if x is None else str(x) for x in c["iterations_to_best"])
        body.append(
            [
                ev.label(m, True),
                f"{c['verified']} of {c['seeds']}",
                *speed,
                num(c["iterations"], "{:g}"),
                to_best,
                str(c["candidates"]),
                str(c["compile_failures"]),
                str(c["tool_errors"]),
                f"{c['tokens_in']:,} / {c['tokens_out']:,}",
                usd(c["cost_usd"]),
                f"{c['wall_seconds']:.1f} s",
                reasons(c["stop_reasons"]),
            ]
        )
    return head, body


DEFINITIONS = [
    (
        "fast_p",
        "share of tasks whose port passed final verification (held-out shapes, extra seeds) and is "
        "more "
        "than p times faster than the baseline; fast_0 is the verified share. Averaged over seeds "
        "per task, "
        "then over tasks.",
    ),
    (
        "native / naive",
        "the strongest native MLX path of each task, and the naive path a user has today.",
    ),
    (
        "geomean",
        "geometric mean over tasks of the speedup; a failed task counts 1.0x (the user keeps the "
        "baseline), "
        "a verified port counts its measured speedup, even below 1.",
    ),
    (
        "correct@1, correct@k",
        "mean share of verified seeds per task; unbiased pass@k over the k seeds run (the share "
        "of tasks verified on at least one of k seeds).",
    ),
    ("95% CI", f"percentile bootstrap over tasks ({M.BOOTSTRAP} resamples, fixed seed)."),
    ("compile failures", "candidates that failed to compile, and their share of all candidates."),
    (
        "tool errors",
        "tool calls answered with an error (unknown tool, invalid or malformed arguments, unknown "
        "id), "
        "and their share of all tool calls.",
    ),
    ("iterations to best", "model turns until the final best candidate first appeared."),
    (
        "n/a (simulator: correctness only)",
        "the Metal simulator checks correctness, never speed, so no speedup metric "
        "is measured on it.",
    ),
]


# ---------------------------------------------------------------- markdown


def _md_table(head: list[str], body: list[list[str]]) -> list[str]:
    cell = lambda s: s.replace("|", "\\|")  # noqa: E731
    return (
        ["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
        + ["| " + " | ".join(map(cell, row)) + " |" for row in body]
        + [""]
    )


def markdown(ev: Eval) -> str:
    lines = ["# mlxport eval: leaderboard", ""]
    lines += [f"- {k}: {v}" for k, v in setup(ev)] + [""]
    if not ev.timed:
        lines += [
            f"> Speedup metrics: {ev.na}. fast_0 (the verified share), correct@k, error rates, "
            f"tokens, cost, "
            f"wall time, iterations and stop reasons are measured.",
            "",
        ]
    lines += [
        "## Leaderboard",
        "",
        *_md_table(*leaderboard_table(ev)),
        "## Cost and behaviour",
        "",
        *_md_table(*behaviour_table(ev)),
        "Plots: see report.html in this folder.",
        "",
        "## Per task",
        "",
    ]
    for task in ev.tasks:
        lines += [f"### {task}", "", *_md_table(*task_table(ev, task))]
    lines += _md_problems(ev)
    lines += ["## Definitions", ""] + [f"- **{k}**: {v}" for k, v in DEFINITIONS] + [""]
    return "\n".join(lines)


def _md_problems(ev: Eval) -> list[str]:
    if not ev.errors:
        return []
    out = ["## Runs that raised (retried by the next `mlxport eval` on this folder)", ""]
    return out + [f"- `{e['folder']}`: {e['error']}" for e in ev.errors] + [""]


# ---------------------------------------------------------------- html


def _html_table(head: list[str], body: list[list[str]], cls: str = "") -> str:
    rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in body)
    return (
        f'<div class="scroll"><table class="{cls}"><thead><tr>'
        + "".join(f"<th>{escape(h)}</th>" for h in head)
        + f"</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def plots(ev: Eval) -> list[str]:
    ran = [r for r in ev.rows if r["runs"]]
    order = [r["model"] for r in ran]
    labels = {m: ev.label(m, True) for m in order}
    cells = ev.per_task
    if ev.timed:
        series = {
            m: [cells.get(t, {}).get(m, {}).get("speedup", {}).get("native") for t in ev.tasks]
            for m in order
        }
        bars = svg.grouped_bars(
            "Speedup over the native baseline, per task",
            ev.tasks,
            series,
            ref=1.0,
            y_label="speedup (failed = 1.0x)",
            labels=labels,
            desc="geometric mean over seeds; failed ports count 1.0x",
        )
        points = [(r["model"], r["cost_usd"], r["geomean"]["native"]) for r in ran]
        cost = svg.scatter(
            "Cost against geomean speedup",
            points,
            x_label="total cost (USD)",
            y_label="geomean speedup vs native",
            ref=1.0,
            labels=labels,
        )
    else:
        series = {m: [_share(cells.get(t, {}).get(m)) for t in ev.tasks] for m in order}
        bars = svg.grouped_bars(
            f"Verified share per task: speedup {ev.na}",
            ev.tasks,
            series,
            percent=True,
            y_label="verified seeds",
            labels=labels,
            desc="x: not run",
        )
        points = [(r["model"], r["cost_usd"], r["fast_0"]) for r in ran]
        cost = svg.scatter(
            "Cost against verified share (no timing)",
            points,
            x_label="total cost (USD)",
            y_label="fast_0 (verified share)",
            percent=True,
            labels=labels,
        )
    max_iter = int(
        ev.config.get("max_iterations") or max((r.get("iterations", 0) for r in ev.runs), default=1)
    )
    curves, what = {}, ""
    for m in order:
        what, curves[m] = M.convergence([r for r in ev.runs if r["model"] == m], max_iter)
    conv = svg.lines(
        "Best so far against iteration",
        curves,
        x_label="iteration (model turn)",
        y_label=what,
        percent=not ev.timed,
        ref=1.0 if ev.timed else None,
        labels=labels,
    )
    return [bars, cost, conv]


def _share(cell: dict[str, Any] | None) -> float | None:
    return None if cell is None else cell["verified"] / cell["seeds"]


def render_html(ev: Eval) -> str:
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>mlxport eval leaderboard</title><style>{CSS}</style></head><body><main>",
        "<h1>mlxport eval: leaderboard</h1>",
        "<dl class=setup>",
    ]
    parts += [f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in setup(ev)] + ["</dl>"]
    if not ev.timed:
        parts.append(
            f'<p class="note">Speedup metrics: <b>{escape(ev.na)}</b>. fast_0 (the verified '
            f"share), "
            f"correct@k, error rates, tokens, cost, wall time, iterations and stop reasons are "
            f"measured.</p>"
        )
    parts += [
        "<h2>Leaderboard</h2>",
        _html_table(*leaderboard_table(ev), cls="board"),
        "<h2>Cost and behaviour</h2>",
        _html_table(*behaviour_table(ev)),
        "<h2>Plots</h2>",
        '<div class="plots">' + "".join(f"<figure>{p}</figure>" for p in plots(ev)) + "</div>",
        "<h2>Per task</h2>",
    ]
    for task in ev.tasks:
        parts += [
            f'<h3 id="task-{escape(task)}">{escape(task)}</h3>',
            _html_table(*task_table(ev, task)),
        ]
    if ev.errors:
        parts += [
            "<h2>Runs that raised</h2><p>Retried by the next <code>mlxport eval</code> on this "
            "folder.</p><ul>"
        ]
        parts += [
            f"<li><code>{escape(e['folder'])}</code>: {escape(e['error'])}</li>" for e in ev.errors
        ] + ["</ul>"]
    parts += ["<h2>Definitions</h2><dl class=defs>"]
    parts += [f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in DEFINITIONS]
    parts += ["</dl></main></body></html>"]
    return "\n".join(parts)
