"""A batch's jobs: from a manifest (``[[port]]`` entries naming a task folder, a suite task or a .cu
file with the flags of ``mlxport port FILE.cu``), a folder of task folders, one task folder, or
``suite``; each the task, the model and the RunConfig fields it runs with."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlxport.errors import UserError

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
