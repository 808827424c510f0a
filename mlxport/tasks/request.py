"""The one request a task is made from: what `mlxport port FILE.cu`, `mlxport tasks new --from`,
a batch manifest's ``[[port]]`` entry and MCP's ``create_task`` all give, parsed once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mlxport.errors import UserError

Case = dict[str, int | float]


class TaskRequest(BaseModel):
    """A task to make from a user's .cu file. Without ``reference`` the original kernel, run on the
    CPU executor, is the golden; with one, ``inputs`` and ``outputs`` describe the arrays."""

    model_config = ConfigDict(extra="forbid")

    source: Path  # the .cu file
    kernel: str | None = None  # its __global__ kernel (default: the only one)
    cases: list[Case]  # sizes, kernel parameters and host variables by name
    heldout: list[Case] = Field(default_factory=list)  # with a reference: held-out cases
    dtypes: list[str] | None = None  # element types of a templated kernel
    # buffer -> its extent, where the host code gives none
    shapes: dict[str, str] = Field(default_factory=dict)
    grid: str | None = None  # blocks per grid, 'X[,Y,Z]', where the host code does not launch
    block: str | None = None
    shared_bytes: str | None = None
    template: str | None = None  # template arguments the launch does not give: 'T=float,B=256'
    includes: list[Path] = Field(default_factory=list)  # folders of the file's local headers
    name: str | None = None  # the task's name (default: from the kernel or the file)
    reference: str | None = None  # module:function or file.py:function
    inputs: str | None = None  # with a reference: 'x[R,C];w:float32[C]'
    outputs: str | None = None  # with a reference: 'out[R,C]'

    @field_validator("includes")
    @classmethod
    def _folders(cls, includes: list[Path]) -> list[Path]:
        """Absolute: the file is preprocessed in a sandbox, whose folder is not the user's."""
        for folder in includes:
            if not folder.is_dir():
                raise ValueError(f"-I {folder}: no such folder; pass the folder of its headers")
        return [folder.resolve() for folder in includes]

    @classmethod
    def of(cls, **flags: Any) -> TaskRequest:
        """A request from values as users write them: ``cases=['N=4096,C=768']``,
        ``dtypes='float32,float16'``, ``shapes=['K=B*N']``; ``None`` leaves a field unset."""
        values = {k: v for k, v in flags.items() if v is not None}
        if "cases" in values:
            values["cases"] = [parse_case(c, "--case") for c in values["cases"]]
        if "heldout" in values:
            values["heldout"] = [parse_case(c, "--heldout") for c in values["heldout"]]
        if isinstance(values.get("dtypes"), str):
            values["dtypes"] = parse_dtypes(values["dtypes"])
        if isinstance(values.get("shapes"), list | tuple):
            values["shapes"] = dict(parse_pair(s, "--shape") for s in values["shapes"])
        if not values.get("cases"):  # the sizes the file fixes itself; a missing one is named
            values["cases"] = [{}]
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise UserError(f"{where}: {err['msg'].removeprefix('Value error, ')}") from None


def parse_dtypes(text: str | None) -> list[str] | None:
    return [d.strip() for d in text.split(",") if d.strip()] if text else None


def parse_case(text: str | dict, flag: str = "--case") -> Case:
    """``'N=4096,s=0.5'`` as ``{"N": 4096, "s": 0.5}`` (a dict passes through)."""
    if isinstance(text, dict):
        return dict(text)
    out: Case = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        k, v = parse_pair(part, flag)
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError as e:
                raise UserError(
                    f"{flag} {part!r}: {v!r} is not a number; bind names to numbers, e.g. N=4096"
                ) from e
    return out


def parse_pair(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    dotted = all(part.isidentifier() for part in name.strip().split("."))
    if not sep or not dotted or not value.strip():
        raise UserError(f"{flag} {text!r} is not NAME=VALUE: write it like N=4096")
    return name.strip(), value.strip()


def task_name_for(path: Path) -> str:
    """A task name (a Python identifier: it names the op in kernel.py) from a file name."""
    return re.sub(r"\W", "_", path.stem).lstrip("0123456789") or "kernel"
