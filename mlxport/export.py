"""``mlxport export``: a verified port as a Python package a user can ``pip install``: the op with
its fallback, its parity test, the task it was verified on, and a header naming the original
kernel's source and license."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from mlxport.errors import UserError, read_text
from mlxport.redaction import write_text

OP_FILES = ("kernel.py", "test_kernel.py", "candidate.toml", "reference.py")
_LICENSE = re.compile(r"(SPDX-License-Identifier:\s*\S+|(?:Licensed under|License:|Copyright)[^\n]{0,120})", re.I)

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{description}"
requires-python = ">=3.10"
dependencies = ["mlx>=0.32"]

[project.optional-dependencies]
test = ["pytest", "mlxport"]

[tool.setuptools]
packages = ["{package}"]
include-package-data = true

[tool.setuptools.package-data]
"{package}" = ["*.toml", "task/**/*", "task/*"]
"""

INIT = '''"""{header}"""

from {dot}kernel import backend, {func}

__all__ = ["backend", "{func}"]
'''


def export_port(folder: Path, out: Path) -> Path:
    """Write the package of the port in ``folder`` (an ``mlxport port`` output) under ``out``."""
    run_file = folder / "run.json"
    if not run_file.is_file():
        raise UserError(f"{folder} holds no port (no run.json): pass the OUT/<task> folder of `mlxport port`")
    run = json.loads(read_text(run_file, "run record"))
    if not run["result"]["verified"] or not (folder / "kernel.py").is_file():
        raise UserError(f"the port in {folder} has no verified kernel, so there is nothing to ship: "
                        f"{run['result'].get('why_not') or 'see report.md'}")
    task, package = run["task"], re.sub(r"\W", "_", run["task"]).lower()
    target = out / f"mlxport-{task.replace('_', '-')}"
    if target.exists():
        raise UserError(f"{target} exists: remove it or pass another --out")
    pkg = target / package
    pkg.mkdir(parents=True)
    for name in OP_FILES:
        if (folder / name).is_file():
            shutil.copy(folder / name, pkg / name)
    shutil.copytree(folder / "task", pkg / "task", ignore=shutil.ignore_patterns("__pycache__"))
    header = _header(folder, run)
    write_text(pkg / "__init__.py", INIT.format(header=header, dot=".", func=task))
    description = f"{task}: an MLX kernel ported from CUDA by mlxport ({run['result']['label']})"
    write_text(target / "pyproject.toml", PYPROJECT.format(dist=target.name, description=description.replace('"', "'"),
                                                           package=package))
    write_text(target / "README.md", f"# {target.name}\n\n{header}\n\n```python\nfrom {package} import {task}, "
                                     f"backend\n```\n\n`backend` says which path runs (metal, cuda, sim or reference).\n"
                                     f"Test: `pip install '.[test]' && pytest {package}/test_kernel.py`.\n")
    return target


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
    license_line = ("License of the original, as its source states: " + "; ".join(dict.fromkeys(f.strip() for f in found))
                    if found else f"The original's license is not stated in {source}: check it before you publish.")
    notes = task_dir / "NOTES.md"
    origin = ""
    if notes.is_file() and (m := re.search(r"from (\S+\.cu\w*)", read_text(notes, "notes"))):
        origin = f" (made from {m[1]})"
    return (f"{run['task']}: the CUDA kernel `{kernel}` of {source}{origin}, ported to MLX by mlxport with "
            f"{run['model']}; {run['result']['label']}.\n\n{license_line}")
