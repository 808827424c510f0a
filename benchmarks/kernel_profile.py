"""What each port's and each baseline's kernels take on the GPU itself, from the CUDA profiler.

torch's profiler records every kernel in the process through CUPTI, MLX's included, with its start
and end on the GPU. With ``MLX_USE_CUDA_GRAPHS=0`` (set here, before MLX loads) calls run in order
on one stream, so kernels never overlap and each one's duration is its own. Per call it reports:

- ``device_us``: the summed durations of the call's kernels (a port with ``init_value`` also runs
  MLX's fill kernels; a native op may run several), what the call costs inside a CUDA graph, where
  MLX's default puts a model's ops;
- ``span_us``: first kernel start to last kernel end over the calls, divided by their number: device
  time plus the gaps where the GPU waited for launches.

The backend's timer reads the same device time (``mlxport/backends/timer.py``); this script adds
the same-size copy, the spans, the kernels of each call and the variants. (Session 4's run, at
commit 3df4b29, also read the wall clock around each round's calls.)

Per task, bench case and dtype: the expert port, the native op, a copy kernel moving the same
bytes (the calibration's), and with ``--variants`` the launch-shape variants of
``port_variants.py`` (each checked against the port's output first). Functions run in rounds,
split in the trace by a one-thread marker kernel. Also: an empty kernel and a tiny native op (the
launch floor), and the copy of 1 GiB of traffic the calibration times.

    python benchmarks/kernel_profile.py --out OUT_DIR [--tasks a,b] [--variants [a,b]] [--calls 20]
"""

from __future__ import annotations

import os

os.environ["MLX_USE_CUDA_GRAPHS"] = "0"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlx.core as mx  # noqa: E402

from benchmarks.port_variants import (  # noqa: E402
    attention_variants,
    reduce_sum_variants,
    rmsnorm_variants,
    rope_variants,
)
from mlxport.backends import mlx_kernel, timer  # noqa: E402
from mlxport.backends.calibration import copy_candidate, device_name  # noqa: E402
from mlxport.spec import KernelCandidate  # noqa: E402
from mlxport.tasks import (  # noqa: E402
    baseline,
    expert_ports,
    load_task,
    make_inputs,  # noqa: E402
)

HERE = Path(__file__).parent
TASKS = (
    "rmsnorm,softmax_rows,layernorm,cumsum,reduce_sum_atomic,rope,gelu_tanh,vector_add,"
    "transpose_tiled"
)
ROUNDS = 3


def on(fn, sets: list[dict]):
    """``fn`` as a function of the call's index, rotating over input sets."""
    return lambda j: fn(sets[j % len(sets)])


def profile(fns: dict, calls: int) -> dict[str, dict]:
    """Per function, medians over ROUNDS interleaved rounds (``timer.profile``), in us per call."""
    out = {}
    for name, t in timer.profile(fns, calls=calls, rounds=ROUNDS).items():
        out[name] = {
            "device_us": statistics.median(t.device) * 1e6,
            "span_us": statistics.median(t.span) * 1e6,
            "device_us_rounds": [round(d * 1e6, 2) for d in t.device],
            "kernels_per_call": sum(t.kernels.values()),
            "kernels": {(k if len(k) <= 90 else k[:87] + "..."): v for k, v in t.kernels.items()},
        }
    return out


def _matches(
    task, dtype: str, cand: KernelCandidate, port: KernelCandidate, sets: list[dict], params: dict
) -> bool:
    """A variant is profiled only if it reproduces the port's outputs within the
    task's tolerance."""
    tol = task.tolerance[dtype]
    names = [o.name for o in task.outputs]
    a = dict(
        zip(cand.output_names, mlx_kernel.caller(cand, {**sets[0], **params})(sets[0]), strict=True)
    )
    b = dict(
        zip(port.output_names, mlx_kernel.caller(port, {**sets[0], **params})(sets[0]), strict=True)
    )
    return all(
        mx.allclose(
            a[n].astype(mx.float32), b[n].astype(mx.float32), rtol=tol.rtol, atol=tol.atol
        ).item()
        for n in names
    )


VARIANTS = {
    "rmsnorm": rmsnorm_variants,
    "rope": rope_variants,
    "attention_fwd": attention_variants,
    "reduce_sum_atomic": lambda port: {
        **reduce_sum_variants(port),
        "v2_module_globals": KernelCandidate.from_toml(HERE / "variants" / "reduce_sum_v2.toml"),
    },
}


def task_rows(name: str, calls: int, variants: str) -> list[dict]:
    """``variants``: "" (none), "all", or labels "a,b"."""
    task = load_task(name)
    port = expert_ports(task)["cuda"]
    extra = VARIANTS[name](port) if variants and name in VARIANTS else {}
    if variants not in ("", "all") and (unknown := set(variants.split(",")) - set(extra)):
        sys.exit(
            f"{name} has no variants {sorted(unknown)}: "
            f"its variants are {', '.join(extra) or 'none'}"
        )
    extra = {
        label: c
        for label, c in extra.items()
        if c.id != port.id  # the port is profiled anyway
        and (variants == "all" or label in variants.split(","))
    }
    rows = []
    for case in task.bench_cases():
        params = task.param_values(case)
        for dtype in ("bfloat16", "float32"):
            row = {"task": name, "case": task.case_label(case), "dtype": dtype}
            try:
                sets = [make_inputs(task, case, dtype, s) for s in range(3)]
                nbytes, _ = task.cost_of(case, dtype)
                copy_in = [{"x": mx.zeros((nbytes // 8 // 4 * 4,))} for _ in range(2)]
                port_fn = mlx_kernel.caller(port, {**sets[0], **params})
                fns = {
                    "port": on(port_fn, sets),
                    "native": on(baseline(task, task.baselines.native, params), sets),
                    "copy": on(mlx_kernel.caller(copy_candidate("cuda"), copy_in[0]), copy_in),
                }
                checked = {}
                for label, cand in extra.items():
                    checked[label] = _matches(task, dtype, cand, port, sets, params)
                    if checked[label]:
                        fns[label] = on(mlx_kernel.caller(cand, {**sets[0], **params}), sets)
                row.update(bytes=nbytes, variants_match_port=checked, **profile(fns, calls))
                for v in row.values():
                    if isinstance(v, dict) and "device_us" in v:
                        v["gbs_device"] = nbytes / v["device_us"] / 1e3
            except Exception:
                row["error"] = traceback.format_exc()[-2500:]
            rows.append(row)
            print(json.dumps(row), flush=True)
            mx.clear_cache()
    return rows


def floor(calls: int) -> dict:
    """An empty one-thread kernel and a 4-element native op: what a call costs beyond its work."""
    sets = [{"x": mx.ones((4,))}, {"x": mx.full((4,), 2.0)}]
    empty = KernelCandidate(
        language="cuda",
        name="mlxport_empty",
        input_names=["x"],
        output_names=["out"],
        output_shapes=[[64]],
        output_dtypes=["float32"],
        grid=[1, 1, 1],
        threadgroup=[1, 1, 1],
        source="out[0] = x[0];",
    )
    return profile(
        {
            "empty_kernel": on(mlx_kernel.caller(empty, sets[0]), sets),
            "native_add": on(lambda s: s["x"] + 1, sets),
        },
        calls * 5,
    )


def copy_1gib(calls: int) -> dict:
    n = (1 << 30) // 8
    sets = [{"x": mx.random.normal((n,))} for _ in range(2)]
    mx.eval([s["x"] for s in sets])
    out = profile(
        {
            "copy": on(mlx_kernel.caller(copy_candidate("cuda"), sets[0]), sets),
            "mlx_add0": on(lambda s: s["x"] + 0, sets),
        },
        calls,
    )
    for v in out.values():
        v["gbs_device"] = (1 << 30) / v["device_us"] / 1e3
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", default=TASKS)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument(
        "--variants",
        nargs="?",
        const="all",
        default="",
        help="time the port's variants too: all of them, or these labels (a,b)",
    )
    args = ap.parse_args()
    if not mx.cuda.is_available():
        sys.exit("kernel_profile.py needs MLX's CUDA backend and torch with CUDA")
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "device": device_name("cuda"),
        "mlx_version": mx.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(sys.argv),
        "rows": [],
    }
    path = args.out / "kernel_profile.json"
    for label, stage in (("floor", floor), ("copy_1gib", copy_1gib)):
        try:
            result[label] = stage(args.calls)
        except Exception:
            result[label] = {"error": traceback.format_exc()[-2500:]}
        print(label, json.dumps(result[label]), flush=True)
        path.write_text(json.dumps(result, indent=1))
    for name in args.tasks.split(","):
        result["rows"] += task_rows(name, args.calls, args.variants)
        path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
