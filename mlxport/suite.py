"""Task folders on disk: find, load and validate them, and import their Python functions.

A task is a folder with ``task.toml``, ``kernel.cu``, ``reference.py`` and optional expert
ports in ``ports/`` (``msl.toml``, ``cuda.toml``). See docs/tasks.md.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from mlxport.errors import UserError
from mlxport.spec import KernelCandidate, KernelTask

SUITE_DIR = Path(__file__).parent / "evals" / "tasks"
REQUIRED = ("task.toml", "kernel.cu", "reference.py")


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
    raise TaskError(f"no task named {str(name_or_dir)!r}: pass a task folder or one of "
                    f"{', '.join(suite_names())} (see `mlxport tasks list`)")


def load_task(name_or_dir: str | Path) -> KernelTask:
    folder = find_task(name_or_dir)
    for f in REQUIRED:
        if not (folder / f).is_file():
            raise TaskError(f"{folder} has no {f}: every task folder needs {', '.join(REQUIRED)}")
    try:
        data = tomllib.loads((folder / "task.toml").read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{folder / 'task.toml'} is not valid TOML ({e}): fix the syntax") from e
    try:
        task = KernelTask.model_validate(data)
    except ValidationError as e:
        raise TaskError(f"{folder / 'task.toml'} is invalid: {_first_error(e)}") from e
    task.folder = folder.resolve()
    if not (folder / task.source).is_file():
        raise TaskError(f"{folder} has no {task.source}, which task.toml names as its CUDA source")
    return task


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def resolve(task: KernelTask, ref: str) -> Callable:
    """Import ``module:function`` where ``module`` is a file in the task folder or an importable module."""
    if ":" not in ref:
        raise TaskError(f"{ref!r} in {task.name} must look like module:function")
    mod_name, fn_name = ref.split(":", 1)
    module = _import(task, mod_name)
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise TaskError(f"{mod_name}.py of task {task.name} has no function {fn_name!r}")
    return fn


def baseline(task: KernelTask, ref: str, params: dict[str, Any]) -> Callable:
    """A baseline (``module:function``) as a function of an input dict, with the case's params
    bound, as the benchmark calls it."""
    fn = resolve(task, ref)
    order = [t.name for t in task.inputs]
    return lambda inputs: fn(*[inputs[n] for n in order], **params)


def _import(task: KernelTask, mod_name: str) -> ModuleType:
    path = (task.folder / f"{mod_name}.py") if task.folder else None
    if path is None or not path.is_file():
        try:
            return importlib.import_module(mod_name)
        except Exception as e:
            raise TaskError(f"cannot import {mod_name!r} for task {task.name}: {e}") from e
    key = f"mlxport_task_{task.name}_{mod_name}_{abs(hash(str(path)))}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise TaskError(f"{path} does not import ({type(e).__name__}: {e}): fix the reference module") from e
    sys.modules[key] = module
    return module


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
        return KernelCandidate.model_validate(tomllib.loads(path.read_text()))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path} is not valid TOML ({e}): fix the syntax") from e
    except ValidationError as e:
        raise TaskError(f"{path} is not a valid candidate: {_first_error(e)}") from e
