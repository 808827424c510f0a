"""Task folders on disk and the suite: finding and loading a task, its expert ports, a
candidate file.

A task is a folder with ``task.toml``, ``kernel.cu``, ``reference.py`` and optional expert ports
in ``ports/`` (``msl.toml``, ``cuda.toml``). See docs/tasks.md.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from mlxport.errors import UserError, read_text
from mlxport.spec import KernelCandidate, KernelTask

SUITE_DIR = Path(__file__).parents[1] / "evals" / "tasks"


class TaskError(UserError):
    """A task folder is missing, malformed or inconsistent. The message names the fix."""


def suite_names() -> list[str]:
    return sorted(p.parent.name for p in SUITE_DIR.glob("*/task.toml"))


def find_task(name_or_dir: str | Path) -> Path:
    path = Path(name_or_dir)
    if path.is_dir():
        return path
    if (SUITE_DIR / str(name_or_dir)).is_dir():
        return SUITE_DIR / str(name_or_dir)
    raise TaskError(
        f"no task named {str(name_or_dir)!r}: pass a task folder or one of "
        f"{', '.join(suite_names())} (see `mlxport tasks list`)"
    )


def load_task(name_or_dir: str | Path) -> KernelTask:
    folder = find_task(name_or_dir)
    if not (folder / "task.toml").is_file():
        raise TaskError(
            f"{folder} has no task.toml: every task folder needs one (`mlxport tasks new` writes "
            f"it)"
        )
    try:
        data = tomllib.loads(read_text(folder / "task.toml", "task file"))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{folder / 'task.toml'} is not valid TOML ({e}): fix the syntax") from e
    if "original" in data and "reference" not in data and not (folder / "reference.py").is_file():
        data["reference"] = None  # no reference.py: the original kernel is the golden
    try:
        task = KernelTask.model_validate(data)
    except ValidationError as e:
        raise TaskError(f"{folder / 'task.toml'} is invalid: {_first_error(e)}") from e
    task.folder = folder.resolve()
    if not (folder / task.source).is_file():
        raise TaskError(f"{folder} has no {task.source}, which task.toml names as its CUDA source")
    named = [
        r for r in (task.reference, *(vars(task.baselines).values() if task.baselines else ())) if r
    ]
    if (
        any(r.split(":", 1)[0] == "reference" for r in named)
        and not (folder / "reference.py").is_file()
    ):
        raise TaskError(
            f"{folder} has no reference.py, which task.toml names as its reference or a baseline: "
            f"add "
            f"it, or drop them to check against the original kernel"
        )
    return task


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def expert_ports(task: KernelTask) -> dict[str, KernelCandidate]:
    """The hand-written ports shipped with a task, keyed by language."""
    out = {}
    for lang in ("msl", "cuda"):
        path = task.folder / "ports" / f"{lang}.toml"
        if path.is_file():
            out[lang] = load_candidate(path)
    return out


def load_candidate(path: str | Path) -> KernelCandidate:
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"no candidate file {path}: pass the path of a candidate .toml")
    try:
        return KernelCandidate.model_validate(tomllib.loads(read_text(path, "candidate")))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path} is not valid TOML ({e}): fix the syntax") from e
    except ValidationError as e:
        raise TaskError(f"{path} is not a valid candidate: {_first_error(e)}") from e


# The suite tasks whose speed is bounded by memory traffic (the rules policy's speed target is over
# these).
MEMORY_BOUND = (
    "rmsnorm",
    "softmax_rows",
    "layernorm",
    "rope",
    "gelu_tanh",
    "vector_add",
    "transpose_tiled",
    "cumsum",
)
