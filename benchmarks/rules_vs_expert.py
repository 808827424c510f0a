"""The default policy's own output next to the expert ports, on a real GPU backend.

What ``mlxport port`` ships by default is the rule-based translation (a non-LLM baseline) at the
variant it measures fastest. Per suite task this script does the same search: the translation and
its tuning variants (``mlxport.translate.variants``: other values of its #defines), each checked
on every case (held-out too), the correct ones timed at the first bench case in the task's primary
dtype; the fastest is the rules result. The expert port is timed at the same case, and the table
gives the rules result against the native op, the naive composition and the expert port, with
geomeans over all tasks and over the memory-bound ones.

    python benchmarks/rules_vs_expert.py --backend cuda --out OUT_DIR [--tasks a,b] [--iters 20] [--max-variants N]

Writes OUT_DIR/rules_vs_expert.json and .md after every task.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.backends import get_backend  # noqa: E402
from mlxport.tasks import expert_ports, load_task, suite_names  # noqa: E402
from mlxport.translate.translator import Untranslatable, translate_task  # noqa: E402
from mlxport.translate.variants import tuning_variants  # noqa: E402
from mlxport.verify.benchmark import benchmark, primary_dtype  # noqa: E402
from mlxport.verify.correctness import run_correctness  # noqa: E402

MEMORY_BOUND = ("rmsnorm", "softmax_rows", "layernorm", "rope", "gelu_tanh", "vector_add", "transpose_tiled", "cumsum")


def task_row(name: str, backend, language: str, iters: int, max_variants: int | None = None) -> dict:
    task = load_task(name)
    case = task.bench_cases()[0]
    dtype = primary_dtype(task)
    row = {"task": name, "case": task.case_label(case), "dtype": dtype, "variants": []}
    try:
        first = translate_task(task, language)
    except Untranslatable as e:
        row["untranslatable"] = str(e)
        return row
    best = None
    for size, translation in [("as written", first), *tuning_variants(task, language)[:max_variants]]:
        cand = translation.candidate
        entry = {"variant": size, "id": cand.id}
        report = run_correctness(task, cand, backend, seed=7, heldout=True)
        entry["correct"] = report.ok
        if report.ok:
            r = benchmark(task, cand, backend, case=case, dtype=dtype, seed=11, iters=iters)
            entry["us"] = r.candidate.median_us
            if best is None or entry["us"] < best[0]["us"]:
                best = (entry, r)
        else:
            entry["summary"] = report.summary()[:600]
        row["variants"].append(entry)
    if best is None:
        row["incorrect"] = "no variant of the translation passed every case"
        return row
    entry, rules = best
    expert = benchmark(task, expert_ports(task)[language], backend, case=case, dtype=dtype, seed=11, iters=iters)
    base = {b.name: b.median_us for b in expert.baselines}
    row.update(rules_variant=entry["variant"], rules_us=entry["us"], expert_us=expert.candidate.median_us,
               native_us=base.get("native"), naive_us=base.get("naive"), timing_basis=expert.timing_basis,
               vs_expert=expert.candidate.median_us / entry["us"])
    for b in ("native", "naive"):
        if base.get(b):
            row[f"vs_{b}"] = base[b] / entry["us"]
    return row


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def markdown(result: dict) -> str:
    rows = result["rows"]
    lines = [f"Device: {result['device']} ({result['backend']}), {result['date']}; times are "
             f"{next((r['timing_basis'] for r in rows if r.get('timing_basis')), 'wall clock')}. Rules: the "
             "rule-based translation (non-LLM baseline) at its fastest correct variant; speedups >1 mean "
             "the rules result is faster.", "",
             "| task | case | dtype | rules variant | rules (us) | expert (us) | native (us) | naive (us) "
             "| vs native | vs naive | vs expert |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "rules_us" not in r:
            why = r.get("untranslatable") or r.get("incorrect") or r.get("error", "")[:120]
            lines.append(f"| {r['task']} | {r.get('case', '')} | {r.get('dtype', '')} | not ported: {why} | | | | | | | |")
            continue
        f = {k: (f"{r[k]:.2f}x" if r.get(k) else "") for k in ("vs_native", "vs_naive", "vs_expert")}
        lines.append(f"| {r['task']} | {r['case']} | {r['dtype']} | {r['rules_variant']} | {r['rules_us']:.1f} | "
                     f"{r['expert_us']:.1f} | {r.get('native_us') or 0:.1f} | {r.get('naive_us') or 0:.1f} | "
                     f"{f['vs_native']} | {f['vs_naive']} | {f['vs_expert']} |")
    ported = [r for r in rows if "rules_us" in r]
    lines.append("")
    for label, group in (("all ported tasks", ported), ("memory-bound tasks", [r for r in ported if r["task"] in MEMORY_BOUND])):
        g = {k: geomean([r[k] for r in group if r.get(k)]) for k in ("vs_native", "vs_naive", "vs_expert")}
        lines.append(f"Geomean over {label} ({len(group)}): " +
                     ", ".join(f"{k.replace('_', ' ')} {v:.2f}x" for k, v in g.items() if v))
    lines.append(f"Translated and correct: {len(ported)} of {len(rows)} tasks.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", default="")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--max-variants", type=int, default=None, help="tuning variants per task (default: all)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    backend = get_backend(args.backend)
    if not backend.timing:
        sys.exit(f"the {args.backend} backend does not time kernels: run this on a GPU backend (cuda or metal)")
    language = "cuda" if args.backend == "cuda" else "msl"
    backend.calibrate()
    result = {"backend": args.backend, "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv),
              "device": str(backend.device_info().get("device_name", args.backend)), "rows": []}
    for name in [t for t in args.tasks.split(",") if t] or sorted(suite_names(), key=lambda n: n not in MEMORY_BOUND):
        t0 = time.time()
        try:
            row = task_row(name, backend, language, args.iters, args.max_variants)
        except Exception as e:
            row = {"task": name, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]}
        row["seconds"] = round(time.time() - t0, 1)
        result["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
        (args.out / "rules_vs_expert.json").write_text(json.dumps(result, indent=2, default=str))
        (args.out / "rules_vs_expert.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
