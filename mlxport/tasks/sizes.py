"""Sizes no case of a task has: where the final verification calls the op as shipped, so a port
right only at the sizes it was shown is found out.

A size is a name the cases bind to an integer that the task's shapes use (for a task whose golden
is the original kernel, a name the user bound with ``--case``). Sizes that take one value in
every case stay at it (the kernel was never shown another); those the task limits to a few
values (``[cases] choices``) take one of them; the rest are drawn between 1 and twice the
largest value seen (in multiples of ``[cases] multiples``), and the largest tensor stays within
the largest of the visible cases', so a check on the simulator takes as long as the task's own
cases do. Where the others leave room, the first drawn case has the largest size above every
value it took: a kernel's loop over tiles of it runs further than any case ran it. Sizes bound
to different names are drawn at different values where the task leaves room.

Sizes far from any case (`moved`, `probe_sizes`) are where a path of a kernel that the drawn sizes
never reach runs: a grid of ``min(ceildiv(n, 256), 64)`` blocks changes course only past n = 16384.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

import numpy as np

from mlxport.errors import UserError
from mlxport.expr import evaluate, parse
from mlxport.spec import KernelTask

# Names that tune a launch rather than size the data (the user's block_size, a tile).
TUNING = re.compile(r"block|thread|warp|tile|BLOCK|THREAD|WARP|TILE|^B[rc]$")
TRIES = 400
# Values a size is moved to when a path is looked for: powers of two and their neighbours.
LADDER = tuple(sorted({1, 2, 3} | {2**k + d for k in range(2, 32) for d in (-1, 0, 1)}))


def size_names(task: KernelTask) -> list[str]:
    """The names of a task's cases that are sizes."""
    cases = task.all_cases()
    if task.reference is None and task.original is not None and task.original.bound:
        names = [n for n in task.original.bound if not TUNING.search(n)]
    else:
        names = sorted(task.dims())
    return [n for n in names if all(_integer(c.get(n)) for c in cases)]


def fresh_sizes(
    task: KernelTask,
    count: int,
    rng: np.random.Generator,
    together: list[list[str]] = (),
) -> list[dict[str, Any]]:
    """Up to ``count`` cases, each a visible case with its sizes drawn afresh, none equal to a case
    of the task or to each other (fewer where the sizes leave no room; none where none varies).
    The sizes of a group in ``together`` take one value."""
    names = size_names(task)
    seen = task.all_cases()
    values = {n: [c[n] for c in seen] for n in names}
    free = [n for n in names if _free(task, n, values[n])]
    limit = max(_extent(task, c, names) for c in task.cases.visible)
    keys = {_key(c, names) for c in seen}
    # The first case first tries the largest size above every value seen, the others drawn to
    # keep within the limit: a loop over tiles of it then runs more of them than any case did.
    # (Only the largest: a size that sets a tile's width may be one the port cannot run above.)
    above = sorted(
        (n for n in free if not task.cases.choices.get(n)), key=lambda n: -max(values[n])
    )[:1]
    out: list[dict[str, Any]] = []
    for attempt in range(TRIES):
        if len(out) == count or not free:
            break
        case = dict(task.cases.visible[int(rng.integers(len(task.cases.visible)))])
        if _from_cuda(task):  # the names the user bound; the host code computes the rest
            case = {k: v for k, v in case.items() if k in task.original.bound}
        target = above[len(out)] if len(out) < len(above) and attempt < TRIES // 2 else None
        for n in free:
            m = task.cases.multiples.get(n, 1)
            if n == target:
                top = max(values[n])
                case[n] = int(rng.integers(top // m + 1, 2 * top // m + 2)) * m
                continue
            case[n] = _draw(values[n], task.cases.choices.get(n), rng)
            case[n] = max(m, case[n] // m * m)
        for group in together:
            case.update(dict.fromkeys(group, case[group[0]]))
        untied = [n for n in free if not any(n in g[1:] for g in together)]
        if _key(case, names) in keys or (_coincide(case, untied) and attempt < TRIES // 2):
            continue
        try:
            if _extent(task, case, names) > limit or not _allowed(task, case):
                continue
        except UserError:
            continue  # sizes the task's shapes refuse (a negative extent)
        keys.add(_key(case, names))
        out.append(case)
    return out


def near(task: KernelTask, case: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """``case`` (the timed size) with each size that varies drawn between half its value and it,
    in its multiples: a large size nobody chose, as much work as the timed size at most, so a
    kernel keyed to the sizes it was shown, or to the timed one, is found out. ``case`` itself
    where the drawn sizes break the task's rules."""
    names = size_names(task)
    seen = task.all_cases() + [case]
    drawn = dict(case)
    for n in names:
        values = [c[n] for c in seen if n in c]
        if n not in case or task.cases.choices.get(n) or not _free(task, n, values):
            continue
        m = task.cases.multiples.get(n, 1)
        top = case[n] // m
        drawn[n] = int(rng.integers(max(top // 2, 1), top + 1)) * m
    return drawn if _allowed(task, drawn) else case


# The factors sizes move by in a held-out case of odd sizes: each its own, so two sizes in one
# ratio at the visible cases (OC = 2 C) are not in it there.
RATIOS = (1.0, 1.25, 0.75, 1.5)


def odd(v: int) -> int:
    """The next odd number above ``v``."""
    return v + 1 if v % 2 == 0 else v + 2


def odd_sizes(base: dict[str, Any], free: list[str]) -> dict[str, int]:
    """``free`` sizes of ``base`` made odd, each moved by its own factor first (a grid read as
    ``ceildiv(C, 8)`` where the host launches ``ceildiv(OC, 16)`` is right wherever OC = 2 C:
    sizes made odd alike keep that), and apart."""
    moved = {k: odd(int(base[k] * RATIOS[i % len(RATIOS)])) for i, k in enumerate(free)}
    return apart(moved, dict.fromkeys(free, 2))


def power_of_two_dividing(values: list[int]) -> int:
    """The largest power of two dividing every value, at most half the largest (so sizes drawn up
    to twice that in its multiples take at least four values)."""
    m = 1
    while all(v % (2 * m) == 0 for v in values) and 4 * m <= max(values):
        m *= 2
    return m


def doublings(top: int) -> list[int]:
    """1, 2, 4... up to ``top``."""
    return [1 << k for k in range(max(top, 1).bit_length())]


def in_multiples(sizes: dict[str, int], steps: dict[str, int]) -> dict[str, int]:
    """Each size rounded up to a multiple of its step, and apart."""
    return apart({k: -(-v // steps[k]) * steps[k] for k, v in sizes.items()}, steps)


def apart(sizes: dict[str, int], steps: dict[str, int]) -> dict[str, int]:
    """Sizes bound to different names at different values (a transpose read as [width, height]
    where it is [height, width] is right wherever the two are equal): a size equal to one before
    it moves up by its step until it differs."""
    taken: set[int] = set()
    for k, v in sizes.items():
        while v in taken:
            v += steps[k]
        sizes[k] = v
        taken.add(v)
    return sizes


def _coincide(case: dict[str, Any], free: list[str]) -> bool:
    """Whether two sizes bound to different names take one value (where the draw can tell a
    [width, height] from a [height, width] apart only if they differ)."""
    return len({case[n] for n in free}) < len(free)


def _allowed(task: KernelTask, case: dict[str, Any]) -> bool:
    names = task.bindings(case, task.dtypes[0]) if not _from_cuda(task) else case
    return all(evaluate(rule, names) for rule in task.cases.requires)


def _pinned(task: KernelTask) -> set[str]:
    """Sizes a requirement holds at one value (``K == 128``, the arm of a switch the case takes)."""
    out = set()
    for rule in task.cases.requires:
        node = parse(rule)
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq):
            sides = [node.left, node.comparators[0]]
            names = [n.id for n in sides if isinstance(n, ast.Name)]
            if len(names) == 1 and any(isinstance(n, ast.Constant) for n in sides):
                out.add(names[0])
    return out


def _free(task: KernelTask, name: str, seen: list[int]) -> bool:
    if name in _pinned(task):
        return False
    if name in task.cases.choices:
        return len(task.cases.choices[name]) > 1
    if max(seen) < 1:
        return False  # an offset or a pad bound at zero is no size to draw
    if _from_cuda(task):
        return True  # its original runs at each drawn size first; sizes it refuses are left out
    return len(set(seen)) > 1


def _from_cuda(task: KernelTask) -> bool:
    return task.reference is None and task.original is not None and bool(task.original.bound)


def _draw(seen: list[int], choices: list[int] | None, rng: np.random.Generator) -> int:
    if choices:
        return int(rng.choice(choices))
    # log-uniform up to twice the largest seen, so small sizes (one row, an odd tail) come up as
    # often as large ones
    return max(1, int(round(math.exp(rng.uniform(0.0, math.log(2 * max(seen)))))))


def _extent(task: KernelTask, case: dict[str, Any], names: list[str]) -> int:
    """How big a case is: its largest tensor, or (a task from a .cu file, whose extents come with
    the launch at that case) the product of its sizes."""
    if _from_cuda(task):
        return math.prod(case[n] for n in names)
    return max(math.prod(s) for s in task.shapes(case, task.dtypes[0]).values())


def _key(case: dict[str, Any], names: list[str]) -> tuple:
    return tuple(case.get(n) for n in names)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def moved(base: dict[str, Any], names: list[str], values: tuple[int, ...] = LADDER):
    """``base`` with its sizes moved far: each alone along ``values``, then all together."""
    for group in [[n] for n in names] + ([names] if len(names) > 1 else []):
        for v in values:
            yield {**base, **dict.fromkeys(group, v)}


def probe_sizes(task: KernelTask, base: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """Cases with the free sizes of ``base`` moved far (`moved`), within the values the task
    allows (its choices, multiples and requires), each with its extent (its largest tensor, or
    the product of its sizes): those moving fewest sizes first (sizes bound together, a row's
    bytes and its elements, mostly stay valid then), then smallest first."""
    names = size_names(task)
    free = [n for n in names if _free(task, n, [c[n] for c in task.all_cases()])]
    if _from_cuda(task):
        base = {k: v for k, v in base.items() if k in task.original.bound}
    found: dict[tuple, tuple[int, dict[str, Any]]] = {}
    for case in moved(base, free):
        for n in free:
            case[n] = _allowed_value(task, n, case[n])
        key = _key(case, names)
        if key in found:
            continue
        try:
            if _allowed(task, case):
                found[key] = (extent(task, case, names), case)
        except (UserError, ValueError):
            continue
    return sorted(found.values(), key=lambda x: (sum(x[1][n] != base.get(n) for n in free), x[0]))


def _allowed_value(task: KernelTask, name: str, v: int) -> int:
    choices = task.cases.choices.get(name)
    if choices:
        return min(choices, key=lambda c: abs(c - v))
    m = task.cases.multiples.get(name, 1)
    return max(m, v // m * m)


def extent(task: KernelTask, case: dict[str, Any], names: list[str]) -> int:
    """A case's largest tensor where its shapes evaluate at it, else the product of its sizes."""
    try:
        return max(math.prod(s) for s in task.shapes(case, task.dtypes[0]).values())
    except (UserError, ValueError, KeyError):
        return math.prod(case[n] for n in names)
