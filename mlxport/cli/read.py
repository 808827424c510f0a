"""``mlxport read``: what the reader finds in a CUDA file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o
from mlxport.errors import read_text

app = o.command_app(
    "Read a CUDA file: kernels, parameters, shared memory, intrinsics, launches, Metal mapping."
)


@app.command()
def read(
    path: Annotated[Path, typer.Argument(help="A .cu file.")], as_json: o.Json = False
) -> None:
    """Read a CUDA file: kernels, parameters, shared memory, intrinsics, launches, Metal mapping."""
    from mlxport.translate.reading.reader import read_cuda, summary

    cf = read_cuda(read_text(path, "CUDA source"), name=path.name)
    if as_json:
        sys.stdout.write(cf.model_dump_json(indent=2) + "\n")
    else:
        o.out.print(summary(cf), highlight=False, markup=False)
