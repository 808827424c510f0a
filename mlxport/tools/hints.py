"""Hints for the common mistakes behind a failed compile, in words that name the fix."""

from __future__ import annotations

import re

from mlxport.spec import CompileResult, KernelCandidate

SIGNATURE = re.compile(
    r"(\[\[\s*kernel\s*\]\]|\bkernel\s+void\b|__global__|\bvoid\s+\w+\s*\([^)]*\b(device|constant)\b)"
)


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
