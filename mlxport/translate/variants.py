"""The rule-based translation's search space: the same CUDA source with other values of its
integer ``#define``s (block sizes, items per thread, tile sizes, grid caps), each re-translated.

A value can change what a kernel computes (a tile that no longer divides its loop, a cap below
what the kernel needs), so a variant is a candidate like any other: it ships only after passing
every check. Hardware constants (the warp size) are left alone, and a define that sizes the block
stays within 1024 threads.
"""

from __future__ import annotations

import re
from typing import Any

THREADGROUP_SIZES = (64, 128, 256, 512, 1024)
MAX_VARIANTS = 10


def tuning_variants(task, target: str) -> list[tuple[str, Any]]:
    """(label such as ``LN_BLOCK=512``, Translation) for each other value worth timing, the
    launch's block define first, at most MAX_VARIANTS, none identical to another."""
    from mlxport.translate.reader import read_cuda
    from mlxport.translate.translator import Untranslatable, translate

    source = task.source_text()
    cf = read_cuda(source, name=task.source)
    launch = next((site for site in cf.launches if site.kernel == task.kernel), None)
    if launch is None:
        return []
    block = launch.block.strip()
    tunable = [(name, int(value)) for name, value in cf.defines.items()
               if value.strip().isdigit() and int(value) > 0 and "WARP" not in name.upper()]
    tunable.sort(key=lambda nv: nv[0] != block)
    out, seen = [], set()
    for name, value in tunable:
        values = [value // 2, value * 2, value * 4]
        if name == block:
            values = [v for v in dict.fromkeys([*THREADGROUP_SIZES, *values]) if v <= 1024]
        for v in values:
            if v < 1 or v == value:
                continue
            changed = re.sub(rf"(#define\s+{name}\s+)\S+", rf"\g<1>{v}", source, count=1)
            try:
                translation = translate(changed, kernel=task.kernel, target=target, task=task)
            except Untranslatable:
                continue
            if translation.candidate.id not in seen:
                seen.add(translation.candidate.id)
                out.append((f"{name}={v}", translation))
    return _interleave(out)[:MAX_VARIANTS]


def _interleave(variants: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """One value of each define in turn, so the cap keeps every define in the search."""
    by_name: dict[str, list] = {}
    for label, t in variants:
        by_name.setdefault(label.split("=")[0], []).append((label, t))
    out, queues = [], list(by_name.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out
