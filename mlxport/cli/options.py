"""What several commands share: the options declared once, the consoles, and the one function
that builds a run's configuration from flags."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from mlxport.errors import UserError

out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, soft_wrap=True)


def command_app(help: str) -> typer.Typer:
    """A command's Typer app, configured alike for every command."""
    return typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=help)


Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
Model = Annotated[
    str, typer.Option(help="rules (the non-LLM baseline), scripted:FILE or provider:model.")
]
BaseUrl = Annotated[
    str | None, typer.Option(help="OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1.")
]
Backend = Annotated[str, typer.Option(help="auto, metal, cuda or sim.")]
Budget = Annotated[
    str | None,
    typer.Option(help="e.g. iterations=12,patience=6,tokens=4e5,cost=5,wall=30m,target=1.5"),
]
Out = Annotated[Path, typer.Option("--out", help="Output folder.")]
Seed = Annotated[int, typer.Option(help="Seed of the run (inputs and verification).")]
Search = Annotated[
    str, typer.Option(help="linear (one ReAct thread) or tree (cycles on the best-rated idea).")
]
Task = Annotated[str, typer.Option(help="Task name or folder.")]
Chip = Annotated[
    str,
    typer.Option(
        help="The Apple GPU the simulator's estimates are for: a chip of `mlxport kb chips`, e.g. "
        "'M3 Max' or 'M1 Pro (14-core)'."
    ),
]


def note(text: str) -> None:
    """A note on what making a task found, on stderr (stdout may be JSON)."""
    err.print(f"note: {text}", highlight=False, markup=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def runs_here(candidate, backend) -> None:
    """A candidate reaches only a backend that compiles its language; else one sentence naming the
    fix."""
    if candidate.language != backend.language:
        where = (
            "--backend cuda on a machine with MLX's CUDA backend"
            if candidate.language == "cuda"
            else "--backend sim (or metal on Apple silicon)"
        )
        raise UserError(
            f"candidate {candidate.name} is {candidate.language} and the {backend.name} backend "
            f"runs "
            f"{backend.language} candidates: use {where}"
        )


def overrides(
    *,
    backend: str,
    base_url: str | None,
    budget: str | None,
    seed: int | None = None,
    search: str = "linear",
    chip: str | None = None,
) -> dict[str, Any]:
    """RunConfig fields from the shared flags (batch and eval apply them to every port)."""
    from mlxport.agent.config import SEARCHES, parse_budget

    if search not in SEARCHES:
        raise UserError(f"--search must be one of {', '.join(SEARCHES)}, got {search!r}")
    fields = {
        "backend": backend,
        "search": search,
        **parse_budget(budget),
        **({"base_url": base_url} if base_url else {}),
        **({"chip": chip} if chip else {}),
    }
    return fields if seed is None else {**fields, "seed": seed}


def run_config(
    *,
    model: str,
    backend: str,
    base_url: str | None,
    budget: str | None,
    seed: int,
    search: str = "linear",
    chip: str | None = None,
):
    """A validated RunConfig from the flags, with the model spec checked (a typo fails at once,
    before the agent is loaded)."""
    from mlxport.agent.config import RunConfig
    from mlxport.agent.providers import check_model_spec

    config = RunConfig(
        model=model,
        **overrides(
            backend=backend,
            base_url=base_url,
            budget=budget,
            seed=seed,
            search=search,
            chip=chip,
        ),
    )
    config.validate()
    check_model_spec(config.model, config.base_url)
    return config


def clip(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, cut after a whole sentence where one ends in the second
    half (else at a word), marked so no one reads a cut line as the whole of it."""
    if len(text) <= limit:
        return text
    end = text.rfind(". ", limit // 2, limit)
    cut = text[: end + 1] if end > 0 else text[: text.rfind(" ", 0, limit)]
    return cut + " [...] (the whole of it: transcript.jsonl)"


class Progress:
    """What a port or the making of a task is doing, as it goes: each graph step in a line or two
    (a listener of the graph), each step of making a task (``step``), and, after ``quiet`` seconds
    without a line, what it still waits on and since when: one step can take long (a model's turn,
    the original or the simulator at a large size), and a person should not wonder whether it
    hangs. Used as a context, which starts and stops that heartbeat."""

    def __init__(self, console: Console, quiet: float = 4.0, tick: float = 0.5):
        self.console, self.quiet, self.tick = console, quiet, tick
        self.lock = threading.Lock()
        self.waiting, self.since = "the start", time.monotonic()
        self.last = self.since
        self.stopped = threading.Event()
        self.beat = threading.Thread(target=self._beat, name="Progress heartbeat", daemon=True)

    def __enter__(self) -> Progress:
        self.beat.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.beat.join()

    def _beat(self) -> None:
        while not self.stopped.wait(self.tick):
            with self.lock:
                now = time.monotonic()
                if now - self.last >= self.quiet:
                    self.console.print(
                        f"[dim]wait  {self.waiting}: {now - self.since:.0f} s[/dim]",
                        highlight=False,
                    )
                    self.last = now

    def _line(self, text: str, waiting: str | None = None) -> None:
        self.console.print(text, highlight=False)
        self.last = time.monotonic()
        if waiting and waiting != self.waiting:
            self.waiting, self.since = waiting, self.last

    def step(self, text: str) -> None:
        """A step of making a task (running the original kernel at a case), as it starts."""
        with self.lock:
            self._line(f"[blue]task[/blue]  {escape(text)}", "the original kernel")

    def __call__(self, node: str, data: dict) -> None:
        with self.lock:
            self._show(node, data)

    def _show(self, node: str, data: dict) -> None:
        if data.get("progress"):
            self._line(f"[dim]check[/dim] {escape(data['progress'])}", "the final verification")
        for m in data.get("messages", []) or []:
            kind = getattr(m, "type", "")
            if kind == "ai":
                text = (m.content or "").strip() if isinstance(m.content, str) else ""
                if text:
                    self._line(f"[cyan]model[/cyan] {escape(clip(text, 400))}")
                for c in m.tool_calls:
                    args = ", ".join(
                        f"{k}={str(v)[:40]!r}" for k, v in c["args"].items() if k != "source"
                    )
                    self._line(f"[cyan]call[/cyan]  {c['name']}({escape(args)})", "the tools")
            elif kind == "tool":
                first = str(m.content).splitlines()[0] if m.content else ""
                color = "red" if getattr(m, "status", "") == "error" else "green"
                self._line(f"[{color}]tool[/{color}]  {escape(clip(first, 600))}", "the model")
        if data.get("best_id"):
            self._line(f"[magenta]best[/magenta]  {data['best_id']}")
        if data.get("stop_reason"):
            self._line(f"[yellow]stop[/yellow]  {data['stop_reason']}", "the final verification")
        if node == "finalize" and data.get("final"):
            f = data["final"]
            from mlxport.verify.reverify import verdict_label

            self._line(
                f"[bold]final[/bold] {f.get('candidate_id')}: {escape(verdict_label(f))}",
                "the port's files",
            )
