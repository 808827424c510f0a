"""Tasks: task folders on disk and the suite, fresh inputs for a case, and calls of a task's
references and baselines.

A task is a folder with ``task.toml``, ``kernel.cu``, ``reference.py`` and optional expert
ports in ``ports/`` (``msl.toml``, ``cuda.toml``). See docs/tasks.md. This module sits beside
``spec``: backends, verification and everything above may import it.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx.core as mx
import numpy as np
from pydantic import ValidationError

from mlxport.errors import UserError, read_text
from mlxport.expr import ITEMSIZE, ArrayInfo, Dtype
from mlxport.spec import KernelCandidate, KernelTask, TensorSpec

SUITE_DIR = Path(__file__).parent / "evals" / "tasks"


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
            f"{folder} has no task.toml: every task folder needs one (`mlxport tasks new` writes it)"
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
            f"{folder} has no reference.py, which task.toml names as its reference or a baseline: add "
            f"it, or drop them to check against the original kernel"
        )
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
        raise TaskError(
            f"{path} does not import ({type(e).__name__}: {e}): fix the reference module"
        ) from e
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
        return KernelCandidate.model_validate(tomllib.loads(read_text(path, "candidate")))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path} is not valid TOML ({e}): fix the syntax") from e
    except ValidationError as e:
        raise TaskError(f"{path} is not a valid candidate: {_first_error(e)}") from e


# ---------------------------------------------------------------- inputs, references, baselines

# MLX evaluation is not safe from several threads at once (ml-explore/mlx#2067): batch and eval
# run ports in threads, so every evaluation in this process goes through this lock.
MLX_LOCK = threading.RLock()

MX_DTYPES = {
    "float32": mx.float32,
    "float16": mx.float16,
    "bfloat16": mx.bfloat16,
    "int32": mx.int32,
    "uint32": mx.uint32,
    "int64": mx.int64,
    "uint64": mx.uint64,
    "int8": mx.int8,
    "uint8": mx.uint8,
    "int16": mx.int16,
    "uint16": mx.uint16,
    "bool": mx.bool_,
}
DTYPE_NAMES = {v: k for k, v in MX_DTYPES.items()}


def dtype_name(d: mx.Dtype) -> str:
    return DTYPE_NAMES[d]


def make_inputs(
    task: KernelTask, case: dict[str, Any], dtype: str, seed: int
) -> dict[str, mx.array]:
    """Input arrays for one case and dtype, drawn with numpy from ``seed`` (reproducible anywhere)."""
    rng = np.random.default_rng(seed)
    shapes = task.shapes(case, dtype)
    _check_memory(task, case, dtype, shapes)
    return {t.name: _draw(t, shapes[t.name], t.resolve_dtype(dtype), rng) for t in task.inputs}


def _check_memory(
    task: KernelTask, case: dict[str, Any], dtype: str, shapes: dict[str, tuple[int, ...]]
) -> None:
    """Refuse, before allocating, a case whose arrays cannot fit in this machine's memory (inputs
    are drawn in float64 first)."""

    def nbytes(spec: TensorSpec, extra: int = 0) -> int:
        return math.prod(shapes[spec.name]) * (ITEMSIZE[spec.resolve_dtype(dtype)] + extra)

    need = sum(nbytes(t, 8) for t in task.inputs) + sum(nbytes(t) for t in task.outputs)
    have = physical_memory()
    if have and need > have:
        raise TaskError(
            f"case {task.case_label(case)} needs {_size(need)} for its arrays at {dtype}; this machine "
            f"has {_size(have)} of memory: make the case smaller"
        )


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TB"


def _draw(
    spec: TensorSpec, shape: tuple[int, ...], dtype: str, rng: np.random.Generator
) -> mx.array:
    init = spec.init
    match init.kind:
        case "normal":
            a = rng.normal(init.mean, init.std, shape)
        case "uniform":
            a = rng.uniform(init.low, init.high, shape)
        case "randint":
            a = rng.integers(int(init.low), int(init.high), shape)
        case "arange":
            a = np.arange(int(np.prod(shape))).reshape(shape) + init.low
        case "full":
            a = np.full(shape, init.value)
    if dtype.startswith("float") or dtype == "bfloat16":
        return mx.array(a.astype(np.float32)).astype(MX_DTYPES[dtype])
    return mx.array(a).astype(MX_DTYPES[dtype])


# The suite tasks whose speed is bounded by memory traffic (the rules policy's speed target is over these).
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


def case_infos(task: KernelTask, case: dict[str, Any], dtype: str) -> dict[str, Any]:
    """``arg_infos`` at a case and dtype, without making the inputs."""
    shapes = task.shapes(case, dtype)
    infos: dict[str, Any] = {
        t.name: ArrayInfo(shapes[t.name], Dtype(t.resolve_dtype(dtype))) for t in task.inputs
    }
    infos.update(task.param_values(case))
    return infos


def arg_infos(
    task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]
) -> dict[str, Any]:
    """What candidate expressions see: ArrayInfo per input, and each param's value."""
    infos: dict[str, Any] = {
        n: ArrayInfo(tuple(a.shape), Dtype(dtype_name(a.dtype))) for n, a in inputs.items()
    }
    infos.update(task.param_values(case))
    return infos


def call(
    ref: str, task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]
) -> list[mx.array]:
    """Call a reference or baseline (``module:function``): inputs positionally in task order,
    params by keyword."""
    fn = resolve(task, ref)
    args = [inputs[t.name] for t in task.inputs]
    try:
        out = fn(*args, **task.param_values(case))
        outs = list(out) if isinstance(out, tuple | list) else [out]
        wrong = [o for o in outs if not isinstance(o, mx.array)]
        if wrong:
            raise TaskError(
                f"{ref} of task {task.name} returned {type(wrong[0]).__name__}, not mx.array: return the "
                f"outputs as MLX arrays (a tuple for several)"
            )
        mx.eval(*outs)
    except TaskError:
        raise
    except (
        Exception,
        SystemExit,
    ) as e:  # a reference's sys.exit() is its bug, not the end of mlxport
        raise TaskError(f"{ref} of task {task.name} raised {type(e).__name__}: {e}") from e
    if len(outs) != len(task.outputs):
        raise TaskError(
            f"{ref} returned {len(outs)} output(s); task {task.name} declares {len(task.outputs)}"
        )
    return outs


def golden(task: KernelTask, inputs: dict[str, mx.array], case: dict[str, Any]) -> list[mx.array]:
    """The reference evaluated in float32 on the same (already rounded) inputs: the truth that
    every dtype is compared with, so a half-precision reference's own rounding is not the bar."""
    up = {
        n: a.astype(mx.float32) if a.dtype in (mx.float16, mx.bfloat16) else a
        for n, a in inputs.items()
    }
    return call(task.reference, task, up, case)


def to_numpy(a: mx.array) -> np.ndarray:
    """float64 copy for comparisons (bfloat16 has no numpy dtype)."""
    if a.dtype == mx.bfloat16:
        a = a.astype(mx.float32)
    return np.array(a).astype(np.float64)
