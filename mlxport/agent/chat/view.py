"""What a chat session shows: steps as they stream, the plan, the best candidate, the budget,
diffs, the approval prompt and the recap of a resumed session. Sized for an 80x24 terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from rich.console import Console
from rich.markup import escape

from mlxport.agent.config import RunConfig
from mlxport.agent.graph import spent
from mlxport.agent.state import State
from mlxport.errors import UserError
from mlxport.tools.plan import Plan
from mlxport.tools.session import Record
from mlxport.tools.texts import candidate_diff
from mlxport.verify.reverify import verdict_label

# Guidance typed in a chat goes into the conversation as a HumanMessage with one of these
# prefixes, so the model knows who is speaking; its id starts with CHAT_ID so a recap can tell it
# from the graph's own notes (ids are never sent to a provider).
GUIDANCE = "Guidance from the person you are working with: "
QUESTION = "The person you are working with asks (answer in your next message, then continue): "
CHAT_ID = "chat-"

HELP = """\
Type guidance at any time: it reaches the model before its next call.
Start a line with ? (or end it with ?) to ask a question; the model answers next turn.
  /help        this help
  /plan        the plan tree
  /best        the best candidate and its results
  /budget      iterations, tokens, cost and wall time used and left
  /diff A B    unified diff of two candidates (ids, unique prefixes or 'best')
  /save        write the outputs now (kernel.py once a candidate is verified)
  /quit        end; the session is checkpointed and resumes with --session ID
When a new best candidate appears, answer y (accept) or n (reject)."""


def model_label(model: str) -> str:
    return f"{model} (rule-based translator, a non-LLM baseline)" if model == "rules" else model


def is_chat(m: BaseMessage) -> bool:
    return isinstance(m, HumanMessage) and str(m.id or "").startswith(CHAT_ID)


def chat_text(m: BaseMessage) -> str:
    text = str(m.content)
    for prefix, mark in ((GUIDANCE, ""), (QUESTION, "? ")):
        if text.startswith(prefix):
            return mark + text.removeprefix(prefix)
    return text


def text_of(content: Any) -> str:
    """Message text; providers such as Anthropic send a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return ""


def call_text(call: dict[str, Any]) -> str:
    args = ", ".join(
        f"{k}={_short(v)}"
        for k, v in (call.get("args") or {}).items()
        if k not in ("source", "header")
    )
    return f"{call.get('name')}({args})"


def _short(v: Any, n: int = 30) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 1] + "…"


def first_line(text: str) -> str:
    return next((line for line in str(text).splitlines() if line.strip()), "")


class View:
    """Renders onto one rich console; one line per event where it can."""

    def __init__(self, console: Console):
        self.c = console
        self.streaming: str | None = None  # id of the AI message whose tokens are being printed
        self.streamed: set[str] = set()

    def line(self, label: str, style: str, text: str, *, wrap: bool = False) -> None:
        self.end_stream()
        self.c.print(
            f"[{style}]{label:<6}[/{style}]{escape(text)}",
            highlight=False,
            soft_wrap=wrap,
            overflow="ellipsis",
            no_wrap=not wrap,
            crop=not wrap,
        )

    def plain(self, text: str, style: str = "", *, soft: bool = False) -> None:
        """``soft``: let the terminal wrap it, so a command shown can be copied whole."""
        self.end_stream()
        self.c.print(text, style=style or None, markup=False, highlight=False, soft_wrap=soft)

    # ------------------------------------------------------------ streaming

    def token(self, text: str, message_id: str | None) -> None:
        if not text:
            return
        if self.streaming != message_id:
            self.end_stream()
            self.c.print("[cyan]model[/cyan] ", end="", highlight=False)
            self.streaming = message_id
            if message_id:
                self.streamed.add(message_id)
        self.c.print(text, end="", markup=False, highlight=False, soft_wrap=True)

    def end_stream(self) -> None:
        if self.streaming is not None:
            self.c.print()
            self.streaming = None

    def update(self, node: str, data: Any) -> None:
        if not isinstance(data, dict):
            return
        for m in data.get("messages") or []:
            self.message(m)
        if node == "assess" and data.get("best_id"):
            self.line("best", "magenta", f"{data['best_id']} is the new best candidate")
        if data.get("stop_reason"):
            self.line("stop", "yellow", str(data["stop_reason"]))
        if node == "finalize" and data.get("final"):
            f = data["final"]
            self.line("final", "bold", f"{f.get('candidate_id') or '-'}: {verdict_label(f)}")

    def message(self, m: BaseMessage, *, recap: bool = False) -> None:
        if isinstance(m, SystemMessage):
            return
        if isinstance(m, AIMessage):
            text = text_of(m.content).strip()
            if text and (recap or m.id not in self.streamed):
                self.line(
                    "model", "cyan", " ".join(text.split()) if recap else text, wrap=not recap
                )
            for call in m.tool_calls:
                self.line("  →", "cyan", call_text(call))
            for bad in m.invalid_tool_calls:
                self.line("  →", "red", f"{bad.get('name')}(<invalid arguments>)")
        elif isinstance(m, ToolMessage):
            style = "red" if getattr(m, "status", "") == "error" else "green"
            self.line("  ←", style, first_line(text_of(m.content)))
        elif is_chat(m):
            self.line("you", "bold blue", chat_text(m), wrap=not recap)
        elif isinstance(m, HumanMessage):
            self.line("note", "dim", first_line(text_of(m.content)))

    # ------------------------------------------------------------ commands

    def plan(self, state: State) -> None:
        self.plain("plan ([>] active, [x] done, [-] abandoned):", "bold")
        self.plain(Plan.model_validate(state.plan).render())

    def best(self, state: State, awaiting: str | None = None) -> None:
        records = state.records
        best_id = state.best_id
        if awaiting in records:
            self.plain(
                f"candidate {awaiting} awaits your approval (y/n); until then the best is "
                f"{best_id or 'none'}",
                "yellow",
            )
            best_id = awaiting
        if best_id not in records:
            self.plain(f"no correct candidate yet ({len(records)} tried)", "yellow")
            return
        r = Record.model_validate(records[best_id])
        node = f", plan idea {r.plan_node}" if r.plan_node else ""
        self.plain(f"best: {best_id} (iteration {r.iteration}{node})", "bold")
        if r.correctness is not None:
            self.plain(r.correctness.summary())
        if r.benchmark is None:
            self.plain("speed: not benchmarked yet")
        elif r.speedup is not None:
            self.plain(
                "speed: " + ", ".join(f"{k} {v:.2f}x" for k, v in r.benchmark.speedups.items())
            )
        else:
            self.plain(
                f"speed: not timed on {r.benchmark.backend}; {first_line(r.benchmark.estimate)}"
            )
        final = state.final or {}
        if final.get("candidate_id") == best_id and final.get("verified"):
            self.plain(verdict_label(final), "green")
        launch = f"grid {r.candidate.grid}, threadgroup {r.candidate.threadgroup}"
        self.plain(f"{r.candidate.language} kernel {r.candidate.name}, {launch}:", "dim")
        lines = r.candidate.source.strip("\n").splitlines()
        self.plain(
            "\n".join(lines[:10])
            + (f"\n… {len(lines) - 10} more lines (/save writes it)" if len(lines) > 10 else "")
        )

    def budget(self, state: State, config: RunConfig) -> None:
        used_it, used_tok = state.iterations, state.total_tokens()
        used_cost, used_wall = spent(state, config), state.elapsed
        since = state.since_improvement
        rows = [
            (
                "iterations",
                f"{used_it} of {config.max_iterations}",
                f"{config.max_iterations - used_it}",
            ),
            (
                "tokens",
                f"{used_tok:,} of {config.max_tokens:,}",
                f"{max(config.max_tokens - used_tok, 0):,}",
            ),
            (
                "cost",
                f"${used_cost:.4f} of ${config.max_cost:.2f}",
                f"${max(config.max_cost - used_cost, 0):.4f}",
            ),
            (
                "wall",
                f"{used_wall:.1f} s of {config.max_wall_seconds:.0f} s",
                f"{max(config.max_wall_seconds - used_wall, 0):.0f} s",
            ),
            (
                "patience",
                f"{since} of {config.patience} candidates without improvement",
                f"{config.patience - since}",
            ),
        ]
        self.plain(f"{'budget':<11}{'used':<44}left", "bold")
        for name, used, left in rows:
            self.plain(f"{name:<11}{used:<44}{left}")
        if state.stop_reason:
            self.plain(f"stopped: {state.stop_reason}", "yellow")

    def diff(self, state: State, a: str, b: str) -> None:
        ra, rb = find_record(state, a), find_record(state, b)
        lines = candidate_diff(ra.candidate, rb.candidate)
        if not lines:
            self.plain(f"{ra.candidate.id} and {rb.candidate.id} are identical")
        for ln in lines:
            style = (
                "bold"
                if ln.startswith(("---", "+++"))
                else "green"
                if ln.startswith("+")
                else "red"
                if ln.startswith("-")
                else "cyan"
                if ln.startswith("@@")
                else ""
            )
            self.plain(ln, style)

    def question(self, question: str) -> None:
        self.end_stream()
        self.c.print(
            f"[bold yellow]the model asks:[/bold yellow] {escape(question)}", highlight=False
        )
        self.plain("  type your answer (slash commands still work)")

    def approval(self, payload: dict[str, Any]) -> None:
        self.end_stream()
        summary = first_line(payload.get("summary") or "")
        speed = f", {payload['speedup']:.2f}x native" if payload.get("speedup") else ""
        self.c.print(
            f"[bold yellow]approve?[/bold yellow] candidate {payload.get('candidate_id')} is the "
            f"new "
            f"best{speed}",
            highlight=False,
        )
        if summary:
            self.plain(f"  {summary}")
        self.c.print(
            "  accept it? [bold]y[/bold]es / [bold]n[/bold]o (/best, /diff A B to inspect)",
            highlight=False,
        )

    def recap(self, state: State, last: int = 8) -> None:
        messages = [m for m in state.messages if not isinstance(m, SystemMessage)]
        self.plain(
            f"recap: {len(messages)} messages, {state.iterations} iterations, "
            f"{len(state.records)} candidates; the last ones:",
            "bold",
        )
        for m in messages[-last:]:
            self.message(m, recap=True)
        guidance = [chat_text(m) for m in messages[:-last] if is_chat(m)]
        if guidance:
            self.plain(f"(earlier guidance: {'; '.join(guidance)[:200]})", "dim")
        self.plan(state)
        best = state.best_id
        self.plain(f"best: {best}" if best else "best: none correct yet")

    def finished(self, run: dict[str, Any], folder: Path) -> None:
        res = run["result"]
        self.end_stream()
        if res["verified"]:
            speed = (
                ", ".join(f"{k} {v:.2f}x" for k, v in res["speedups"].items())
                if res["timed"]
                else "not timed (simulator)"
            )
            self.c.print(
                f"[green]{escape(res['label'])}[/green]: candidate {res['candidate_id']}; {speed}",
                highlight=False,
            )
            self.plain(f"wrote {folder}/kernel.py, test_kernel.py, report.md, run.json")
        else:
            self.c.print(
                f"[red]no verified kernel[/red]: {escape(str(res.get('why_not')))}; see "
                f"{folder}/report.md",
                highlight=False,
            )
        self.plain(
            f"finished ({run['stop_reason']}): type guidance to continue the port, or /quit", "bold"
        )


def find_record(state: State, key: str) -> Record:
    records = state.records
    if key == "best":
        key = state.best_id or ""
        if not key:
            raise UserError("there is no best candidate yet: name candidate ids instead")
    matches = [k for k in records if k.startswith(key)]
    if len(matches) != 1:
        known = ", ".join(list(records)[-8:]) or "none yet"
        what = "is ambiguous" if matches else "matches no candidate"
        raise UserError(f"{key!r} {what}: use a candidate id (known: {known})")
    return Record.model_validate(records[matches[0]])
