"""Compare an output against its reference and describe how it differs.

Pure numpy: used by the correctness check on every backend and by ``tasks check``.
"""

from __future__ import annotations

import math

import numpy as np

from mlxport.spec import CaseResult, Tolerance

LOOSE_NORM = 1e-2  # the error norm a gross-error check allows


def compare(
    out: np.ndarray,
    ref: np.ndarray,
    tol: Tolerance,
    *,
    case: str,
    dtype: str,
    unwritten: np.ndarray | None = None,
    axes: list[str] | None = None,
    elementwise: bool = True,
) -> CaseResult:
    """Elementwise ``|out-ref| <= atol + rtol*|ref|``, a relative error norm, and sanity checks
    that catch outputs which pass a loose tolerance by accident (zeros, constants). ``axes`` names
    the output's axes in the mismatch pattern (``axis_names`` of its shape). Without
    ``elementwise`` (inputs of another scale or conditioning than the task's tolerance is set for:
    scale 30, a constant row under a norm) an element is wrong only where it is NaN or infinite
    and the golden is not, or the other way round, and the error norm may reach LOOSE_NORM."""
    base = CaseResult(case=case, dtype=dtype, verdict="fail", total=int(ref.size))
    if out.shape != ref.shape:
        return base.model_copy(
            update={"verdict": "error", "error": f"shape {out.shape} != expected {ref.shape}"}
        )
    out = out.astype(np.float64)
    ref = ref.astype(np.float64)
    n_unwritten = int(unwritten.sum()) if unwritten is not None else 0
    nan = int((np.isnan(out) & ~np.isnan(ref)).sum())
    inf = int((np.isinf(out) & ~np.isinf(ref)).sum())
    same_special = (np.isnan(out) & np.isnan(ref)) | (
        np.isinf(out) & np.isinf(ref) & (np.sign(out) == np.sign(ref))
    )
    with np.errstate(
        invalid="ignore"
    ):  # inf - inf where both are infinite: same_special says which agree
        diff = np.where(same_special, 0.0, np.abs(out - ref))
    diff = np.where(np.isnan(diff), np.inf, diff)
    if elementwise:
        bad = diff > tol.atol + tol.rtol * np.abs(np.nan_to_num(ref))
    else:
        bad = ~same_special & ~(np.isfinite(out) & np.isfinite(ref))
    if unwritten is not None:
        bad |= unwritten & ~np.isnan(ref)  # a NaN where the golden has one was written
    finite = np.isfinite(ref)
    ref_norm = float(np.linalg.norm(ref[finite])) if finite.any() else 0.0
    err_norm = (
        float(np.linalg.norm(np.where(finite, diff, 0.0))) / ref_norm
        if ref_norm > 0
        else float(diff.max(initial=0))
    )
    max_abs = float(diff.max(initial=0.0))
    rel = diff / np.maximum(np.abs(np.nan_to_num(ref)), tol.atol or 1e-12)
    n_bad = int(bad.sum())
    result = base.model_copy(
        update={
            "max_abs": max_abs,
            "max_rel": float(rel.max(initial=0.0)),
            "err_norm": err_norm,
            "mismatches": n_bad,
            "nan": nan,
            "inf": inf,
            "unwritten": n_unwritten,
        }
    )
    if n_bad:
        first = tuple(np.argwhere(bad)[0])
        return result.model_copy(
            update={
                "first_mismatch": [int(i) for i in first],
                "got": float(out[first]),
                "expected": float(ref[first]),
                "pattern": describe_pattern(bad, axes=axes),
            }
        )
    if err_norm > (tol.norm if elementwise else max(tol.norm, LOOSE_NORM)):
        return result.model_copy(
            update={"pattern": f"relative error norm {err_norm:.3g} exceeds {tol.norm:g}"}
        )
    degenerate = _degenerate(out, ref)
    if degenerate:
        return result.model_copy(update={"pattern": degenerate})
    return result.model_copy(update={"verdict": "pass"})


def _degenerate(out: np.ndarray, ref: np.ndarray) -> str:
    """Outputs that match only because the reference is tiny: all zeros or one constant."""
    if ref.size < 2 or not np.isfinite(ref).all():
        return ""
    ref_spread = float(np.ptp(ref))
    if ref_spread == 0:
        return ""
    if not out.any():
        return "output is all zeros but the reference is not"
    if float(np.ptp(out)) == 0:
        return "output is one constant but the reference varies"
    return ""


MAX_PATTERN = 200


def axis_names(shape: object) -> list[str] | None:
    """Readable names for an output's axes from its shape expressions (``["B", "T", "C"]``): a
    plain identifier names its axis, a short expression (``N*2``) stands for itself, anything else
    is ``axis i``. ``None`` where the shape is not a list of per-axis expressions (``x.shape``)."""
    if not isinstance(shape, (list, tuple)):
        return None
    names = []
    for i, dim in enumerate(shape):
        text = "".join(dim.split()) if isinstance(dim, str) else ""
        names.append(text if text.isidentifier() or 0 < len(text) <= 12 else f"axis {i}")
    # a square ["N", "N"]: say which N
    return [f"{name} (axis {i})" if names.count(name) > 1 else name for i, name in enumerate(names)]


def describe_pattern(bad: np.ndarray, limit: int = 4, axes: list[str] | None = None) -> str:
    """A short description of where mismatches are, per axis in the task's dimension names, to
    help the model find the bug: ``"4096 of 32768 elements wrong (12.5%); wrong where Tq >= 64;
    every B, H, D"``. ``axes`` names the axes (``axis i`` where not given); ``limit`` caps how
    many axes' conditions are spelled out."""
    n = int(bad.sum())
    head = (
        f"{n} of {bad.size} elements wrong ({n / bad.size:.1%})"
        if bad.size
        else "0 of 0 elements wrong"
    )
    if bad.ndim == 0 or n == 0 or n == bad.size:
        return head
    if axes is None or len(axes) != bad.ndim:
        axes = ["index"] if bad.ndim == 1 else [f"axis {i}" for i in range(bad.ndim)]
    conds, every, sizes = [], [], []
    for ax, name in enumerate(axes):
        others = tuple(i for i in range(bad.ndim) if i != ax)
        idx = np.flatnonzero(bad.any(axis=others) if others else bad)
        sizes.append(idx.size)
        if idx.size == bad.shape[ax]:
            every.append(name)
        else:
            conds.append(_range_text(name, idx, bad.shape[ax]))
    parts = [head]
    if conds:
        shown = conds[:limit] + ([f"{len(conds) - limit} more"] if len(conds) > limit else [])
        where = ("wrong at " if shown[0].startswith("every ") else "wrong where ") + " and ".join(
            shown
        )
        box = math.prod(
            sizes
        )  # the wrong elements fill the block the conditions describe, or part of it
        parts.append(where if n == box else f"{where} ({n / box:.0%} of those)")
        if every:
            parts.append("every " + _names(every))
    else:  # some wrong at every index of every axis
        flat = np.flatnonzero(bad.reshape(-1))
        steps = np.unique(np.diff(flat))
        if steps.size == 1 and steps[0] == 1:  # one run across rows: say it flat
            parts.append(f"elements {int(flat[0])}..{int(flat[-1])} in flat order")
        elif flat.size >= 3 and steps.size == 1:  # strided across axes
            parts.append(f"every {_ordinal(int(steps[0]))} element starting at {int(flat[0])}")
        parts.append("scattered over every " + _names(every))
    text = "; ".join(p for p in parts if p)
    return text if len(text) <= MAX_PATTERN else text[: MAX_PATTERN - 3].rstrip() + "..."


def _names(names: list[str]) -> str:
    """``B, H, D``; unnamed axes as ``axis 0, 1``."""
    out = []
    for i, name in enumerate(names):
        axis = name.startswith("axis ") and name[5:].isdigit()
        out.append(name[5:] if axis and i and names[i - 1].startswith("axis ") else name)
    return ", ".join(out)


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _range_text(name: str, idx: np.ndarray, extent: int) -> str:
    """Which indices of an axis of ``extent`` hold wrong elements, as a condition on ``name``: a
    range, a stride, a period (``D % 32 in 0..15``), a few runs, else how many and the first and
    last."""
    lo, hi = int(idx[0]), int(idx[-1])
    if idx.size == 1:
        return f"{name} == {lo}"
    if hi - lo + 1 == idx.size:
        return f"{name} >= {lo}" if hi == extent - 1 else f"{name} {lo}..{hi}"
    starts = idx[np.r_[True, np.diff(idx) > 1]]
    ends = idx[np.r_[np.diff(idx) > 1, True]]
    lengths = ends - starts + 1
    period = np.unique(np.diff(starts))
    run = int(lengths[0])
    last_ok = lengths[-1] == run or (
        ends[-1] == extent - 1 and lengths[-1] < run
    )  # cut short by the end
    if (
        starts.size >= 3
        and period.size == 1
        and np.unique(lengths[:-1]).size == 1
        and last_ok
        and (lo % int(period[0])) + run <= int(period[0])
    ):
        p = int(period[0])
        upto = (
            "" if hi + p - run + 1 >= extent else f" up to {hi}"
        )  # the pattern stops before the end
        if run == 1:
            if p == 2 and lo < 2 and not upto:
                return f"{name} is {'odd' if lo else 'even'}"
            return f"every {_ordinal(p)} {name} starting at {lo}{upto}"
        a = lo % p
        span = "" if lo < p and not upto else f" ({name} {lo}..{hi})"
        return f"{name} % {p} in {a}..{a + run - 1}{span}"
    if starts.size <= 3:
        return f"{name} " + ", ".join(
            f"{s}..{e}" if e > s else f"{s}" for s, e in zip(starts, ends, strict=True)
        )
    return f"{name} in {idx.size} of {extent} values (first {lo}, last {hi})"
