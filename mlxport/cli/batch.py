"""``mlxport batch``: many ports unattended, resumable (see mlxport/batch.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o

app = o.command_app("Port many kernels unattended; rerun the same command to resume.")


@app.command()
def batch(
    source: Annotated[
        str, typer.Argument(help="Manifest .toml, folder of task folders, or 'suite'.")
    ],
    model: o.Model = "rules",
    jobs: Annotated[int, typer.Option(help="Ports at once (device work stays serialised).")] = 2,
    out_dir: o.Out = Path("mlxport-out"),
    backend: o.Backend = "auto",
    base_url: o.BaseUrl = None,
    budget: o.Budget = None,
    seed: o.Seed = 0,
    search: o.Search = "linear",
    ray: Annotated[
        str | None, typer.Option("--ray", help="Ray address, auto or local (mlxport[ray]).")
    ] = None,
    as_json: o.Json = False,
) -> None:
    """Port many kernels unattended; rerun the same command to resume."""
    from mlxport.batch import run_batch

    fields = o.overrides(
        backend=backend, base_url=base_url, budget=budget, seed=seed, search=search
    )
    path = run_batch(
        source,
        model=model,
        jobs=jobs,
        out=out_dir,
        budget=fields,
        ray_address=ray,
        console=o.err if as_json else o.out,
    )
    summary = json.loads(path.read_text())
    if as_json:
        o.print_json(summary)
    if summary["totals"]["verified"] < summary["totals"]["tasks"]:
        raise typer.Exit(1)
