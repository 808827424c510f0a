"""Making a task from a user's input: one request (`tasks.request.TaskRequest`) from every entry
point (`mlxport port FILE.cu`, `mlxport tasks new --from`, a batch manifest's ``[[port]]`` entry,
MCP's ``create_task``) and one function, `make_task`, that writes the task folder.

With a reference (`reference.from_reference`) the user's MLX function is the golden; without one
(`cuda.from_cuda`) the original kernel, run on the CPU executor, is. This room reads CUDA and
runs the executor, so it sits above `translate/`, below `tools/`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from mlxport.spec.toml import dumps
from mlxport.tasks.make.cuda import INCLUDE, Built, from_cuda
from mlxport.tasks.make.reference import from_reference
from mlxport.tasks.request import TaskRequest, task_name_for


def make_task(
    request: TaskRequest,
    parent: Path,
    *,
    on_note: Callable[[str], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Path:
    """The task folder for ``request`` under ``parent`` (made afresh); ``on_note`` hears what
    making it found (headers inlined, outputs written in part, held-out sizes left out),
    ``on_progress`` each case the original starts running at."""
    if request.reference:
        return from_reference(request, parent / (request.name or task_name_for(request.source)))
    built = from_cuda(request, on_progress=on_progress)
    for note in built.notes if on_note else ():
        on_note(note)
    return write_task(built, parent / built.task["name"], request.source)


def write_task(built: Built, folder: Path, source: Path) -> Path:
    """task.toml, the kernel's file and the headers it reads in ``folder`` (made afresh)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, file in built.headers.items():
        (folder / INCLUDE / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, folder / INCLUDE / rel)
    (folder / "kernel.cu").write_text(built.source or source.read_text())
    (folder / "task.toml").write_text(dumps(built.task))
    if built.notes:
        (folder / "NOTES.md").write_text(
            "# Notes from making this task\n\n" + "".join(f"- {n}\n" for n in built.notes)
        )
    return folder


__all__ = ["Built", "TaskRequest", "from_cuda", "make_task", "write_task"]
