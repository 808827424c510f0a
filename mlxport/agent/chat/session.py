"""A chat session on the porting graph: the graph runs in a worker thread, paused before every
model call (``interrupt_before=["reason"]``) so that guidance typed meanwhile is injected first;
``assess`` pauses for approval of each new best (``RunConfig.approve``). The main thread owns the
screen and the person's input; both threads feed one event queue."""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.types import Command

from mlxport.agent.chat.view import CHAT_ID, GUIDANCE, HELP, QUESTION, View, chat_text
from mlxport.agent.config import RunConfig
from mlxport.agent.outputs import Ending, write_outputs
from mlxport.agent.state import State
from mlxport.errors import UserError
from mlxport.spec import KernelTask

YES, NO = ("y", "yes", "accept", "approve", "ok"), ("n", "no", "reject")


def guidance_message(text: str) -> HumanMessage:
    text = text.strip()
    if text.startswith("?") or text.endswith("?"):
        return HumanMessage(
            QUESTION + text.removeprefix("?").strip(), id=f"{CHAT_ID}{uuid.uuid4().hex[:12]}"
        )
    return HumanMessage(GUIDANCE + text, id=f"{CHAT_ID}{uuid.uuid4().hex[:12]}")


def read_lines(events: queue.Queue, read: Callable[[], str]) -> None:
    """The stdin reader thread: every line becomes an event; end of input quits."""
    while True:
        try:
            line = read()
        except (EOFError, OSError, ValueError):
            events.put(("line", "/quit"))
            return
        events.put(("line", line))


RULES_IGNORE_GUIDANCE = (
    "the rules policy is a non-LLM baseline: it does not read guidance (kept in the transcript); "
    "use --model provider:model to steer a port"
)


class ChatSession:
    def __init__(
        self,
        graph,
        task: KernelTask,
        config: RunConfig,
        folder: Path,
        session: str,
        view: View,
        resume_hint: str,
    ):
        self.graph, self.task, self.config, self.folder, self.session = (
            graph,
            task,
            config,
            folder,
            session,
        )
        self.view, self.resume_hint = view, resume_hint
        self.cfg = {
            "configurable": {"thread_id": session},
            "recursion_limit": 4 * config.max_iterations + 40,
        }
        self.events: queue.Queue = queue.Queue()
        self.pending: list[HumanMessage] = []
        self.worker: threading.Thread | None = None
        self.stop = threading.Event()
        self.mode = "idle"  # running | approval | question | finished | idle (stopped by an error)
        self.awaiting: str | None = None  # the candidate the person is asked to approve

    # ------------------------------------------------------------ graph driving

    def snapshot(self):
        return self.graph.get_state(self.cfg)

    def state(self) -> State:
        return State.of(self.snapshot().values)

    def start(self, inputs: Any) -> None:
        self.mode = "running"
        self.worker = threading.Thread(
            target=self._drive, args=(inputs,), daemon=True, name="mlxport-chat-graph"
        )
        self.worker.start()

    def _drive(self, inputs: Any) -> None:
        error = None
        try:
            stream = self.graph.stream(
                inputs,
                self.cfg,
                context=self.config,
                stream_mode=["updates", "messages"],
                interrupt_before=["reason"],
                durability="sync",
            )
            for mode, chunk in stream:
                if self.stop.is_set():
                    stream.close()
                    break
                if mode == "messages":
                    message, meta = chunk
                    if meta.get("langgraph_node") == "reason" and isinstance(
                        message, (AIMessage, AIMessageChunk)
                    ):
                        self.events.put(("token", message.content, message.id))
                    continue
                for node, data in chunk.items():
                    if node != "__interrupt__":
                        self.events.put(("update", node, data))
        except (
            Exception
        ) as e:  # a node failed: show it, keep the session (its last checkpoint is intact)
            error = e
        self.events.put(("done", error))

    def after_segment(self, error: Exception | None, *, resumed: bool = False) -> None:
        if error is not None:
            self.mode = "idle"
            self.view.line("error", "red", f"{type(error).__name__}: {error}"[:500], wrap=True)
            self.view.plain("type anything to retry the step, or /quit (the session is saved)")
            return
        snap = self.snapshot()
        asks = [i.value for t in snap.tasks for i in t.interrupts]
        if asks and isinstance(asks[0], dict) and asks[0].get("kind") == "ask":
            self.mode = "question"
            self.view.question(asks[0]["question"])
        elif asks:
            self.mode = "approval"
            payload = asks[0] if isinstance(asks[0], dict) else {"summary": str(asks[0])}
            self.awaiting = payload.get("candidate_id")
            self.view.approval(payload)
        elif snap.next == ("reason",):
            self.inject()
            self.start(None)
        elif not snap.next and not snap.tasks:
            self.finish(State.of(snap.values), write=not resumed)
        else:  # stopped between steps: carry on from the checkpoint
            self.start(None)

    def inject(self, **reset: Any) -> None:
        """Send queued guidance; ``reset`` also clears the stop fields (a finished port goes on)."""
        if not self.pending and not reset:
            return
        messages, self.pending = self.pending, []
        as_node = (
            "assess" if reset else None
        )  # after END, route through assess's edge back to reason
        self.graph.update_state(self.cfg, {"messages": messages, **reset}, as_node=as_node)
        for m in messages:
            self.view.line("sent", "blue", chat_text(m)[:200])

    def finish(self, state: State, *, write: bool = True) -> None:
        self.mode = "finished"
        if write:
            self.view.finished(self.save(state), self.folder)
        else:  # a resumed session that had finished: its outputs are already written
            self.view.plain(
                f"finished ({state.stop_reason}): type guidance to continue the port, or /quit",
                "bold",
            )

    def save(self, state: State | None = None) -> dict[str, Any]:
        return write_outputs(
            self.folder,
            self.task,
            Ending.of_state(state if state is not None else self.state()),
            asdict(self.config),
            self.session,
        )

    # ------------------------------------------------------------ the person

    def handle(self, line: str) -> bool:
        """One typed line; False ends the session."""
        text = line.strip()
        if not text:
            if self.mode == "approval":
                self.view.plain("answer y or n")
            return True
        if text.startswith("/"):
            return self.command(text)
        if self.mode == "question":
            self.start(Command(resume=text))
            return True
        if self.mode == "approval" and text.lower() in YES + NO:
            self.start(Command(resume="yes" if text.lower() in YES else "no"))
            return True
        self.pending.append(guidance_message(text))
        rules = self.config.model == "rules"
        if rules:
            self.view.plain(
                RULES_IGNORE_GUIDANCE + ("; now answer y or n" if self.mode == "approval" else ""),
                "yellow",
            )
        if self.mode == "finished":
            self.inject(stop_reason=None, finish=None, final=None)
            self.start(None)
        elif self.mode == "idle":
            self.start(None)
        elif not rules:
            self.view.plain(
                "queued for the model's next call; now answer y or n"
                if self.mode == "approval"
                else "queued: it reaches the model before its next call",
                "dim",
            )
        return True

    def command(self, text: str) -> bool:
        name, *args = text.split()
        try:
            if name in ("/quit", "/exit", "/q"):
                return False
            if name == "/help":
                self.view.plain(HELP)
            elif name == "/plan":
                self.view.plan(self.state())
            elif name == "/best":
                self.view.best(
                    self.state(), awaiting=self.awaiting if self.mode == "approval" else None
                )
            elif name == "/budget":
                self.view.budget(self.state(), self.config)
            elif name == "/diff":
                if len(args) != 2:
                    raise UserError(
                        "usage: /diff A B with two candidate ids (or unique prefixes, or 'best')"
                    )
                self.view.diff(self.state(), *args)
            elif name == "/save":
                self.saved(self.save())
            else:
                raise UserError(f"unknown command {name}: see /help")
        except UserError as e:
            self.view.plain(str(e), "red")
        return True

    def saved(self, run: dict[str, Any]) -> None:
        if run["result"]["verified"]:
            self.view.plain(
                f"wrote {self.folder}/kernel.py, test_kernel.py, report.md, run.json, candidates/, "
                f"transcript.jsonl"
            )
        else:
            self.view.plain(
                f"wrote {self.folder}/candidates/ ({run['candidates']}), transcript.jsonl, "
                f"run.json, "
                f"report.md; kernel.py comes once a candidate passes final verification"
            )

    # ------------------------------------------------------------ the loop

    def run(self, read: Callable[[], str], *, resume: bool) -> None:
        threading.Thread(
            target=read_lines, args=(self.events, read), daemon=True, name="mlxport-chat-input"
        ).start()
        if resume:
            self.after_segment(None, resumed=True)
        else:
            self.start({"task_dir": str(self.task.folder)})
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends the session like /quit
            self.loop()
        self.quit()

    def loop(self) -> None:
        while True:
            kind, *payload = self.events.get()
            if kind == "line":
                if not self.handle(payload[0]):
                    return
            elif kind == "token":
                self.view.token(payload[0] if isinstance(payload[0], str) else "", payload[1])
            elif kind == "update":
                self.view.update(*payload)
            elif kind == "done":
                self.after_segment(payload[0])

    def quit(self) -> None:
        if self.worker is not None and self.worker.is_alive():
            self.view.plain(
                "stopping after the current step (Ctrl-C again to stop at once)…", "dim"
            )
            self.stop.set()
            self.worker.join()
        if self.pending:
            self.view.plain(
                f"{len(self.pending)} queued message(s) not yet sent were dropped", "yellow"
            )
        self.view.plain(f"session {self.session} is saved; resume with:", "bold")
        self.view.plain(f"  {self.resume_hint}", soft=True)
