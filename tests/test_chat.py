"""`mlxport chat` in a real terminal (tmux): stream, guidance, approval, /plan, /quit, resume.
Plus one in-process session for rejection, the inspection commands and resuming at an approval."""

import io
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from rich.console import Console
from small_tasks import small_task

from mlxport.agent.chat import chat
from mlxport.agent.chat.view import CHAT_ID
from mlxport.agent.config import RunConfig
from mlxport.agent.graph import build_graph
from mlxport.agent.models import ScriptedModel
from mlxport.tasks import expert_ports, load_task

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
TASK = load_task("vector_add")
PORT = expert_ports(TASK)["msl"]
PORTED = TASK  # what the sessions below port: _ported_task makes it small


@pytest.fixture(scope="module", autouse=True)
def _ported_task(tmp_path_factory):
    """The sessions port vector_add with small cases: these tests are about the chat, not the
    suite's sizes."""
    global PORTED
    PORTED = load_task(small_task("vector_add", tmp_path_factory.mktemp("tasks")))


GUIDANCE = "keep it to one thread per element please"
IDEA = "one thread per element"


def compile_call(candidate=PORT) -> dict:
    args = candidate.model_dump(mode="json", exclude_defaults=True)
    args.pop("language", None)
    return {"name": "compile_kernel", "args": args}


def turn(name: str, content: str = "", **args) -> dict:
    return {"content": content, "tool_calls": [{"name": name, "args": args}]}


SCRIPT = [
    turn("read_cuda_source", "I will read the CUDA source first."),
    turn(
        "update_plan",
        "A plain element-wise map.",
        action="add",
        idea=IDEA,
        expected_gain="baseline",
    ),
    {"content": "Compiling the expert-style port.", "tool_calls": [compile_call()]},
    turn("run_correctness", candidate_id=PORT.id),
    turn("finish", "Correct on every case; finishing.", summary="one thread per element"),
]


def checkpointed(folder, session: str) -> dict:
    """The session's state as the SQLite checkpoint holds it (read alongside the running chat)."""
    conn = sqlite3.connect(folder / "checkpoints.sqlite", check_same_thread=False)
    try:
        return (
            build_graph(checkpointer=SqliteSaver(conn))
            .get_state({"configurable": {"thread_id": session}})
            .values
        )
    finally:
        conn.close()


def summary(state: dict) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in state["messages"]]


# ---------------------------------------------------------------- tmux


def tmux_binary() -> str:
    if shutil.which("tmux") is None and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", "tmux"], capture_output=True, timeout=600)
    path = shutil.which("tmux")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is missing in CI: .ci/run must install it")
        pytest.skip(
            "tmux is not installed and `apt-get install -y tmux` failed: add tmux to the CI setup "
            "(.ci/run) so the chat terminal test runs"
        )
    return path


class Tmux:
    """A private tmux server (own socket) with one 80x24 window per command."""

    def __init__(self, binary: str):
        self.cmd = [binary, "-L", f"mlxport-test-{uuid.uuid4().hex[:8]}", "-f", "/dev/null"]

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            [*self.cmd, *args], capture_output=True, text=True, check=True, timeout=30
        ).stdout

    def start(self, name: str, argv: list[str]) -> None:
        # The shell keeps the pane open after the chat exits, so its last screen can still be read.
        shell = f'{shlex.join(argv)}; echo "[exit $?]"; sleep 600'
        self("new-session", "-d", "-s", name, "-x", "80", "-y", "24", "-c", str(ROOT), shell)

    def screen(self, name: str) -> str:
        return self("capture-pane", "-p", "-J", "-S", "-", "-t", name)

    def wait_for(self, name: str, text: str, timeout: float = 120, count: int = 1) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen(name)
            if screen.count(text) >= count:
                return screen
            if "[exit " in screen and "[exit " not in text:
                break
            time.sleep(0.2)
        pytest.fail(f"{text!r} did not appear in the chat pane; it shows:\n{self.screen(name)}")

    def type(self, name: str, text: str) -> None:
        self("send-keys", "-t", name, "-l", text)
        self("send-keys", "-t", name, "Enter")

    def kill(self) -> None:
        subprocess.run([*self.cmd, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def tmux():
    server = Tmux(tmux_binary())
    yield server
    server.kill()


def test_chat_in_a_terminal_guidance_approval_quit_and_resume(tmp_path, tmux):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    out = tmp_path / "out"
    chat_cmd = [sys.executable, "-m", "mlxport.cli", "chat", "--out", str(out)]
    # No extra seeds in the final verification: the kernel is the expert port
    # (tests/test_agent.py shows them).
    tmux.start(
        "first",
        [
            *chat_cmd,
            "--task",
            str(PORTED.folder),
            "--backend",
            "sim",
            "--model",
            f"scripted:{script}",
            "--budget",
            "extra_seeds=0",
        ],
    )
    tmux.wait_for("first", "type guidance any time")
    tmux.type("first", GUIDANCE)
    session = json.loads((out / "vector_add" / "session.json").read_text())["session"]
    assert f"session {session}" in tmux.screen("first")

    screen = tmux.wait_for("first", "accept it?")
    assert f"candidate {PORT.id} is the new best" in screen and "PASS: 6/6" in screen
    assert "→   read_cuda_source()" in screen and "I will read the CUDA source first." in screen
    tmux.type("first", "y")
    screen = tmux.wait_for("first", "finished (finish)")
    flat = " ".join(screen.split())  # the terminal wraps long lines
    assert "verified on sim" in flat and f": candidate {PORT.id}" in flat

    state = checkpointed(out / "vector_add", session)
    said = [m for m in state["messages"] if isinstance(m, HumanMessage) and GUIDANCE in m.content]
    assert len(said) == 1 and said[0].id.startswith(CHAT_ID)
    assert state["best_id"] == PORT.id and state["final"]["verified"]
    assert (out / "vector_add" / "kernel.py").is_file()

    tmux.type("first", "/plan")
    tmux.wait_for("first", f"p1 {IDEA} (expect baseline;")
    tmux.type("first", "/quit")
    screen = tmux.wait_for("first", "[exit 0]")
    assert f"mlxport chat --session {session} --out {out}" in screen

    tmux.start("again", [*chat_cmd, "--session", session])
    screen = tmux.wait_for("again", "finished (finish)")
    recap = screen[screen.index("recap:") :]
    assert GUIDANCE in recap and f"p1 {IDEA}" in recap and f"best: {PORT.id}" in recap
    assert "Correct on every case; finishing." in recap and "→   finish(" in recap
    tmux.type("again", "/quit")
    tmux.wait_for("again", "[exit 0]")
    resumed = checkpointed(out / "vector_add", session)
    assert summary(resumed) == summary(state) and resumed["plan"] == state["plan"]


# ---------------------------------------------------------------- in process


class Person:
    """Answers the chat's input calls once the screen shows what the line answers."""

    def __init__(self, screen: io.StringIO, steps: list[tuple[str, int, str]]):
        self.buf, self.steps = screen, list(steps)

    def read(self) -> str:
        if not self.steps:
            raise EOFError
        marker, count, line = self.steps.pop(0)
        deadline = time.monotonic() + 120
        while self.buf.getvalue().count(marker) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {marker!r} x{count}:\n{self.buf.getvalue()}")
            time.sleep(0.05)
        return line


def test_reject_inspect_and_resume_at_an_approval(tmp_path):
    variant = PORT.model_copy(update={"threadgroup": [128, 1, 1]})
    scripted = ScriptedModel(
        script=[
            {"tool_calls": [compile_call()]},
            turn("run_correctness", candidate_id=PORT.id),
            {"tool_calls": [compile_call(variant)]},
            turn("run_correctness", candidate_id=variant.id),
            turn("finish", "Done.", summary="threadgroup 128"),
        ]
    )
    screen = io.StringIO()
    console = Console(file=screen, width=80, highlight=False)
    # the final verification of a one-line variant of the expert port
    config = RunConfig(backend="sim", extra_seeds=0)
    first = Person(
        screen,
        [("accept it?", 1, "/best"), ("awaits your approval", 1, "n"), ("accept it?", 2, "/quit")],
    )
    session = chat(PORTED, config, tmp_path, model=scripted, console=console, read=first.read)
    text = screen.getvalue()
    assert f"rejected candidate {PORT.id}" in text and "resume with" in text
    assert f"candidate {PORT.id} awaits your approval (y/n); until then the best is none" in text
    assert threading.active_count() < 10

    second = Person(
        screen,
        [
            ("accept it?", 3, f"/diff {PORT.id[:6]} {variant.id[:6]}"),
            ("+threadgroup", 1, "/budget"),
            ("patience", 1, "y"),
            ("finished (finish)", 1, "/best"),
            ("verified on sim", 2, "/save"),
            ("wrote", 2, "/nonsense"),
            ("unknown command", 1, "/quit"),
        ],
    )
    assert (
        chat(
            None,
            RunConfig(),
            tmp_path,
            session=session,
            model=scripted,
            console=console,
            read=second.read,
        )
        == session
    )
    text = screen.getvalue()
    resumed = text[text.index("recap:") :]
    assert f"candidate {variant.id} is the new best" in resumed
    assert "-threadgroup = [ 256," in resumed or "-threadgroup = [256" in resumed
    assert "iterations 4 of 12" in resumed
    state = checkpointed(tmp_path / "vector_add", session)
    assert state["records"][PORT.id]["rejected"] and state["final"]["candidate_id"] == variant.id
    assert (tmp_path / "vector_add" / "kernel.py").is_file()


def test_guidance_to_the_rules_baseline_is_kept_and_said_to_be_unread(tmp_path):
    screen = io.StringIO()
    console = Console(file=screen, width=200, highlight=False)
    person = Person(
        screen, [("accept it?", 1, "use float4 loads"), ("does not read guidance", 1, "/quit")]
    )
    session = chat(PORTED, RunConfig(backend="sim"), tmp_path, console=console, read=person.read)
    text = screen.getvalue()
    assert "the rules baseline reads no guidance" in text and "type guidance any time" not in text
    assert "it does not read guidance (kept in the transcript); use --model provider:model" in text
    assert "queued for the model" not in text and "it reaches the model" not in text
    assert session


def test_a_question_from_the_model_waits_for_the_persons_answer(tmp_path):
    scripted = ScriptedModel(
        script=[turn("ask_user", question="Is float32 enough?"), turn("finish", "Done.")]
    )
    screen = io.StringIO()
    console = Console(file=screen, width=100, highlight=False)
    person = Person(
        screen,
        [
            ("the model asks: Is float32 enough?", 1, "/plan"),
            ("(empty", 1, "yes, float32 only"),
            ("finished (finish)", 1, "/quit"),
        ],
    )
    session = chat(
        PORTED,
        RunConfig(backend="sim"),
        tmp_path,
        model=scripted,
        console=console,
        read=person.read,
    )
    state = checkpointed(tmp_path / "vector_add", session)
    answers = [m for m in state["messages"] if getattr(m, "type", "") == "tool"]
    assert answers[0].content == "the person answers: yes, float32 only"
