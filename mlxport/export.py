"""``mlxport export``: a verified port as a Python package a user can ``pip install`` (the op with
its fallback, its parity test, the task it was verified on, and a header naming the original
kernel's source and license), or as a repository in the Hugging Face ``kernels`` layout.

The ``kernels`` library documents no MLX layout (its backends are Torch's). What it documents for
a kernel in pure Python is a Torch "noarch" kernel: ``build.toml`` with ``[torch-noarch]``, the
Python under ``torch-ext/<name>/``, and the built variant ``build/torch-<backend>/`` with
``metadata.json``, ``__init__.py`` and a folder named as the repository for older loaders. The
export follows that for the ``metal`` backend; the card says where an MLX op departs from it
(it imports mlx, which the library's dependency list does not name, and the library picks the
``torch-metal`` variant only where torch sees an MPS device)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from mlxport.errors import UserError, read_text
from mlxport.op import keep_small_golden
from mlxport.redaction import write_text

OP_FILES = (
    "kernel.py",
    "test_kernel.py",
    "candidate.toml",
    "op.toml",
    "mlxport_expr.py",
    "golden.npz",
    "reference.py",
)
_LICENSE = re.compile(
    r"(SPDX-License-Identifier:\s*\S+|(?:Licensed under|License:|Copyright)[^\n]{0,120})", re.I
)

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{description}"
requires-python = ">=3.11"
# Linux wheels of mlx ship no backend: mlx[cpu] brings libmlx (mlx[cuda13] for an NVIDIA GPU).
dependencies = [
  "mlx>=0.32; sys_platform == 'darwin'",
  "mlx[cpu]>=0.32; sys_platform == 'linux'",
  "numpy>=1.26",
]

[project.optional-dependencies]
test = ["pytest>=8"]

[tool.setuptools]
packages = ["{package}"]
include-package-data = true

[tool.setuptools.package-data]
"{package}" = ["*.toml", "*.npz", "task/**/*", "task/*"]
"""

INIT = '''"""{header}"""

from {dot}kernel import backend, {func}

__all__ = ["backend", "{func}"]
'''


LAYOUTS = ("pip", "kernels")


def export_port(folder: Path, out: Path, layout: str = "pip") -> Path:
    """Write the port in ``folder`` (an ``mlxport port`` output) under ``out`` as a pip package or,
    with ``layout="kernels"``, as a Hugging Face kernels repository."""
    if layout not in LAYOUTS:
        raise UserError(f"unknown layout {layout!r}: pass --layout pip or --layout kernels")
    run_file = folder / "run.json"
    if not run_file.is_file():
        raise UserError(
            f"{folder} holds no port (no run.json): pass the OUT/<task> folder of `mlxport port`"
        )
    run = json.loads(read_text(run_file, "run record"))
    if not run["result"]["verified"] or not (folder / "kernel.py").is_file():
        raise UserError(
            f"the port in {folder} has no verified kernel, so there is nothing to ship: "
            f"{run['result'].get('why_not') or 'see report.md'}"
        )
    task = run["task"]
    name = task.replace("_", "-")
    target = out / (f"mlxport-{name}" if layout == "pip" else name)
    if target.exists():
        raise UserError(f"{target} exists: remove it or pass another --out")
    header = _header(folder, run)
    (_pip if layout == "pip" else _kernels)(folder, target, run, header)
    return target


def _package(folder: Path, pkg: Path, task: str, header: str) -> None:
    """The op's files as one importable package folder."""
    pkg.mkdir(parents=True)
    for name in OP_FILES:
        if (folder / name).is_file():
            shutil.copy(folder / name, pkg / name)
    shutil.copytree(folder / "task", pkg / "task", ignore=shutil.ignore_patterns("__pycache__"))
    keep_small_golden(pkg)
    write_text(pkg / "__init__.py", INIT.format(header=header, dot=".", func=task))


def _pip(folder: Path, target: Path, run: dict, header: str) -> None:
    task = run["task"]
    package = re.sub(r"\W", "_", task).lower()
    _package(folder, target / package, task, header)
    description = f"{task}: an MLX kernel ported from CUDA by mlxport ({run['result']['label']})"
    write_text(
        target / "pyproject.toml",
        PYPROJECT.format(
            dist=target.name, description=description.replace('"', "'"), package=package
        ),
    )
    write_text(
        target / "README.md",
        f"# {target.name}\n\n{header}\n\n```python\nfrom {package} import {task}, "
        f"backend\n```\n\n`backend` says which path runs (metal, cuda, sim or reference).\n"
        f"Test: `pip install '.[test]' && pytest --pyargs {package}.test_kernel` (the op at sizes "
        f"the port was never shown, against golden outputs stored with it; no mlxport needed, "
        f"except where no GPU and no reference runs the op: then the test says how to get "
        f"mlxport's simulator).\n",
    )


BUILD_TOML = """[general]
name = "{package}"
version = 1
edition = 5
license = "{license}"
backends = ["metal"]

[torch-noarch]
"""

CARD = """---
library_name: kernels
license: {license}
---

# {name}

{header}

An MLX op (`mx.fast.metal_kernel`), not a Torch one: it needs `mlx` (which the `kernels`
library's `python-depends` does not list) and registers no `torch.ops`. The library loads
`build/torch-metal` only where torch sees an MPS device; elsewhere import the variant folder:

```python
from kernels import get_kernel  # on Apple silicon with torch installed
op = get_kernel("<user>/{name}", version=1)
y = op.{task}(...)  # mlx arrays in, mlx arrays out; op.backend says which path runs
```

Test: `pytest torch-ext/{package}/test_kernel.py`.
"""


def _kernels(folder: Path, target: Path, run: dict, header: str) -> None:
    task = run["task"]
    package = target.name.replace("-", "_")
    spdx = _spdx(header)
    target.mkdir(parents=True)
    write_text(target / "build.toml", BUILD_TOML.format(package=package, license=spdx))
    write_text(
        target / "CARD.md",
        CARD.format(
            license=spdx.lower(), name=target.name, header=header, task=task, package=package
        ),
    )
    _package(folder, target / "torch-ext" / package, task, header)
    variant = target / "build" / "torch-metal"
    _package(folder, variant, task, header)
    _package(folder, variant / package, task, header)  # the folder older loaders import
    files = {
        p.relative_to(variant).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(variant.rglob("*"))
        if p.is_file()
    }
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    metadata = {
        "id": f"_{package}_metal_{digest[:7]}",
        "name": package,
        "version": 1,
        "license": spdx,
        "backend": {"type": "metal"},
        "python-depends": [],
        "digest": {"algorithm": "sha256", "files": files},
    }
    write_text(variant / "metadata.json", json.dumps(metadata, indent=2) + "\n")


def _spdx(header: str) -> str:
    """The SPDX identifier the header quotes, else "other" (the card and the header say why)."""
    m = re.search(r"SPDX-License-Identifier:\s*([\w.+-]+)", header)
    return m.group(1) if m else "other"


def _header(folder: Path, run: dict) -> str:
    """Where the kernel came from and under which license, as far as its source says."""
    task_dir = folder / "task"
    source = "kernel.cu"
    try:
        import tomllib

        spec = tomllib.loads(read_text(task_dir / "task.toml", "task"))
        source, kernel = spec.get("source", source), spec["kernel"]
    except (OSError, KeyError, UserError):
        kernel = run["task"]
    text = read_text(task_dir / source, "CUDA source") if (task_dir / source).is_file() else ""
    found = _LICENSE.findall("\n".join(text.splitlines()[:40]))
    license_line = (
        "License of the original, as its source states: "
        + "; ".join(dict.fromkeys(f.strip() for f in found))
        if found
        else f"The original's license is not stated in {source}: check it before you publish."
    )
    notes = task_dir / "NOTES.md"
    origin = ""
    if notes.is_file() and (m := re.search(r"from (\S+\.cu\w*)", read_text(notes, "notes"))):
        origin = f" (made from {m[1]})"
    return (
        f"{run['task']}: the CUDA kernel `{kernel}` of {source}{origin}, ported to MLX by mlxport "
        f"with "
        f"{run['model']}; {run['result']['label']}.\n\n{license_line}"
    )
