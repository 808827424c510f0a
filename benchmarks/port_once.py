"""Run a task's expert port a few times at one bench case, for a profiler to watch from outside.

Nsight Compute reads the hardware counters of one launch; this gives it launches to pick from, the
inputs made as the benchmarks make them:

    ncu --clock-control none -k regex:attention_fwd --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats \
        python3 benchmarks/port_once.py attention_fwd --case 0 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlx.core as mx  # noqa: E402

from mlxport.backends import mlx_kernel  # noqa: E402
from mlxport.tasks import expert_ports, load_task, make_inputs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("--case", type=int, default=0, help="index into the task's bench cases")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--language", default="cuda")
    ap.add_argument("--calls", type=int, default=4)
    args = ap.parse_args()
    task = load_task(args.task)
    case = task.bench_cases()[args.case]
    inputs = {**make_inputs(task, case, args.dtype, 0), **task.param_values(case)}
    launch = mlx_kernel.caller(expert_ports(task)[args.language], inputs)
    for _ in range(args.calls):
        mx.eval(launch(inputs))
    print(f"{args.task} {task.case_label(case)} {args.dtype}: {args.calls} calls")


if __name__ == "__main__":
    main()
