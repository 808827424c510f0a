"""Launch facts of a candidate at the timed size, for the benchmark result the model reads: how
many threadgroups of how many threads, and the threadgroup memory each declares against the
chip's limit (what bounds how many threadgroups a core can hold)."""

from __future__ import annotations

import math
import re

from mlxport.errors import UserError
from mlxport.expr import ExprError, evaluate
from mlxport.spec import KernelCandidate, KernelTask

SIZES = {
    "float": 4,
    "half": 2,
    "bfloat": 2,
    "bfloat16_t": 2,
    "float16_t": 2,
    "int": 4,
    "uint": 4,
    "short": 2,
    "ushort": 2,
    "char": 1,
    "uchar": 1,
    "bool": 1,
    "float2": 8,
    "float4": 16,
    "half2": 4,
    "half4": 8,
    "int2": 8,
    "int4": 16,
    "uint2": 8,
    "uint4": 16,
    "atomic_uint": 4,
    "atomic_int": 4,
    "atomic_float": 4,
    "float3": 16,
    "double": 8,
    "long": 8,
    "ulong": 8,
}
_DECL = re.compile(r"\bthreadgroup\s+(?:const\s+)?(\w+)\s+\w+\s*((?:\[[^\]\[]+\])+)\s*;")
_CONST = re.compile(
    r"(?:\bconstexpr\s+(?:const\s+)?(?:constant\s+)?\w+\s+(\w+)\s*=\s*([^;{}]+);)"
    r"|(?:^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]+))",
    re.MULTILINE,
)


def threadgroup_bytes(candidate: KernelCandidate, values: dict) -> int | None:
    """Bytes of threadgroup memory the candidate declares, or None where a size cannot be read."""
    text = f"{candidate.header}\n{candidate.source}"
    values = dict(values)
    for name, expr, macro, body in _CONST.findall(text):  # constexpr sizes, in order of declaration
        pairs = (
            [(macro, body)]
            if macro
            else [(name, (expr.split(",") + [""])[0])]
            + [tuple(d.split("=", 1)) for d in expr.split(",")[1:] if "=" in d]
        )
        for key, value in pairs:
            try:
                values[key.strip()] = evaluate(
                    re.sub(r"\b(\d+)[uUlL]+\b", r"\1", value.strip()), values
                )
            except (ExprError, UserError):
                continue
    total = 0
    for type_, dims in _DECL.findall(text):
        if type_ not in SIZES:
            return None
        try:
            extents = [evaluate(d.strip(), values) for d in re.findall(r"\[([^\]]+)\]", dims)]
        except (ExprError, UserError):
            return None
        if not all(isinstance(e, int) for e in extents):
            return None
        total += SIZES[type_] * math.prod(extents)
    return total


def launch_facts(
    task: KernelTask, candidate: KernelCandidate, case: dict, dtype: str, limit: int
) -> str:
    from mlxport.tasks import case_infos

    infos = case_infos(task, case, dtype)
    try:
        launch = candidate.launch(infos)
    except UserError:
        return ""
    groups = math.prod(-(-g // t) for g, t in zip(launch.grid, launch.threadgroup, strict=True))
    threads = math.prod(launch.threadgroup)
    text = f"launch at {task.case_label(case)} {dtype}: {groups} threadgroups of {threads} threads"
    if candidate.language == "msl":
        used = threadgroup_bytes(candidate, {**infos, **dict(launch.template)})
        if used is None:
            text += "; threadgroup memory: a size could not be read"
        elif used:
            text += (
                f"; {used} B of threadgroup memory each ({used / limit:.0%} of the {limit // 1024} "
                f"KB a "
                f"threadgroup may use; the more each takes, the fewer run on a core at once)"
            )
    elif launch.shared_memory:
        text += f"; {launch.shared_memory} B of dynamic shared memory each"
    return text
