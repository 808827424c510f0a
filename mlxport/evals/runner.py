"""The eval runner: every model x task x seed through the same graph, tools, budget and device.

Layout of an eval folder::

    eval.json                               models, tasks, seeds, the shared run configuration
    runs/<model-slug>/seed<k>/<task>/       one port (run.json once finished, session.json and
                                            checkpoints.sqlite from its start)
    report.md, report.html                  written by ``report.build_reports``

Finished runs (run.json present) are skipped; interrupted ones resume from their checkpoint;
runs that raised are retried. Running the same folder again with more models, tasks or seeds
adds them; a different budget is refused so that every row was run under the same rules.
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, fields
from hashlib import sha1
from pathlib import Path
from typing import Any

from mlxport.agent import sessions
from mlxport.agent.config import PER_RUN, parse_budget  # noqa: F401  (parse_budget is part of the eval API)
from mlxport.errors import UserError
from mlxport.redaction import write_text

Progress = Callable[[dict[str, Any]], None]
MANIFEST = "eval.json"
# RunConfig fields an eval sets per run; everything else is the shared budget.


class _Stopped(Exception):
    """Raised in a port's update callback to stop it at a node boundary (its checkpoint stays)."""


@dataclass(frozen=True)
class RunKey:
    model: str
    slug: str
    task: str
    seed: int
    task_dir: str

    def folder(self, out: Path) -> Path:
        return seed_dir(out, self.slug, self.seed) / self.task


def seed_dir(out: Path, slug: str, seed: int) -> Path:
    return out / "runs" / slug / f"seed{seed}"


# ---------------------------------------------------------------- inputs


def model_slug(model: str) -> str:
    """A folder name for a model spec, stable across runs of the eval."""
    from mlxport.evals.metrics import label

    text = re.sub(r"[^A-Za-z0-9._-]+", "-", label(model)).strip("-") or "model"
    if model.startswith("scripted:"):  # two scripts may share a name in different folders
        text += "-" + sha1(model.encode()).hexdigest()[:6]
    return text


def split_entrant(entrant: str) -> tuple[str, str]:
    """``model@tree`` -> (model, "tree"); a bare model spec searches linearly."""
    from mlxport.agent.config import SEARCHES

    model, sep, search = entrant.rpartition("@")
    return (model, search) if sep and search in SEARCHES else (entrant, "linear")


def normalise_model(model: str) -> str:
    """Scripted paths become absolute so a resumed run finds them from any directory."""
    model, search = split_entrant(model.strip())
    if model.startswith("scripted:"):
        model = "scripted:" + str(Path(model.removeprefix("scripted:")).expanduser().resolve())
    return model if search == "linear" else f"{model}@{search}"


def resolve_models(models: list[str]) -> list[str]:
    """The requested models, deduplicated, with ``rules`` (the non-LLM baseline) always first."""
    out = ["rules"]
    for m in models:
        m = normalise_model(m)
        if m and m not in out:
            out.append(m)
    return out


def resolve_tasks(suite: str | None = "core", tasks: list[str] | None = None) -> dict[str, str]:
    """Task name -> folder: ``tasks`` if given (suite names or task folders), else the suite."""
    from mlxport.tasks import load_task, suite_names

    if not tasks:
        if suite not in (None, "core"):
            raise UserError(f"unknown suite {suite!r}: use --suite core or name tasks with --tasks")
        tasks = suite_names()
    out: dict[str, str] = {}
    for t in tasks:
        task = load_task(t)
        if out.get(task.name, str(task.folder)) != str(task.folder):
            raise UserError(
                f"two tasks are named {task.name!r} ({out[task.name]}, {task.folder}): rename one"
            )
        out[task.name] = str(task.folder)
    return out


def base_config(overrides: dict[str, Any]) -> dict[str, Any]:
    """The run configuration shared by every run, as a dict, with ``backend=auto`` resolved to the
    backend of this machine (an eval's rows must share one device)."""
    from mlxport.agent.state import RunConfig
    from mlxport.backends import BackendUnavailable, get_backend, resolve

    bad = sorted(set(overrides) - ({f.name for f in fields(RunConfig)} - set(PER_RUN)))
    if bad:
        raise UserError(
            f"unknown run setting(s) {', '.join(bad)} for an eval: use budget keys like "
            f"max_iterations, max_tokens, max_cost, max_wall_seconds, backend"
        )
    config = RunConfig(**overrides).validate()
    try:
        config.backend = resolve(config.backend)
        get_backend(config.backend)  # an unavailable backend is said before any run starts
    except BackendUnavailable as e:
        raise UserError(str(e)) from e
    data = asdict(config)
    for k in PER_RUN:
        data.pop(k)
    if data.get("prices") is not None:
        data["prices"] = list(data["prices"])
    return data


# ---------------------------------------------------------------- manifest


def load_manifest(out: Path) -> dict[str, Any] | None:
    path = out / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def _merge_manifest(
    out: Path, models: list[str], tasks: dict[str, str], seeds: int, config: dict[str, Any]
) -> dict:
    old = load_manifest(out)
    if old is not None and old["config"] != config:
        changed = sorted(
            k for k in set(old["config"]) | set(config) if old["config"].get(k) != config.get(k)
        )
        raise UserError(
            f"{out} holds an eval run with other settings ({', '.join(changed)}): every model must "
            f"run under the same budget, so pass the same settings or a new --out"
        )
    old = old or {
        "models": [],
        "tasks": [],
        "task_dirs": {},
        "seeds": 0,
        "config": config,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    manifest = {
        **old,
        "models": list(dict.fromkeys([*old["models"], *models])),
        "tasks": list(dict.fromkeys([*old["tasks"], *tasks])),
        "task_dirs": {**old["task_dirs"], **tasks},
        "seeds": max(old["seeds"], seeds),
        "slugs": {m: model_slug(m) for m in dict.fromkeys([*old["models"], *models])},
    }
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / MANIFEST, json.dumps(manifest, indent=2))
    return manifest


# ---------------------------------------------------------------- running


def plan_runs(models: list[str], tasks: dict[str, str], seeds: int) -> list[RunKey]:
    """Seed-major, then task, then model: a partial eval has every model on the same tasks."""
    return [
        RunKey(m, model_slug(m), t, s, d)
        for s in range(seeds)
        for t, d in tasks.items()
        for m in models
    ]


def run_state(key: RunKey, out: Path) -> str:
    folder = key.folder(out)
    if (folder / "run.json").is_file():
        return "finished"
    return "interrupted" if sessions.latest(folder) is not None else "new"


def run_eval(
    models: list[str],
    tasks: list[str] | None,
    seeds: int,
    config_overrides: dict[str, Any],
    jobs: int,
    out: Path,
    on_progress: Progress | None = None,
) -> Path:
    """Run every model x task x seed under one configuration into ``out``; return ``out``.
    ``tasks``: suite task names or task folders (empty: the core suite).

    ``rules`` (the non-LLM baseline) is always included. ``on_progress(event)`` gets a dict per
    run with ``status`` in skipped/started/resumed/done/error, ``model``, ``task``, ``seed``,
    ``done``, ``total`` and, when done, the ``run`` record.
    """
    from mlxport.agent.models import check_model_spec
    from mlxport.agent.sessions import ensure_writable

    if seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {seeds}")
    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, got {jobs}")
    models = resolve_models(models)
    task_dirs = resolve_tasks(tasks=tasks)
    config = base_config(config_overrides)
    for m in models:
        check_model_spec(split_entrant(m)[0], config.get("base_url"))
    ensure_writable(out)
    _merge_manifest(out, models, task_dirs, seeds, config)
    keys = plan_runs(models, task_dirs, seeds)
    stop = threading.Event()
    counter = {"done": 0}
    lock = threading.Lock()

    def report(key: RunKey, status: str, **extra: Any) -> None:
        with lock:
            if status in ("skipped", "done", "error"):
                counter["done"] += 1
            event = {
                "status": status,
                "model": key.model,
                "task": key.task,
                "seed": key.seed,
                "done": counter["done"],
                "total": len(keys),
                **extra,
            }
        if on_progress:
            on_progress(event)

    todo = []
    for key in keys:
        if run_state(key, out) == "finished":
            report(key, "skipped", run=json.loads((key.folder(out) / "run.json").read_text()))
        else:
            todo.append(key)
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="mlxport-eval") as pool:
        futures: set[Future] = {
            pool.submit(_run_one, key, config, out, stop, report) for key in todo
        }
        try:
            while futures:
                finished, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                for f in finished:
                    f.result()
        except BaseException:
            stop.set()  # running ports stop at their next node and keep their checkpoints
            for f in futures:
                f.cancel()
            raise
    return out


def _run_one(
    key: RunKey,
    config: dict[str, Any],
    out: Path,
    stop: threading.Event,
    report: Callable[..., None],
) -> None:
    from mlxport.agent.port import run_port
    from mlxport.agent.state import RunConfig
    from mlxport.tasks import load_task

    if stop.is_set():
        return
    folder = key.folder(out)

    def on_update(node: str, update: dict[str, Any]) -> None:
        if stop.is_set():
            raise _Stopped

    saved = sessions.latest(folder)
    report(key, "resumed" if saved else "started")
    task = load_task(key.task_dir)
    cfg = RunConfig(
        **{
            **config,
            "prices": tuple(config["prices"]) if config.get("prices") else None,
            "model": split_entrant(key.model)[0],
            "search": split_entrant(key.model)[1],
            "seed": key.seed,
        }
    )
    where = seed_dir(out, key.slug, key.seed)
    try:
        run = _resume(task, saved, where, on_update) if saved else None
        if run is None:
            run = run_port(task, cfg, where, on_update=on_update)
    except _Stopped:
        return
    except (
        Exception
    ) as e:  # one broken run must not end the eval; it is retried on the next invocation
        write_text(
            folder / "error.json",
            json.dumps(
                {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}, indent=2
            ),
        )
        report(key, "error", error=f"{type(e).__name__}: {e}")
        return
    (folder / "error.json").unlink(missing_ok=True)
    report(key, "done", run=run)


def _resume(task, saved, where: Path, on_update) -> dict[str, Any] | None:
    """Continue an interrupted run; None if it died before its first checkpoint."""
    from mlxport.agent.port import NoCheckpoint, run_port

    try:
        return run_port(
            task, saved.config, where, session=saved.id, resume=True, on_update=on_update
        )
    except NoCheckpoint:
        return None


# ---------------------------------------------------------------- reading back


def load_runs(out: Path) -> list[dict[str, Any]]:
    """Every finished run record under ``out/runs``, with ``tool_calls`` counted from the
    transcript where run.json does not carry it."""
    runs = []
    for path in sorted((out / "runs").glob("*/seed*/*/run.json")):
        run = json.loads(path.read_text())
        search = (run.get("config") or {}).get("search", "linear")
        if search != "linear":  # the entrant: the same model with another search is another row
            run["model"] = f"{run['model']}@{search}"
        if "tool_calls" not in run:
            run["tool_calls"] = _count_tool_messages(path.parent / "transcript.jsonl")
        run["_folder"] = str(path.parent.relative_to(out))
        runs.append(run)
    return runs


def _count_tool_messages(path: Path) -> int:
    if not path.is_file():
        return 0
    return sum(
        json.loads(line).get("type") == "tool"
        for line in path.read_text().splitlines()
        if line.strip()
    )


def load_errors(out: Path) -> list[dict[str, Any]]:
    """Runs that raised and have not finished since (they are retried on the next ``eval``)."""
    errors = []
    for path in sorted((out / "runs").glob("*/seed*/*/error.json")):
        if not (path.parent / "run.json").is_file():
            errors.append(
                {"folder": str(path.parent.relative_to(out)), **json.loads(path.read_text())}
            )
    return errors
