"""What every model of the contract shares: strict models, paths inside a task folder, function
references and finite numbers."""

from __future__ import annotations

import math
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
Expr = str | int
ShapeExpr = str | list[Expr]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _inside(path: str, what: str) -> str:
    """A path of a task folder's own, written relative to it: nothing outside is read."""
    if not path or Path(path).is_absolute() or ".." in Path(path).parts or "\\" in path:
        raise ValueError(
            f"{what} {path!r} must be a path inside the task folder, such as kernel.cu"
        )
    return path


_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def _function_ref(ref: str) -> str:
    if not _REF.fullmatch(ref):
        raise ValueError(
            f"{ref!r} must look like module:function, e.g. reference:reference (a .py file of the "
            f"task folder or an importable module)"
        )
    return ref


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{what} is {value}: give a finite number")
    return value
