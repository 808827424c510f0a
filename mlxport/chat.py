"""``mlxport chat``: port a kernel interactively on the same graph as ``mlxport port``.

The model's tokens and each tool step stream to the terminal; typed guidance and questions reach
the model before its next call; each new best candidate waits for the person's y/n; sessions are
checkpointed in ``OUT/<task>/checkpoints.sqlite`` and resume with ``--session ID``.
Run as ``python -m mlxport.chat`` or through the CLI.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from mlxport.errors import UserError
from mlxport.spec import KernelTask

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

INDEX = "chat-sessions.json"  # every chat session started in a task folder: id -> {config, task_dir}


def chat(task: KernelTask | None, config: Any, out: Path, *, session: str | None = None,
         model: BaseChatModel | None = None, console: Console | None = None,
         read: Callable[[], str] = input) -> str:
    """Run a chat session and return its id. With ``session``, resume it (``task`` and ``config``
    are then taken from the saved session); with no task, ask which bundled task to port.
    ``model`` overrides ``config.model`` (tests); ``read`` returns the person's next line."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from mlxport.agent.chat_session import ChatSession
    from mlxport.agent.chat_view import View, model_label
    from mlxport.agent.graph import build_graph

    console = console or Console(highlight=False)
    if session:
        task, config, folder = open_session(out, session)
    else:
        task = task or pick_task(console, read)
        config, folder, session = new_session(task, config, out, model)
    hint = f"mlxport chat --session {session} --out {out}"
    label = model_label(config.model) if model is None else f"{type(model).__name__} (given in code)"
    console.print(f"[bold]mlxport chat[/bold]  task [bold]{task.name}[/bold] · {escape(label)} "
                  f"· backend {config.backend}", highlight=False)
    console.print(f"session {session} (saved in {folder})", highlight=False, soft_wrap=True)
    console.print("type guidance any time · /help · /quit", style="dim")
    conn = sqlite3.connect(folder / "checkpoints.sqlite", check_same_thread=False)
    try:
        graph = build_graph(model=model, checkpointer=SqliteSaver(conn))
        chat_session = ChatSession(graph, task, config, folder, session, View(console), hint)
        resume = bool(chat_session.snapshot().values)
        if resume:
            chat_session.view.recap(chat_session.state())
        chat_session.run(read, resume=resume)
    finally:
        conn.close()
    return session


def new_session(task: KernelTask, config: Any, out: Path, model: BaseChatModel | None):
    from mlxport.agent.port import ensure_writable, new_session_id, session_file

    config.approve = True
    check_config(config, model)
    folder = out / task.name
    ensure_writable(folder)
    session = new_session_id(task.name)
    saved = {"session": session, "config": asdict(config), "task_dir": str(task.folder)}
    session_file(folder).write_text(json.dumps(saved, indent=2))  # the same file run_port writes
    index = _index(folder)
    index[session] = {"config": saved["config"], "task_dir": saved["task_dir"]}
    (folder / INDEX).write_text(json.dumps(index, indent=2))
    return config, folder, session


def check_config(config: Any, model: BaseChatModel | None = None) -> None:
    from mlxport.agent.providers import check_model_spec

    config.validate()
    if model is None:
        check_model_spec(config.model, config.base_url)


def open_session(out: Path, session: str) -> tuple[KernelTask, Any, Path]:
    """A saved chat or port session: its task, its configuration (now with approvals) and folder."""
    from mlxport.agent.config import RunConfig
    from mlxport.agent.port import find_session, session_file
    from mlxport.tasks import load_task

    saved = next((({"session": session, **_index(p.parent)[session]}, p.parent) for p in out.glob(f"*/{INDEX}")
                  if session in _index(p.parent)), None)
    if saved is None:
        folder = find_session(out, session)
        saved = (json.loads(session_file(folder).read_text()), folder)
    data, folder = saved
    config = RunConfig(**{**data["config"], "approve": True})
    return load_task(data["task_dir"]), config, folder


def _index(folder: Path) -> dict[str, Any]:
    path = folder / INDEX
    return json.loads(path.read_text()) if path.is_file() else {}


def resolve_task(kernel: Path | None, task: str | None) -> KernelTask | None:
    """Like ``mlxport port``: --task NAME or folder, or a kernel.cu inside a task folder."""
    from mlxport.tasks import load_task

    if task:
        return load_task(task)
    if kernel is None:
        return None
    if not kernel.is_file():
        raise UserError(f"no such file {kernel}: pass the path of a .cu file")
    if not (kernel.parent / "task.toml").is_file():
        raise UserError(f"{kernel} is not in a task folder: pass --task NAME or DIR (make one with "
                        f"`mlxport tasks new`), or describe it with `mlxport port --reference ...`")
    return load_task(kernel.parent)


def pick_task(console: Console, read: Callable[[], str]) -> KernelTask:
    from mlxport.tasks import load_task, suite_names

    names = suite_names()
    console.print("[bold]bundled tasks[/bold]", highlight=False)
    for i, name in enumerate(names, 1):
        console.print(f"{i:>3}  {name:<20} {escape(load_task(name).description)}", highlight=False,
                      overflow="ellipsis", no_wrap=True, crop=True)
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlxport chat", description="Port a CUDA kernel interactively.")
    p.add_argument("kernel", nargs="?", type=Path, help="the .cu file, inside a task folder")
    p.add_argument("--task", help="task name or folder")
    p.add_argument("--session", help="resume this session id")
    p.add_argument("--model", default="rules", help="rules, scripted:FILE or provider:model")
    p.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--backend", default="auto", help="auto, metal, cuda or sim")
    p.add_argument("--budget", help="e.g. iterations=12,patience=6,tokens=4e5,cost=5,wall=1800")
    p.add_argument("--out", type=Path, default=Path("mlxport-out"), help="output folder")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    from mlxport.agent.config import RunConfig, parse_budget

    args = parser().parse_args(argv)
    err = Console(stderr=True, highlight=False)
    try:
        config = RunConfig(model=args.model, base_url=args.base_url, backend=args.backend, seed=args.seed,
                           **parse_budget(args.budget))
        if not args.session:  # cheap checks first, before loading a task or the agent
            check_config(config)
        task = None if args.session else resolve_task(args.kernel, args.task)
        chat(task, config, args.out, session=args.session)
    except UserError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        return 2
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
