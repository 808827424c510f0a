"""``mlxport check``: compile a candidate and check it on every case and dtype of a task."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from mlxport.cli import options as o

app = o.command_app(
    "Compile a candidate and check it against the task's reference on every visible case and dtype."
)


@app.command()
def check(
    candidate: Annotated[Path, typer.Argument(help="Candidate .toml file.")],
    task: o.Task,
    backend: o.Backend = "auto",
    seed: Annotated[int | None, typer.Option(help="Input seed.")] = None,
    heldout: Annotated[bool, typer.Option(help="Also run the held-out cases.")] = False,
    as_json: o.Json = False,
) -> None:
    """Compile a candidate and check it against the task's reference on every visible case and
    dtype."""
    from mlxport.backends import get_backend
    from mlxport.tasks import load_candidate, load_task
    from mlxport.verify.correctness import run_correctness

    the_task, cand = load_task(task), load_candidate(candidate)
    be = get_backend(backend)
    o.runs_here(cand, be)
    report = run_correctness(the_task, cand, be, seed=seed, heldout=heldout)
    if as_json:
        o.print_json(report.model_dump(mode="json") | {"ok": report.ok})
    else:
        table = Table(
            "case",
            "dtype",
            "verdict",
            "max abs err",
            "max rel err",
            "err norm",
            "first mismatch / error",
        )
        for c in report.cases:
            color = "green" if c.verdict == "pass" else "red"
            detail = c.error or (
                f"{c.first_mismatch}: got {c.got:.6g}, expected {c.expected:.6g}; {c.pattern}"
                if c.first_mismatch is not None
                else c.pattern
            )
            table.add_row(
                c.label,
                c.dtype,
                f"[{color}]{c.verdict}[/{color}]",
                _num(c.max_abs),
                _num(c.max_rel),
                _num(c.err_norm),
                detail,
            )
        o.out.print(table)
        o.out.print(
            f"{'PASS' if report.ok else 'FAIL'}: candidate {cand.id} on {be.name} (seed "
            f"{report.seeds[0]})"
        )
    if not report.ok:
        raise typer.Exit(1)


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}"
