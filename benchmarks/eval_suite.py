"""Wall time of a full-suite eval on the simulator: rules (the non-LLM baseline) plus two scripted
models (the expert ports, and a buggy model that compiles a broken and a wrong kernel) over every
core task, default budget, one seed, then the reports.

    .venv/bin/python benchmarks/eval_suite.py                 # cold simulator compile cache
    .venv/bin/python benchmarks/eval_suite.py --warm          # the user's compile cache
    .venv/bin/python benchmarks/eval_suite.py --jobs 2 --out /tmp/eval-suite

Prints one line per run and the totals; the acceptance bound is 15 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--out", type=Path, default=None, help="eval folder (default: a fresh temporary folder)"
    )
    ap.add_argument(
        "--warm", action="store_true", help="keep the simulator's compile cache (default: cold)"
    )
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="mlxport-eval-suite-"))
    if not args.warm:
        os.environ["MLXPORT_CACHE"] = str(scratch / "cache")

    from evals_scripts.scripts import write_scripts

    from mlxport.evals.report import build_reports
    from mlxport.evals.runner import run_eval
    from mlxport.tasks import suite_names

    tasks = suite_names()
    specs = write_scripts(scratch / "scripts", tasks)
    out = args.out or scratch / "eval"
    t0 = time.monotonic()

    def progress(e: dict) -> None:
        if e["status"] in ("done", "error", "skipped"):
            run = e.get("run") or {}
            print(
                f"{time.monotonic() - t0:7.1f} s  [{e['done']:2d}/{e['total']}] {e['status']:7s} "
                f"{e['model'].rsplit('/', 1)[-1]:8s} {e['task']:18s} "
                f"{run.get('stop_reason') or e.get('error')} "
                f"verified={(run.get('result') or {}).get('verified')}",
                flush=True,
            )

    run_eval(
        [specs["expert"], specs["buggy"]],
        tasks,
        1,
        {"backend": "sim"},
        args.jobs,
        out,
        on_progress=progress,
    )
    ran = time.monotonic() - t0
    md, html = build_reports(out)
    total = time.monotonic() - t0
    print(
        f"\neval of rules + 2 scripted models x {len(tasks)} tasks on the simulator, "
        f"jobs={args.jobs}, {os.cpu_count()} CPUs, "
        f"{'warm' if args.warm else 'cold'} compile cache: runs {ran:.1f} s, "
        f"with reports {total:.1f} s ({total / 60:.1f} min)"
    )
    print(f"reports: {md}  {html}")


if __name__ == "__main__":
    main()
