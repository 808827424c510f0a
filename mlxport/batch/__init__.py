"""Many ports unattended: a manifest, a folder of task folders or the suite, ported into one
output folder by a thread pool (or a Ray cluster), resumable, with a summary at the end.

Each port goes to ``OUT/<task>/`` through ``run_port``. A task with a ``run.json`` is skipped; one
with a ``session.json`` but no ``run.json`` continues from its checkpoint. Every start, resume,
skip, finish and error is appended to ``OUT/batch_events.jsonl``, so a restarted batch can show
that no port ran twice. See docs/batch.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from mlxport.batch.jobs import Job, load_jobs
from mlxport.errors import UserError
from mlxport.redaction import redact_text, write_text

EVENTS = "batch_events.jsonl"
Event = dict[str, Any]

# ---------------------------------------------------------------- events


class EventLog:
    """Appends one JSON line per event to OUT/batch_events.jsonl (also from Ray workers: one
    small O_APPEND write per line) and forwards every event, iterations included, to listeners."""

    def __init__(self, out: Path, listener: Callable[[Event], None] | None = None):
        self.path = out / EVENTS
        self.listener = listener
        self._lock = threading.Lock()

    def emit(self, task: str, event: str, **data: Any) -> None:
        record = {
            "time": round(time.time(), 3),
            "pid": os.getpid(),
            "task": task,
            "event": event,
            **data,
        }
        if event != "iteration":
            line = redact_text(json.dumps(record, default=str) + "\n").encode()
            with self._lock:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line)
                finally:
                    os.close(fd)
        self.forward(record)

    def forward(self, record: Event) -> None:
        if self.listener:
            self.listener(record)


def read_events(out: Path) -> list[Event]:
    path = Path(out) / EVENTS
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------- one job


def port_job(job: Job, out: Path, log: EventLog) -> dict[str, Any]:
    """Run, resume or skip one port; returns its summary row. Never raises for a failed port."""
    folder = out / job.name
    done = _read_json(folder / "run.json")
    if done is not None:
        log.emit(job.name, "skip", session=done.get("session"))
        return summary_row(job.name, "skipped", done)
    try:
        run, resumed = _run(job, out, folder, log)
    except Exception as e:  # one failed port never stops the batch; a rerun resumes it
        message = f"{type(e).__name__}: {e}"
        log.emit(job.name, "error", error=message[:500])
        return summary_row(job.name, "failed", None, error=message)
    log.emit(
        job.name,
        "finish",
        session=run["session"],
        verified=run["result"]["verified"],
        stop_reason=run["stop_reason"],
    )
    return summary_row(job.name, "resumed" if resumed else "done", run)


def _run(job: Job, out: Path, folder: Path, log: EventLog) -> tuple[dict[str, Any], bool]:
    from mlxport.agent import sessions
    from mlxport.agent.port import run_port
    from mlxport.agent.state import RunConfig
    from mlxport.tasks import load_task

    saved = sessions.latest(folder)
    if saved is not None:
        session, config = saved.id, saved.config
    else:
        session, config = _logged_session(out, job.name), RunConfig(model=job.model, **job.config)
    # A session counts as started once its "start" is logged; a kill between the log line and
    # session.json (or the first checkpoint) continues the same session instead of starting again.
    started = session is not None and any(
        e["event"] == "start" and e.get("session") == session for e in read_events(out)
    )
    session = session or sessions.new_id(job.name)
    log.emit(job.name, "resume" if started else "start", session=session, model=config.model)

    def update(node: str, data: dict[str, Any]) -> None:
        if node == "reason" and "iterations" in data:
            log.emit(
                job.name,
                "iteration",
                iteration=data["iterations"],
                max_iterations=config.max_iterations,
            )

    run = run_port(load_task(job.task_dir), config, out, session=session, on_update=update)
    return run, started


def _logged_session(out: Path, task: str) -> str | None:
    """The session of a start logged for ``task`` that never got as far as its session.json."""
    starts = [e for e in read_events(out) if e["task"] == task and e["event"] == "start"]
    return starts[-1].get("session") if starts else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):  # absent, or cut short by a kill: not done
        return None


def summary_row(
    task: str, status: str, run: dict[str, Any] | None, error: str | None = None
) -> dict[str, Any]:
    if run is None:
        return {
            "task": task,
            "status": status,
            "stop_reason": None,
            "verified": False,
            "speedup": None,
            "speed": "-",
            "iterations": 0,
            "tokens": 0,
            "cost_usd": 0.0,
            "model": None,
            "error": error,
        }
    res = run["result"]
    native = res["speedups"].get("native") if res.get("timed") else None
    if native is not None:
        speed = f"{native:.2f}x"
    elif res.get("verified"):
        speed = f"not timed ({res.get('backend')})"
    else:
        speed = "-"
    return {
        "task": task,
        "status": status,
        "stop_reason": run["stop_reason"],
        "verified": res["verified"],
        "speedup": native,
        "speed": speed,
        "iterations": run["iterations"],
        "tokens": run["tokens"]["input"] + run["tokens"]["output"],
        "cost_usd": run["cost_usd"],
        "model": run["model"],
        "error": error,
    }


# ---------------------------------------------------------------- the batch


def run_batch(
    source: str | Path,
    *,
    model: str = "rules",
    jobs: int = 2,
    out: Path = Path("mlxport-out"),
    budget: dict[str, Any] | None = None,
    ray_address: str | None = None,
    on_event: Callable[[Event], None] | None = None,
    console=None,
) -> Path:
    """Port every task of ``source`` into ``out``; returns the path of ``out/batch.json``.

    ``budget`` holds RunConfig fields (max_iterations, backend, base_url, ...). ``jobs`` ports run
    at once (LLM calls overlap; device work is serialised per backend by the toolbox). With
    ``ray_address`` each port is a Ray task that needs the custom resource named after its
    backend. ``on_event`` gets every event; ``console`` (a rich Console) shows live progress and
    the summary table.
    """
    from mlxport.agent.models import check_model_spec
    from mlxport.agent.sessions import ensure_writable

    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, got {jobs}")
    out = Path(out).resolve()
    ensure_writable(out)
    job_list = load_jobs(source, model=model, budget=budget, out=out)
    for spec in sorted({j.model for j in job_list}):
        check_model_spec(spec, (budget or {}).get("base_url"))
    t0 = time.time()
    display = _Display(console, job_list) if console is not None else None
    listeners = [f for f in (on_event, display.event if display else None) if f]
    log = EventLog(out, lambda e: [f(e) for f in listeners])
    with display or contextlib.nullcontext():
        if ray_address:
            from mlxport.batch.ray import run_on_ray  # Ray is imported only where it runs

            rows = run_on_ray(job_list, out, ray_address, log, jobs)
        else:
            rows = _run_local(job_list, out, jobs, log)
    order = {j.name: i for i, j in enumerate(job_list)}
    rows.sort(key=lambda r: order[r["task"]])
    summary = {
        "source": str(source),
        "out": str(out),
        "model": model,
        "jobs": jobs,
        "ray": ray_address,
        "wall_seconds": round(time.time() - t0, 1),
        "totals": totals(rows),
        "tasks": rows,
    }
    write_text(out / "batch.json", json.dumps(summary, indent=2))
    write_text(out / "batch_report.md", report_md(summary))
    if console is not None:
        console.print(summary_table(rows))
        console.print(
            f"{summary['totals']['verified']}/{len(rows)} verified; wrote {out / 'batch_report.md'}"
        )
    return out / "batch.json"


def _run_local(job_list: list[Job], out: Path, jobs: int, log: EventLog) -> list[dict[str, Any]]:
    rows = []
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="mlxport-batch") as pool:
        futures = [pool.submit(port_job, j, out, log) for j in job_list]
        for f in as_completed(futures):
            rows.append(f.result())
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tasks": len(rows),
        "verified": sum(r["verified"] for r in rows),
        "failed": sum(r["status"] == "failed" for r in rows),
        "skipped": sum(r["status"] == "skipped" for r in rows),
        "tokens": sum(r["tokens"] for r in rows),
        "cost_usd": round(sum(r["cost_usd"] for r in rows), 6),
    }


COLUMNS = ("task", "status", "stop reason", "verified", "speedup", "iters", "tokens", "cost $")


def _cells(r: dict[str, Any]) -> list[str]:
    return [
        r["task"],
        r["status"],
        str(r["stop_reason"] or r.get("error") or "-")[:60],
        "yes" if r["verified"] else "no",
        r["speed"],
        str(r["iterations"]),
        str(r["tokens"]),
        f"{r['cost_usd']:.4f}",
    ]


def summary_table(rows: list[dict[str, Any]]):
    from rich.table import Table

    table = Table(title="batch summary")
    for c in COLUMNS:
        table.add_column(c, justify="right" if c in ("iters", "tokens", "cost $") else "left")
    for r in rows:
        table.add_row(*_cells(r))
    return table


def report_md(summary: dict[str, Any]) -> str:
    t = summary["totals"]
    rules = any(r["model"] == "rules" for r in summary["tasks"])
    lines = [
        "# Batch report",
        "",
        f"- source: `{summary['source']}`; model: `{summary['model']}`"
        + (" (`rules` is the rule-based translator: a non-LLM baseline)" if rules else ""),
        f"- {t['verified']}/{t['tasks']} verified, {t['failed']} failed, {t['skipped']} skipped "
        f"(done earlier)",
        f"- tokens {t['tokens']}, cost ${t['cost_usd']:.4f}, wall time {summary['wall_seconds']} s"
        + (f", on Ray at {summary['ray']}" if summary["ray"] else f", {summary['jobs']} at once"),
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += [
        "| " + " | ".join(c.replace("|", "/") for c in _cells(r)) + " |" for r in summary["tasks"]
    ]
    lines += [
        "",
        "Each task's port is in `<task>/` (report.md, run.json, kernel.py); events in "
        "`batch_events.jsonl`.",
        "Speedups exist only where a GPU timed the kernel; the simulator checks correctness only.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- progress


class _Display:
    """A rich progress view: one overall bar, one line per task with its status."""

    def __init__(self, console, job_list: list[Job]):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.overall = self.progress.add_task("batch", total=len(job_list), status="")
        self.rows = {
            j.name: self.progress.add_task(j.name, total=None, status="queued", start=False)
            for j in job_list
        }

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def event(self, e: Event) -> None:
        row = self.rows.get(e["task"])
        if row is None:
            return
        kind = e["event"]
        if kind in ("start", "resume"):
            self.progress.start_task(row)
            self.progress.update(row, status="running" if kind == "start" else "resumed")
        elif kind == "iteration":
            self.progress.update(
                row,
                total=e["max_iterations"],
                completed=e["iteration"],
                status=f"iteration {e['iteration']}",
            )
        elif kind in ("finish", "skip", "error"):
            status = {"skip": "skipped", "error": "[red]failed[/red]"}.get(kind) or (
                "[green]verified[/green]"
                if e.get("verified")
                else f"not verified ({e.get('stop_reason')})"
            )
            self.progress.update(row, status=status, total=1, completed=1)
            self.progress.stop_task(row)
            self.progress.advance(self.overall)
        elif kind == "submitted":
            self.progress.update(row, status=f"on Ray ({e.get('resource')})")


__all__ = [
    "EVENTS",
    "EventLog",
    "Job",
    "load_jobs",
    "port_job",
    "read_events",
    "run_batch",
    "summary_row",
]
