"""Starting or resuming a chat session: the person ports a kernel on the same graph as ``mlxport
port``, watching each step, steering and approving (agent/chat/session.py runs it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from langchain_core.language_models.chat_models import BaseChatModel
from rich.console import Console
from rich.markup import escape

from mlxport.agent import sessions
from mlxport.agent.config import RunConfig
from mlxport.agent.providers import check_model_spec
from mlxport.backends import get_backend
from mlxport.errors import UserError
from mlxport.spec import KernelTask
from mlxport.tasks import load_task, suite_names


def chat(
    task: KernelTask | None,
    config: RunConfig,
    out: Path,
    *,
    session: str | None = None,
    model: BaseChatModel | None = None,
    console: Console | None = None,
    read: Callable[[], str] = input,
) -> str:
    """Run a chat session and return its id. With ``session``, resume it (``task`` and ``config``
    are then taken from the saved session); with no task, ask which bundled task to port.
    ``model`` overrides ``config.model`` (tests); ``read`` returns the person's next line."""
    from mlxport.agent.chat.session import ChatSession
    from mlxport.agent.chat.view import View, model_label
    from mlxport.agent.graph import build_graph

    console = console or Console(highlight=False)
    if session:
        saved = sessions.find(out, session)
        task, config = load_task(saved.task_dir), replace(saved.config, approve=True)
    else:
        task = task or pick_task(console, read)
        config = replace(config, approve=True).validate()
        if model is None:
            check_model_spec(config.model, config.base_url)
        get_backend(config.backend)  # an unavailable backend is said before anything is saved
        sessions.ensure_writable(out / task.name)
        saved = sessions.save(out / task.name, sessions.new_id(task.name), task.folder, config)
    hint = f"mlxport chat --session {saved.id} --out {out}"
    label = (
        model_label(config.model) if model is None else f"{type(model).__name__} (given in code)"
    )
    console.print(
        f"[bold]mlxport chat[/bold]  task [bold]{task.name}[/bold] · {escape(label)} "
        f"· backend {config.backend}",
        highlight=False,
    )
    console.print(f"session {saved.id} (saved in {saved.folder})", highlight=False, soft_wrap=True)
    console.print(
        "the rules baseline reads no guidance · /help · /quit"
        if config.model == "rules" and model is None
        else "type guidance any time · /help · /quit",
        style="dim",
    )
    saver, conn = sessions.checkpointer(saved.folder)
    try:
        graph = build_graph(model=model, checkpointer=saver)
        chat_session = ChatSession(graph, task, config, saved.folder, saved.id, View(console), hint)
        resume = bool(chat_session.snapshot().values)
        if resume:
            chat_session.view.recap(chat_session.state())
        chat_session.run(read, resume=resume)
    finally:
        conn.close()
    return saved.id


def pick_task(console: Console, read: Callable[[], str]) -> KernelTask:
    names = suite_names()
    console.print("[bold]bundled tasks[/bold]", highlight=False)
    for i, name in enumerate(names, 1):
        console.print(
            f"{i:>3}  {name:<20} {escape(load_task(name).description)}",
            highlight=False,
            overflow="ellipsis",
            no_wrap=True,
            crop=True,
        )
    while True:
        console.print("which task? (number or name) ", end="", highlight=False)
        try:
            choice = read().strip()
        except EOFError as e:
            raise UserError("no task chosen: pass KERNEL.cu or --task NAME") from e
        if choice.isdigit() and 1 <= int(choice) <= len(names):
            return load_task(names[int(choice) - 1])
        if choice in names:
            return load_task(choice)
        console.print(f"[red]no task {escape(choice)!r}[/red]", highlight=False)
