"""``mlxport bench``: check a candidate, then time it against its task's baselines (on the
simulator: the candidate's labelled cost estimate for ``--chip``, verify/estimate.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o
from mlxport.errors import UserError

app = o.command_app(
    "Check a candidate, then time it against the task's baselines on the bench cases."
)


@app.command()
def bench(
    candidate: Annotated[Path, typer.Argument(help="Candidate .toml file.")],
    task: o.Task,
    backend: o.Backend = "auto",
    chip: o.Chip = "M3 Max",
    as_json: o.Json = False,
) -> None:
    """Check a candidate, then time it against the task's baselines on the bench cases."""
    from mlxport.tasks import load_candidate
    from mlxport.tools.session import open_session
    from mlxport.verify.benchmark import benchmark, summary
    from mlxport.verify.correctness import run_correctness

    session = open_session(task, backend, chip=chip)
    cand, be = load_candidate(candidate), session.backend
    o.runs_here(cand, be)
    report = run_correctness(session.task, cand, be)
    if not report.ok:
        o.err.print(report.summary(), highlight=False, markup=False)
        raise UserError(
            f"candidate {cand.id} is not correct on {be.name}: fix it before timing it (see "
            f"mlxport check)"
        )
    results = [
        benchmark(session.task, cand, be, case=c, chip=session.chip, datasheet=session.datasheet)
        for c in session.task.bench_cases()
    ]
    if as_json:
        o.print_json([r.model_dump(mode="json") for r in results])
    else:
        for r in results:
            o.out.print(summary(r), highlight=False, markup=False)
