"""Compile a task's CUDA port with NVRTC, as MLX compiles it, on a machine without a GPU: the
compiler's resource report (registers, spills, shared memory) and, with --sass, the machine code.

MLX compiles a custom kernel with NVRTC for the device's architecture (``sm_90a`` on compute
capability 9, which enables wgmma). Here NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel and the
CUDA headers from ``nvidia-cuda-runtime``; --sass needs ``cuobjdump`` and ``nvdisasm`` on PATH (the
CUDA toolkit's, or the copies in Triton's wheel under triton/backends/nvidia/bin):

    pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl
    python benchmarks/nvrtc_build.py attention_fwd --case 0 --dtype bfloat16 --arch sm_90a
        [--set WG=0] [--sass]
    python benchmarks/nvrtc_build.py softmax_rows --rules ["unroll=8 + __restrict__"] [--sass]

``--rules`` builds the rule-based translation instead of the expert port, or with a label one of
its tuning variants (``mlxport.translate.tuning.variants``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.backends.cuda_source import nvrtc_compile, nvrtc_root, nvrtc_source  # noqa: E402
from mlxport.tasks import case_infos, expert_ports, load_task  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("--case", type=int, default=0, help="index into the task's bench cases")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=EXPR",
        help="another template expression",
    )
    ap.add_argument(
        "--sass", action="store_true", help="print the machine code (cuobjdump --dump-sass)"
    )
    ap.add_argument(
        "--rules",
        nargs="?",
        const="as written",
        metavar="VARIANT",
        help="the rule-based translation (or this tuning variant of it) instead of the expert port",
    )
    args = ap.parse_args()
    task = load_task(args.task)
    port = expert_ports(task)["cuda"] if args.rules is None else rules_port(task, args.rules)
    if args.set:
        port = port.model_copy(
            update={"template": {**port.template, **dict(s.split("=", 1) for s in args.set)}}
        )
    case = task.bench_cases()[args.case]
    infos = case_infos(task, case, args.dtype)
    launch = port.launch(infos)
    if nvrtc_root() is None:
        sys.exit(
            "NVRTC not found: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl"
        )
    ok, log, cubin = nvrtc_compile(nvrtc_source(port, infos), args.arch)
    print(
        f"{args.task} {task.case_label(case)} {args.dtype} {args.arch} "
        f"template {dict(launch.template)}"
    )
    print(log.strip() or "(no log)")
    if not ok:
        sys.exit(1)
    if args.sass:
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            print(
                subprocess.run(
                    ["cuobjdump", "--dump-sass", f.name], capture_output=True, text=True, check=True
                ).stdout
            )


def rules_port(task, label: str):
    from mlxport.translate.translator import translate_task
    from mlxport.translate.tuning.variants import Search

    variant = (
        translate_task(task, "cuda")
        if label == "as written"
        else Search(task, "cuda").variant(label)
    )
    if variant is None:
        sys.exit(
            f"{task.name}'s translation has no variant {label!r}: "
            "labels are as in rules_vs_expert.json, e.g. 'unroll=8 + __restrict__'"
        )
    return variant.candidate


if __name__ == "__main__":
    main()
