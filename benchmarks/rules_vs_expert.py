"""The default policy's own output next to the expert ports, on a real GPU backend.

What ``mlxport port`` ships by default is the rule-based translation (a non-LLM baseline) at the
variant it measures fastest. Per suite task this script does the same search: the translation and
its tuning variants (``mlxport.translate.tuning.variants.Search``, each step on top of the fastest
so far), each checked on the visible cases in the task's primary dtype and timed at the first bench
case in that dtype; then the fastest gets the full check (every case, held-out too, every dtype),
the next fastest if it fails, so the rules result passed every check. Compiles are what a check
costs (one per dtype and launch shape), so only that one variant pays for all of them. The expert
port is timed at the same case, and the table gives the rules result against the native op, the
naive composition and the expert port, with geomeans over all tasks and over the memory-bound ones.
Each variant's entry in the JSON has its seconds and, for the ones fully checked, the outcome.

    python benchmarks/rules_vs_expert.py --backend cuda --out OUT_DIR [--tasks a,b | --tasks memory]
        [--iters 20] [--max-variants N] [--seconds S] [--jobs N]

``--seconds`` shares a wall-clock budget among the tasks: a task stops its search when its share
runs low. ``--jobs N`` runs N tasks at once, each in a process of its own: a search is mostly
compiles (on the CPU) and checks, and timings take turns on the GPU (the backend's timing lock), so
two timings never overlap, though other jobs' checks may run beside one. Writes
OUT_DIR/rules_vs_expert.json and .md after every task.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.backends import get_backend  # noqa: E402
from mlxport.errors import UserError  # noqa: E402
from mlxport.tasks import MEMORY_BOUND, expert_ports, load_task, suite_names  # noqa: E402
from mlxport.translate.translator import Untranslatable, translate_task  # noqa: E402
from mlxport.translate.tuning.variants import Search  # noqa: E402
from mlxport.verify.benchmark import benchmark, primary_dtype  # noqa: E402
from mlxport.verify.correctness import check_case, run_correctness  # noqa: E402

# share of a task's time for timing variants; the rest is the full check and the expert port
VARIANT_SHARE = 0.6


def task_row(
    name: str,
    backend,
    language: str,
    iters: int,
    max_variants: int | None = None,
    deadline: float | None = None,
) -> dict:
    """The rules result for one task against its expert port. Every variant is timed after a quick
    check; the full check runs on the fastest, then the next fastest while one fails. Past
    ``deadline`` (time.time()) the search stops; the translation is always timed."""
    task = load_task(name)
    case = task.bench_cases()[0]
    dtype = primary_dtype(task)
    row = {"task": name, "case": task.case_label(case), "dtype": dtype, "variants": []}
    try:
        first = translate_task(task, language)
    except Untranslatable as e:
        row["untranslatable"] = str(e)
        return row
    candidates = {first.candidate.id: first.candidate}
    row["variants"].append(
        timed_variant(task, "as written", first.candidate, backend, case, dtype, iters)
    )
    search, times, base = Search(task, language), {}, row["variants"][0].get("us")
    while (variant := search.next(times, base)) is not None and (
        max_variants is None or len(times) < max_variants
    ):
        if deadline is not None and time.time() > deadline:
            row["search_cut"] = f"out of time after {len(times)} variants"
            break
        label, translation = variant
        candidates[translation.candidate.id] = translation.candidate
        entry = timed_variant(task, label, translation.candidate, backend, case, dtype, iters)
        row["variants"].append(entry)
        times[label] = entry.get("us")
    best = fully_checked(task, row["variants"], candidates, backend)
    if best is None:
        row["incorrect"] = "no variant of the translation passed every case"
        return row
    expert = benchmark(
        task, expert_ports(task)[language], backend, case=case, dtype=dtype, seed=11, iters=iters
    )
    base = {b.name: b.median_us for b in expert.baselines}
    row.update(
        rules_variant=best["variant"],
        rules_us=best["us"],
        expert_us=expert.candidate.median_us,
        native_us=base.get("native"),
        naive_us=base.get("naive"),
        timing_basis=expert.timing_basis,
        vs_expert=expert.candidate.median_us / best["us"],
    )
    for b in ("native", "naive"):
        if base.get(b):
            row[f"vs_{b}"] = base[b] / best["us"]
    return row


def timed_variant(task, label: str, cand, backend, case: dict, dtype: str, iters: int) -> dict:
    """The variant checked on the visible cases in ``dtype``, then timed alone (``benchmark`` checks
    the timed size too; the baselines are timed once, next to the expert port); its entry says
    which step failed and how many seconds it took, the quick check's apart."""
    t0 = time.time()
    entry = {"variant": label, "id": cand.id}
    for k, visible in enumerate(task.cases.visible):
        result = check_case(task, cand, backend, visible, dtype, seed=7 + 101 * k)
        if result.verdict != "pass":
            entry["quick_check"] = f"{result.case} {dtype}: {result.error or result.pattern}"[:600]
            break
    else:
        entry["check_seconds"] = round(time.time() - t0, 1)
        try:
            entry["us"] = benchmark(
                task, cand, backend, case=case, dtype=dtype, seed=11, iters=iters, baselines=False
            ).candidate.median_us
        except UserError as e:
            entry["timing_error"] = str(e)[:600]
    entry["seconds"] = round(time.time() - t0, 1)
    return entry


def fully_checked(task, entries: list[dict], candidates: dict, backend) -> dict | None:
    """The fastest timed entry that passes the full check (every case, held-out too, every dtype),
    trying the next fastest while one fails; each entry tried records the outcome."""
    for entry in sorted((e for e in entries if "us" in e), key=lambda e: e["us"]):
        t0 = time.time()
        report = run_correctness(task, candidates[entry["id"]], backend, seed=7, heldout=True)
        entry["full_check"] = {"correct": report.ok, "seconds": round(time.time() - t0, 1)}
        if report.ok:
            return entry
        entry["full_check"]["summary"] = report.summary()[:600]
    return None


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def markdown(result: dict) -> str:
    rows = result["rows"]
    lines = [
        f"Device: {result['device']} ({result['backend']}), {result['date']}; times are "
        f"{next((r['timing_basis'] for r in rows if r.get('timing_basis')), 'wall clock')}. "
        "Rules: the rule-based translation (non-LLM baseline) at its fastest correct variant; "
        "speedups >1 mean the rules result is faster.",
        "",
        "| task | case | dtype | rules variant | rules (us) | expert (us) | native (us) "
        "| naive (us) | vs native | vs naive | vs expert |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "rules_us" not in r:
            why = r.get("untranslatable") or r.get("incorrect") or r.get("error", "")[:120]
            lines.append(
                f"| {r['task']} | {r.get('case', '')} | {r.get('dtype', '')} "
                f"| not ported: {why} | | | | | | | |"
            )
            continue
        f = {
            k: (f"{r[k]:.2f}x" if r.get(k) else "") for k in ("vs_native", "vs_naive", "vs_expert")
        }
        lines.append(
            f"| {r['task']} | {r['case']} | {r['dtype']} | {r['rules_variant']} | "
            f"{r['rules_us']:.1f} | {r['expert_us']:.1f} | "
            f"{r.get('native_us') or 0:.1f} | {r.get('naive_us') or 0:.1f} | "
            f"{f['vs_native']} | {f['vs_naive']} | {f['vs_expert']} |"
        )
    ported = [r for r in rows if "rules_us" in r]
    lines.append("")
    for label, group in (
        ("all ported tasks", ported),
        ("memory-bound tasks", [r for r in ported if r["task"] in MEMORY_BOUND]),
    ):
        g = {
            k: geomean([r[k] for r in group if r.get(k)])
            for k in ("vs_native", "vs_naive", "vs_expert")
        }
        lines.append(
            f"Geomean over {label} ({len(group)}): "
            + ", ".join(f"{k.replace('_', ' ')} {v:.2f}x" for k, v in g.items() if v)
        )
    lines.append(f"Translated and correct: {len(ported)} of {len(rows)} tasks.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--tasks",
        default="",
        help="a,b or memory (the memory-bound tasks); default: every suite task",
    )
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument(
        "--max-variants", type=int, default=None, help="tuning variants per task (default: all)"
    )
    ap.add_argument(
        "--seconds", type=float, default=0, help="wall-clock budget for all tasks (0: none)"
    )
    ap.add_argument(
        "--jobs", type=int, default=1, help="tasks at once, each in a process of its own"
    )
    args = ap.parse_args()
    if args.jobs < 1:
        sys.exit(f"--jobs must be at least 1, got {args.jobs}")
    args.out.mkdir(parents=True, exist_ok=True)
    backend = get_backend(args.backend)
    if not backend.timing:
        sys.exit(
            f"the {args.backend} backend does not time kernels: "
            "run this on a GPU backend (cuda or metal)"
        )
    language = "cuda" if args.backend == "cuda" else "msl"
    result = {
        "backend": args.backend,
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(sys.argv),
        "device": str(backend.device_info().get("device_name", args.backend)),
        "rows": [],
    }
    names = task_names(args.tasks)
    end = time.time() + args.seconds if args.seconds else None

    def record(row: dict) -> None:
        result["rows"] = sorted([*result["rows"], row], key=lambda r: names.index(r["task"]))
        print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
        (args.out / "rules_vs_expert.json").write_text(json.dumps(result, indent=2, default=str))
        (args.out / "rules_vs_expert.md").write_text(markdown(result))

    # Task k starts in wave k // jobs: its share of what is left is over the waves still to run.
    plan = [
        (
            name,
            args.backend,
            language,
            args.iters,
            args.max_variants,
            end,
            math.ceil((len(names) - k) / args.jobs),
        )
        for k, name in enumerate(names)
    ]
    if args.jobs == 1:
        for job in plan:
            record(task_result(*job))
    else:
        with ProcessPoolExecutor(
            args.jobs, mp_context=multiprocessing.get_context("spawn")
        ) as pool:
            futures = {pool.submit(task_result, *job): job[0] for job in plan}
            for done in as_completed(futures):
                try:
                    record(done.result())
                except Exception as e:
                    # a job process that died (a crash in MLX) takes the pool with it
                    record(
                        {
                            "task": futures[done],
                            "error": f"its process died: {type(e).__name__}: {e}",
                        }
                    )
    print(markdown(result))


def task_result(
    name: str,
    backend_name: str,
    language: str,
    iters: int,
    max_variants: int | None,
    end: float | None,
    waves_left: int,
) -> dict:
    """One task's row, its search cut at its share of the time left (``end``: time.time() when all
    tasks are done; ``waves_left``: the rounds of tasks still to run, this one's included)."""
    t0 = time.time()
    try:
        row = task_row(
            name,
            get_backend(backend_name),
            language,
            iters,
            max_variants,
            variant_deadline(t0, end, waves_left) if end else None,
        )
    except Exception as e:
        row = {
            "task": name,
            "error": f"{type(e).__name__}: {e}",
            "trace": traceback.format_exc()[-1500:],
        }
    row["seconds"] = round(time.time() - t0, 1)
    return row


def task_names(tasks: str) -> list[str]:
    if tasks == "memory":
        return list(MEMORY_BOUND)
    return [t for t in tasks.split(",") if t] or sorted(
        suite_names(), key=lambda n: n not in MEMORY_BOUND
    )


def variant_deadline(now: float, end: float, waves_left: int) -> float:
    """When a task stops timing variants: its even share of what is left, less the part kept for
    the full check of the fastest and the expert port's timing."""
    return now + VARIANT_SHARE * max(end - now, 0) / waves_left


if __name__ == "__main__":
    main()
