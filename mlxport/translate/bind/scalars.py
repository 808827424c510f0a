"""Binding the kernel's scalar parameters: each takes its value from the launch's argument (or a
task param or input dimension of its name) and becomes a kernel input or a body-local constant."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.host.cexpr import CExprError, const_value, lower, simplify
from mlxport.translate.host.launch import LaunchPlan, find_unknown
from mlxport.translate.reading.cudafile import Param
from mlxport.translate.reading.names import TYPE_MAP

# std::bool_constant<Atomic>: a parameter that only selects a template instantiation
_TAG = re.compile(r"(?:std::)?(?:bool_constant|integral_constant|true_type|false_type)\b.*")


@dataclass
class Scalars:
    inputs: list[str] = field(default_factory=list)  # params the kernel takes as inputs
    # (parameter, its value, the param it is when it is one directly)
    consts: list[tuple[Param, ast.expr, str | None]] = field(default_factory=list)


def bind_scalars(job: KernelJob, plan: LaunchPlan) -> Scalars:
    out = Scalars()
    for p in job.info.params:
        if p.is_pointer or p.is_reference or _TAG.fullmatch(p.base_type.strip()):
            continue  # a tag type carries no value: its template argument is the launch's
        value = _value(job, plan, p)
        params = set(job.binder.params) if job.task else {p.name}
        if isinstance(value, ast.Name) and value.id in params:
            if value.id not in out.inputs:  # `pitch` passed `imageW`, itself a parameter
                out.inputs.append(value.id)
            out.consts.append((p, value, value.id))
            job.bindings[p.name] = value.id
            continue
        try:
            lowered = lower(value, want_bool=p.base_type == "bool")
        except CExprError as e:
            raise Untranslatable(
                e.what, plan.line, f"needed for kernel parameter `{p.name}`"
            ) from None
        for n in ast.walk(lowered):
            if isinstance(n, ast.Name) and n.id in params and n.id not in out.inputs:
                out.inputs.append(n.id)
        out.consts.append((p, lowered, None))
        job.bindings[p.name] = ast.unparse(lowered)
    return out


def _value(job: KernelJob, plan: LaunchPlan, p: Param) -> ast.expr:
    value = plan.kargs.get(p.name) if plan else None
    if isinstance(value, CExprError) or value is None:
        value = job.binder.scalar(p.name)
    if value is None and job.task is None:
        value = ast.Name(p.name)
    if value is None:
        raise Untranslatable(
            f"scalar parameter `{p.name}`",
            job.info.line,
            "no task param or input dimension matches it",
        )
    bad = find_unknown(value)
    if bad is not None:
        raise Untranslatable(bad.what, bad.line, f"needed for kernel parameter `{p.name}`")
    return simplify(value)


def prologue_consts(job: KernelJob, scalars: Scalars, cuda: bool) -> tuple[list[str], list[str]]:
    """Body-local constants for scalar params: (outer lines, lines inside the body's block)."""
    outer, inner = [], []
    for name, param in job.param_consts:
        outer.append(
            f"const bool {name} = {param}[0];" if cuda else f"const bool {name} = {param};"
        )
        if param not in scalars.inputs:
            scalars.inputs.append(param)
    for p, value, direct in scalars.consts:
        ctype = _ctype(job, p.type)
        if direct is not None:
            if direct == p.name and not cuda:
                continue
            src = f"{direct}[0]" if cuda else direct
            if direct == p.name:
                outer.append(f"const {ctype} mlxport_{p.name} = {src};")
                inner.append(f"const {ctype} {p.name} = mlxport_{p.name};")
            else:
                outer.append(f"const {ctype} {p.name} = {src};")
            continue
        c = to_c(
            value,
            lambda t, i: f"{t}_shape[{i}]",
            lambda t: _size_c(job, t),
            lambda n: f"{n}[0]" if cuda else n,
            "" if cuda else "metal::",
        )
        if p.name in scalars.inputs:  # the value reads the input of the parameter's own name
            outer.append(f"const {ctype} mlxport_{p.name} = {c};")
            inner.append(f"const {ctype} {p.name} = mlxport_{p.name};")
        else:
            outer.append(f"const {ctype} {p.name} = {c};")
    return outer, inner


def _size_c(job: KernelJob, tensor: str) -> str:
    nd = job.binder.ndim(tensor)
    if nd is None:
        raise Untranslatable(f"{tensor}.size", job.info.line, "unknown rank")
    return "(" + " * ".join(f"size_t({tensor}_shape[{i}])" for i in range(nd)) + ")" if nd else "1"


def _ctype(job: KernelJob, t: str) -> str:
    t = re.sub(r"\b(const|__restrict__)\b", "", t).strip()
    return TYPE_MAP.get(t, t) if job.target == "msl" else t


def to_c(
    e: ast.expr,
    shape_of: Callable[[str, int], str],
    size_of: Callable[[str], str],
    scalar: Callable[[str], str],
    minmax: str = "",
) -> str:
    """C text for a body-local constant: ``x.shape[i]`` reads the shape buffer MLX passes."""

    def go(n: ast.expr) -> str:
        if isinstance(n, ast.Constant):
            return str(int(n.value)) if isinstance(n.value, bool) else repr(n.value)
        if isinstance(n, ast.Name):
            return scalar(n.id)
        if (
            isinstance(n, ast.Subscript)
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "shape"
        ):
            idx = const_value(n.slice)
            if not isinstance(idx, int):
                raise CExprError("a computed shape index")
            return shape_of(n.value.value.id, idx)
        if isinstance(n, ast.Attribute) and n.attr == "size":
            return size_of(n.value.id)
        if isinstance(n, ast.BinOp):
            ops = {
                ast.Add: "+",
                ast.Sub: "-",
                ast.Mult: "*",
                ast.FloorDiv: "/",
                ast.Mod: "%",
                ast.LShift: "<<",
                ast.RShift: ">>",
            }
            return f"({go(n.left)} {ops[type(n.op)]} {go(n.right)})"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return f"(-{go(n.operand)})"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            args = [go(a) for a in n.args]
            if n.func.id == "ceildiv":
                return f"(({args[0]} + {args[1]} - 1) / {args[1]})"
            if n.func.id in ("min", "max"):
                return f"{minmax}{n.func.id}({', '.join(args)})"
        raise CExprError(f"expression {ast.unparse(n)!r} in a kernel constant")

    return go(e)
