"""Eval metrics: pure functions over run records (the ``run.json`` dicts a port writes).

Task-level first, then aggregated over tasks, so every model is scored on the same task set and
bootstrap intervals resample tasks. With several seeds a task's value is its mean over seeds
(a geometric mean for speedups).

- ``fast_p[b]``: share of tasks whose port is verified *and* faster than ``p`` times baseline
  ``b`` (KernelBench's fast_p; ``native`` is the strongest baseline, ``naive`` the path a user
  has today). ``fast_0`` is the share of verified ports, timed or not.
- ``geomean[b]``: geometric mean over tasks of the speedup over ``b``; a failed task counts 1.0x
  (the user keeps the baseline), a verified one counts its measured speedup, even below 1.
- ``correct@1``: mean over tasks of (verified seeds / seeds); ``correct@k`` with k = seeds: the
  unbiased pass@k estimator, i.e. the share of tasks verified on at least one of k seeds.
- Speedups exist only where a GPU timed the kernels; on the simulator (correctness only) they are
  reported as not measured, never as 0 or 1.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from math import comb
from typing import Any

P_VALUES = (0.0, 1.0, 1.5, 2.0)
BASELINES = ("native", "naive")
SIM_NA = "n/a (simulator: correctness only)"
UNTIMED_NA = "n/a (not every verified port was timed)"
BOOTSTRAP = 2000
RULES_NOTE = "non-LLM baseline"

Run = dict[str, Any]


# ---------------------------------------------------------------- names


def label(model: str) -> str:
    """A short display name: ``scripted:/x/y/expert`` -> ``scripted:expert``."""
    if model.startswith("scripted:"):
        path = model.removeprefix("scripted:").rstrip("/")
        stem = path.rsplit("/", 1)[-1]
        return "scripted:" + (stem[:-5] if stem.endswith(".json") else stem)
    return model


def is_baseline(model: str) -> bool:
    return model.partition("@")[0] == "rules"


# ---------------------------------------------------------------- per run


def verified(run: Run) -> bool:
    return bool((run.get("result") or {}).get("verified"))


def speedup(run: Run, baseline: str) -> float | None:
    """The measured speedup of a verified port over ``baseline``, or None where not timed."""
    result = run.get("result") or {}
    if not result.get("verified") or not result.get("timed"):
        return None
    value = (result.get("speedups") or {}).get(baseline)
    return float(value) if value is not None else None


def effective_speedup(run: Run, baseline: str) -> float:
    """What the user gets: the port's speedup if verified, else 1.0 (the baseline stays)."""
    s = speedup(run, baseline)
    return s if s is not None else 1.0


def timing_status(runs: Iterable[Run]) -> str | None:
    """None when speedups are measured for every verified run, else why they are not."""
    runs = list(runs)
    if not runs:
        return UNTIMED_NA
    if any((r.get("result") or {}).get("backend") in ("sim", None) for r in runs):
        return SIM_NA
    for r in runs:
        if verified(r) and any(speedup(r, b) is None for b in BASELINES):
            return UNTIMED_NA
    return None


def stop_kind(reason: str | None) -> str:
    """Stop reasons with their detail removed (``model_error: ...`` -> ``model_error``)."""
    return (reason or "none").split(":", 1)[0]


# ---------------------------------------------------------------- aggregation


def by_task(runs: Iterable[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for r in sorted(runs, key=lambda r: (r["task"], r.get("seed") or 0)):
        out.setdefault(r["task"], []).append(r)
    return out


def geomean(values: Iterable[float]) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): chance that at least one of k of n samples is correct."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def task_values(tasks: dict[str, list[Run]], k: int) -> dict[str, list[float]]:
    """One value per task for each metric that is averaged (or geo-averaged) over tasks."""
    out: dict[str, list[float]] = {"correct@1": [], f"correct@{k}": []}
    for runs in tasks.values():
        n, c = len(runs), sum(verified(r) for r in runs)
        out["correct@1"].append(c / n)
        out[f"correct@{k}"].append(pass_at_k(n, c, min(k, n)))
        for b in BASELINES:
            out.setdefault(f"geomean_{b}", []).append(
                geomean(effective_speedup(r, b) for r in runs)
            )
            for p in P_VALUES:
                hits = [verified(r) and (p == 0.0 or (speedup(r, b) or 0.0) > p) for r in runs]
                out.setdefault(f"fast_{p:g}_{b}", []).append(sum(hits) / n)
    return out


def bootstrap_ci(
    values: list[float],
    stat: Callable[[list[float]], float],
    *,
    n: int = BOOTSTRAP,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of ``stat`` over tasks resampled with replacement (deterministic)."""
    if not values:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    stats = sorted(stat([values[rng.randrange(len(values))] for _ in values]) for _ in range(n))
    lo = stats[int((1 - level) / 2 * n)]
    hi = stats[min(n - 1, int((1 + level) / 2 * n))]
    return (lo, hi)


def model_metrics(
    runs: list[Run],
    *,
    expected: int | None = None,
    tasks_asked: list[str] | None = None,
    seeds: int | None = None,
    bootstrap: int = BOOTSTRAP,
) -> dict[str, Any]:
    """Every metric of one model's runs (any seeds, any tasks). ``expected``: how many runs the
    eval asked for, to report missing ones. With ``tasks_asked`` and ``seeds``, a run that never
    produced a record (it raised, or was not run) counts as a failure, so every model is scored on
    the same tasks and a crash never ranks above a wrong kernel."""
    tasks = by_task(runs)
    for t in tasks_asked or []:
        have = tasks.setdefault(t, [])
        have += [{"task": t, "result": {"verified": False}}] * max((seeds or 1) - len(have), 0)
    k = min((len(v) for v in tasks.values()), default=1)
    values = task_values(tasks, k)
    timing = timing_status(runs)
    model = runs[0]["model"] if runs else ""
    m: dict[str, Any] = {
        "model": model,
        "label": label(model),
        "non_llm_baseline": is_baseline(model),
        "runs": len(runs),
        "tasks": len(tasks),
        "seeds_per_task": k,
        "missing_runs": max((expected or len(runs)) - len(runs), 0),
        "timing": timing or "measured",
        "fast_0": mean(values["correct@1"]),
        "correct@1": mean(values["correct@1"]),
        "k": k,
        "correct@k": mean(values[f"correct@{k}"]),
        "ci": {
            "fast_0": bootstrap_ci(values["correct@1"], mean, n=bootstrap),
            "correct@k": bootstrap_ci(values[f"correct@{k}"], mean, n=bootstrap),
        },
        "fast_p": {},
        "geomean": {},
    }
    for b in BASELINES:
        if timing is not None:
            m["fast_p"][b] = {f"{p:g}": None for p in P_VALUES}
            m["geomean"][b] = None
            continue
        m["fast_p"][b] = {f"{p:g}": mean(values[f"fast_{p:g}_{b}"]) for p in P_VALUES}
        m["geomean"][b] = geomean(values[f"geomean_{b}"])
        m["ci"][f"geomean_{b}"] = bootstrap_ci(values[f"geomean_{b}"], geomean, n=bootstrap)
        for p in P_VALUES[1:]:
            m["ci"][f"fast_{p:g}_{b}"] = bootstrap_ci(values[f"fast_{p:g}_{b}"], mean, n=bootstrap)
    m.update(cost_metrics(runs))
    return m


def cost_metrics(runs: list[Run]) -> dict[str, Any]:
    """Spending, errors and convergence, summed or summarised over runs."""
    candidates = sum(r.get("candidates", 0) for r in runs)
    calls = sum(tool_calls(r) for r in runs)
    to_best = [r["iterations_to_best"] for r in runs if r.get("iterations_to_best") is not None]
    walls = [r.get("wall_seconds", 0.0) for r in runs]
    return {
        "candidates": candidates,
        "compile_failures": sum(r.get("compile_failures", 0) for r in runs),
        "compile_failure_rate": (sum(r.get("compile_failures", 0) for r in runs) / candidates)
        if candidates
        else None,
        "tool_calls": calls,
        "tool_errors": sum(r.get("tool_errors", 0) for r in runs),
        "tool_error_rate": (sum(r.get("tool_errors", 0) for r in runs) / calls) if calls else None,
        "tokens_in": sum((r.get("tokens") or {}).get("input", 0) for r in runs),
        "tokens_out": sum((r.get("tokens") or {}).get("output", 0) for r in runs),
        "cost_usd": round(sum(r.get("cost_usd", 0.0) for r in runs), 6),
        "wall_seconds": round(sum(walls), 3),
        "median_wall_seconds": statistics.median(walls) if walls else None,
        "iterations": sum(r.get("iterations", 0) for r in runs),
        "mean_iterations": mean(r.get("iterations", 0) for r in runs) if runs else None,
        "median_iterations_to_best": statistics.median(to_best) if to_best else None,
        "stop_reasons": dict(
            sorted(Counter(stop_kind(r.get("stop_reason")) for r in runs).items())
        ),
    }


def tool_calls(run: Run) -> int:
    """Tool calls answered in the run (the loader fills this from the transcript if absent)."""
    return int(run.get("tool_calls", 0))


def leaderboard(
    runs: list[Run],
    models: list[str] | None = None,
    *,
    expected_per_model: int | None = None,
    tasks: list[str] | None = None,
    seeds: int | None = None,
    bootstrap: int = BOOTSTRAP,
) -> list[dict[str, Any]]:
    """One metrics row per model, best first: by geomean speedup over native where every model was
    timed, else by verified share; then correct@k, then lower cost. ``rules`` is always a row."""
    groups: dict[str, list[Run]] = {m: [] for m in (models or [])}
    for r in runs:
        groups.setdefault(r["model"], []).append(r)
    groups.setdefault("rules", [])
    rows = [
        model_metrics(
            v, expected=expected_per_model, tasks_asked=tasks, seeds=seeds, bootstrap=bootstrap
        )
        | {"model": m, "label": label(m), "non_llm_baseline": is_baseline(m)}
        for m, v in groups.items()
    ]
    timed = all_timed(rows)

    def key(r: dict[str, Any]) -> tuple:
        primary = r["geomean"]["native"] if timed else r["fast_0"]
        return (-_num(primary), -_num(r["correct@k"]), r["cost_usd"], r["label"])

    return sorted(rows, key=key)


def all_timed(rows: list[dict[str, Any]]) -> bool:
    """Whether every model that ran has measured speedups (one with no runs yet does not count)."""
    ran = [r for r in rows if r["runs"]]
    return bool(ran) and all(r["timing"] == "measured" for r in ran)


def _num(x: float | None) -> float:
    return -1.0 if x is None or (isinstance(x, float) and math.isnan(x)) else x


def per_task(runs: list[Run]) -> dict[str, dict[str, dict[str, Any]]]:
    """task -> model -> summary over its seeds (for the per-task tables and plots)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in runs:
        out.setdefault(r["task"], {}).setdefault(r["model"], {"runs": []})["runs"].append(r)
    for models in out.values():
        for cell in models.values():
            rs = cell.pop("runs")
            timing = timing_status(rs)
            cell.update(
                {
                    "seeds": len(rs),
                    "verified": sum(verified(r) for r in rs),
                    "speedup": {
                        b: (
                            geomean(effective_speedup(r, b) for r in rs) if timing is None else None
                        )
                        for b in BASELINES
                    },
                    "timing": timing or "measured",
                    "iterations": mean(r.get("iterations", 0) for r in rs),
                    "iterations_to_best": [r.get("iterations_to_best") for r in rs],
                    "candidates": sum(r.get("candidates", 0) for r in rs),
                    "compile_failures": sum(r.get("compile_failures", 0) for r in rs),
                    "tool_errors": sum(r.get("tool_errors", 0) for r in rs),
                    "tokens_in": sum((r.get("tokens") or {}).get("input", 0) for r in rs),
                    "tokens_out": sum((r.get("tokens") or {}).get("output", 0) for r in rs),
                    "cost_usd": sum(r.get("cost_usd", 0.0) for r in rs),
                    "wall_seconds": sum(r.get("wall_seconds", 0.0) for r in rs),
                    "stop_reasons": dict(Counter(stop_kind(r.get("stop_reason")) for r in rs)),
                }
            )
    return out


def convergence(runs: list[Run], max_iterations: int) -> tuple[str, list[float]]:
    """Best result so far against iteration, averaged over runs: the best speedup over native (1.0
    until a correct candidate appears) where timed, else the share of runs with a correct
    candidate. Returns (what is plotted, values for iterations 0..max_iterations)."""
    timed = timing_status(runs) is None
    curve = []
    for i in range(max_iterations + 1):
        per_run = []
        for r in runs:
            seen = [h for h in r.get("best_history") or [] if h["iteration"] <= i]
            if timed:
                best = seen[-1].get("speedup") if seen else None
                per_run.append(best if best is not None else 1.0)
            else:
                per_run.append(1.0 if seen else 0.0)
        curve.append((geomean(per_run) if timed else mean(per_run)) if per_run else float("nan"))
    return (
        "best speedup over native" if timed else "share of runs with a correct candidate"
    ), curve
