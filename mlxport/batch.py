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
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mlxport.errors import UserError
from mlxport.redaction import redact_text, write_text

EVENTS = "batch_events.jsonl"
CONFIG_FIELDS = (
    "max_iterations",
    "patience",
    "max_tokens",
    "max_cost",
    "max_wall_seconds",
    "max_consecutive_errors",
    "target_speedup",
    "extra_seeds",
    "chip",
    "seed",
    "context_window",
    "backend",
    "base_url",
    "search",
)
# A [[port]] entry's keys for a .cu file: TaskRequest's fields, the file as `kernel` and the
# kernel's name as `kernel_name` (as in `mlxport port FILE.cu --kernel NAME`).
KERNEL_KEYS = {
    "kernel", "kernel_name", "cases", "heldout", "dtypes", "shapes", "grid", "block",
    "shared_bytes", "template", "includes", "reference", "inputs", "outputs",
}  # fmt: skip
REQUEST_KEYS = {"kernel": "source", "kernel_name": "kernel"}
Event = dict[str, Any]


@dataclass
class Job:
    """One port of a batch: the task folder, the model and the RunConfig fields it runs with."""

    name: str
    task_dir: str
    model: str
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        return self.config.get("backend", "auto")


# ---------------------------------------------------------------- input


def load_jobs(
    source: str | Path,
    *,
    model: str = "rules",
    budget: dict[str, Any] | None = None,
    out: Path = Path("mlxport-out"),
) -> list[Job]:
    """The jobs of a manifest (.toml), a folder of task folders, one task folder, or ``suite``."""
    from mlxport.tasks import SUITE_DIR, suite_names

    base = _config_fields(budget or {}, "budget")
    if str(source) == "suite":
        return [Job(n, str(SUITE_DIR / n), model, dict(base)) for n in suite_names()]
    path = Path(source)
    if path.is_file() and path.suffix == ".toml":
        return _manifest_jobs(path, model, base, out)
    if (path / "task.toml").is_file():
        return [_task_job(path, model, base)]
    if path.is_dir():
        folders = sorted(p.parent for p in path.glob("*/task.toml"))
        if not folders:
            raise UserError(
                f"{path} holds no task folders (*/task.toml): pass a manifest .toml, a folder of "
                f"task "
                f"folders, or suite"
            )
        return _unique([_task_job(f, model, base) for f in folders])
    raise UserError(
        f"no manifest or folder {path}: pass a manifest .toml, a folder of task folders, or suite"
    )


def _task_job(folder: Path, model: str, config: dict[str, Any]) -> Job:
    from mlxport.tasks import load_task

    task = load_task(folder)
    return Job(task.name, str(task.folder), model, dict(config))


def _manifest_jobs(path: Path, model: str, base: dict[str, Any], out: Path) -> list[Job]:
    from mlxport.tasks import find_task

    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"manifest {path} is not valid TOML ({e}): fix the syntax") from e
    entries = data.get("port")
    if not isinstance(entries, list) or not entries:
        raise UserError(
            f'manifest {path} has no [[port]] entries: add one per task (task = "softmax_rows")'
        )
    default_model = data.get("model", model)
    defaults = {**base, **_config_fields(data.get("budget", {}), f"[budget] of {path}")}
    jobs = []
    for i, entry in enumerate(entries):
        where = f"[[port]] #{i + 1} of {path}"
        config = {**defaults, **_config_fields(entry.get("budget", {}), f"budget in {where}")}
        unknown = set(entry) - {"task", "name", "model", "budget"} - KERNEL_KEYS
        if unknown:
            raise UserError(
                f"{where} has unknown keys {sorted(unknown)}: use task, or kernel with cases (and "
                f"{', '.join(sorted(KERNEL_KEYS - {'kernel', 'cases'}))}), name, model, budget"
            )
        if "task" in entry:
            rel = path.parent / entry["task"]
            job = _task_job(
                rel if rel.is_dir() else find_task(entry["task"]),
                entry.get("model", default_model),
                config,
            )
            if entry.get("name", job.name) != job.name:
                raise UserError(
                    f"{where} names the port {entry['name']!r} but its task is {job.name!r}: "
                    f"output "
                    f"folders are named after tasks, so drop name (use another --out to port a "
                    f"task twice)"
                )
        elif "kernel" in entry:
            job = _kernel_job(
                entry, path.parent, out, where, entry.get("model", default_model), config
            )
        else:
            raise UserError(
                f'{where} names neither task nor kernel: add task = "NAME_OR_DIR" or kernel = '
                f'"x.cu"'
            )
        jobs.append(job)
    return _unique(jobs)


def _kernel_job(
    entry: dict[str, Any], root: Path, out: Path, where: str, model: str, config: dict
) -> Job:
    """A ``[[port]]`` entry naming a .cu file: its task made as ``mlxport port FILE.cu`` makes it
    (the original kernel as the golden, or ``reference`` with ``inputs`` and ``outputs``); paths
    are relative to the manifest."""
    from mlxport.tasks.make import TaskRequest, make_task

    if "cases" not in entry:
        raise UserError(f"{where} ports a .cu file and needs cases, e.g. cases = ['N=4096']")
    fields = {REQUEST_KEYS.get(k, k): v for k, v in entry.items() if k in KERNEL_KEYS}
    fields["source"] = root / entry["kernel"]
    fields["includes"] = [root / p for p in entry.get("includes", [])]
    module, _, fn = entry.get("reference", "").rpartition(":")
    if module.endswith(".py"):
        fields["reference"] = f"{root / module}:{fn}"
    request = TaskRequest.of(name=entry.get("name"), **fields)
    try:
        folder = make_task(request, out.resolve() / "_tasks")
    except UserError as e:
        raise UserError(f"{where}: {e}") from e
    return _task_job(folder, model, config)


def _config_fields(values: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = set(values) - set(CONFIG_FIELDS)
    if unknown:
        raise UserError(
            f"unknown keys {sorted(unknown)} in {where}: use RunConfig fields "
            f"({', '.join(CONFIG_FIELDS)})"
        )
    return dict(values)


def _unique(jobs: list[Job]) -> list[Job]:
    seen: set[str] = set()
    for j in jobs:
        if j.name in seen:
            raise UserError(
                f"task {j.name!r} appears twice in the batch: a batch ports each task once (use "
                f"another "
                f"--out for a second run)"
            )
        seen.add(j.name)
    return jobs


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
        rows = (
            run_on_ray(job_list, out, ray_address, log, jobs)
            if ray_address
            else _run_local(job_list, out, jobs, log)
        )
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


# ---------------------------------------------------------------- Ray


def run_on_ray(
    job_list: list[Job], out: Path, address: str, log: EventLog, jobs: int = 1
) -> list[dict[str, Any]]:
    """Each port as a Ray task that needs one unit of the custom resource named after its backend
    (``sim``, ``metal``, ``cuda``), so it lands on a node that offers that backend. ``out`` must
    be a folder every node sees (a shared filesystem) for resume and skip to work across runs.
    ``local`` starts a throwaway cluster on this machine offering ``jobs`` units of each backend."""
    auto = sorted({j.name for j in job_list if j.backend == "auto"})
    if auto:
        raise UserError(
            f"with --ray pick the backend (budget backend=metal, cuda or sim) so ports go to nodes "
            f"with "
            f"that resource; {', '.join(auto[:3])} use auto"
        )
    try:
        import ray
    except ImportError as e:
        raise UserError(
            "--ray needs Ray, which is not installed: pip install 'mlxport[ray]'"
        ) from e
    owned = not ray.is_initialized()
    if owned:
        if address != "local":
            _match_ray_auth()
        local = {"resources": {j.backend: jobs for j in job_list}} if address == "local" else {}
        ray.init(address=address, log_to_driver=False, **local)
    try:
        offered = ray.cluster_resources()
        for backend in sorted({j.backend for j in job_list}):
            if offered.get(backend, 0) < 1:
                raise UserError(
                    f"no node of the Ray cluster at {address} offers the {backend!r} resource: "
                    f"start one "
                    f"with ray start --resources='{{\"{backend}\": 1}}'"
                )
        if any(j.backend == "cuda" for j in job_list) and offered.get("GPU", 0) < 1:
            raise UserError(
                f"the Ray cluster at {address} offers 'cuda' but no GPU: start its GPU nodes with "
                f"ray start --num-gpus=N"
            )
        remote = ray.remote(_ray_port)
        refs = {}
        for j in job_list:
            # A CUDA port holds one GPU of its own: Ray sets the worker's CUDA_VISIBLE_DEVICES to
            # it, while the simulator checks and compiles use the node's CPUs.
            gpus = 1 if j.backend == "cuda" else 0
            ref = remote.options(
                resources={j.backend: 1}, num_cpus=1, num_gpus=gpus, name=f"port:{j.name}"
            ).remote(asdict(j), str(out))
            refs[ref] = j
            log.emit(j.name, "submitted", resource=j.backend)
        rows = []
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    row, last = ray.get(ref)
                except Exception as e:  # the worker died or could not import mlxport
                    row = summary_row(
                        job.name, "failed", None, error=f"{type(e).__name__}: {str(e)[:300]}"
                    )
                    log.emit(job.name, "error", error=row["error"])
                else:
                    log.forward(last)  # the worker already wrote it to the log
                rows.append(row)
        return rows
    finally:
        if owned:
            ray.shutdown()


def _match_ray_auth() -> None:
    """``ray start`` turns token authentication on when a token exists (~/.ray/auth_token,
    RAY_AUTH_TOKEN) but ``ray.init(address=...)`` does not (Ray 2.60): send the token as well."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # another Ray version: its own defaults apply
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _ray_port(job: dict[str, Any], out: str) -> tuple[dict[str, Any], Event]:
    """Runs on a Ray worker: the same job as in the thread pool; events go to the shared log."""
    import ray

    events: list[Event] = []
    log, one = EventLog(Path(out), events.append), Job(**job)
    if one.backend == "cuda":
        log.emit(
            one.name,
            "placed",
            gpus=[str(g) for g in ray.get_gpu_ids()],
            visible=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        )
    row = port_job(one, Path(out), log)
    return row, events[-1]
