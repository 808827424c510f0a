"""``mlxport chat``: port a kernel interactively (see agent/chat/), or resume a chat session."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o
from mlxport.errors import UserError

app = o.command_app("Port a kernel interactively: watch each step, steer, approve candidates.")


@app.command()
def chat(
    kernel: Annotated[
        Path | None, typer.Argument(help="The .cu file, inside a task folder.")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Task name or folder.")] = None,
    session: Annotated[str | None, typer.Option(help="Resume this session id.")] = None,
    model: o.Model = "rules",
    base_url: o.BaseUrl = None,
    backend: o.Backend = "auto",
    budget: o.Budget = None,
    out_dir: o.Out = Path("mlxport-out"),
    seed: o.Seed = 0,
    search: o.Search = "linear",
    chip: o.Chip = "M3 Max",
) -> None:
    """Port a kernel interactively: watch each step, steer, approve candidates; resume with
    --session."""
    from mlxport.agent.chat import chat as run_chat
    from mlxport.agent.config import RunConfig

    if session:
        run_chat(None, RunConfig(), out_dir, session=session)
        return
    config = o.run_config(
        model=model,
        base_url=base_url,
        backend=backend,
        budget=budget,
        seed=seed,
        search=search,
        chip=chip,
    )
    run_chat(_task(kernel, task), config, out_dir)


def _task(kernel: Path | None, task: str | None):
    """As ``mlxport port``: --task NAME or folder, or a kernel.cu in a task folder; None asks."""
    from mlxport.tasks import load_task

    if task:
        return load_task(task)
    if kernel is None:
        return None
    if not kernel.is_file():
        raise UserError(f"no such file {kernel}: pass the path of a .cu file")
    if not (kernel.parent / "task.toml").is_file():
        raise UserError(
            f"{kernel} is not in a task folder: pass --task NAME or DIR (make one with "
            f"`mlxport tasks new`), or describe it with `mlxport port --reference ...`"
        )
    return load_task(kernel.parent)
