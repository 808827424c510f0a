"""A porting task: its CUDA source, inputs, params and outputs, cases, tolerances and baselines,
and the original kernel's launches where it is the golden."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from mlxport.errors import read_text
from mlxport.expr import DTYPES, ArrayInfo, Dtype, as_int, as_shape, evaluate, names_used, parse
from mlxport.spec.base import FLOAT_DTYPES, Expr, Strict, _finite, _function_ref, _inside


class Init(Strict):
    """How fresh random inputs are drawn, chosen per task so outputs are not near zero; ``full``
    is a constant (``value``), as a host fills an in-out buffer before a launch. For ``randint``,
    ``low`` and ``high`` may be expressions over the case's sizes: an index into a buffer of ``V``
    rows draws from ``[0, V)``."""

    kind: Literal["normal", "uniform", "randint", "arange", "full"] = "normal"
    mean: float = 0.0
    std: float = 1.0
    low: int | float | str = -1.0
    high: int | float | str = 1.0
    value: float = 0.0  # a fill value may be NaN or infinite (a max's start)

    @model_validator(mode="after")
    def _drawable(self) -> Init:
        for name in ("mean", "std", "low", "high"):
            value = getattr(self, name)
            if isinstance(value, str):
                if self.kind != "randint":
                    raise ValueError(f"init.{name} is an expression, which only randint takes")
                parse(value)
            else:
                _finite(value, f"init.{name}")
        if self.std < 0:
            raise ValueError(f"init.std is {self.std}: a standard deviation is not negative")
        numbers = not isinstance(self.low, str) and not isinstance(self.high, str)
        if numbers and self.kind == "uniform" and self.low > self.high:
            raise ValueError(f"init.low {self.low} is above init.high {self.high}: swap them")
        if numbers and self.kind == "randint" and int(self.low) >= int(self.high):
            raise ValueError(
                f"init.low {self.low} must be below init.high {self.high} (randint draws from "
                f"[low, high))"
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
    """A scalar parameter (eps, scale, causal...) passed to the reference and the kernel. A float
    param with a ``range`` takes other values in the final verification's held-out cases; one
    with an ``expr`` is what the host code computes from the sizes (``ceildiv(N, Bc)``,
    ``1 / sqrt(d)``), which the op computes too rather than take it from its caller."""

    name: str
    type: Literal["float", "int", "bool"]
    default: float | int | bool | None = None
    range: tuple[float, float] | None = None
    expr: str | None = None

    @field_validator("expr")
    @classmethod
    def _expression(cls, v: str | None) -> str | None:
        if v is not None:
            parse(v)
        return v

    @model_validator(mode="after")
    def _range(self) -> Param:
        if self.range is not None and (self.type != "float" or not self.range[0] <= self.range[1]):
            raise ValueError(
                f"param {self.name}'s range {list(self.range)} needs a float param and low <= high"
            )
        return self


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
    # sizes the kernel supports only some values of (an attention's head dim): the values the
    # final verification's fresh sizes are drawn from
    choices: dict[str, list[int]] = Field(default_factory=dict)
    # sizes the kernel takes in multiples of some m only (a rotary head dim is even)
    multiples: dict[str, int] = Field(default_factory=dict)
    # what every case must satisfy, as comparisons over its names ("Tq <= Tk"): the op refuses
    # inputs that do not, in one sentence
    requires: list[str] = Field(default_factory=list)


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
    # a __constant__ array the host fills at run time (cudaMemcpyToSymbol of values the file does
    # not state, a convolution's filter): its name -> the task input the launch fills it from
    constants: dict[str, str] = Field(default_factory=dict)
    # what the task was made with (`mlxport port FILE.cu` flags: --kernel, --grid, --template...)
    # and the names its --case bound, so its launch can be evaluated at sizes of no case
    made_with: dict[str, str | dict[str, str]] = Field(default_factory=dict)
    bound: list[str] = Field(default_factory=list)

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
        unfilled = self.original and set(self.original.constants.values()) - {
            t.name for t in self.inputs
        }
        if unfilled:
            raise ValueError(
                f"[original] constants fills a __constant__ array from {sorted(unfilled)[0]}, "
                "which is no input: name an input of the task"
            )
        for rule in self.cases.requires:
            parse(rule)
        for case in self.all_cases() + self.cases.bench:
            self._check_case(case)
            for rule in self.cases.requires:
                if not evaluate(rule, self.bindings(case, self.dtypes[0])):
                    raise ValueError(
                        f"case {self.case_label(case)} breaks [cases] requires {rule!r}"
                    )
        return self

    def _check_case(self, case: dict[str, Any]) -> None:
        for k, v in case.items():
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"case {self.case_label(case)}: {k} is {v}; give a finite number")
        for name, shape in self.shapes(case, self.dtypes[0]).items():
            if any(d < 0 for d in shape):
                raise ValueError(
                    f"case {self.case_label(case)} gives {name} the shape {shape}: sizes are not "
                    f"negative"
                )
            if math.prod(shape) >= 2**63:
                raise ValueError(
                    f"case {self.case_label(case)} gives {name} {math.prod(shape):.3g} elements, "
                    f"more "
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
