"""``mlxport eval``: several models on the same graph, tools and budget; ``eval report`` rebuilds
the reports of an eval folder (see mlxport/evals)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o
from mlxport.errors import UserError

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    invoke_without_command=True,
    help="Compare LLMs on the same graph, tools and budget.",
)


@app.callback()
def run(
    ctx: typer.Context,
    models: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated model specs, each optionally with @tree or "
            "@linear (its search; default linear), e.g. "
            "rules,rules@tree; rules is always added."
        ),
    ] = None,
    suite: Annotated[str, typer.Option(help="Task suite.")] = "core",
    tasks: Annotated[
        str | None, typer.Option(help="Comma-separated task names (default: the whole suite).")
    ] = None,
    seeds: Annotated[int, typer.Option(help="Runs per model and task.")] = 1,
    budget: o.Budget = None,
    backend: o.Backend = "auto",
    base_url: o.BaseUrl = None,
    jobs: Annotated[
        int, typer.Option(help="Ports run side by side (device work stays serialised).")
    ] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Eval folder; rerun to resume.")] = Path(
        "mlxport-eval"
    ),
) -> None:
    """Run every model x task x seed with the same budget, then write report.md and report.html."""
    if ctx.invoked_subcommand:
        return
    from mlxport.evals.report import build_reports
    from mlxport.evals.runner import resolve_tasks, run_eval

    fields = o.overrides(backend=backend, base_url=base_url, budget=budget)
    names = [t for t in (tasks or "").split(",") if t]
    resolve_tasks(suite, names)  # an unknown suite or task fails here, before any work

    def progress(event: dict) -> None:
        o.out.print(
            f"[{event['done']}/{event['total']}] {event['model']} {event['task']} seed "
            f"{event['seed']}: "
            f"{event['status']}",
            highlight=False,
        )

    folder = run_eval(
        [m for m in (models or "").split(",") if m],
        names,
        seeds,
        fields,
        jobs,
        out_dir,
        on_progress=progress,
    )
    md, html = build_reports(folder)
    o.out.print(f"wrote {md} and {html}")


@app.command("report")
def report(folder: Annotated[Path, typer.Argument(help="An eval folder.")]) -> None:
    """Rebuild report.md and report.html from the run records in an eval folder."""
    from mlxport.evals.report import build_reports

    if not folder.is_dir():
        raise UserError(
            f"no eval folder {folder}: pass the --out folder of an earlier mlxport eval"
        )
    md, html = build_reports(folder)
    o.out.print(f"wrote {md} and {html}")
