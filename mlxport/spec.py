"""Tasks, candidates and results: the contract every part of mlxport speaks.

No heavy imports here (no mlx, no langgraph): this module is loaded by worker processes,
the MCP server and the GPU machine alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from mlxport.errors import read_text
from mlxport.expr import (
    DTYPES,
    ArrayInfo,
    Dtype,
    ExprError,
    as_dtype,
    as_int,
    as_shape,
    evaluate,
    names_used,
    parse,
)

__all__ = [
    "ArrayInfo",
    "BenchmarkReport",
    "CaseResult",
    "CompileResult",
    "CorrectnessReport",
    "Datasheet",
    "Diagnostic",
    "Dtype",
    "ExprError",
    "Init",
    "KernelCandidate",
    "KernelTask",
    "Launch",
    "Param",
    "Tolerance",
    "TensorSpec",
    "Timing",
    "DTYPES",
    "evaluate",
]

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
_TEMPLATE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Names a template parameter cannot take: C++20's keywords and alternative tokens, and MSL's own.
CPP_KEYWORDS = frozenset(
    (
        "alignas",
        "alignof",
        "and",
        "and_eq",
        "asm",
        "auto",
        "bitand",
        "bitor",
        "bool",
        "break",
        "case",
        "catch",
        "char",
        "char8_t",
        "char16_t",
        "char32_t",
        "class",
        "compl",
        "concept",
        "const",
        "consteval",
        "constexpr",
        "constinit",
        "const_cast",
        "continue",
        "co_await",
        "co_return",
        "co_yield",
        "decltype",
        "default",
        "delete",
        "do",
        "double",
        "dynamic_cast",
        "else",
        "enum",
        "explicit",
        "export",
        "extern",
        "false",
        "float",
        "for",
        "friend",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "mutable",
        "namespace",
        "new",
        "noexcept",
        "not",
        "not_eq",
        "nullptr",
        "operator",
        "or",
        "or_eq",
        "private",
        "protected",
        "public",
        "register",
        "reinterpret_cast",
        "requires",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "static_assert",
        "static_cast",
        "struct",
        "switch",
        "template",
        "this",
        "thread_local",
        "throw",
        "true",
        "try",
        "typedef",
        "typeid",
        "typename",
        "union",
        "unsigned",
        "using",
        "virtual",
        "void",
        "volatile",
        "wchar_t",
        "while",
        "xor",
        "xor_eq",
        "device",
        "constant",
        "threadgroup",
        "threadgroup_imageblock",
        "thread",
        "ray_data",
        "object_data",
        "kernel",
        "vertex",
        "fragment",
        "half",
        "bfloat",
        "uint",
        "ushort",
        "uchar",
        "size_t",
        "ptrdiff_t",
    )
)
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


# ---------------------------------------------------------------- task


class Init(Strict):
    """How fresh random inputs are drawn, chosen per task so outputs are not near zero; ``full``
    is a constant (``value``), as a host fills an in-out buffer before a launch."""

    kind: Literal["normal", "uniform", "randint", "arange", "full"] = "normal"
    mean: float = 0.0
    std: float = 1.0
    low: float = -1.0
    high: float = 1.0
    value: float = 0.0

    @model_validator(mode="after")
    def _drawable(self) -> Init:
        for name in (
            "mean",
            "std",
            "low",
            "high",
        ):  # a fill value may be NaN or infinite (a max's start)
            _finite(getattr(self, name), f"init.{name}")
        if self.std < 0:
            raise ValueError(f"init.std is {self.std}: a standard deviation is not negative")
        if self.kind == "uniform" and self.low > self.high:
            raise ValueError(f"init.low {self.low} is above init.high {self.high}: swap them")
        if self.kind == "randint" and int(self.low) >= int(self.high):
            raise ValueError(
                f"init.low {self.low} must be below init.high {self.high} (randint draws from [low, high))"
            )
        return self


class TensorSpec(Strict):
    """A named tensor. ``dtype`` is a dtype name or ``"T"``, the dtype under test."""

    name: str
    dtype: str = "T"
    shape: list[Expr]
    init: Init = Field(default_factory=Init)

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"tensor name {v!r} is not a valid identifier")
        return v

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        if v != "T" and v not in DTYPES:
            raise ValueError(f"unknown dtype {v!r}; use T or one of {', '.join(DTYPES)}")
        return v

    def resolve_dtype(self, dtype: str) -> str:
        return dtype if self.dtype == "T" else self.dtype


class Param(Strict):
    """A scalar parameter (eps, scale, causal...) passed to the reference and the kernel."""

    name: str
    type: Literal["float", "int", "bool"]
    default: float | int | bool | None = None


class Tolerance(Strict):
    atol: float
    rtol: float
    # Relative error norm ||out - ref|| / ||ref|| bound: catches systematic error that
    # per-element atol/rtol lets through.
    norm: float = 1e-2

    @field_validator("atol", "rtol", "norm")
    @classmethod
    def _bound(cls, v: float, info) -> float:
        _finite(v, info.field_name)
        if v < 0:
            raise ValueError(f"{info.field_name} is {v}: a tolerance is not negative")
        return v


class Baselines(Strict):
    """``native``: the strongest native MLX path; ``naive``: what a user has today."""

    native: str
    naive: str

    @field_validator("native", "naive")
    @classmethod
    def _ref(cls, v: str) -> str:
        return _function_ref(v)


class Cases(Strict):
    """``visible`` cases are shown to the model; ``heldout`` ones run only in the final
    verification; ``bench`` cases are realistic sizes used only for timing."""

    visible: list[dict[str, int | float | bool]]
    heldout: list[dict[str, int | float | bool]] = Field(default_factory=list)
    bench: list[dict[str, int | float | bool]] = Field(default_factory=list)


class Cost(Strict):
    """Bytes moved and FLOPs done, as expressions over dimensions and ``itemsize``."""

    bytes: str
    flops: str = "0"


class OriginalLaunch(Strict):
    """The CUDA kernel's launch at one case, as its host code gives it."""

    case: str  # the case's label (KernelTask.case_label)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    template: list[str] = Field(default_factory=list)  # C++ text; "T" stands for the element type


class Original(Strict):
    """How to run the task's CUDA kernel as written, on the CPU executor (the golden when the task
    has no reference): what each kernel parameter is bound to, and its launch at every case."""

    args: dict[str, str]  # kernel parameter -> task input or param it reads
    results: dict[str, str]  # task output -> the kernel parameter holding it after the launch
    launches: list[OriginalLaunch]
    include: list[str] = Field(default_factory=list)  # folders of the file's local headers
    # a struct passed by value that the host fills at run time (llama.cpp's rope_corr_dims, a
    # std::bool_constant tag): parameter -> its size in bytes, passed as zero bytes
    zeroed: dict[str, int] = Field(default_factory=dict)

    @field_validator("include")
    @classmethod
    def _own_folders(cls, v: list[str]) -> list[str]:
        return [_inside(p, "include folder") for p in v]

    def launch(self, label: str) -> OriginalLaunch:
        for launch in self.launches:
            if launch.case == label:
                return launch
        raise KeyError(label)


class KernelTask(Strict):
    """A porting task: CUDA source, reference, baselines, cases. A task is a folder."""

    name: str
    description: str = ""
    kernel: str  # entry __global__ kernel in kernel.cu
    source: str = "kernel.cu"
    reference: str | None = (
        "reference:reference"  # None: the original kernel on the CPU executor is the golden
    )
    baselines: Baselines | None = None  # None: nothing to time against (a user's own kernel)
    inputs: list[TensorSpec]
    params: list[Param] = Field(default_factory=list)
    outputs: list[TensorSpec]
    dtypes: list[str] = Field(default_factory=lambda: list(FLOAT_DTYPES))
    tolerance: dict[str, Tolerance]
    cases: Cases
    cost: Cost
    target_speedup: float = 1.0
    tags: list[str] = Field(default_factory=list)
    original: Original | None = None
    folder: Path | None = Field(default=None, exclude=True)
    _source: str | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _task_name(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(
                f"task name {v!r} must be a Python identifier such as my_kernel (it names the op)"
            )
        return v

    @field_validator("source")
    @classmethod
    def _source_inside(cls, v: str) -> str:
        return _inside(v, "source")

    @field_validator("reference")
    @classmethod
    def _reference(cls, v: str | None) -> str | None:
        return v if v is None else _function_ref(v)

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError('dtypes is empty: list at least one, e.g. ["float32"]')
        for d in v:
            if d not in DTYPES:
                raise ValueError(f"unknown dtype {d!r}; use one of {', '.join(DTYPES)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> KernelTask:
        missing = [d for d in self.dtypes if d not in self.tolerance]
        if missing:
            raise ValueError(
                f"no tolerance for dtype {', '.join(missing)}: add [tolerance.{missing[0]}]"
            )
        names = (
            [t.name for t in self.inputs]
            + [p.name for p in self.params]
            + [t.name for t in self.outputs]
        )
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(
                f"duplicate name(s) {', '.join(sorted(dupes))} among inputs, params and outputs"
            )
        if not self.cases.visible:
            raise ValueError("[cases] needs at least one visible case")
        if self.reference is None and self.original is None:
            raise ValueError(
                'no reference and no [original] launch: give reference = "module:function" or '
                "let `mlxport tasks new --from kernel.cu` describe the original kernel"
            )
        for spec in self.inputs + self.outputs:
            for dim in spec.shape:
                parse(dim) if isinstance(dim, str) else None
        for case in self.all_cases() + self.cases.bench:
            self._check_case(case)
        return self

    def _check_case(self, case: dict[str, Any]) -> None:
        for k, v in case.items():
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"case {self.case_label(case)}: {k} is {v}; give a finite number")
        for name, shape in self.shapes(case, self.dtypes[0]).items():
            if any(d < 0 for d in shape):
                raise ValueError(
                    f"case {self.case_label(case)} gives {name} the shape {shape}: sizes are not negative"
                )
            if math.prod(shape) >= 2**63:
                raise ValueError(
                    f"case {self.case_label(case)} gives {name} {math.prod(shape):.3g} elements, more "
                    f"than a 64-bit index counts: make the case smaller"
                )

    def all_cases(self) -> list[dict[str, Any]]:
        return self.cases.visible + self.cases.heldout

    def bench_cases(self) -> list[dict[str, Any]]:
        return self.cases.bench or self.cases.visible[:1]

    def dims(self) -> set[str]:
        """Dimension names used by input and output shapes."""
        out: set[str] = set()
        for spec in self.inputs + self.outputs:
            for dim in spec.shape:
                out |= names_used(dim)
        return out

    def bindings(self, case: dict[str, Any], dtype: str) -> dict[str, Any]:
        """Names in scope for a case: its dimensions, params (with defaults) and ``itemsize``."""
        for p in self.params:
            if p.name not in case and p.default is None:
                raise ValueError(f"case {case} does not set param {p.name!r}, which has no default")
        unknown = self.dims() - set(case) - {p.name for p in self.params}
        if unknown:
            raise ValueError(
                f"shape names unknown dimension(s) {', '.join(sorted(unknown))}; "
                f"bind them in every case of [cases]"
            )
        names: dict[str, Any] = {p.name: p.default for p in self.params}
        names.update(case)
        names["itemsize"] = ArrayInfo((), Dtype(dtype)).itemsize
        return names

    def shapes(self, case: dict[str, Any], dtype: str) -> dict[str, tuple[int, ...]]:
        names = self.bindings(case, dtype)
        return {
            t.name: as_shape(t.shape, names, f"shape of {t.name}")
            for t in self.inputs + self.outputs
        }

    def param_values(self, case: dict[str, Any]) -> dict[str, Any]:
        return {p.name: case.get(p.name, p.default) for p in self.params}

    def case_label(self, case: dict[str, Any]) -> str:
        return ",".join(f"{k}={v}" for k, v in case.items())

    def cost_of(self, case: dict[str, Any], dtype: str) -> tuple[int, int]:
        names = self.bindings(case, dtype)
        return as_int(self.cost.bytes, names, "cost.bytes"), as_int(
            self.cost.flops, names, "cost.flops"
        )

    def source_text(self) -> str:
        """The CUDA source, read once."""
        if self._source is None:
            self._source = (
                read_text(self.folder / self.source, "CUDA source") if self.folder else ""
            )
        return self._source


# ---------------------------------------------------------------- candidate


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
                f"(available: {', '.join(inputs)}): use those names in input_names, or translate "
                "with mlxport translate --task TASK, which binds the kernel's parameters to them"
            )
        names = dict(inputs)
        if problem := template_problem(
            self.template
        ):  # model_copy(update=...) skips the validators
            raise ExprError(problem)
        template = {k: evaluate(v, names) for k, v in self.template.items()}
        for k, v in template.items():
            if not isinstance(v, bool | int | Dtype):
                raise ExprError(f"template value {k} must be an int, bool or dtype, got {v!r}")
        names.update(template)
        shapes = [
            as_shape(s, names, f"output_shapes[{i}]") for i, s in enumerate(self.output_shapes)
        ]
        dtypes = [
            as_dtype(d, names, f"output_dtypes[{i}]") for i, d in enumerate(self.output_dtypes)
        ]
        grid = tuple(as_int(g, names, "grid") for g in self.grid)
        tg = tuple(as_int(t, names, "threadgroup") for t in self.threadgroup)
        if any(v < 1 for v in grid + tg):
            raise ExprError(f"grid {grid} and threadgroup {tg} must be positive")
        return Launch(
            output_shapes=shapes,
            output_dtypes=dtypes,
            grid=grid,
            threadgroup=tg,
            template=[(k, v.name if isinstance(v, Dtype) else v) for k, v in template.items()],
            shared_memory=as_int(self.shared_memory, names, "shared_memory"),
        )

    @classmethod
    def from_toml(cls, path: Path) -> KernelCandidate:
        import tomllib

        return cls.model_validate(tomllib.loads(read_text(path, "candidate")))

    def to_toml(self) -> str:
        return _to_toml(self.model_dump(mode="json", exclude_defaults=True))


def template_problem(template: dict[str, Any]) -> str | None:
    """Why a candidate's ``template`` cannot be passed to the compiler, or None. Keys become template
    parameter names in the generated code and values its arguments: a key is a plain identifier
    (never C++ text), a value an int, a bool, or an expression of one or of a dtype ("x.dtype",
    "float16"), which the launch checks it evaluates to."""
    for key, value in template.items():
        if (
            not isinstance(key, str)
            or not _TEMPLATE_KEY.fullmatch(key)
            or key in CPP_KEYWORDS
            or key.startswith("__")
        ):
            return (
                f"template key {key!r} must be an identifier: letters, digits and _, not starting with a "
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


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        if "\n" in v:
            return '"""\n' + v.replace("\\", "\\\\").replace('"""', '\\"""') + '"""'
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return repr(v)


def _to_toml(data: dict[str, Any]) -> str:
    # Multi-line source goes last so the file reads like launch settings followed by code.
    order = sorted(data, key=lambda k: (k in ("header", "source"), k == "source"))
    return "".join(f"{k} = {_toml_value(data[k])}\n" for k in order)


# ---------------------------------------------------------------- results


class Diagnostic(Strict):
    severity: Literal["error", "warning", "note"] = "error"
    message: str
    where: Literal["source", "header", "generated"] = "source"
    line: int | None = None  # 1-based line in the candidate's source or header
    column: int | None = None


class CompileResult(Strict):
    backend: str
    ok: bool
    candidate_id: str
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False

    def summary(self) -> str:
        if self.ok:
            return f"compiled on {self.backend}" + (" (cached)" if self.cached else "")
        lines = [f"compile failed on {self.backend}:"]
        for d in self.diagnostics[:8]:
            loc = (
                f"{d.where} line {d.line}" + (f":{d.column}" if d.column else "")
                if d.line
                else d.where
            )
            lines.append(f"  {loc}: {d.message}")
        return "\n".join(lines)


Verdict = Literal["pass", "fail", "error"]


class CaseResult(Strict):
    case: str
    dtype: str
    verdict: Verdict
    max_abs: float | None = None
    max_rel: float | None = None
    err_norm: float | None = None
    mismatches: int = 0
    total: int = 0
    first_mismatch: list[int] | None = None
    got: float | None = None  # output and golden at the first mismatch
    expected: float | None = None
    nan: int = 0
    inf: int = 0
    unwritten: int = 0
    pattern: str = ""
    error: str = ""
    seed: int | None = None  # of the inputs


class CorrectnessReport(Strict):
    backend: str
    candidate_id: str
    task: str
    seeds: list[int]
    heldout: bool = False
    cases: list[CaseResult]
    golden: str = ""  # what the outputs were compared with (verify/golden.py)

    @property
    def ok(self) -> bool:
        return bool(self.cases) and all(c.verdict == "pass" for c in self.cases)

    def summary(self, limit: int = 12) -> str:
        """Compact text for the model: a verdict line, then one line per failing case."""
        bad = [c for c in self.cases if c.verdict != "pass"]
        head = (
            f"{'PASS' if self.ok else 'FAIL'}: {len(self.cases) - len(bad)}/{len(self.cases)} cases passed "
            f"on {self.backend} (seed {self.seeds[0]})"
        )
        lines = [head]
        # One line per distinct error, with where else it came; which thread faults first varies
        # from run to run where threadgroups run side by side, so positions do not tell errors apart.
        same: dict[str, list[CaseResult]] = {}
        for c in bad:
            if c.verdict == "error":
                same.setdefault(_error_kind(c.error), []).append(c)
        bad = [c for c in bad if c.verdict != "error" or same[_error_kind(c.error)][0] is c]
        for c in bad[:limit]:
            if c.verdict == "error":
                also = same[_error_kind(c.error)][1:]
                more = (
                    ""
                    if not also
                    else (
                        f" (the same in {len(also)} more case{'s' if len(also) > 1 else ''}: "
                        + ", ".join(f"{o.case} {o.dtype}" for o in also[:4])
                        + (", ..." if len(also) > 4 else "")
                        + ")"
                    )
                )
                lines.append(f"  {c.case} {c.dtype}: ERROR {c.error}{more}")
                continue
            where = (
                f" first at {c.first_mismatch}: got {c.got:.6g}, expected {c.expected:.6g};"
                if c.first_mismatch is not None and c.got is not None
                else ""
            )
            extra = "".join(
                f" {k}={v};"
                for k, v in (("nan", c.nan), ("inf", c.inf), ("unwritten", c.unwritten))
                if v
            )
            sizes = (
                f" max_abs={c.max_abs:.3g} err_norm={c.err_norm:.3g};"
                if c.max_abs is not None
                else ""
            )
            lines.append(f"  {c.case} {c.dtype}: {c.pattern};{where}{sizes}{extra}".rstrip(";"))
        if len(bad) > limit:
            lines.append(f"  ... and {len(bad) - limit} more failing cases")
        if self.ok:
            worst = max(self.cases, key=lambda c: c.err_norm or 0.0)
            lines.append(
                f"  worst: {worst.case} {worst.dtype} max_abs={worst.max_abs:.3g} err_norm={worst.err_norm:.3g}"
            )
        return "\n".join(lines)


class Datasheet(Strict):
    """A device's published figures: the ceilings a roofline is drawn against."""

    name: str
    memory_bandwidth_gbs: float
    fp32_tflops: float


class Timing(Strict):
    name: str
    median_us: float
    spread: float  # (p90 - p10) / median
    samples: int
    gbs: float | None = None
    gflops: float | None = None
    roofline_fraction: float | None = None


class BenchmarkReport(Strict):
    backend: str
    device: str
    candidate_id: str
    task: str
    case: str
    dtype: str
    candidate: Timing | None = None  # None on the simulator: it never times
    baselines: list[Timing] = Field(default_factory=list)
    speedups: dict[str, float] = Field(default_factory=dict)
    stable: bool = True
    flags: list[str] = Field(default_factory=list)
    estimate: str = ""  # simulator: a labelled roofline floor estimate for a named chip
    bandwidth_basis: str = ""  # what roofline_fraction is a fraction of
    timing_basis: str = ""  # how the times were read (backends/timer.py)


def _error_kind(error: str | None) -> str:
    """An error without the thread and threadgroup positions it names."""
    return re.sub(r"\(\d+, ?\d+, ?\d+\)", "(.)", error or "")
