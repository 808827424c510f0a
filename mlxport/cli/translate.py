"""``mlxport translate``: the rule-based translation (a non-LLM baseline) of a CUDA kernel."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o
from mlxport.errors import read_text
from mlxport.redaction import write_text

app = o.command_app(
    "Rule-based translation (a non-LLM baseline) of a CUDA kernel into a candidate."
)


@app.command()
def translate(
    path: Annotated[Path, typer.Argument(help="A .cu file.")],
    kernel: Annotated[
        str | None, typer.Option(help="Kernel to translate (default: the first).")
    ] = None,
    target: Annotated[str, typer.Option(help="msl or cuda.")] = "msl",
    task: Annotated[
        str | None, typer.Option(help="Task whose inputs and params bind the kernel's.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the candidate here.")
    ] = None,
) -> None:
    """Rule-based translation (a non-LLM baseline) of a CUDA kernel into a candidate."""
    from mlxport.tasks import load_task
    from mlxport.translate.translator import translate as run_translate

    result = run_translate(
        read_text(path, "CUDA source"),
        kernel=kernel,
        target=target,
        task=load_task(task) if task else None,
    )
    text = result.candidate.to_toml()
    if output:
        write_text(output, text)
        o.out.print(f"wrote {output}")
    else:
        sys.stdout.write(text)
    for note in result.notes:
        o.err.print(f"note: {note}", highlight=False, markup=False)
