"""Graph state and the run-scoped configuration."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

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


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    task_dir: str
    records: Annotated[dict[str, dict[str, Any]], merge]  # candidate id -> toolbox.Record.to_state()
    plan: dict[str, Any]
    best_id: str | None
    best_history: list[dict[str, Any]]  # (iteration, candidate, speedup) each time the best improved
    iterations: int
    evaluated: int  # candidates with a correctness verdict
    since_improvement: int
    consecutive_errors: int
    tool_errors: int
    seed: int
    usage: Annotated[dict[str, dict[str, int]], add_usage]
    elapsed: float  # seconds of work so far, summed over runs (a resumed run keeps counting)
    stop_reason: str | None
    finish: dict[str, Any] | None
    final: dict[str, Any] | None
