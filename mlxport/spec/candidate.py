"""A candidate kernel: its body and launch math as ``mx.fast.*_kernel`` takes them, and the
launch resolved for concrete inputs."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from mlxport.errors import read_text
from mlxport.expr import ArrayInfo, ExprError, parse, resolve_launch
from mlxport.spec.base import Expr, ShapeExpr, Strict
from mlxport.spec.toml import dumps

_TEMPLATE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Names a template parameter cannot take: C++20's keywords and alternative tokens, and MSL's own.
# fmt: off
CPP_KEYWORDS = frozenset((
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
    "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
    "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
    "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "device", "constant",
    "threadgroup", "threadgroup_imageblock", "thread", "ray_data", "object_data", "kernel",
    "vertex", "fragment", "half", "bfloat", "uint", "ushort", "uchar", "size_t", "ptrdiff_t",
))
# fmt: on


class KernelCandidate(Strict):
    """One kernel attempt: the body plus launch math, as ``mx.fast.*_kernel`` takes it.

    ``grid`` counts threads, as MLX dispatches. Shapes, dtypes, grid, threadgroup and template
    values are expressions evaluated against the actual inputs (see mlxport.expr).
    """

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")  # init_value may be NaN

    language: Literal["msl", "cuda"] = "msl"
    name: str
    source: str
    header: str = ""
    input_names: list[str]
    output_names: list[str]
    output_shapes: list[ShapeExpr]
    output_dtypes: list[str]
    grid: list[Expr]
    threadgroup: list[Expr]
    template: dict[str, bool | int | str] = Field(
        default_factory=dict
    )  # bool first: TOML true stays a bool
    init_value: float | None = None
    # output -> the input it starts as: MLX outputs are new arrays, so an in-out buffer is an input
    # and an output; the output is filled with NaN (init_value), the kernel reads an element from
    # the input until it has written it, and every element it never wrote is the input's.
    inout: dict[str, str] = Field(default_factory=dict)
    atomic_outputs: bool = False
    ensure_row_contiguous: bool = True
    shared_memory: Expr = 0  # cuda only: bytes of dynamic shared memory

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"kernel name {v!r} must be a C identifier")
        return v

    @field_validator("input_names", "output_names")
    @classmethod
    def _identifiers(cls, v: list[str]) -> list[str]:
        for n in v:
            if not n.isidentifier():
                raise ValueError(f"{n!r} is not a valid identifier")
        return v

    @field_validator("template")
    @classmethod
    def _template(cls, v: dict[str, bool | int | str]) -> dict[str, bool | int | str]:
        if problem := template_problem(v):
            raise ValueError(problem)
        return v

    @field_validator("grid", "threadgroup")
    @classmethod
    def _three(cls, v: list[Expr]) -> list[Expr]:
        if len(v) != 3:
            raise ValueError("grid and threadgroup take exactly three expressions (x, y, z)")
        for e in v:
            parse(e) if isinstance(e, str) else None
        return v

    @model_validator(mode="after")
    def _lengths(self) -> KernelCandidate:
        if not self.output_names:
            raise ValueError("a kernel needs at least one output")
        n = len(self.output_names)
        if len(self.output_shapes) != n or len(self.output_dtypes) != n:
            raise ValueError(f"output_shapes and output_dtypes need one entry per output ({n})")
        if self.atomic_outputs and self.language == "cuda":
            raise ValueError(
                "atomic_outputs is Metal only; CUDA kernels call atomicAdd on plain pointers"
            )
        for out, src in self.inout.items():
            if out not in self.output_names or src not in self.input_names:
                raise ValueError(
                    f"inout maps output {out} to input {src}: name an output and one of its inputs"
                )
        if self.inout and not (self.init_value is not None and math.isnan(self.init_value)):
            raise ValueError("an inout output starts as NaN: set init_value = nan")
        return self

    @property
    def id(self) -> str:
        """Content hash: identical candidates share compiles and results."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def launch(self, inputs: dict[str, ArrayInfo | int | float | bool]) -> Launch:
        """Resolve every expression against concrete inputs."""
        missing = [n for n in self.input_names if n not in inputs]
        if missing:
            raise ExprError(
                f"input(s) {', '.join(missing)} are not inputs or params of the task "
                f"(available: {', '.join(inputs)}): use those names in input_names"
            )
        if problem := template_problem(self.template):  # model_copy(update=...) skips validators
            raise ExprError(problem)
        return Launch(**resolve_launch(self.model_dump(), inputs))

    @classmethod
    def from_toml(cls, path: Path) -> KernelCandidate:
        import tomllib

        return cls.model_validate(tomllib.loads(read_text(path, "candidate")))

    def to_toml(self) -> str:
        return dumps(self.model_dump(mode="json", exclude_defaults=True))


def template_problem(template: dict[str, Any]) -> str | None:
    """Why a candidate's ``template`` cannot be passed to the compiler, or None. Keys become
    template parameter names in the generated code and values its arguments: a key is a plain
    identifier (never C++ text), a value an int, a bool, or an expression of one or of a dtype
    ("x.dtype", "float16"), which the launch checks it evaluates to."""
    for key, value in template.items():
        if (
            not isinstance(key, str)
            or not _TEMPLATE_KEY.fullmatch(key)
            or key in CPP_KEYWORDS
            or key.startswith("__")
        ):
            return (
                f"template key {key!r} must be an identifier: letters, digits and _, not starting "
                f"with a "
                "digit or __, at most 64 characters, not a C++ or Metal keyword"
            )
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if abs(value) > 2**62:
                return f"template value {key} = {value} is too large"
            continue
        if not isinstance(value, str):
            return f"template value {key} must be an int, bool or dtype, got {type(value).__name__}"
        try:
            parse(value)
        except ExprError as e:
            return f"template value {key} = {value!r} must be an int, bool or dtype expression: {e}"
    return None


class Launch(Strict):
    """A candidate's launch resolved for one set of inputs."""

    output_shapes: list[tuple[int, ...]]
    output_dtypes: list[str]
    grid: tuple[int, int, int]
    threadgroup: tuple[int, int, int]
    template: list[tuple[str, int | bool | str]]
    shared_memory: int = 0
