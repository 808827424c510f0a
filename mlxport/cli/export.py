"""``mlxport export``: a verified port as a pip-installable package (see mlxport/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlxport.cli import options as o

app = o.command_app(
    "Write a verified port as a Python package a user can pip install, or as a Hugging Face "
    "kernels repository."
)


@app.command()
def export(
    folder: Annotated[Path, typer.Argument(help="A port's output folder, OUT/<task>.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Where the package folder goes.")] = Path(
        "dist"
    ),
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            help="pip (a package pip installs) or kernels (a Hugging "
            "Face kernels repository: build.toml, torch-ext/, "
            "build/torch-metal/).",
        ),
    ] = "pip",
) -> None:
    """Write a verified port as a Python package (the op with its fallback, its parity test, and a
    header naming the original kernel's source and license) or a Hugging Face kernels repository."""
    from mlxport.export import export_port

    target = export_port(folder, out_dir, layout)
    package = target.name.removeprefix("mlxport-").replace("-", "_")
    if layout == "pip":
        o.out.print(
            f"wrote {target}: `pip install {target}`, then `from {package} import ...`",
            highlight=False,
        )
    else:
        o.out.print(
            f"wrote {target}: a kernel repository for the Hugging Face Hub; build/torch-metal/ is "
            f"what "
            f"`kernels.get_kernel` loads",
            highlight=False,
        )
