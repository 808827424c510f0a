"""Hints for the common mistakes behind a failed compile, in words that name the fix."""

from __future__ import annotations

import re
from functools import cache

from mlxport.spec import CompileResult, KernelCandidate

SIGNATURE = re.compile(
    r"(\[\[\s*kernel\s*\]\]|\bkernel\s+void\b|__global__|\bvoid\s+\w+\s*\([^)]*\b(device|constant)\b)"
)
QUOTED = re.compile(r"'(\w+)'")


def compile_hints(candidate: KernelCandidate, result: CompileResult) -> list[str]:
    hints = []
    if SIGNATURE.search(candidate.source):
        hints.append(
            "`source` holds a whole kernel function, but it is only the kernel's BODY (what goes "
            "between "
            "its braces): MLX generates the signature from input_names and output_names; put "
            "helper "
            "functions in `header`"
        )
    return hints


def with_metal_names(result: CompileResult, language: str) -> CompileResult:
    """A failed Metal compile with each CUDA name its errors quote (a leftover of the original:
    ``__syncthreads``, ``fmaxf``, ``threadIdx``) followed by what Metal has instead, as the table
    ``read_cuda_source`` reads from says (translate/reading/calls.py and the built-ins and types
    beside it)."""
    if result.ok or language != "msl":
        return result
    said: set[str] = set()
    diagnostics = []
    for d in result.diagnostics:
        names = [n for n in QUOTED.findall(d.message) if n in _cuda_names() and n not in said]
        said.update(names)
        extra = "".join(f"; {_instead(n)}" for n in dict.fromkeys(names))
        diagnostics.append(d.model_copy(update={"message": d.message + extra}))
    return result.model_copy(update={"diagnostics": diagnostics})


def _instead(name: str) -> str:
    rule = _cuda_names()[name]
    if rule.needs_rewrite:
        return f"`{name}` is CUDA, with no Metal equivalent: {rule.reason}" + (
            f" (try {rule.metal})" if rule.metal else ""
        )
    return f"`{name}` is CUDA; Metal has {rule.metal}" + (
        f" ({rule.reason})" if rule.reason else ""
    )


@cache
def _cuda_names() -> dict:
    """CUDA names that Metal spells otherwise, with what Metal has."""
    from mlxport.translate.reading.features import BUILTINS, CALLS, TYPES

    table = {**BUILTINS, **CALLS, **TYPES}
    return {
        n: r
        for n, r in table.items()
        if r.needs_rewrite or (r.metal and r.metal.split("(")[0].split("::")[-1] != n)
    }
