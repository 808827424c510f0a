"""A task from a bare .cu file: the user's kernel, its cases, and the kernel itself as the golden.

The reader says what each parameter is: a const or never-written pointer is an input, a written
one an output, one both read and written an in-out buffer (an input ``x`` and an output
``x_out``, as MLX's outputs are new arrays). The host code, evaluated at each case, gives the
launch and the scalars it computes; buffer extents come from the host code where it states them,
else from ``--shape``, else from how far the original kernel reaches at the case (a measuring run
on the CPU executor). Held-out cases are odd sizes the original itself runs at; where it does not,
the note says so.
"""

from __future__ import annotations

import keyword
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends.cuda_cpu import CudaExecutor, Launch
from mlxport.errors import UserError, read_text
from mlxport.expr import evaluate
from mlxport.spec import KernelTask
from mlxport.translate.host.evaluate import evaluate_launch, file_constants
from mlxport.translate.host.values import (
    Buffer,
    HostArg,
    HostEvalError,
    HostLaunch,
    Tensor,
    Unknown,
    number,
)
from mlxport.translate.reading.cudafile import KernelInfo, Param
from mlxport.translate.reading.includes import amalgamate
from mlxport.translate.reading.reader import read_cuda
from mlxport.verify.golden import STORAGE, zero_struct

MEASURE_ELEMENTS = 1 << 22  # the room a buffer of unknown extent gets in the measuring run
TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4, "norm": 1e-4},
    "float16": {"atol": 2e-3, "rtol": 1e-2, "norm": 5e-3},
    "bfloat16": {"atol": 1e-2, "rtol": 5e-2, "norm": 2e-2},
}
DTYPE_OF = {
    "float32": "float32",
    "float64": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "int16": "int16",
    "uint16": "uint16",
    "int8": "int8",
    "uint8": "uint8",
}


class CudaTaskError(UserError):
    """The file, kernel or case cannot make a task; the message names the flag that fixes it."""


@dataclass
class Built:
    task: dict[str, Any]  # task.toml's content
    notes: list[str] = field(default_factory=list)
    source: str = ""  # kernel.cu: the file with its local headers inlined
    # headers the kernel reads from -I folders: their path under the task's include/ -> the file
    headers: dict[str, Path] = field(default_factory=dict)


def cuda_task(
    path: Path,
    *,
    kernel: str | None,
    cases: list[dict[str, Any]],
    dtypes: list[str] | None = None,
    shapes: dict[str, str] | None = None,
    grid: str | None = None,
    block: str | None = None,
    shared_bytes: str | None = None,
    template: str | None = None,
    includes: list[Path] = (),
    name: str | None = None,
    executor: CudaExecutor | None = None,
    heldout: int = 3,
) -> Built:
    """The content of task.toml for ``kernel`` of the file at ``path``, run at ``cases``."""
    if not cases:
        raise CudaTaskError(
            "no case to run the kernel at: pass --case with the sizes, e.g. --case 'N=4096'"
        )
    _read(path)
    text, inlined, missing = amalgamate(path, list(includes))
    cf = read_cuda(text, name=path.name)
    info = _kernel(cf, kernel, path)
    executor = executor or CudaExecutor()
    source = executor.source(path, tuple(includes))
    headers = _headers(source.preprocessed, list(includes))
    sig = source.kernels.get(info.name)
    if sig is None:
        raise CudaTaskError(f"the executor finds no __global__ {info.name} in {path.name}")
    for p in info.params:
        p.base_type = source.resolve(p.base_type)  # typedef floatX: what the buffer really holds
    typenames = {t.name for t in info.template_params if t.kind in ("typename", "class")}
    flags = dict(_pair(p) for p in _top_level(template)) if template else {}
    zeroed = _zeroed_structs(info, typenames, flags, executor, source)
    for p in info.params:
        if p.name not in zeroed:
            _storage(p, typenames)  # a pointer to a struct is named here
    if zeroed and not any(p.is_pointer for p in info.params):
        name = next(iter(zeroed))
        raise CudaTaskError(
            f"every buffer of {info.name} arrives inside the struct {name} passed by value, which "
            f"the executor can pass only as zero bytes: port a kernel that takes its buffers as "
            f"pointer parameters"
        )
    templated = any(p.is_pointer and p.base_type in typenames for p in info.params)
    if not templated:
        # the buffers fix the dtype: the task is checked at the tolerance of its least precise float buffer
        own = {_dtype(p, typenames) for p in info.params if p.is_pointer}
        floats = [d for d in ("bfloat16", "float16", "float32") if d in own] or ["float32"]
        if dtypes and not set(dtypes) <= own:
            raise CudaTaskError(
                f"{info.name} is not templated on its element type (its buffers are "
                f"{', '.join(sorted(own))}): drop --dtypes, or port a templated kernel"
            )
        dtypes = floats[:1]
    dtypes = dtypes or ["float32"]
    roles = _roles(info)
    builder = _Builder(
        path,
        source.preprocessed,
        {},
        info,
        sig,
        roles,
        typenames,
        shapes or {},
        (grid, block, shared_bytes),
        executor,
        source,
        includes,
    )
    builder.macros = _numeric_macros(cf) | file_constants(source.preprocessed)
    builder.shapes = {k: _c_expr(v, builder.macros) for k, v in builder.shapes.items()}
    builder.template_flags = flags
    builder.zeroed = zeroed
    notes: list[str] = [
        f"dropped #include <{h}>: nothing of it runs in device code"
        for h in source.dropped_includes
    ]
    notes += [
        f"{p.name} ({p.type}, {zeroed[p.name]} bytes) is a struct passed by value, which the host fills at run "
        f"time: the original runs with it all zero bytes"
        for p in info.params
        if p.name in zeroed
    ]
    notes += [f"kernel.cu holds {path.name} with its local header {h} inlined" for h in inlined]
    notes += [
        f'#include "{h}" is not found next to {path.name} or in an -I folder: left out'
        for h in missing
    ]
    visible = [builder.case(c) for c in cases]
    builder.heldout = True
    held: list[dict] = []
    for candidate, why in builder.heldout_candidates(cases[0], heldout):
        try:
            held.append(builder.case(candidate))
        except (CudaTaskError, HostEvalError) as e:
            notes.append(
                f"no held-out case with {why}: the original kernel does not support it ({e})"
            )
    _name_measured(info, builder.buffer_shapes, roles, [c for c, _ in visible + held])
    notes += builder.partial.values()
    first = visible[0][0]
    launches = [
        {
            "case": _label(c),
            "grid": list(h.grid),
            "block": list(h.block),
            "shared_bytes": h.shared_bytes,
            "template": builder.template(h),
        }
        for c, h in visible + held
    ]
    inputs, outputs, params, args, results = [], [], [], {}, {}
    for p in info.params:
        if p.name in zeroed:
            continue
        if not p.is_pointer:
            params.append(
                {"name": p.name, "type": _param_type(p, builder.types), "default": first[p.name]}
            )
            args[p.name] = p.name
            continue
        tensor = (
            f"{p.name}_" if keyword.iskeyword(p.name) else p.name
        )  # `in`: the port names it in Python
        spec = {
            "name": tensor,
            "dtype": _dtype(p, typenames),
            "shape": builder.buffer_shapes[p.name],
        }
        if roles[p.name] in ("input", "inout"):
            fill = builder.fills.get(p.name)
            if (
                fill is None
                and np.dtype(_storage(p, typenames).replace("bfloat16", "uint16")).kind in "iu"
            ):
                fill = 0  # indices and counts: zero, as when the task was measured, stays in bounds
            inputs.append(
                {**spec, **({"init": {"kind": "full", "value": fill}} if fill is not None else {})}
            )
            args[p.name] = tensor
        if roles[p.name] in ("output", "inout"):
            out = tensor if roles[p.name] == "output" else f"{tensor}_out"
            start = 0.0 if builder.atomic else math.nan  # atomics accumulate into zeros
            nan = {"init": {"kind": "full", "value": start}} if p.name in builder.partial else {}
            outputs.append({**spec, "name": out, **nan})
            results[out] = p.name
    if not outputs:
        raise CudaTaskError(f"{info.name} writes none of its pointer arguments: nothing to port")
    if not any(
        t["dtype"] == "T" for t in inputs
    ):  # templated on its outputs' type only: one dtype each run
        if len(dtypes) > 1 and any(t["dtype"] == "T" for t in outputs):
            raise CudaTaskError(
                f"{info.name}'s element type is its outputs' alone, so a port cannot tell it from "
                f"its inputs: pass one dtype with --dtypes"
            )
        for t in outputs:
            t["dtype"] = dtypes[0] if t["dtype"] == "T" else t["dtype"]
    itemsize = " + ".join(
        "*".join(f"({d})" for d in builder.buffer_shapes[p.name])
        for p in info.params
        if p.is_pointer
    )
    task = {
        "name": name or _identifier(info.name),
        "kernel": info.name,
        "source": "kernel.cu",
        "reference": None,
        "description": f"{info.name} from {path.name}, checked against the original kernel on the CPU executor",
        "dtypes": dtypes,
        "inputs": inputs,
        "outputs": outputs,
        "params": params,
        "tolerance": {d: TOLERANCE.get(d, TOLERANCE["float32"]) for d in dtypes},
        "cases": {"visible": [c for c, _ in visible], "heldout": [c for c, _ in held]},
        "cost": {"bytes": f"({itemsize}) * itemsize"},
        "tags": ["user-kernel"],
        "original": {
            "args": args,
            "results": results,
            "launches": launches,
            "include": [INCLUDE] if headers else [],
            "zeroed": zeroed,
        },
    }
    KernelTask.model_validate(
        {k: v for k, v in task.items() if v is not None} | {"reference": None}
    )
    return Built(task, notes, text, headers)


def _name_measured(
    info: KernelInfo,
    shapes: dict[str, list[str]],
    roles: dict[str, str],
    cases: list[dict[str, Any]],
) -> None:
    """A buffer whose extent only a measurement gives (``n_out``) named by what equals it at every
    case (a param, a product of two params, for an output also an input's extent), so a port can
    size it from its arguments; the measured name then leaves the cases."""
    params = [p.name for p in info.params if not p.is_pointer]
    products = [*params, *(f"{a} * {b}" for i, a in enumerate(params) for b in params[i:])]
    buffers = sorted(
        (p for p in info.params if p.is_pointer), key=lambda p: roles[p.name] == "output"
    )
    for p in buffers:
        measured = f"n_{p.name}"
        if shapes[p.name] != [measured]:
            continue
        inputs = (
            [
                shapes[q.name][0]
                for q in buffers
                if roles[q.name] != "output" and q is not p and len(shapes[q.name]) == 1
            ]
            if roles[p.name] == "output"
            else []
        )
        expr = next((e for e in [*products, *inputs] if _equals_at(e, measured, cases)), None)
        if expr is None:
            continue
        shapes[p.name] = [expr]
        if not any(re.search(rf"\b{measured}\b", str(d)) for sh in shapes.values() for d in sh):
            for c in cases:
                c.pop(measured, None)


def _equals_at(expr: str, measured: str, cases: list[dict[str, Any]]) -> bool:
    try:
        values = [evaluate(expr, c) for c in cases]
    except (UserError, KeyError):
        return False
    # Only integer params size a buffer: a float scale that happens to equal the extent is no size.
    return all(type(v) is int and v == c[measured] for v, c in zip(values, cases, strict=True))


def _headers(preprocessed: str, includes: list[Path]) -> dict[str, Path]:
    """The files the preprocessor read from the -I folders (its line markers name them), by their
    path under the folder they were found in: a task carries copies, so it reads nothing outside."""
    roots = [Path(p).resolve() for p in includes]
    found: dict[str, Path] = {}
    for name in dict.fromkeys(_MARKER.findall(preprocessed)):
        file = Path(name).resolve()
        for root in roots:
            if file.is_relative_to(root) and file.is_file():
                found.setdefault(file.relative_to(root).as_posix(), file)
                break
    return found


_MARKER = re.compile(r'^# \d+ "([^"<][^"]*)"', re.M)
INCLUDE = "include"  # the task folder's copy of the headers its kernel reads from -I folders


def write_task(built: Built, folder: Path, source: Path) -> Path:
    """task.toml, the kernel's file and the headers it reads in ``folder`` (made afresh)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, file in built.headers.items():
        (folder / INCLUDE / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, folder / INCLUDE / rel)
    (folder / "kernel.cu").write_text(built.source or source.read_text())
    (folder / "task.toml").write_text(toml_text(built.task))
    if built.notes:
        (folder / "NOTES.md").write_text(
            "# Notes from making this task\n\n" + "".join(f"- {n}\n" for n in built.notes)
        )
    return folder


class _Builder:
    def __init__(
        self,
        path,
        text,
        defines,
        info,
        sig,
        roles,
        typenames,
        shapes,
        launch_flags,
        executor,
        source,
        includes,
    ):
        self.path, self.text, self.defines, self.info, self.sig = path, text, defines, info, sig
        self.roles, self.typenames, self.shapes, self.flags = roles, typenames, shapes, launch_flags
        self.executor, self.source, self.includes = executor, source, includes
        self.fills: dict[str, float] = {}
        self.buffer_shapes: dict[str, list[str]] = {}  # from the first case that gives one
        self.template_flags: dict[str, str] = {}
        self.zeroed: dict[str, int] = {}  # struct parameters passed as zero bytes -> their size
        self.atomic = any(f.category == "atomic" for f in info.features)
        self.macros: dict[
            str, int | float
        ] = {}  # for --grid and --block written in the file's own macros
        self.partial: dict[
            str, str
        ] = {}  # outputs the original writes only in part -> the note saying so
        self.whole: set[str] = (
            set()
        )  # outputs written whole at the visible cases: so must held-out ones be
        self.heldout = False  # building held-out cases, which must be sizes the original supports

    @property
    def types(self) -> dict[str, str]:
        return {
            t: "float" for t in self.typenames
        } | self.template_flags  # the kernel is built at float

    def case(self, bound: dict[str, Any]) -> tuple[dict[str, Any], HostLaunch]:
        """The full case (the names bound, every scalar parameter, every buffer's extent) and its launch."""
        grid, block, shared = (self._flag(f, bound) for f in self.flags)
        types = self.types
        launch = evaluate_launch(
            self.text,
            self.info.name,
            bound,
            self.defines,
            grid,
            block,
            shared,
            types,
            lambda expr: self.executor.constant(self.source, self.info.name, expr),
        )
        if (
            launch.line == 0 and not launch.args
        ):  # no launch names the kernel: --grid/--block and --case say all
            launch.args = [
                HostArg(
                    p.name,
                    Buffer(p.name)
                    if p.is_pointer
                    else bound.get(p.name, Unknown("no launch in the host code names the kernel")),
                )
                for p in self.info.params
            ]
        for p in self.info.params[len(launch.args) :]:  # default arguments the launch leaves out
            if p.default is None or p.is_pointer:
                break
            try:
                v = number(p.default.strip())
            except ValueError:
                v = Unknown(f"{p.name} defaults to {p.default}, which is not a number")
            launch.args.append(HostArg(p.name, v))
        if len(launch.args) != len(self.info.params):
            raise CudaTaskError(
                f"the launch at line {launch.line} passes {len(launch.args)} arguments to "
                f"{self.info.name}, which takes {len(self.info.params)}"
            )
        case = {k: v for k, v in bound.items() if isinstance(v, int | float | bool)}
        unknown: list[str] = []
        for p, arg in zip(self.info.params, launch.args, strict=True):
            if p.name in self.zeroed:
                continue
            if p.is_pointer:
                shape = self.shape_of(p, arg, bound)
                if shape is None:
                    unknown.append(p.name)
                elif shape == [f"n_{p.name}"]:
                    case[f"n_{p.name}"] = self._extent(p, arg, bound)
                self.buffer_shapes.setdefault(p.name, shape or [f"n_{p.name}"])
                if isinstance(arg.value, Buffer) and arg.value.fill is not None:
                    self.fills[p.name] = arg.value.fill
            elif isinstance(arg.value, int | float | bool):
                case[p.name] = _scalar(p, arg.value, types)
            else:
                why = getattr(arg.value, "why", "")
                if launch.line == 0:
                    raise CudaTaskError(
                        f"no launch in the host code names {self.info.name}, so nothing gives "
                        f"{p.name} a value: bind {p.name} with --case"
                    )
                raise CudaTaskError(
                    f"the host code gives {p.name} (argument {arg.text!r} of the launch at line "
                    f"{launch.line}) no value at this case: {why}; bind {p.name} with --case"
                )
        if unknown:
            case.update(self._measure(case, launch, unknown))
        self._check(case, launch)
        return case, launch

    def _flag(self, expr: str | None, bound: dict[str, Any]) -> Any:
        if expr is None:
            return None
        try:
            values = [
                evaluate(_c_expr(e.strip(), self.macros), dict(bound)) for e in expr.split(",")
            ]
        except UserError as e:
            raise CudaTaskError(f"cannot evaluate {expr!r} at {_label(bound)}: {e}") from e
        return values if len(values) > 1 else values[0]

    def shape_of(self, p: Param, arg, bound: dict[str, Any]) -> list[str] | None:
        """A buffer's shape as expressions over the case's names where the host states it in them
        (or --shape does), ``[n_<name>]`` where it states only a number, None where it states nothing."""
        if p.name in self.shapes:
            return [self.shapes[p.name]]
        v = arg.value
        itemsize = _itemsize(_storage(p, self.typenames))
        if isinstance(v, Tensor) and v.shape() is not None:
            return (
                [v.names[i] for i in range(len(v.dims))]
                if len(v.names) == len(v.dims)
                else [f"n_{p.name}"]
            )
        if isinstance(v, Buffer):
            if v.dims:
                return list(v.dims)
            n = v.elements(itemsize)
            if n is None:
                return None
            if v.size_text:
                bare = re.fullmatch(rf"(.+?)\s*\*\s*{itemsize}", v.size_text.strip())
                expr = _c_expr(
                    bare.group(1) if bare else f"({v.size_text}) / {itemsize}", self.macros
                )
                try:
                    if int(evaluate(expr, dict(bound))) == n:
                        return [expr]
                except UserError:
                    pass
            return [f"n_{p.name}"]
        return None

    def _extent(self, p: Param, arg, bound: dict[str, Any]) -> int:
        if p.name in self.shapes:
            try:
                return int(evaluate(self.shapes[p.name], dict(bound)))
            except UserError as e:
                raise CudaTaskError(
                    f"--shape {p.name}={self.shapes[p.name]} does not evaluate at "
                    f"{_label(bound)}: {e}"
                ) from e
        v = arg.value
        itemsize = _itemsize(_storage(p, self.typenames))
        if isinstance(v, Tensor):
            return int(math.prod(v.shape()))
        return int(v.elements(itemsize))

    def _args(
        self, case: dict[str, Any], sizes: dict[str, int], fill: float | None = None
    ) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        out = []
        for p in self.info.params:
            if p.name in self.zeroed:
                out.append(zero_struct(self.zeroed[p.name]))
                continue
            storage = _storage(p, self.typenames)
            if p.is_pointer:
                n = sizes.get(p.name) or self.elements(p.name, case)
                data = np.full(n, fill) if fill is not None else rng.standard_normal(n)
                out.append(_to_storage(data, storage))
            else:
                out.append(
                    np.array(case[p.name]).astype("uint16" if storage == "bfloat16" else storage)
                )
        return out

    def elements(self, name: str, case: dict[str, Any]) -> int:
        return int(math.prod(int(evaluate(d, dict(case))) for d in self.buffer_shapes[name]))

    def template(self, launch: HostLaunch) -> list[str]:
        element = {p.base_type for p in self.info.params if p.is_pointer} & self.typenames
        names = [t.name for t in self.info.template_params]
        args = list(launch.template_args)
        if self.template_flags:
            unknown = set(self.template_flags) - set(names)
            if unknown:
                raise CudaTaskError(
                    f"--template names {', '.join(sorted(unknown))}, not template parameters of "
                    f"{self.info.name} ({', '.join(names) or 'none'})"
                )
            args = [
                self.template_flags.get(n, args[i] if i < len(args) else None)
                for i, n in enumerate(names)
            ]
            args = args[: next((i for i, a in enumerate(args) if a is None), len(args))]
        if len(args) < len(names):
            for t in self.info.template_params[len(args) :]:
                if t.name in element or t.kind in ("typename", "class"):
                    args.append("float")
                elif t.default is not None:
                    args.append(t.default)
                else:
                    raise CudaTaskError(
                        f"{self.info.name} needs template argument {t.name}, which the launch does "
                        f"not give: bind it with --case {t.name}=..."
                    )
        return ["float" if n in element else a for n, a in zip(names, args, strict=False)]

    def _compiled(self, launch: HostLaunch):
        return self.executor.compile(self.source, self.info.name, self.template(launch))

    def _measure(
        self, case: dict[str, Any], launch: HostLaunch, unknown: list[str]
    ) -> dict[str, int]:
        """How far the original reaches into the buffers whose extent nothing states."""
        sizes = {n: MEASURE_ELEMENTS for n in unknown}
        result = self.executor.run(
            self._compiled(launch),
            Launch(launch.grid, launch.block, launch.shared_bytes),
            self._args(case, sizes, fill=0.0),
            measure=True,
        )
        if not result.ok:
            given = next(
                (n for n in self.shapes if re.search(rf"\b{n}\[", result.error or "")), None
            )
            if given is not None:
                raise CudaTaskError(
                    f"the original kernel fails at {_label(case)}: {result.error}; "
                    f"--shape {given}={self.shapes[given]} is too small"
                )
            raise CudaTaskError(
                f"the original kernel fails at {_label(case)} while its buffer sizes are measured: "
                f"{result.error}"
            )
        return {f"n_{n}": max(1, result.touched.get(n, 0)) for n in unknown}

    def _check(self, case: dict[str, Any], launch: HostLaunch) -> None:
        """The original runs at the case on random inputs, and writes finite outputs."""
        args = self._args(case, {})
        result = self.executor.run(
            self._compiled(launch), Launch(launch.grid, launch.block, launch.shared_bytes), args
        )
        if not result.ok:
            raise CudaTaskError(f"the original kernel fails at {_label(case)}: {result.error}")
        self._outputs_only(case, launch, args, result)
        for p in self.info.params:
            if p.is_pointer and self.roles[p.name] == "output":
                written = result.written.get(p.name)
                if written is not None and not written.any():
                    raise CudaTaskError(
                        f"the original writes none of the {written.size} elements of {p.name} at "
                        f"{_label(case)}: is its size right? (--shape {p.name}=EXPR)"
                    )
                if written is not None and written.all() and not self.heldout:
                    self.whole.add(p.name)
                if written is not None and not written.all() and p.name in self.whole:
                    raise CudaTaskError(
                        f"the original writes {int(written.sum())} of the {written.size} elements "
                        f"of {p.name} at {_label(case)}, though all at the visible case"
                    )
                if (
                    written is not None
                    and not written.all()
                    and np.dtype(_storage(p, self.typenames).replace("bfloat16", "float16")).kind
                    != "f"
                ):
                    raise CudaTaskError(
                        f"the original writes {int(written.sum())} of the {written.size} elements of "
                        f"{p.name} at {_label(case)}, which holds integers (no NaN marks what it "
                        f"leaves): give its real size with --shape {p.name}=EXPR"
                    )
                if (
                    written is not None
                    and not written.all()
                    and p.name not in self.partial
                    and self.atomic
                ):
                    self.partial[p.name] = (
                        f"the original writes {int(written.sum())} of the {written.size} elements "
                        f"of {p.name} at {_label(case)}: the rest keep the zeros it starts as "
                        f"(atomics accumulate into outputs the host zeroes, and MLX starts every "
                        f"output of an atomic kernel at zero)"
                    )
                elif written is not None and not written.all() and p.name not in self.partial:
                    self.partial[p.name] = (
                        f"the original writes {int(written.sum())} of the {written.size} elements "
                        f"of {p.name} at {_label(case)}: the rest are unspecified (NaN in the "
                        f"golden, and the port's output starts as NaN); if that is not so, give "
                        f"its real size with --shape {p.name}=EXPR"
                    )

    def _outputs_only(self, case: dict[str, Any], launch: HostLaunch, args: list, first) -> None:
        """A buffer the kernel reads and writes whose first contents change nothing (it writes each
        element before reading it back) is an output, not an in-out buffer."""
        for i, p in enumerate(self.info.params):
            written = first.written.get(p.name) if p.is_pointer else None
            if self.roles.get(p.name) != "inout" or written is None or not written.all():
                continue
            other = list(args)
            storage = _storage(p, self.typenames)
            rng = np.random.default_rng(7)
            # integers start as zeros: any other contents will do
            other[i] = (
                rng.integers(1, 64, args[i].size).astype(storage)
                if storage != "bfloat16" and np.dtype(storage).kind in "iu"
                else _to_storage(rng.standard_normal(args[i].size), storage)
            )
            again = self.executor.run(
                self._compiled(launch),
                Launch(launch.grid, launch.block, launch.shared_bytes),
                other,
            )
            if again.ok and all(
                np.array_equal(again.buffers[n], first.buffers[n], equal_nan=True)
                for n in first.buffers
            ):
                self.roles[p.name] = "output"

    def heldout_candidates(
        self, bound: dict[str, Any], count: int
    ) -> list[tuple[dict[str, Any], str]]:
        """Odd sizes near a visible case: each size the user bound, one at a time, made odd (block
        sizes, tile sizes and template arguments stay)."""
        fixed = {t.name for t in self.info.template_params}
        out = []
        for k, v in bound.items():
            if (
                not isinstance(v, int)
                or isinstance(v, bool)
                or v < 4
                or k in fixed
                or re.search(r"block|thread|warp|tile|BLOCK|THREAD|WARP|TILE|^B[rc]$", k)
            ):
                continue
            odd = v + 1 if v % 2 == 0 else v + 2
            out.append(({**bound, k: odd}, f"{k}={odd}"))
        return out[:count]


def _read(path: Path) -> str:
    if not path.is_file():
        raise CudaTaskError(f"no such file {path}: pass the path of a .cu file")
    return read_text(path, "CUDA source")


def _kernel(cf, kernel: str | None, path: Path) -> KernelInfo:
    names = [k.name for k in cf.kernels]
    if not names:
        raise CudaTaskError(
            f"{path.name} defines no __global__ kernel: pass a file with the kernel to port"
        )
    if kernel is None:
        if len(names) > 1:
            raise CudaTaskError(
                f"{path.name} has {len(names)} kernels ({', '.join(names)}): pick one with --kernel"
            )
        kernel = names[0]
    if kernel not in names:
        raise CudaTaskError(
            f"{path.name} has no kernel {kernel!r}; its kernels are {', '.join(names)}: "
            f"pass one of them with --kernel"
        )
    return cf.kernel(kernel)


def _roles(info: KernelInfo) -> dict[str, str]:
    roles = {}
    for p in info.params:
        if not p.is_pointer:
            continue
        if p.is_const or not p.written:
            roles[p.name] = "input"
        else:
            roles[p.name] = "inout" if p.read else "output"
    return roles


def _c_expr(expr: str, constants: dict[str, int | float]) -> str:
    """A --shape, --grid or --block written in C, with the file's own constants, as a task expression
    (integer `/` truncates; the sizes are positive, so it is floor division)."""
    expr = re.sub(r"(?<!/)/(?!/)", "//", expr)
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(constants.get(m.group(), m.group())), expr)


def _numeric_macros(cf) -> dict[str, int | float]:
    out: dict[str, int | float] = {}
    for m in cf.macros:
        body = m.body.strip().strip("()").rstrip("uUlLfF")
        if m.params is None and re.fullmatch(r"-?\d+(\.\d*)?([eE]-?\d+)?", body):
            out[m.name] = float(body) if re.search(r"[.eE]", body) else int(body)
    return out


def _itemsize(storage: str) -> int:
    return 2 if storage == "bfloat16" else np.dtype(storage).itemsize


def _zeroed_structs(
    info: KernelInfo, typenames: set[str], flags: dict[str, str], executor: CudaExecutor, source
) -> dict[str, int]:
    """Parameters of a struct type passed by value, with their sizes as the compiler gives them."""
    out = {}
    for p in info.params:
        if p.is_pointer or p.base_type in typenames or STORAGE.get(p.base_type) is not None:
            continue
        t = re.sub(r"^(?:const\s+)?(?:struct\s+)?", "", p.base_type)
        for name, value in flags.items():  # std::bool_constant<Atomic> at --template Atomic=false
            t = re.sub(rf"\b{re.escape(name)}\b", value, t)
        n = executor.constant(source, info.name, f"sizeof({t})")
        if n is None:
            raise CudaTaskError(
                f"parameter {p.name} of type {p.type} cannot be passed by the executor: port a "
                f"kernel whose parameters are pointers, plain scalars and structs of known size"
                f"{' (bind its template arguments with --template)' if '<' in t else ''}"
            )
        out[p.name] = n
    return out


def _storage(p: Param, typenames: set[str]) -> str:
    if p.base_type in typenames:
        return "float32"
    storage = STORAGE.get(p.base_type)
    if storage is None:
        raise CudaTaskError(
            f"parameter {p.name} of type {p.type} cannot be passed by the executor: port a kernel "
            f"whose parameters are pointers to numbers and plain scalars"
        )
    return "uint16" if storage == "bfloat16" and not p.is_pointer else storage


def _dtype(p: Param, typenames: set[str]) -> str:
    if p.base_type in typenames:
        return "T"
    return DTYPE_OF.get(STORAGE.get(p.base_type, "float32"), "float32")


def _to_storage(data: np.ndarray, storage: str) -> np.ndarray:
    if storage == "bfloat16":
        bits = data.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    if np.dtype(storage).kind in "iu":
        return np.zeros(data.shape, storage)  # indices and counts: zeros stay in bounds
    return data.astype(storage)


def _param_type(p: Param, types: dict[str, str]) -> str:
    t = types.get(
        p.base_type, p.base_type
    ).lower()  # a template type (acc_t scale) as the kernel is built
    if t in ("bool",):
        return "bool"
    if any(w in t for w in ("float", "double", "half", "bfloat16")):
        return "float"
    return "int"


def _scalar(p: Param, v: Any, types: dict[str, str]) -> Any:
    kind = _param_type(p, types)
    return bool(v) if kind == "bool" else float(v) if kind == "float" else int(v)


def _label(case: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in case.items())


def _top_level(text: str) -> list[str]:
    """``Ktraits=traits<64, 4, float>,kIsCircular=false`` split at the commas outside <> and ()."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise CudaTaskError(
            f"--template {text!r} is not NAME=VALUE: write it like T=float,BLOCK=256"
        )
    return name.strip(), value.strip()


def _identifier(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else f"k_{s}"


# ---------------------------------------------------------------- task.toml


def toml_text(data: dict[str, Any]) -> str:
    """TOML for a task: scalars first, then tables and arrays of tables."""
    lines: list[str] = []
    _table(data, [], lines)
    return "\n".join(lines).strip() + "\n"


def _table(data: dict[str, Any], prefix: list[str], lines: list[str]) -> None:
    scalars = {
        k: v
        for k, v in data.items()
        if v is not None and not _is_table(v) and not _is_table_array(v)
    }
    for k, v in scalars.items():
        lines.append(f"{k} = {_value(v)}")
    for k, v in data.items():
        if _is_table(v):
            lines += ["", f"[{'.'.join([*prefix, k])}]"]
            _table(v, [*prefix, k], lines)
        elif _is_table_array(v):
            for item in v:
                lines += ["", f"[[{'.'.join([*prefix, k])}]]"]
                _table(item, [*prefix, k], lines)


def _is_table(v: Any) -> bool:
    return isinstance(v, dict) and any(isinstance(x, dict | list) for x in v.values())


def _is_table_array(v: Any) -> bool:
    return (
        isinstance(v, list)
        and bool(v)
        and all(isinstance(x, dict) for x in v)
        and any(any(isinstance(y, dict | list) for y in x.values()) for x in v)
    )


def _value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if math.isnan(v):
            return "nan"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return (
            "{ "
            + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None)
            + " }"
        )
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else f'"{k}"'
