"""The ``mlxport`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mlxport.errors import UserError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Port CUDA kernels to fast, verified MLX custom kernels.")
tasks_app = typer.Typer(no_args_is_help=True, help="The task suite: list, show, check, scaffold.")
app.add_typer(tasks_app, name="tasks")
eval_app = typer.Typer(invoke_without_command=True, help="Compare LLMs on the same graph, tools and budget.")
app.add_typer(eval_app, name="eval")
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
    from mlxport.tasks import load_task, suite_names

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
    from mlxport.tasks import expert_ports, load_task

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
    from mlxport.tasks import load_task, suite_names

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


# ---------------------------------------------------------------- kernels


BackendOpt = Annotated[str, typer.Option(help="auto, metal, cuda or sim.")]


@app.command()
def check(candidate: Annotated[Path, typer.Argument(help="Candidate .toml file.")],
          task: Annotated[str, typer.Option(help="Task name or folder.")],
          backend: BackendOpt = "auto", seed: Annotated[int | None, typer.Option(help="Input seed.")] = None,
          heldout: Annotated[bool, typer.Option(help="Also run the held-out cases.")] = False,
          as_json: JsonOpt = False) -> None:
    """Compile a candidate and check it against the task's reference on every visible case and dtype."""
    from mlxport.backends import get_backend
    from mlxport.tasks import load_candidate, load_task
    from mlxport.verify.correctness import run_correctness

    the_task, cand = load_task(task), load_candidate(candidate)
    be = get_backend(backend)
    report = run_correctness(the_task, cand, be, seed=seed, heldout=heldout)
    if as_json:
        _print_json(report.model_dump(mode="json") | {"ok": report.ok})
    else:
        table = Table("case", "dtype", "verdict", "max abs err", "max rel err", "err norm", "first mismatch / error")
        for c in report.cases:
            color = "green" if c.verdict == "pass" else "red"
            detail = c.error or (f"{c.first_mismatch}: got {c.got:.6g}, expected {c.expected:.6g}; {c.pattern}"
                                 if c.first_mismatch is not None else c.pattern)
            table.add_row(c.case, c.dtype, f"[{color}]{c.verdict}[/{color}]", _num(c.max_abs), _num(c.max_rel),
                          _num(c.err_norm), detail)
        out.print(table)
        out.print(f"{'PASS' if report.ok else 'FAIL'}: candidate {cand.id} on {be.name} (seed {report.seeds[0]})")
    if not report.ok:
        raise typer.Exit(1)


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}"


@app.command()
def bench(candidate: Annotated[Path, typer.Argument(help="Candidate .toml file.")],
          task: Annotated[str, typer.Option(help="Task name or folder.")],
          backend: BackendOpt = "auto", chip: Annotated[str, typer.Option(help="Chip for simulator estimates.")] = "M3 Max",
          as_json: JsonOpt = False) -> None:
    """Check a candidate, then time it against the task's baselines on the bench cases."""
    from mlxport.backends import get_backend
    from mlxport.tasks import load_candidate, load_task
    from mlxport.verify.benchmark import benchmark, summary
    from mlxport.verify.correctness import run_correctness

    the_task, cand = load_task(task), load_candidate(candidate)
    be = get_backend(backend)
    report = run_correctness(the_task, cand, be)
    if not report.ok:
        err.print(report.summary(), highlight=False, markup=False)
        raise UserError(f"candidate {cand.id} is not correct on {be.name}: fix it before timing it (see mlxport check)")
    from mlxport.tools.session import open_session

    s = open_session(the_task.folder, be.name, chip=chip)
    results = [benchmark(the_task, cand, be, case=c, chip=s.chip, datasheet=s.datasheet) for c in the_task.bench_cases()]
    if as_json:
        _print_json([r.model_dump(mode="json") for r in results])
    else:
        for r in results:
            out.print(summary(r), highlight=False, markup=False)


@app.command()
def read(path: Annotated[Path, typer.Argument(help="A .cu file.")], as_json: JsonOpt = False) -> None:
    """Read a CUDA file: kernels, parameters, shared memory, intrinsics, launches, Metal mapping."""
    from mlxport.translate.reader import read_cuda, summary

    if not path.is_file():
        raise UserError(f"no such file {path}: pass the path of a .cu file")
    cf = read_cuda(path)
    if as_json:
        sys.stdout.write(cf.model_dump_json(indent=2) + "\n")
    else:
        out.print(summary(cf), highlight=False, markup=False)


@app.command()
def translate(path: Annotated[Path, typer.Argument(help="A .cu file.")],
              kernel: Annotated[str | None, typer.Option(help="Kernel to translate (default: the first).")] = None,
              target: Annotated[str, typer.Option(help="msl or cuda.")] = "msl",
              task: Annotated[str | None, typer.Option(help="Task whose inputs and params bind the kernel's.")] = None,
              output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the candidate here.")] = None) -> None:
    """Rule-based translation (a non-LLM baseline) of a CUDA kernel into a candidate."""
    from mlxport.tasks import load_task
    from mlxport.translate.translator import translate as run_translate

    if not path.is_file():
        raise UserError(f"no such file {path}: pass the path of a .cu file")
    result = run_translate(path.read_text(errors="replace"), kernel=kernel, target=target,
                           task=load_task(task) if task else None)
    text = result.candidate.to_toml()
    if output:
        output.write_text(text)
        out.print(f"wrote {output}")
    else:
        sys.stdout.write(text)
    for note in result.notes:
        err.print(f"note: {note}", highlight=False, markup=False)


@app.command()
def doctor(as_json: JsonOpt = False,
           calibrate: Annotated[bool, typer.Option(help="Measure copy bandwidth and matmul rate on the GPU.")] = False
           ) -> None:
    """Which backends can run here, and why not."""
    import platform

    from mlxport.backends import availability, select_auto

    status = availability()
    data = {"platform": platform.platform(), "python": platform.python_version(), "auto": select_auto(),
            "backends": {k: {"available": v.ok, "reason": v.reason} for k, v in status.items()}}
    if calibrate:
        from mlxport.backends import GPUS, get_backend

        if data["auto"] not in GPUS:
            raise UserError(f"--calibrate needs a GPU backend ({' or '.join(GPUS)}); the simulator has no timing")
        data["calibration"] = get_backend(data["auto"]).calibrate()
    if as_json:
        _print_json(data)
        return
    out.print(f"{data['platform']}, Python {data['python']}; auto selects [bold]{data['auto']}[/bold]")
    for name, v in status.items():
        mark = "[green]available[/green]" if v.ok else f"[red]unavailable[/red]: {escape(v.reason)}"
        out.print(f"  {name:6s} {mark}")
    if "calibration" in data:
        out.print(f"  calibration: {data['calibration']}")


# ---------------------------------------------------------------- port


@app.command()
def port(
    kernel: Annotated[Path | None, typer.Argument(help="The .cu file to port (default: the task's kernel.cu).")] = None,
    task: Annotated[str | None, typer.Option(help="Task name or folder.")] = None,
    reference: Annotated[str | None, typer.Option(help="module:function or file.py:function (no --task).")] = None,
    inputs: Annotated[str | None, typer.Option(help="With --reference: 'x[R,C];w:float32[C]'.")] = None,
    outputs: Annotated[str | None, typer.Option(help="With --reference: 'out[R,C]'.")] = None,
    case: Annotated[list[str] | None, typer.Option(help="With --reference: a visible case 'R=256,C=1024'.")] = None,
    heldout: Annotated[list[str] | None, typer.Option(help="With --reference: a held-out case.")] = None,
    kernel_name: Annotated[str | None, typer.Option("--kernel-name", help="Entry kernel (default: first).")] = None,
    dtypes: Annotated[str, typer.Option(help="With --reference: comma-separated dtypes.")] = "float32",
    model: Annotated[str, typer.Option(help="rules, scripted:FILE or provider:model.")] = "rules",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1.")] = None,
    backend: Annotated[str, typer.Option(help="auto, metal, cuda or sim.")] = "auto",
    budget: Annotated[str | None, typer.Option(help="e.g. iterations=12,patience=6,tokens=4e5,cost=5,wall=1800")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("mlxport-out"),
    resume: Annotated[str | None, typer.Option(help="Resume this session id.")] = None,
    seed: int = 0,
    as_json: JsonOpt = False,
) -> None:
    """Port a CUDA kernel to a verified MLX kernel and write kernel.py, test_kernel.py and a report."""
    from mlxport.agent.config import RunConfig, parse_budget
    from mlxport.agent.providers import check_model_spec

    show = _progress(err if as_json else out)
    if resume:
        from mlxport.agent.port import resume_port

        run = resume_port(out_dir, resume, on_update=show)
    else:
        # Cheap checks first, so a typo fails in a moment rather than after loading the agent.
        config = RunConfig(model=model, base_url=base_url, backend=backend, seed=seed, **parse_budget(budget))
        config.validate()
        check_model_spec(model, base_url)
        the_task = _resolve_task(kernel, task, reference, inputs, outputs, case, heldout, kernel_name, dtypes, out_dir)
        from mlxport.agent.port import run_port

        run = run_port(the_task, config, out_dir, on_update=show)
    if as_json:
        _print_json(run)
    else:
        _print_port_summary(run, out_dir)
    if not run["result"]["verified"]:
        raise typer.Exit(1)


def _resolve_task(kernel, task, reference, inputs, outputs, case, heldout, kernel_name, dtypes, out_dir):
    from mlxport.evals.scaffold import task_from_flags, task_name_for
    from mlxport.tasks import load_task

    if task:
        return load_task(task)
    if kernel is None:
        raise UserError("nothing to port: pass a .cu file, or --task NAME (see `mlxport tasks list`)")
    if not kernel.is_file():
        raise UserError(f"no such file {kernel}: pass the path of a .cu file")
    _check_cuda_file(kernel)
    if (kernel.parent / "task.toml").is_file() and not reference:
        return load_task(kernel.parent)
    if not (reference and inputs and outputs):
        raise UserError(f"{kernel} is not in a task folder: pass --task DIR, or --reference, --inputs, --outputs "
                        f"and --case to describe it")
    folder = task_from_flags(kernel, out_dir / "_tasks" / task_name_for(kernel), reference=reference, inputs=inputs,
                             outputs=outputs, cases=case or [], heldout=heldout or [], kernel=kernel_name,
                             dtypes=[d.strip() for d in dtypes.split(",") if d.strip()])
    return load_task(folder)


def _check_cuda_file(path: Path) -> None:
    from mlxport.translate.reader import read_cuda

    try:
        cf = read_cuda(path.read_bytes().decode("utf-8", errors="strict"), name=path.name)
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is binary, not CUDA source: pass a .cu text file") from e
    if not any(k.kind == "global" for k in cf.kernels):
        raise UserError(f"{path} defines no __global__ kernel: pass a file with the kernel to port")


def _progress(console: Console):
    def show(node: str, data: dict) -> None:
        for m in data.get("messages", []) or []:
            kind = getattr(m, "type", "")
            if kind == "ai":
                text = (m.content or "").strip() if isinstance(m.content, str) else ""
                if text:
                    console.print(f"[cyan]model[/cyan] {escape(text[:300])}", highlight=False)
                for c in m.tool_calls:
                    args = ", ".join(f"{k}={str(v)[:40]!r}" for k, v in c["args"].items() if k != "source")
                    console.print(f"[cyan]call[/cyan]  {c['name']}({escape(args)})", highlight=False)
            elif kind == "tool":
                first = str(m.content).splitlines()[0] if m.content else ""
                color = "red" if getattr(m, "status", "") == "error" else "green"
                console.print(f"[{color}]tool[/{color}]  {escape(first[:200])}", highlight=False)
        if data.get("best_id"):
            console.print(f"[magenta]best[/magenta]  {data['best_id']}")
        if data.get("stop_reason"):
            console.print(f"[yellow]stop[/yellow]  {data['stop_reason']}")
        if node == "finalize" and data.get("final"):
            f = data["final"]
            verdict = f"verified on {f['backend']}" if f.get("verified") else "no candidate passed verification"
            console.print(f"[bold]final[/bold] {f.get('candidate_id')}: {verdict}")
    return show


def _print_port_summary(run: dict, out_dir: Path) -> None:
    res = run["result"]
    label = " (non-LLM baseline)" if run["non_llm_baseline"] else ""
    out.print(f"\n[bold]{run['task']}[/bold] with {run['model']}{label}: stop reason {run['stop_reason']}, "
              f"{run['iterations']} iterations, {run['candidates']} candidates")
    if res["verified"]:
        speed = ", ".join(f"{k} {v:.2f}x" for k, v in res["speedups"].items()) if res["timed"] else \
            "not timed (simulator)"
        out.print(f"[green]verified[/green] on {res['backend']}: candidate {res['candidate_id']}; {speed}")
        out.print(f"wrote {out_dir / run['task']}/kernel.py, test_kernel.py, report.md, run.json")
    else:
        out.print(f"[red]no verified kernel[/red]; see {out_dir / run['task']}/report.md")


@app.command()
def chat(kernel: Annotated[Path | None, typer.Argument(help="The .cu file, inside a task folder.")] = None,
         task: Annotated[str | None, typer.Option(help="Task name or folder.")] = None,
         session: Annotated[str | None, typer.Option(help="Resume this session id.")] = None,
         model: Annotated[str, typer.Option(help="rules, scripted:FILE or provider:model.")] = "rules",
         base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server.")] = None,
         backend: BackendOpt = "auto",
         budget: Annotated[str | None, typer.Option(help="e.g. iterations=12,cost=5")] = None,
         out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("mlxport-out"),
         seed: int = 0) -> None:
    """Port a kernel interactively: watch each step, steer, approve candidates; resume with --session."""
    from mlxport.agent.config import RunConfig, parse_budget
    from mlxport.chat import chat as run_chat
    from mlxport.chat import check_config, resolve_task

    config = RunConfig(model=model, base_url=base_url, backend=backend, seed=seed, **parse_budget(budget))
    if not session:
        check_config(config)
    run_chat(None if session else resolve_task(kernel, task), config, out_dir, session=session)


@app.command()
def batch(source: Annotated[str, typer.Argument(help="Manifest .toml, folder of task folders, or 'suite'.")],
          model: Annotated[str, typer.Option(help="rules, scripted:FILE or provider:model.")] = "rules",
          jobs: Annotated[int, typer.Option(help="Ports at once (device work stays serialised).")] = 2,
          out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("mlxport-out"),
          backend: BackendOpt = "auto",
          base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server.")] = None,
          budget: Annotated[str | None, typer.Option(help="e.g. iterations=12,cost=5")] = None,
          seed: int = 0,
          ray: Annotated[str | None, typer.Option("--ray", help="Ray address, auto or local (mlxport[ray]).")] = None,
          as_json: JsonOpt = False) -> None:
    """Port many kernels unattended; rerun the same command to resume."""
    from mlxport.agent.config import parse_budget
    from mlxport.batch import run_batch

    cfg = {"backend": backend, "seed": seed, **parse_budget(budget), **({"base_url": base_url} if base_url else {})}
    path = run_batch(source, model=model, jobs=jobs, out=out_dir, budget=cfg, ray_address=ray,
                     console=err if as_json else out)
    summary = json.loads(path.read_text())
    if as_json:
        _print_json(summary)
    if summary["totals"]["verified"] < summary["totals"]["tasks"]:
        raise typer.Exit(1)


@app.command()
def mcp() -> None:
    """Serve mlxport's tools (read, knowledge, compile, check, benchmark, port) to an MCP client over stdio."""
    from mlxport.mcp_server import serve_mcp

    serve_mcp()


# ---------------------------------------------------------------- eval


@eval_app.callback()
def eval_run(
    ctx: typer.Context,
    models: Annotated[str | None, typer.Option(help="Comma-separated model specs; rules is always added.")] = None,
    suite: Annotated[str, typer.Option(help="Task suite.")] = "core",
    tasks: Annotated[str | None, typer.Option(help="Comma-separated task names (default: the whole suite).")] = None,
    seeds: Annotated[int, typer.Option(help="Runs per model and task.")] = 1,
    budget: Annotated[str | None, typer.Option(help="Same for every model, e.g. iterations=12,cost=2,wall=30m")] = None,
    backend: BackendOpt = "auto",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server for openai: models.")] = None,
    jobs: Annotated[int, typer.Option(help="Ports run side by side (device work stays serialised).")] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Eval folder; rerun to resume.")] = Path("mlxport-eval"),
) -> None:
    """Run every model x task x seed with identical budgets, then write report.md and report.html."""
    if ctx.invoked_subcommand:
        return
    from mlxport.agent.config import parse_budget
    from mlxport.evals.report import build_reports
    from mlxport.evals.runner import resolve_tasks, run_eval

    if not models:
        raise UserError("pass --models, e.g. --models openai:gpt-4.1-mini,scripted:my_script.json")
    overrides = {**parse_budget(budget), "backend": backend, **({"base_url": base_url} if base_url else {})}
    names = [t for t in (tasks or "").split(",") if t]
    resolve_tasks(suite, names)  # an unknown suite or task fails here, before any work

    def progress(event: dict) -> None:
        out.print(f"[{event['done']}/{event['total']}] {event['model']} {event['task']} seed {event['seed']}: "
                  f"{event['status']}", highlight=False)

    folder = run_eval([m for m in models.split(",") if m], names, seeds, overrides, jobs, out_dir,
                      on_progress=progress)
    md, html = build_reports(folder)
    out.print(f"wrote {md} and {html}")


@eval_app.command("report")
def eval_report(folder: Annotated[Path, typer.Argument(help="An eval folder.")]) -> None:
    """Rebuild report.md and report.html from the run records in an eval folder."""
    from mlxport.evals.report import build_reports

    if not folder.is_dir():
        raise UserError(f"no eval folder {folder}: pass the --out folder of an earlier mlxport eval")
    md, html = build_reports(folder)
    out.print(f"wrote {md} and {html}")


def main() -> None:
    try:
        app()
    except UserError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
