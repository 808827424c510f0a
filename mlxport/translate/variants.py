"""The rule-based translation's search space: the same CUDA source with other values of the integers
its launch is tuned by, each re-translated. Three kinds: ``#define NAME 256``, host or file-scope
``constexpr int NAME = 256;`` (every declaration of that name at once), and a literal that a launch
passes both as a template argument and as its block size (``k<T, 512><<<rows, 512>>>``).

A value can change what a kernel computes (a tile that no longer divides its loop, a cap below what
the kernel needs), so a variant is a candidate like any other: it ships only after passing every
check. Hardware constants (the warp size) are left alone, and a value that sizes the block stays
within 1024 threads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

THREADGROUP_SIZES = (64, 128, 256, 512, 1024)
MAX_VARIANTS = 10
_DEFINE = re.compile(r"^[ \t]*#define[ \t]+(\w+)[ \t]+(\d+)[ \t]*(?://.*)?$", re.M)
_CONSTEXPR = re.compile(r"\bconstexpr\s+(?:unsigned\s+|signed\s+)?(?:int|long|size_t|short)\s+(\w+)\s*=\s*(\d+)\s*;")
_LAUNCH_PAIR = re.compile(r"<[^<>;]*?\b(\d+)\b[^<>;]*>\s*<<<\s*[^,;]+?,\s*(\d+)\b")  # k<T, 512><<<g, 512


def tuning_variants(task, target: str) -> list[tuple[str, Any]]:
    """(label such as ``LN_BLOCK=512``, Translation) for each other value worth timing, the
    launch's block first, at most MAX_VARIANTS, none identical to another or to the translation
    itself (a value in a branch the task's launch does not take changes nothing)."""
    from mlxport.translate.reader import read_cuda
    from mlxport.translate.translator import Untranslatable, translate

    source = task.source_text()
    cf = read_cuda(source, name=task.source)
    launch = next((site for site in cf.launches if site.kernel == task.kernel), None)
    if launch is None:
        return []
    try:
        seen = {translate(source, kernel=task.kernel, target=target, task=task).candidate.id}
    except Untranslatable:
        return []
    out = []
    for name, value, blockish, edit in sorted(_knobs(source, launch.block.strip()), key=lambda k: not k[2]):
        values = [value // 2, value * 2, value * 4]
        if blockish:
            values = [v for v in dict.fromkeys([*THREADGROUP_SIZES, *values]) if v <= 1024]
        for v in values:
            if v < 1 or v == value:
                continue
            try:
                translation = translate(edit(v), kernel=task.kernel, target=target, task=task)
            except Untranslatable:
                continue
            if translation.candidate.id not in seen:
                seen.add(translation.candidate.id)
                out.append((name, f"{name}={v}", translation))
    return _interleave(out)[:MAX_VARIANTS]


def _knobs(source: str, block: str) -> list[tuple[str, int, bool, Callable[[int], str]]]:
    """(name, value, whether it sizes the block, the source with another value) per tunable integer."""
    knobs = []
    for m in _DEFINE.finditer(source):
        name, value = m.group(1), int(m.group(2))
        if value > 0 and "WARP" not in name.upper():
            knobs.append((name, value, name == block, lambda v, m=m: _replace(source, [m.span(2)], v)))
    decls: dict[str, list[re.Match]] = {}
    for m in _CONSTEXPR.finditer(source):
        decls.setdefault(m.group(1), []).append(m)
    for name, ms in decls.items():
        value = int(ms[0].group(2))
        if value > 0 and "WARP" not in name.upper() and all(int(m.group(2)) == value for m in ms):
            knobs.append((name, value, name == block, lambda v, ms=ms: _replace(source, [m.span(2) for m in ms], v)))
    for m in _LAUNCH_PAIR.finditer(source):
        if m.group(1) == m.group(2) and int(m.group(1)) > 32:
            line = source.count("\n", 0, m.start()) + 1
            knobs.append((f"block@{line}", int(m.group(1)), True,
                          lambda v, m=m: _replace(source, [m.span(1), m.span(2)], v)))
    return knobs


def _replace(source: str, spans: list[tuple[int, int]], value: int) -> str:
    for start, end in sorted(spans, reverse=True):
        source = source[:start] + str(value) + source[end:]
    return source


def _interleave(variants: list[tuple[str, str, Any]]) -> list[tuple[str, Any]]:
    """One value of each knob in turn, so the cap keeps every knob in the search."""
    by_name: dict[str, list] = {}
    for name, label, t in variants:
        by_name.setdefault(name, []).append((label, t))
    out, queues = [], list(by_name.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out
