"""Graph state and the run-scoped configuration."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

from mlxport.agent.config import RunConfig

__all__ = ["RunConfig", "State"]


def merge(left: dict | None, right: dict | None) -> dict:
    return {**(left or {}), **(right or {})}


def add_usage(left: dict | None, right: dict | None) -> dict:
    """Sum token usage per node: {"reason": {"input_tokens": n, "output_tokens": m, "calls": k}}."""
    out = {k: dict(v) for k, v in (left or {}).items()}
    for node, u in (right or {}).items():
        cur = out.setdefault(node, {})
        for k, v in u.items():
            cur[k] = cur.get(k, 0) + v
    return out


@dataclass
class State:
    """What the graph carries from node to node (and checkpoints). Nodes return partial updates."""

    task_dir: str = ""
    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    records: Annotated[dict[str, dict[str, Any]], merge] = field(
        default_factory=dict
    )  # id -> Record.model_dump(mode="json")
    plan: dict[str, Any] = field(default_factory=dict)
    best_id: str | None = None
    best_history: list[dict[str, Any]] = field(
        default_factory=list
    )  # (iteration, candidate, speedup) per new best
    iterations: int = 0
    evaluated: int = 0  # candidates with a correctness verdict
    correct: int = 0  # candidates that count as correct
    since_improvement: int = 0
    consecutive_errors: int = 0
    tool_errors: int = 0
    seed: int = 0
    usage: Annotated[dict[str, dict[str, int]], add_usage] = field(default_factory=dict)
    elapsed: float = 0.0  # seconds of work so far, summed over runs (a resumed run keeps counting)
    search: str = "linear"  # RunConfig.search, kept where the graph's edges can read it
    cycle: dict[str, Any] | None = (
        None  # tree search: the idea worked on, candidates since it improved
    )
    cycles: list[dict[str, Any]] = field(
        default_factory=list
    )  # tree search: each ended cycle's outcome
    stop_reason: str | None = None
    finish: dict[str, Any] | None = None
    final: dict[str, Any] | None = None

    @classmethod
    def of(cls, values: dict[str, Any] | State | None) -> State:
        """The state from a checkpoint's values (which hold only the fields written so far)."""
        if isinstance(values, State):
            return values
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (values or {}).items() if k in names})

    def total_tokens(self) -> int:
        return sum(
            u.get("input_tokens", 0) + u.get("output_tokens", 0) for u in self.usage.values()
        )
