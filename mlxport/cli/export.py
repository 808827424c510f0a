"""``mlxport export``: a verified port as a pip-installable package (see mlxport/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o

app = o.command_app("Write a verified port as a Python package a user can pip install.")


@app.command()
def export(folder: Annotated[Path, typer.Argument(help="A port's output folder, OUT/<task>.")],
           out_dir: Annotated[Path, typer.Option("--out", help="Where the package folder goes.")] = Path("dist")
           ) -> None:
    """Write a verified port as a Python package: the op with its fallback, its parity test, and
    a header naming the original kernel's source and license."""
    from mlxport.export import export_port

    target = export_port(folder, out_dir)
    o.out.print(f"wrote {target}: `pip install {target}`, then `from {target.name.removeprefix('mlxport-').replace('-', '_')} "
                f"import ...`", highlight=False)
