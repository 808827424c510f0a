"""``mlxport tasks``: the task suite: list, show, check, new."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from mlxport.cli import options as o

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="The task suite: list, show, check, scaffold.",
)


@app.command("list")
def list_tasks(as_json: o.Json = False) -> None:
    """List the bundled task suite."""
    from mlxport.tasks import load_task, suite_names

    tasks = [load_task(n) for n in suite_names()]
    if as_json:
        o.print_json(
            [
                {
                    "name": t.name,
                    "kernel": t.kernel,
                    "dtypes": t.dtypes,
                    "tags": t.tags,
                    "description": t.description,
                    "path": str(t.folder),
                }
                for t in tasks
            ]
        )
        return
    table = Table("task", "entry kernel", "dtypes", "cases (visible/held-out)", "description")
    for t in tasks:
        table.add_row(
            t.name,
            t.kernel,
            ",".join(t.dtypes),
            f"{len(t.cases.visible)}/{len(t.cases.heldout)}",
            t.description,
        )
    o.out.print(table)


@app.command("show")
def show(name: str, as_json: o.Json = False) -> None:
    """Show one task: inputs, outputs, cases, baselines, tolerances, expert ports."""
    from mlxport.tasks import expert_ports, load_task

    task = load_task(name)
    ports = expert_ports(task)
    if as_json:
        o.print_json(
            {**task.model_dump(mode="json"), "path": str(task.folder), "ports": sorted(ports)}
        )
        return
    p = o.out.print
    p(f"[bold]{task.name}[/bold]: {task.description}")
    p(f"  source: {task.folder / task.source} (entry kernel {task.kernel})")
    for t in task.inputs:
        p(f"  input  {t.name}: {t.dtype}{t.shape} init={t.init.kind}")
    for param in task.params:
        p(f"  param  {param.name}: {param.type} = {param.default}")
    for t in task.outputs:
        p(f"  output {t.name}: {t.dtype}{t.shape}")
    p(
        f"  reference {task.reference}; baselines native={task.baselines.native} "
        f"naive={task.baselines.naive}"
    )
    p(
        f"  dtypes {', '.join(task.dtypes)}; tolerance "
        + "; ".join(f"{d}: atol={t.atol:g} rtol={t.rtol:g}" for d, t in task.tolerance.items())
    )
    p(f"  visible cases: {[task.case_label(c) for c in task.cases.visible]}")
    p(f"  held-out cases: {len(task.cases.heldout)} (run only in final verification)")
    p(f"  expert ports: {', '.join(sorted(ports)) or 'none'}")


@app.command("check")
def check(
    names: Annotated[
        list[str] | None, typer.Argument(help="Task names or folders (default: all).")
    ] = None,
    seed: int = 0,
    as_json: o.Json = False,
) -> None:
    """Load each task and run its reference and baselines on every case and dtype (MLX CPU)."""
    from mlxport.evals.check import check_task
    from mlxport.tasks import load_task, suite_names

    rows = []
    for name in names or suite_names():
        rows += check_task(load_task(name), seed=seed)
    failed = [r for r in rows if r.result.verdict != "pass"]
    if as_json:
        o.print_json(
            [
                {
                    "task": r.task,
                    "baseline": r.baseline,
                    "case": r.case,
                    "dtype": r.dtype,
                    "heldout": r.heldout,
                    **r.result.model_dump(exclude={"case", "dtype"}),
                }
                for r in rows
            ]
        )
    else:
        _print_check_table(rows)
        o.out.print(f"{len(rows) - len(failed)} of {len(rows)} checks passed")
    if failed:
        raise typer.Exit(1)


def _print_check_table(rows) -> None:
    """One line per task and function (worst case shown); every failing case listed after."""
    groups: dict[tuple[str, str], list] = {}
    for r in rows:
        groups.setdefault((r.task, r.baseline), []).append(r)
    table = Table("task", "fn", "passed", "worst err norm", "worst max abs err", "first failure")
    for (task, fn), rs in groups.items():
        bad = [r for r in rs if r.result.verdict != "pass"]
        norm = max((r.result.err_norm or 0.0) for r in rs)
        abs_err = max((r.result.max_abs or 0.0) for r in rs)
        color = "red" if bad else "green"
        first = (
            f"{bad[0].case} {bad[0].dtype}: {bad[0].result.pattern or bad[0].result.error}"
            if bad
            else ""
        )
        table.add_row(
            task,
            fn,
            f"[{color}]{len(rs) - len(bad)}/{len(rs)}[/{color}]",
            f"{norm:.2g}",
            f"{abs_err:.3g}",
            first,
        )
    o.out.print(table)


@app.command("new")
def new(
    name: str,
    directory: Annotated[
        Path, typer.Option("--dir", help="Parent folder (made if missing).")
    ] = Path("."),
    source: Annotated[
        Path | None,
        typer.Option(
            "--from", help="A .cu file: the task checks ports against its kernel, run on the CPU."
        ),
    ] = None,
    kernel: Annotated[str | None, typer.Option(help="With --from: the __global__ kernel.")] = None,
    case: Annotated[
        list[str] | None, typer.Option(help="With --from: a case, e.g. 'N=4096,C=768'.")
    ] = None,
    dtypes: Annotated[
        str | None, typer.Option(help="With --from: dtypes of a templated kernel.")
    ] = None,
    shape: Annotated[
        list[str] | None, typer.Option(help="With --from: a buffer's extent, 'NAME=EXPR'.")
    ] = None,
    grid: Annotated[
        str | None, typer.Option(help="With --from: blocks per grid, where the host gives none.")
    ] = None,
    block: Annotated[
        str | None, typer.Option(help="With --from: threads per block, likewise.")
    ] = None,
    shared_bytes: Annotated[
        str | None, typer.Option(help="With --from: dynamic shared memory, likewise.")
    ] = None,
    template: Annotated[
        str | None, typer.Option(help="With --from: template arguments, e.g. 'T=float'.")
    ] = None,
    include: Annotated[
        list[Path] | None,
        typer.Option("-I", "--include", help="With --from: a folder of the file's local headers."),
    ] = None,
    inputs: Annotated[
        str | None,
        typer.Option(help="With --from: the values an integer input takes, 'idx:int32[0,V)'."),
    ] = None,
) -> None:
    """Make a task folder: from a .cu file (--from) with its kernel as the golden, or a scaffold to
    edit."""
    if source is not None:
        from mlxport.tasks.make import TaskRequest, make_task

        request = TaskRequest.of(
            source=source,
            kernel=kernel,
            cases=case,
            dtypes=dtypes,
            shapes=shape,
            grid=grid,
            block=block,
            shared_bytes=shared_bytes,
            template=template,
            includes=include,
            inputs=inputs,
            name=name,
        )
        with o.Progress(o.err) as show:
            folder = make_task(request, directory, on_note=o.note, on_progress=show.step)
        o.out.print(
            f"created {folder}: port it with `mlxport port --task {folder}`; check it with "
            f"`mlxport tasks check {folder}`"
        )
        return
    from mlxport.tasks.scaffold import scaffold

    directory.mkdir(parents=True, exist_ok=True)
    folder = scaffold(name, directory)
    o.out.print(
        f"created {folder}: edit kernel.cu, task.toml and reference.py, then run "
        f"`mlxport tasks check {folder}`"
    )
