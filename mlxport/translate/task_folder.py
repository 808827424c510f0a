"""A task folder from a bare .cu file and the flags that describe its cases."""

from __future__ import annotations

from pathlib import Path

from mlxport.errors import UserError
from mlxport.translate.cuda_task import cuda_task, write_task


def cuda_task_folder(
    path: Path,
    parent: Path,
    *,
    kernel_name,
    cases,
    dtypes,
    shapes,
    grid,
    block,
    shared_bytes,
    includes,
    name: str | None = None,
    console=None,
) -> Path:
    """The task folder of a bare .cu file, made from its kernel and cases (``mlxport port FILE.cu``,
    ``tasks new --from`` and the MCP server's create_task); ``console`` prints the notes."""
    if not cases:
        raise UserError(
            f"a task from {path} needs the sizes of one case to run the kernel at: pass --case "
            "(e.g. --case 'N=4096')"
        )
    built = cuda_task(
        path,
        kernel=kernel_name,
        cases=[parse_case(c) for c in cases],
        dtypes=parse_dtypes(dtypes),
        shapes=dict(parse_pair(s, "--shape") for s in shapes),
        grid=grid,
        block=block,
        shared_bytes=shared_bytes,
        includes=list(includes),
        name=name,
    )
    folder = write_task(built, parent / built.task["name"], path)
    if console is not None:
        for note in built.notes:
            console.print(f"note: {note}", highlight=False, markup=False)
    return folder


def parse_dtypes(text: str | None) -> list[str] | None:
    return [d.strip() for d in text.split(",") if d.strip()] if text else None


def parse_case(text: str) -> dict:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        k, v = parse_pair(part, "--case")
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError as e:
                raise UserError(
                    f"--case {part!r}: {v!r} is not a number; bind names to numbers, e.g. N=4096"
                ) from e
    return out


def parse_pair(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if (
        not sep
        or not all(part.isidentifier() for part in name.strip().split("."))
        or not value.strip()
    ):
        raise UserError(f"{flag} {text!r} is not NAME=VALUE: write it like N=4096")
    return name.strip(), value.strip()
