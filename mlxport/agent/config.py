"""The run-scoped configuration: what a run is allowed to do. Light (no LangChain), so the CLI
can validate it before loading the agent."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    approve: bool = False  # chat: pause for a person to approve each new best candidate

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
