"""Compare an output against its reference and describe how it differs.

Pure numpy: used by the correctness check on every backend and by ``tasks check``.
"""

from __future__ import annotations

import numpy as np

from mlxport.spec import CaseResult, Tolerance


def compare(out: np.ndarray, ref: np.ndarray, tol: Tolerance, *, case: str, dtype: str,
            unwritten: np.ndarray | None = None) -> CaseResult:
    """Elementwise ``|out-ref| <= atol + rtol*|ref|``, a relative error norm, and sanity checks
    that catch outputs which pass a loose tolerance by accident (zeros, constants)."""
    base = CaseResult(case=case, dtype=dtype, verdict="fail", total=int(ref.size))
    if out.shape != ref.shape:
        return base.model_copy(update={"verdict": "error", "error": f"shape {out.shape} != expected {ref.shape}"})
    out = out.astype(np.float64)
    ref = ref.astype(np.float64)
    n_unwritten = int(unwritten.sum()) if unwritten is not None else 0
    nan = int((np.isnan(out) & ~np.isnan(ref)).sum())
    inf = int((np.isinf(out) & ~np.isinf(ref)).sum())
    same_special = (np.isnan(out) & np.isnan(ref)) | (np.isinf(out) & np.isinf(ref) & (np.sign(out) == np.sign(ref)))
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite: same_special says which agree
        diff = np.where(same_special, 0.0, np.abs(out - ref))
    diff = np.where(np.isnan(diff), np.inf, diff)
    bad = diff > tol.atol + tol.rtol * np.abs(np.nan_to_num(ref))
    if unwritten is not None:
        bad |= unwritten & ~np.isnan(ref)  # a NaN where the golden has one was written
    finite = np.isfinite(ref)
    ref_norm = float(np.linalg.norm(ref[finite])) if finite.any() else 0.0
    err_norm = float(np.linalg.norm(np.where(finite, diff, 0.0))) / ref_norm if ref_norm > 0 else float(diff.max(initial=0))
    max_abs = float(diff.max(initial=0.0))
    rel = diff / np.maximum(np.abs(np.nan_to_num(ref)), tol.atol or 1e-12)
    n_bad = int(bad.sum())
    result = base.model_copy(update={
        "max_abs": max_abs, "max_rel": float(rel.max(initial=0.0)), "err_norm": err_norm,
        "mismatches": n_bad, "nan": nan, "inf": inf, "unwritten": n_unwritten,
    })
    if n_bad:
        first = tuple(np.argwhere(bad)[0])
        return result.model_copy(update={"first_mismatch": [int(i) for i in first], "got": float(out[first]),
                                         "expected": float(ref[first]), "pattern": describe_pattern(bad)})
    if err_norm > tol.norm:
        return result.model_copy(update={"pattern": f"relative error norm {err_norm:.3g} exceeds {tol.norm:g}"})
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


def describe_pattern(bad: np.ndarray, limit: int = 3) -> str:
    """A short human description of where mismatches are, to help the model find the bug."""
    n = int(bad.sum())
    frac = n / bad.size
    parts = [f"{n} of {bad.size} elements wrong ({frac:.1%})"]
    flat = np.flatnonzero(bad.reshape(-1))
    if bad.ndim >= 2:
        rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1))
        cols = np.flatnonzero(bad.reshape(-1, bad.shape[-1]).any(axis=0))
        parts.append(_range_text("rows", rows, bad.shape[0]))
        parts.append(_range_text("columns", cols, bad.shape[-1]))
    else:
        parts.append(_range_text("indices", flat, bad.size))
    if flat.size >= 4:
        steps = np.unique(np.diff(flat))
        if steps.size == 1 and steps[0] > 1:
            parts.append(f"every {int(steps[0])}th element starting at {int(flat[0])}")
    return "; ".join(p for p in parts[: limit + 1] if p)


def _range_text(what: str, idx: np.ndarray, extent: int) -> str:
    if idx.size == 0 or idx.size == extent:
        return f"all {what}" if idx.size == extent else ""
    lo, hi = int(idx[0]), int(idx[-1])
    if hi - lo + 1 == idx.size:
        if hi == extent - 1:
            return f"{what} >= {lo} wrong"
        return f"{what} {lo}..{hi} wrong"
    return f"{idx.size} {what} wrong, first {lo}, last {hi}"
