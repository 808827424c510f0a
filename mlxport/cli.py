"""The ``mlxport`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from mlxport.errors import UserError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Port CUDA kernels to fast, verified MLX custom kernels.")
tasks_app = typer.Typer(no_args_is_help=True, help="The task suite: list, show, check, scaffold.")
app.add_typer(tasks_app, name="tasks")
kb_app = typer.Typer(no_args_is_help=True, help="The Apple-GPU knowledge base: search it, look up chips.")
app.add_typer(kb_app, name="kb")

out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, soft_wrap=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# ---------------------------------------------------------------- tasks


@tasks_app.command("list")
def tasks_list(as_json: JsonOpt = False) -> None:
    """List the bundled task suite."""
    from mlxport.suite import load_task, suite_names

    tasks = [load_task(n) for n in suite_names()]
    if as_json:
        _print_json([{"name": t.name, "kernel": t.kernel, "dtypes": t.dtypes, "tags": t.tags,
                      "description": t.description, "path": str(t.folder)} for t in tasks])
        return
    table = Table("task", "entry kernel", "dtypes", "cases (visible/held-out)", "description")
    for t in tasks:
        table.add_row(t.name, t.kernel, ",".join(t.dtypes), f"{len(t.cases.visible)}/{len(t.cases.heldout)}",
                      t.description)
    out.print(table)


@tasks_app.command("show")
def tasks_show(name: str, as_json: JsonOpt = False) -> None:
    """Show one task: inputs, outputs, cases, baselines, tolerances, expert ports."""
    from mlxport.suite import expert_ports, load_task

    task = load_task(name)
    ports = expert_ports(task)
    if as_json:
        _print_json({**task.model_dump(mode="json"), "path": str(task.folder), "ports": sorted(ports)})
        return
    out.print(f"[bold]{task.name}[/bold]: {task.description}")
    out.print(f"  source: {task.folder / task.source} (entry kernel {task.kernel})")
    for t in task.inputs:
        out.print(f"  input  {t.name}: {t.dtype}{t.shape} init={t.init.kind}")
    for p in task.params:
        out.print(f"  param  {p.name}: {p.type} = {p.default}")
    for t in task.outputs:
        out.print(f"  output {t.name}: {t.dtype}{t.shape}")
    out.print(f"  reference {task.reference}; baselines native={task.baselines.native} naive={task.baselines.naive}")
    out.print(f"  dtypes {', '.join(task.dtypes)}; tolerance " +
              "; ".join(f"{d}: atol={t.atol:g} rtol={t.rtol:g}" for d, t in task.tolerance.items()))
    out.print(f"  visible cases: {[task.case_label(c) for c in task.cases.visible]}")
    out.print(f"  held-out cases: {len(task.cases.heldout)} (run only in final verification)")
    out.print(f"  expert ports: {', '.join(sorted(ports)) or 'none'}")


@tasks_app.command("check")
def tasks_check(names: Annotated[list[str] | None, typer.Argument(help="Task names or folders (default: all).")] = None,
                seed: int = 0, as_json: JsonOpt = False) -> None:
    """Load each task and run its reference and baselines on every case and dtype (MLX CPU)."""
    from mlxport.evals.check import check_task
    from mlxport.suite import load_task, suite_names

    rows = []
    for name in names or suite_names():
        rows += check_task(load_task(name), seed=seed)
    failed = [r for r in rows if r.result.verdict != "pass"]
    if as_json:
        _print_json([{"task": r.task, "baseline": r.baseline, "case": r.case, "dtype": r.dtype,
                      "heldout": r.heldout, **r.result.model_dump(exclude={"case", "dtype"})} for r in rows])
    else:
        _print_check_table(rows)
        out.print(f"{len(rows) - len(failed)} of {len(rows)} checks passed")
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
        first = f"{bad[0].case} {bad[0].dtype}: {bad[0].result.pattern or bad[0].result.error}" if bad else ""
        table.add_row(task, fn, f"[{color}]{len(rs) - len(bad)}/{len(rs)}[/{color}]", f"{norm:.2g}",
                      f"{abs_err:.3g}", first)
    out.print(table)


@tasks_app.command("new")
def tasks_new(name: str, directory: Annotated[Path, typer.Option("--dir", help="Parent folder.")] = Path(".")) -> None:
    """Scaffold a new task folder with a CUDA kernel, task.toml, reference.py and port stubs to edit."""
    from mlxport.evals.scaffold import scaffold

    folder = scaffold(name, directory)
    out.print(f"created {folder}: edit kernel.cu, task.toml and reference.py, then run "
              f"`mlxport tasks check {folder}`")


# ---------------------------------------------------------------- knowledge base


@kb_app.command("search")
def kb_search(query: str, k: Annotated[int, typer.Option("-k", help="Sections to return.")] = 3,
              chip: Annotated[str | None, typer.Option(help="Include this chip's figures.")] = None,
              as_json: JsonOpt = False) -> None:
    """Search the knowledge base; each section comes with its sources."""
    from mlxport.knowledge import format_hits, search

    hits = _kb(lambda: search(query, k=k, chip=chip))
    if as_json:
        _print_json([h.model_dump() for h in hits])
    else:
        out.print(format_hits(hits), highlight=False, markup=False)


@kb_app.command("chip")
def kb_chip(name: Annotated[str, typer.Argument(help="e.g. 'M3 Max', or auto on a Mac.")] = "auto",
            as_json: JsonOpt = False) -> None:
    """The spec row of an Apple chip: GPU cores, bandwidth, FP32/FP16 rates, memory, features."""
    from mlxport.knowledge import hardware_profile
    from mlxport.knowledge.chips import chip_text

    profile = _kb(lambda: hardware_profile(name))
    if as_json:
        _print_json(profile.model_dump())
    else:
        out.print(chip_text(profile), highlight=False, markup=False)


@kb_app.command("chips")
def kb_chips() -> None:
    """List the chips the knowledge base knows."""
    from mlxport.knowledge import list_chips

    out.print("\n".join(list_chips()))


def _kb(fn):
    try:
        return fn()
    except ValueError as e:
        raise UserError(str(e)) from e


def main() -> None:
    try:
        app()
    except UserError as e:
        err.print(f"[red]error:[/red] {e}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
