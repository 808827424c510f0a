"""``mlxport kb``: the Apple-GPU knowledge base: search it, look up chips."""

from __future__ import annotations

from typing import Annotated

import typer

from mlxport.cli import options as o
from mlxport.errors import UserError

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="The Apple-GPU knowledge base: search it, look up chips.",
)


@app.command("search")
def search(
    query: str,
    k: Annotated[int, typer.Option("-k", help="Sections to return.")] = 3,
    chip: Annotated[str | None, typer.Option(help="Include this chip's figures.")] = None,
    as_json: o.Json = False,
) -> None:
    """Search the knowledge base; each section comes with its sources."""
    from mlxport.knowledge import format_hits
    from mlxport.knowledge import search as kb_search

    hits = _kb(lambda: kb_search(query, k=k, chip=chip))
    if as_json:
        o.print_json([h.model_dump() for h in hits])
    else:
        o.out.print(format_hits(hits), highlight=False, markup=False)


@app.command("chip")
def chip(
    name: Annotated[str, typer.Argument(help="e.g. 'M3 Max', or auto on a Mac.")] = "auto",
    as_json: o.Json = False,
) -> None:
    """The spec row of an Apple chip: GPU cores, bandwidth, FP32/FP16 rates, memory, features."""
    from mlxport.knowledge import hardware_profile
    from mlxport.knowledge.chips import chip_text

    profile = _kb(lambda: hardware_profile(name))
    if as_json:
        o.print_json(profile.model_dump())
    else:
        o.out.print(chip_text(profile), highlight=False, markup=False)


@app.command("chips")
def chips() -> None:
    """List the chips the knowledge base knows."""
    from mlxport.knowledge import list_chips

    o.out.print("\n".join(list_chips()))


def _kb(fn):
    try:
        return fn()
    except ValueError as e:
        raise UserError(str(e)) from e
