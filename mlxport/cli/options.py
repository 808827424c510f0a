"""What several commands share: the options declared once, the consoles, and the one function
that builds a run's configuration from flags."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

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
