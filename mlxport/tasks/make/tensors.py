"""The task's arrays from what the runs found: each buffer an input, an output or both (an input
``x`` and an output ``x_out``, as MLX's outputs are new arrays), each scalar a param, and
extents only a measurement gave named by what equals them at every case."""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass, field
from typing import Any

from mlxport.errors import UserError
from mlxport.expr import evaluate
from mlxport.tasks.make.cases import CaseRunner, dims, label
from mlxport.tasks.make.kernel import CudaTaskError, dtype, param_type
from mlxport.translate.host.values import HostLaunch


@dataclass
class Arrays:
    """task.toml's inputs, outputs and params, and how the original's parameters bind to them."""

    inputs: list[dict] = field(default_factory=list)
    outputs: list[dict] = field(default_factory=list)
    params: list[dict] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)  # kernel parameter -> input or param
    results: dict[str, str] = field(default_factory=dict)  # output -> kernel parameter
    constants: dict[str, str] = field(default_factory=dict)  # __constant__ array -> input


def arrays(
    runner: CaseRunner, first: dict[str, Any], dtypes: list[str], domains: dict[str, dict]
) -> Arrays:
    """``domains``: the init of each integer input (tasks/make/domains.py)."""
    info, sig = runner.info, runner.sig
    out = Arrays()
    for p in info.params:
        if p.name in sig.zeroed:
            continue
        if not p.is_pointer:
            kind = param_type(p, sig.types)
            out.params.append({"name": p.name, "type": kind, "default": first[p.name]})
            out.args[p.name] = p.name
            continue
        tensor = f"{p.name}_" if keyword.iskeyword(p.name) else p.name  # `in`: a Python name
        spec = {
            "name": tensor,
            "dtype": dtype(p, sig.typenames),
            "shape": runner.buffer_shapes[p.name],
        }
        role = runner.roles[p.name]
        if role in ("input", "inout"):
            fill = runner.fills.get(p.name)
            init = {"init": {"kind": "full", "value": fill}} if fill is not None else {}
            if p.name in domains:
                init = {"init": domains[p.name]}
            out.inputs.append({**spec, **init})
            out.args[p.name] = tensor
        if role in ("output", "inout"):
            name = tensor if role == "output" else f"{tensor}_out"
            start = 0.0 if runner.atomic else math.nan  # atomics accumulate into zeros
            init = {"init": {"kind": "full", "value": start}} if p.name in runner.partial else {}
            out.outputs.append({**spec, "name": name, **init})
            out.results[name] = p.name
    if not out.outputs:
        raise CudaTaskError(f"{info.name} writes none of its pointer arguments: nothing to port")
    for c in runner.kf.constants:
        out.inputs.append({"name": c.name, "dtype": c.dtype, "shape": [c.elements]})
        out.constants[c.name] = c.name
    _output_dtypes(info.name, out, dtypes)
    return out


def _output_dtypes(kernel: str, out: Arrays, dtypes: list[str]) -> None:
    """A kernel templated on its outputs' type only runs one dtype at a time: they take it."""
    if any(t["dtype"] == "T" for t in out.inputs):
        return
    if len(dtypes) > 1 and any(t["dtype"] == "T" for t in out.outputs):
        raise CudaTaskError(
            f"{kernel}'s element type is its outputs' alone, so a port cannot tell it from its "
            f"inputs: pass one dtype with --dtypes"
        )
    for t in out.outputs:
        t["dtype"] = dtypes[0] if t["dtype"] == "T" else t["dtype"]


def launches(runner: CaseRunner, runs: list[tuple[dict, HostLaunch]]) -> list[dict]:
    return [
        {
            "case": label(c),
            "grid": list(h.grid),
            "block": list(h.block),
            "shared_bytes": h.shared_bytes,
            "template": runner.template(h),
        }
        for c, h in runs
    ]


def name_measured(runner: CaseRunner, cases: list[dict[str, Any]]) -> None:
    """A buffer whose extent only a measurement gives (``n_out``) named by what equals it at every
    case: another buffer's shape (K as large as Q is Q's [B, nh, N, d]), a size the case binds or
    a scalar parameter, a product of two (a launcher's ``rows`` and the kernel's ``cols``); so a
    port can size it from its arguments and the op takes it in that shape. Two factors are ordered
    as the kernel indexes the buffer (``in[y * width + x]`` is ``[height, width]``). The measured
    name then leaves the cases."""
    info, shapes = runner.info, runner.buffer_shapes
    measured = {f"n_{p.name}" for p in info.params if p.is_pointer}
    sizes = [k for k, v in cases[0].items() if type(v) is int and k not in measured]
    products = [*sizes, *(f"{a} * {b}" for i, a in enumerate(sizes) for b in sizes[i:])]
    buffers = sorted(
        (p for p in info.params if p.is_pointer), key=lambda p: runner.roles[p.name] == "output"
    )
    for p in buffers:
        own = f"n_{p.name}"
        if shapes[p.name] != [own]:
            continue
        known = [
            shapes[q.name]
            for q in buffers
            if q is not p and not any(str(d).startswith("n_") for d in shapes[q.name])
        ]
        candidates = [*known, *(dims(e) for e in products)]
        found = next((c for c in candidates if _equals_at(_product(c), own, cases)), None)
        if found is None:
            continue
        shapes[p.name] = strided(list(found), runner.strides(p.name))
        if not any(re.search(rf"\b{own}\b", str(d)) for sh in shapes.values() for d in sh):
            for c in cases:
                c.pop(own, None)


def strided(shape: list[str], strides: set[str]) -> list[str]:
    """A two-dimensional shape with the row stride the kernel indexes by last."""
    if len(shape) == 2 and all(isinstance(d, str) and d.isidentifier() for d in shape):
        return dims(f"{shape[0]} * {shape[1]}", strides)
    return shape


def _product(shape: list[str]) -> str:
    return " * ".join(f"({d})" for d in shape)


def _equals_at(expr: str, measured: str, cases: list[dict[str, Any]]) -> bool:
    try:
        values = [evaluate(expr, c) for c in cases]
    except (UserError, KeyError):
        return False
    # Only integer params size a buffer: a float scale that happens to equal the extent is no size.
    return all(type(v) is int and v == c[measured] for v, c in zip(values, cases, strict=True))
