"""The run-scoped configuration: what a run is allowed to do. Light (no LangChain), so the CLI
can validate it before loading the agent."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from mlxport.errors import UserError

PER_RUN = ("model", "seed", "approve")
SEARCHES = ("linear", "tree")
BUDGET_KEYS = {
    "iterations": "max_iterations",
    "patience": "patience",
    "tokens": "max_tokens",
    "cost": "max_cost",
    "wall": "max_wall_seconds",
    "errors": "max_consecutive_errors",
    "target": "target_speedup",
    "extra_seeds": "extra_seeds",
    "verify": "max_verifications",
    "stagnation": "stagnation",
    "request_timeout": "request_timeout",
}


@dataclass(kw_only=True)
class RunConfig:
    """What a run is allowed to do. Passed as the graph's context; identical across eval models."""

    model: str = field(
        default="rules", metadata={"description": "rules, scripted:FILE or provider:model"}
    )
    base_url: str | None = field(
        default=None, metadata={"description": "OpenAI-compatible server URL"}
    )
    backend: str = field(default="auto", metadata={"description": "auto, metal, cuda or sim"})
    max_iterations: int = 12
    patience: int = 6  # evaluated candidates without improvement
    max_tokens: int = 400_000
    max_cost: float = 5.0  # USD
    max_wall_seconds: float = 1800.0
    max_consecutive_errors: int = 4
    target_speedup: float | None = None  # default: the task's target
    extra_seeds: int = 2  # final verification
    max_verifications: int = (
        3  # candidates the model may check with the verify tool before finishing
    )
    chip: str = "M3 Max"  # the Apple GPU the simulator's cost estimates are for
    seed: int = 0
    context_window: int | None = None
    request_timeout: float = (
        300.0  # seconds per model request (a hung server ends the run after its retries)
    )
    prices: tuple[float, float] | None = (
        None  # USD per million tokens in/out; default: the price table
    )
    search: str = field(
        default="linear",
        metadata={
            "description": "linear (one ReAct thread) or tree (cycles "
            "on the best-rated idea of the plan)"
        },
    )
    stagnation: int = 3  # tree: candidates checked without improvement before a cycle ends
    max_difficulty: float = 0.8  # tree: ideas rated harder are not tried
    approve: bool = False  # chat: a person is present: approves each new best, answers ask_user

    def validate(self) -> RunConfig:
        if not 0 < self.max_difficulty <= 1:
            raise UserError(f"max_difficulty is a rating from 0 to 1, got {self.max_difficulty}")
        if self.search not in SEARCHES:
            raise UserError(f"--search must be one of {', '.join(SEARCHES)}, got {self.search!r}")
        for name in (
            "max_iterations",
            "patience",
            "max_tokens",
            "max_consecutive_errors",
            "stagnation",
        ):
            if getattr(self, name) < 1:
                raise UserError(
                    f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}"
                )
        for name in ("max_cost", "max_wall_seconds", "request_timeout"):
            if getattr(self, name) <= 0:
                raise UserError(
                    f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}"
                )
        from mlxport.backends import check_name

        check_name(self.backend)
        from mlxport.knowledge import hardware_profile

        try:
            hardware_profile(self.chip)
        except ValueError as e:
            raise UserError(str(e)) from e
        return self


def parse_budget(text: str | None) -> dict[str, Any]:
    """``iterations=12,patience=6,tokens=400k,cost=2.5,wall=30m`` -> RunConfig overrides. Full
    RunConfig field names (``max_iterations=12``) work too."""
    names = (
        {f.name for f in fields(RunConfig)} - set(PER_RUN) - {"prices"}
    )  # prices: a pair, set in code
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, sep, value = part.partition("=")
        key = BUDGET_KEYS.get(key.strip(), key.strip())
        if not sep or key not in names:
            raise UserError(
                f"cannot read budget item {part!r}: use key=value with keys "
                f"{', '.join(BUDGET_KEYS)} (e.g. --budget iterations=12,cost=2)"
            )
        out[key] = _budget_value(key, value.strip(), part)
    return out


def _budget_value(key: str, value: str, part: str) -> Any:
    scale = (
        {"k": 1e3, "m": 1e6}
        if key == "max_tokens"
        else {"s": 1, "m": 60, "h": 3600}
        if key == "max_wall_seconds"
        else {}
    )
    factor = 1.0
    if value and value[-1].lower() in scale:
        factor, value = scale[value[-1].lower()], value[:-1]
    try:
        number = float(value) * factor
    except ValueError as e:
        if key in ("backend", "chip", "base_url"):
            return value
        forms = {
            "max_tokens": ", or one ending in k or m (e.g. tokens=400k)",
            "max_wall_seconds": " of seconds, or one ending in s, m or h (e.g. wall=30m)",
        }
        raise UserError(f"budget item {part!r} needs a number{forms.get(key, '')}") from e
    if not math.isfinite(number):
        raise UserError(f"budget item {part!r} needs a finite number")
    return (
        int(number)
        if key
        in (
            "max_iterations",
            "patience",
            "max_tokens",
            "max_consecutive_errors",
            "extra_seeds",
            "max_verifications",
            "stagnation",
            "context_window",
        )
        else number
    )
