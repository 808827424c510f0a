"""``mlxport port``: port one kernel unattended, or resume a port that was stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mlxport.cli import options as o
from mlxport.errors import UserError, read_text

# The flags of a bare .cu file: TaskRequest's fields (mlxport/tasks/request.py).
KernelName = Annotated[
    str | None, typer.Option("--kernel", help="The __global__ kernel (default: the only one).")
]
Case = Annotated[
    list[str] | None,
    typer.Option(
        help="A case: sizes, kernel parameters and host variables by name, "
        "e.g. 'N=4096,C=768,block_size=128'. Repeat for more."
    ),
]
Dtypes = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated dtypes, for a kernel templated on its element type (default float32)."
    ),
]
Shape = Annotated[
    list[str] | None,
    typer.Option(
        help="A buffer's extent in elements of its dtype (four per float4) where the host "
        "code gives none, e.g. 'K=B*nh*N*d'. Repeat for more."
    ),
]
Grid = Annotated[
    str | None,
    typer.Option(
        help="Blocks per grid, 'X[,Y,Z]' over the case's names, where the "
        "host code does not launch the kernel."
    ),
]
Block = Annotated[str | None, typer.Option(help="Threads per block, 'X[,Y,Z]', likewise.")]
SharedBytes = Annotated[
    str | None, typer.Option(help="Dynamic shared memory of the launch, likewise.")
]
Template = Annotated[
    str | None,
    typer.Option(help="Template arguments the launch does not give, e.g. 'T=float,BLOCK=256'."),
]
Include = Annotated[
    list[Path] | None,
    typer.Option("-I", "--include", help="A folder of the file's local headers. Repeat for more."),
]
Reference = Annotated[
    str | None,
    typer.Option(
        help="module:function or file.py:function: an MLX reference instead of the original kernel."
    ),
]
Inputs = Annotated[
    str | None,
    typer.Option(
        help="With --reference: 'x[R,C];w:float32[C]'. For a bare .cu file: the values an integer "
        "input takes, 'idx:int32[0,V)'."
    ),
]
Outputs = Annotated[str | None, typer.Option(help="With --reference: 'out[R,C]'.")]
Heldout = Annotated[list[str] | None, typer.Option(help="With --reference: a held-out case.")]

app = o.command_app(
    "Port a CUDA kernel to a verified MLX kernel and write kernel.py, test_kernel.py and a report."
)


@app.command()
def port(
    kernel: Annotated[
        Path | None, typer.Argument(help="The .cu file to port (default: the task's kernel.cu).")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Task name or folder.")] = None,
    kernel_name: KernelName = None,
    case: Case = None,
    dtypes: Dtypes = None,
    shape: Shape = None,
    grid: Grid = None,
    block: Block = None,
    shared_bytes: SharedBytes = None,
    template: Template = None,
    include: Include = None,
    reference: Reference = None,
    inputs: Inputs = None,
    outputs: Outputs = None,
    heldout: Heldout = None,
    model: o.Model = "rules",
    base_url: o.BaseUrl = None,
    backend: o.Backend = "auto",
    budget: o.Budget = None,
    out_dir: o.Out = Path("mlxport-out"),
    resume: Annotated[
        str | None, typer.Option(help="Resume this session id (its own configuration applies).")
    ] = None,
    seed: o.Seed = 0,
    search: o.Search = "linear",
    chip: o.Chip = "M3 Max",
    as_json: o.Json = False,
) -> None:
    """Port a CUDA kernel to a verified MLX kernel and write kernel.py, test_kernel.py and a report.

    A bare .cu file needs only --case: the original kernel, run on the CPU, is what the port is
    checked against."""
    config = dict(
        model=model,
        base_url=base_url,
        backend=backend,
        budget=budget,
        seed=seed,
        search=search,
        chip=chip,
    )
    request = dict(
        kernel=kernel_name,
        cases=case,
        dtypes=dtypes,
        shapes=shape,
        grid=grid,
        block=block,
        shared_bytes=shared_bytes,
        template=template,
        includes=include,
        reference=reference,
        inputs=inputs,
        outputs=outputs,
        heldout=heldout,
    )
    with o.Progress(o.err if as_json else o.out) as show:
        try:
            run = _run(kernel, task, resume, out_dir, show, config, request)
        except Exception as e:
            if as_json:  # one record whatever stops it; the error still goes to stderr
                o.print_json(_failure(kernel, task, resume, e))
            raise
    if as_json:
        o.print_json(run)
    else:
        _print_summary(run, out_dir)
    if not run["result"]["verified"]:
        raise typer.Exit(1)


def _run(
    kernel: Path | None,
    task: str | None,
    resume: str | None,
    out_dir: Path,
    show: o.Progress,
    config: dict,
    request: dict,
) -> dict:
    if resume:
        from mlxport.agent.port import resume_port

        return resume_port(out_dir, resume, on_update=show)
    run_config = o.run_config(**config)
    the_task = _resolve_task(kernel, task, request, out_dir, show)
    from mlxport.agent.port import run_port

    return run_port(the_task, run_config, out_dir, on_update=show)


def _failure(kernel: Path | None, task: str | None, resume: str | None, e: Exception) -> dict:
    """The record of a port that stopped before it had a result: what was asked, and why."""
    why = str(e) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"
    return {
        "task": task or (kernel.stem if kernel else None),
        "source": str(kernel) if kernel else None,
        "resume": resume,
        "error": why,
        "result": {"verified": False, "why_not": why},
    }


def _resolve_task(
    kernel: Path | None, task: str | None, request: dict, out_dir: Path, show: o.Progress
):
    from mlxport.tasks import load_task
    from mlxport.tasks.make import TaskRequest, make_task

    if task:
        return load_task(task)
    if kernel is None:
        raise UserError(
            "nothing to port: pass a .cu file, or --task NAME (see `mlxport tasks list`)"
        )
    if not kernel.is_file():
        raise UserError(f"no such file {kernel}: pass the path of a .cu file")
    _check_cuda_file(kernel)
    if (
        (kernel.parent / "task.toml").is_file()
        and not request["reference"]
        and not request["cases"]
    ):
        return load_task(kernel.parent)
    made = TaskRequest.of(source=kernel, **request)
    return load_task(make_task(made, out_dir / "_tasks", on_note=o.note, on_progress=show.step))


def _check_cuda_file(path: Path) -> None:
    from mlxport.translate.reading.reader import read_cuda

    cf = read_cuda(read_text(path, "CUDA source"), name=path.name)
    if not any(k.kind == "global" for k in cf.kernels):
        raise UserError(f"{path} defines no __global__ kernel: pass a file with the kernel to port")


def _print_summary(run: dict, out_dir: Path) -> None:
    res = run["result"]
    label = " (non-LLM baseline)" if run["non_llm_baseline"] else ""
    o.out.print(
        f"\n[bold]{run['task']}[/bold] with {run['model']}{label}: stop reason "
        f"{run['stop_reason']}, "
        f"{run['iterations']} iterations, {run['candidates']} candidates"
    )
    if res["verified"]:
        speed = (
            ", ".join(f"{k} {v:.2f}x" for k, v in res["speedups"].items())
            if res["timed"]
            else "not timed (simulator)"
        )
        o.out.print(
            f"[green]{escape(res['label'])}[/green]: candidate {res['candidate_id']}; {speed}",
            highlight=False,
        )
        o.out.print(f"wrote {out_dir / run['task']}/kernel.py, test_kernel.py, report.md, run.json")
    else:
        o.out.print(
            f"[red]no verified kernel[/red]: {escape(str(res.get('why_not')))}", highlight=False
        )
        o.out.print(f"see {out_dir / run['task']}/report.md")
