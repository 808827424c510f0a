"""Graph state and the run-scoped configuration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages


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


@dataclass(kw_only=True)
class RunConfig:
    """What a run is allowed to do. Passed as the graph's context; identical across eval models."""

    model: str = field(default="rules", metadata={"description": "rules, scripted:FILE or provider:model"})
    base_url: str | None = field(default=None, metadata={"description": "OpenAI-compatible server URL"})
    backend: str = field(default="auto", metadata={"description": "auto, metal, cuda or sim"})
    max_iterations: int = 12
    patience: int = 6  # evaluated candidates without improvement
    max_tokens: int = 400_000
    max_cost: float = 5.0  # USD
    max_wall_seconds: float = 1800.0
    max_consecutive_errors: int = 4
    target_speedup: float | None = None  # default: the task's target
    extra_seeds: int = 2  # final verification
    chip: str = "M3 Max"  # for simulator roofline estimates
    seed: int = 0
    context_window: int | None = None
    prices: tuple[float, float] | None = None  # USD per million tokens in/out; default: the price table

    def validate(self) -> RunConfig:
        from mlxport.errors import UserError

        for name in ("max_iterations", "patience", "max_tokens", "max_consecutive_errors"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        for name in ("max_cost", "max_wall_seconds"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.backend not in ("auto", "metal", "cuda", "sim"):
            raise UserError(f"unknown backend {self.backend!r}: use auto, metal, cuda or sim")
        return self
