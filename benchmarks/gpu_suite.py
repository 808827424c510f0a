"""Every expert port of the suite on a real GPU backend: correctness on all cases (held-out too),
then timings against every baseline, side by side, plus a validation of the timer itself.

    python benchmarks/gpu_suite.py --backend cuda --out OUT_DIR [--tasks a,b] [--iters 30]

Writes OUT_DIR/gpu_suite.json and OUT_DIR/gpu_suite.md (the table that goes into BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.backends import get_backend  # noqa: E402
from mlxport.tasks import expert_ports, load_task, suite_names  # noqa: E402
from mlxport.verify.benchmark import benchmark, primary_dtype  # noqa: E402
from mlxport.verify.correctness import run_correctness  # noqa: E402


def check_ports(backend, names: list[str], language: str, rows: list[dict], save) -> None:
    for name in names:
        task = load_task(name)
        port = expert_ports(task).get(language)
        if port is None:
            continue
        t0 = time.time()
        try:
            report = run_correctness(task, port, backend, seed=2026, heldout=True, extra_seeds=1)
            rows.append(
                {
                    "task": name,
                    "candidate": f"{port.name} {port.id}",
                    "ok": report.ok,
                    "cases": len(report.cases),
                    "failed": [c.model_dump() for c in report.cases if c.verdict != "pass"][:6],
                    "summary": report.summary(),
                    "seconds": round(time.time() - t0, 1),
                }
            )
        except Exception as e:
            rows.append(
                {
                    "task": name,
                    "ok": False,
                    "error": f"{type(e).__name__}: {e}",
                    "trace": traceback.format_exc()[-1500:],
                }
            )
        print(f"correctness {name}: {rows[-1].get('ok')} {rows[-1].get('error', '')}", flush=True)
        save()


def translated(backend, names: list[str], target: str, rows: list[dict], save) -> None:
    try:
        from mlxport.translate.translator import Untranslatable, translate_task
    except ImportError as e:
        rows.append({"error": f"translator unavailable: {e}"})
        return
    for name in names:
        task = load_task(name)
        try:
            cand = translate_task(task, target).candidate
        except Untranslatable as e:
            rows.append({"task": name, "untranslatable": str(e)})
            continue
        except Exception as e:
            rows.append({"task": name, "error": f"{type(e).__name__}: {e}"})
            continue
        report = run_correctness(task, cand, backend, seed=7, heldout=True)
        rows.append({"task": name, "ok": report.ok, "summary": report.summary()})
        print(f"translated {name}: {report.ok}", flush=True)
        save()


def bench_ports(
    backend, names: list[str], language: str, iters: int, rows: list[dict], save
) -> None:
    for name in names:
        task = load_task(name)
        port = expert_ports(task).get(language)
        if port is None:
            continue
        for case in task.bench_cases():
            for dtype in dict.fromkeys([primary_dtype(task), "float32"]):
                if dtype not in task.dtypes:
                    continue
                try:
                    r = benchmark(task, port, backend, case=case, dtype=dtype, seed=11, iters=iters)
                    row = r.model_dump(mode="json")
                    print(
                        f"bench {name} {r.case} {dtype}: "
                        + ", ".join(f"{k} {v:.2f}x" for k, v in r.speedups.items()),
                        flush=True,
                    )
                except Exception as e:
                    rows.append(
                        {
                            "task": name,
                            "case": task.case_label(case),
                            "dtype": dtype,
                            "error": f"{type(e).__name__}: {e}",
                            "trace": traceback.format_exc()[-1500:],
                        }
                    )
                    print(f"bench {name} failed: {e}", flush=True)
                    save()
                    continue
                try:
                    nbytes = task.cost_of(case, dtype)[0]
                    row["copy_same_bytes_gbs"] = nbytes / backend.copy_seconds(nbytes) / 1e9
                except Exception as e:  # the timing stands without its reference copy
                    row["copy_same_bytes_error"] = f"{type(e).__name__}: {e}"
                rows.append(row)
                save()


def validate_timer(backend, language: str) -> dict:
    """The same kernel timed twice agrees; twice the work takes about twice the time."""
    task = load_task("vector_add")
    port = expert_ports(task)[language]
    n = 1 << 26
    a = benchmark(
        task, port, backend, case={"N": n}, dtype="float32", seed=1, iters=40
    ).candidate.median_us
    b = benchmark(
        task, port, backend, case={"N": n}, dtype="float32", seed=2, iters=40
    ).candidate.median_us
    c = benchmark(
        task, port, backend, case={"N": 2 * n}, dtype="float32", seed=3, iters=40
    ).candidate.median_us
    return {
        "same_kernel_us": [a, b],
        "repeat_ratio": b / a,
        "double_work_us": c,
        "double_work_ratio": c / a,
    }


def markdown(result: dict) -> str:
    cal = result["calibration"]
    lines = [
        f"Device: {result['device'].get('device_name')} ({result['backend']}), MLX "
        f"{result['device'].get('mlx_version')}, {result['date']}; calibrated copy bandwidth "
        f"{cal.get('copy_gbs', 0):.0f} GB/s "
        f"(vector copy kernel {cal.get('copy_kernel_gbs', 0):.0f}, "
        f"MLX x + 0 {cal.get('mlx_copy_gbs', 0):.0f}, "
        f"over {cal.get('copy_bytes', 0) / 2**30:.0f} GiB), "
        f"bf16 matmul {cal.get('bf16_matmul_tflops', 0):.0f} TFLOP/s; times are "
        f"{result['device'].get('timing_basis') or 'wall clock'}.",
        "",
        "| task | case | dtype | port (us) | native (us) | naive (us) | vs native | vs naive "
        "| GB/s | of copy BW | of same-size copy |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["bench"]:
        if "error" in r:
            lines.append(
                f"| {r['task']} | {r['case']} | {r['dtype']} "
                f"| error: {r['error'][:60]} | | | | | | | |"
            )
            continue
        base = {b["name"]: b for b in r["baselines"]}
        c = r["candidate"]
        unstable = "" if r.get("stable", True) else " (spread)"
        frac = f"{c['roofline_fraction']:.0%}" if c.get("roofline_fraction") else ""
        same = (
            f"{c['gbs'] / r['copy_same_bytes_gbs']:.0%}"
            if c.get("gbs") and r.get("copy_same_bytes_gbs")
            else ""
        )
        lines.append(
            f"| {r['task']} | {r['case']} | {r['dtype']} | {c['median_us']:.1f}{unstable} | "
            f"{base['native']['median_us']:.1f} | {base['naive']['median_us']:.1f} | "
            f"{r['speedups']['native']:.2f}x | {r['speedups']['naive']:.2f}x | "
            f"{c['gbs'] or 0:.0f} | {frac} | {same} |"
        )
    lines += [
        "",
        "Correctness of the expert ports (visible + held-out cases, 2 seeds): "
        + ", ".join(
            f"{r['task']} {'PASS' if r.get('ok') else 'FAIL'}" for r in result["correctness"]
        ),
    ]
    t = result.get("timer") or {}
    if t:
        lines.append(
            f"Timer validation: same kernel twice {t['repeat_ratio']:.3f}x; double the work "
            f"{t['double_work_ratio']:.2f}x the time."
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", default="")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument(
        "--skip",
        default="",
        help="comma list of stages to skip: correctness,translated,bench,timer",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = [t for t in args.tasks.split(",") if t] or suite_names()
    skip = set(args.skip.split(","))
    backend = get_backend(args.backend)
    language = "cuda" if args.backend == "cuda" else "msl"
    result = {
        "backend": args.backend,
        "date": time.strftime("%Y-%m-%d"),
        "host": platform.platform(),
        "command": " ".join(sys.argv),
        "calibration": backend.calibrate(),
    }
    result["device"] = backend.device_info()
    print(json.dumps(result["calibration"]), flush=True)
    result.update(correctness=[], translated=[], bench=[], timer=None)

    def save() -> None:
        # After every row, so a run cut short by the machine's time limit still reports.
        (args.out / "gpu_suite.json").write_text(json.dumps(result, indent=2, default=str))
        (args.out / "gpu_suite.md").write_text(markdown(result))

    stages = [
        ("correctness", lambda: check_ports(backend, names, language, result["correctness"], save)),
        ("bench", lambda: bench_ports(backend, names, language, args.iters, result["bench"], save)),
        ("timer", lambda: result.update(timer=validate_timer(backend, language))),
        ("translated", lambda: translated(backend, names, language, result["translated"], save)),
    ]
    for stage, run in stages:
        if stage not in skip:
            run()
            save()
    print(markdown(result))


if __name__ == "__main__":
    main()
