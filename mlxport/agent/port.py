"""Running one port: the graph with a SQLite checkpoint in the output folder, live updates,
resume after any interruption, and the files a port leaves behind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langgraph.errors import GraphRecursionError

from mlxport.agent import sessions
from mlxport.agent.graph import build_graph
from mlxport.agent.outputs import Ending, write_outputs
from mlxport.agent.providers import check_model_spec
from mlxport.agent.state import RunConfig, State
from mlxport.backends import get_backend
from mlxport.errors import UserError
from mlxport.logs import node_event, run_log
from mlxport.spec import KernelTask
from mlxport.tasks import load_task

Listener = Callable[[str, dict[str, Any]], None]


def run_port(
    task: KernelTask,
    config: RunConfig,
    out: Path,
    *,
    session: str | None = None,
    resume: bool = False,
    on_update: Listener | None = None,
    on_token: Callable[[str], None] | None = None,
    model: BaseChatModel | None = None,
) -> dict[str, Any]:
    """Port ``task`` into ``out/<task>/``. With ``resume``, continue session ``session`` from its
    last checkpoint (``config`` is the one it was saved with: see ``resume_port``). ``on_token``
    streams the model's tokens as they arrive."""
    folder = out / task.name
    sessions.ensure_writable(folder)
    if not resume:
        config.validate()
        if model is None:
            check_model_spec(config.model, config.base_url)
        get_backend(config.backend)  # an unavailable backend is said before anything is saved
        session = session or sessions.new_id(task.name)
        sessions.save(folder, session, task.folder, config)
    saver, conn = sessions.checkpointer(folder)
    with run_log(folder / "log.jsonl", session=session, task=task.name) as log:
        log.info("port_resumed" if resume else "port_started", config=asdict(config))
        try:
            state = _drive(task, config, saver, session, resume, log, on_update, on_token, model)
        finally:
            conn.close()
        run = write_outputs(folder, task, Ending.of_state(state), asdict(config), session)
        log.info("port_finished", stop_reason=run["stop_reason"], result=run["result"])
    return run


class NoCheckpoint(UserError):
    """``resume`` named a session that never reached its first checkpoint."""


def _drive(
    task: KernelTask,
    config: RunConfig,
    saver: sessions.RedactingSaver,
    session: str,
    resume: bool,
    log,
    on_update: Listener | None,
    on_token: Callable[[str], None] | None,
    model: BaseChatModel | None,
) -> State:
    """Run (or continue) the graph to its end and return the final state."""
    graph = build_graph(model=model, checkpointer=saver)
    cfg = {
        "configurable": {"thread_id": session},
        "recursion_limit": 4 * config.max_iterations + 40,
    }
    snapshot = graph.get_state(cfg)
    if resume and not snapshot.values:
        raise NoCheckpoint(
            f"session {session} has no checkpoint for {task.name}: start a new port instead"
        )
    if snapshot.values.get("final") is not None and not snapshot.next:
        return State.of(snapshot.values)  # finished earlier: only the outputs are written again
    inputs = None if snapshot.values else {"task_dir": str(task.folder)}
    modes = ["updates", "custom"] + (["messages"] if on_token else [])
    try:
        for mode, chunk in graph.stream(inputs, cfg, context=config, stream_mode=modes):
            if mode == "custom":  # a line of progress inside a node (the final verification's)
                if on_update:
                    on_update("progress", {"progress": str(chunk)})
                continue
            if mode == "messages":
                token = chunk[0].content if isinstance(chunk[0].content, str) else ""
                if token and chunk[1].get("langgraph_node") == "reason":
                    on_token(token)
                continue
            for node, data in chunk.items():
                if isinstance(data, dict):
                    node_event(log, node, data)
                    if on_update:
                        on_update(node, data)
    except GraphRecursionError:
        graph.update_state(cfg, {"stop_reason": "recursion_limit"})
    return State.of(graph.get_state(cfg).values)


def resume_port(out: Path, session: str, on_update: Listener | None = None) -> dict[str, Any]:
    """Continue a saved port or chat session unattended (nobody is there to approve candidates)."""
    saved = sessions.find(out, session)
    return run_port(
        load_task(saved.task_dir),
        replace(saved.config, approve=False),
        out,
        session=saved.id,
        resume=True,
        on_update=on_update,
    )
