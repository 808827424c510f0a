"""A task from a .cu file checked against an MLX function of the user's (``--reference``), with
the arrays described by ``--inputs`` and ``--outputs``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from mlxport.spec.toml import dumps
from mlxport.tasks.folder import TaskError
from mlxport.tasks.request import TaskRequest
from mlxport.tasks.sizes import TUNING, apart, odd_sizes

_TENSOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(\w+))?\s*\[([^\]]*)\]\s*$")
TOLERANCE = {"float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}


def from_reference(request: TaskRequest, folder: Path) -> Path:
    """Write the task folder: the kernel, the reference module and task.toml."""
    cu, reference = request.source, request.reference or ""
    if not cu.is_file():
        raise TaskError(f"no CUDA file {cu}: pass the path of a .cu file")
    if ":" not in reference:
        raise TaskError(f"--reference {reference!r} must look like module_or_file.py:function")
    if not (request.inputs and request.outputs):
        raise TaskError("--reference needs --inputs and --outputs to describe the kernel's arrays")
    inputs = _tensors(request.inputs, "--inputs")
    outputs = _tensors(request.outputs, "--outputs")
    module, fn = reference.rsplit(":", 1)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(cu, folder / "kernel.cu")
    _reference_module(module, fn, folder)
    dtypes = request.dtypes or ["float32"]
    task = {
        "name": folder.name,
        "description": f"Port of {cu.name}",
        "kernel": request.kernel or _only_kernel(cu),
        "reference": f"reference:{fn}",
        "dtypes": dtypes,
        "baselines": {"native": f"reference:{fn}", "naive": f"reference:{fn}"},
        "inputs": inputs,
        "outputs": outputs,
        "tolerance": {
            d: dict(zip(("atol", "rtol"), TOLERANCE.get(d, (1e-4, 1e-4)), strict=True))
            for d in dtypes
        },
        "cost": {"bytes": f"{' * '.join(outputs[0]['shape']) or '1'} * itemsize * 2"},
        "cases": {"visible": request.cases, "heldout": request.heldout or _heldout(request.cases)},
    }
    (folder / "task.toml").write_text(dumps(task))
    return folder


def _heldout(cases: list[dict]) -> list[dict]:
    """Held-out cases where the user gave none: every size at least twice its largest visible
    value, and every size odd (`odd_sizes`), sizes bound to different names at different values
    (sizes are the integers the cases bind, block and tile sizes aside)."""
    base = cases[0]
    free = [
        k
        for k, v in base.items()
        if isinstance(v, int) and not isinstance(v, bool) and v >= 2 and not TUNING.search(k)
    ]
    if not free:
        return []
    largest = {k: max(c.get(k, base[k]) for c in cases) for k in free}
    twice = apart({k: 2 * largest[k] for k in free}, largest)
    return [{**base, **twice}, {**base, **odd_sizes(base, free)}]


def _reference_module(module: str, fn: str, folder: Path) -> None:
    """reference.py in the folder: a copy of the user's file, or an import of their module."""
    path = Path(module)
    if path.suffix == ".py":
        if not path.is_file():
            raise TaskError(f"no reference file {path}")
        shutil.copy(path, folder / "reference.py")
    else:
        (folder / "reference.py").write_text(f"from {module} import {fn}  # noqa: F401\n")


def _only_kernel(cu: Path) -> str | None:
    from mlxport.translate.reading.reader import read_cuda

    kernels = read_cuda(cu.read_text(), name=cu.name).kernels
    return next((k.name for k in kernels if k.kind == "global"), None)


def _tensors(spec: str, flag: str) -> list[dict]:
    out = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        m = _TENSOR.match(part)
        if not m:
            raise TaskError(
                f"{flag} entry {part!r} must look like name[dims] or name:dtype[dims], e.g. x[R,C]"
            )
        dims = [d.strip() for d in m.group(3).split(",") if d.strip()]
        out.append({"name": m.group(1), "dtype": m.group(2) or "T", "shape": dims})
    if not out:
        raise TaskError(f"{flag} needs at least one tensor, e.g. 'x[R,C];w[C]'")
    return out
