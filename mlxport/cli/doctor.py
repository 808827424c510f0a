"""``mlxport doctor``: which backends run here, and why not; ``--calibrate`` measures the GPU."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from mlxport.cli import options as o
from mlxport.errors import UserError

app = o.command_app("Which backends can run here, and why not.")


@app.command()
def doctor(
    as_json: o.Json = False,
    calibrate: Annotated[
        bool, typer.Option(help="Measure copy bandwidth and matmul rate on the GPU.")
    ] = False,
) -> None:
    """Which backends can run here, and why not."""
    import platform

    from mlxport.backends import GPUS, availability, confine, get_backend, resolve

    status = availability()
    data = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "auto": resolve("auto"),
        "backends": {k: {"available": v.ok, "reason": v.reason} for k, v in status.items()},
        "confinement": confine.probe(gpu=any(status[g].ok for g in GPUS)),
    }
    if calibrate:
        if data["auto"] not in GPUS:
            raise UserError(
                f"--calibrate needs a GPU backend ({' or '.join(GPUS)}); the simulator has no "
                "timing"
            )
        data["calibration"] = get_backend(data["auto"]).calibrate()
    if as_json:
        o.print_json(data)
        return
    o.out.print(
        f"{data['platform']}, Python {data['python']}; auto selects [bold]{data['auto']}[/bold]"
    )
    for name, v in status.items():
        mark = "[green]available[/green]" if v.ok else f"[red]unavailable[/red]: {escape(v.reason)}"
        o.out.print(f"  {name:6s} {mark}")
    o.out.print(
        "  sandbox of the compiler and every worker (docs/security.md says what each stops):"
    )
    for line in data["confinement"]:
        missing = any(w in line for w in ("missing", "unavailable", "could not"))
        mark = "[red]missing[/red] " if missing else "[green]in force[/green]"
        o.out.print(f"    {mark} {escape(line)}")
    if "calibration" in data:
        o.out.print(f"  calibration: {data['calibration']}")
