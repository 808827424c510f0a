"""The wall-clock experiments behind the benchmark's timing method (sessions 2 and 3; since
session 4 the CUDA timer reads device time, see ``kernel_profile.py``), measured on the GPU in one
run (``--stages`` picks):

1. floor, overlap: the per-evaluation floor (an empty kernel and vector_add, one evaluation per
   call against calls submitted in groups), and whether grouped calls of a kernel that does not
   fill the GPU overlap (selective_scan at B=1);
2. copy: MLX's ``x + 0`` and ``mx.abs`` against the vector copy kernel at several sizes, and
   torch's ``copy_`` timed with CUDA events as an outside check where torch is installed;
3. scalars: ports that read scalar params (rmsnorm, rope) with them as 0-d arrays, as device
   arrays (what mlxport passes on CUDA) and as template constants, next to the native op;
4. concurrency: whether independent calls in one evaluation mix results of a port that keeps
   state in module globals (reduce_sum's earlier v2) and of the port, and their timings;
5. serial: the same functions with CUDA graphs on (this process) and off (a child process, as
   the backend's timing worker runs).

These stages run in this process with MLX's defaults (CUDA graphs on), except where they say.

    python benchmarks/timing_method.py --out OUT_DIR
        [--stages floor,overlap,scalars,concurrency,serial,copy]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from mlxport.backends import mlx_kernel  # noqa: E402
from mlxport.backends.calibration import copy_candidate  # noqa: E402
from mlxport.spec import KernelCandidate  # noqa: E402
from mlxport.tasks import (  # noqa: E402
    baseline,
    expert_ports,
    load_task,
    make_inputs,  # noqa: E402
)

HERE = Path(__file__).parent

LANG = "cuda" if mx.cuda.is_available() else "msl"


def med_us(fn, sets, group=None, iters=30) -> float:
    return (
        statistics.median(mlx_kernel.time_calls(fn, sets, warmup=3, iters=iters, group=group)) * 1e6
    )


def kernel_fn(cand: KernelCandidate, sets, extra=None):
    return mlx_kernel.caller(cand, {**sets[0], **(extra or {})})


def empty_kernel():
    """A one-thread kernel: what a call costs beyond the kernel's own work."""
    empty = KernelCandidate(
        language=LANG,
        name="mlxport_empty",
        input_names=["x"],
        output_names=["out"],
        output_shapes=[[64]],
        output_dtypes=["float32"],
        grid=[1, 1, 1],
        threadgroup=[1, 1, 1],
        source="out[0] = x[0];",
    )
    sets = [{"x": mx.ones((4,))}]
    return kernel_fn(empty, sets), sets


def floor() -> dict:
    fn, sets = empty_kernel()
    task = load_task("vector_add")
    port = expert_ports(task)[LANG]
    rows = {
        "empty_kernel_us": {
            "one_eval_per_call": med_us(fn, sets, group=1),
            "grouped": med_us(fn, sets),
        }
    }
    for dtype in ("bfloat16", "float32"):
        vsets = [make_inputs(task, {"N": 1 << 24}, dtype, s) for s in range(3)]
        pf = kernel_fn(port, vsets)
        nf = lambda s: s["a"] + s["b"]  # noqa: E731
        rows[f"vector_add_16M_{dtype}_us"] = {
            "port_one_eval_per_call": med_us(pf, vsets, group=1),
            "port_grouped": med_us(pf, vsets),
            "native_one_eval_per_call": med_us(nf, vsets, group=1),
            "native_grouped": med_us(nf, vsets),
        }
    return rows


def overlap() -> dict:
    """A port whose grid is smaller than the GPU (selective_scan at B=1: 128 blocks): if grouped
    calls overlap on the device, grouped time per call falls well below one-call-per-evaluation
    time minus the floor difference measured in floor()."""
    task = load_task("selective_scan")
    port = expert_ports(task)[LANG]
    case = task.bench_cases()[0]
    params = task.param_values(case)
    sets = [make_inputs(task, case, "bfloat16", s) for s in range(3)]
    fn = kernel_fn(port, sets, params)
    return {
        "selective_scan_B1_bf16_us": {
            "one_eval_per_call": med_us(fn, sets, group=1),
            "grouped": med_us(fn, sets),
        }
    }


def torch_copy_gbs(nbytes: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        for _ in range(10):
            dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / 10)
    del src, dst
    torch.cuda.empty_cache()
    return nbytes / statistics.median(times) / 1e9


def copies() -> list[dict]:
    rows = []
    cand = copy_candidate(LANG)
    for mib in (64, 256, 1024, 2048):
        nbytes = mib << 20
        n = nbytes // 8
        sets = [{"x": mx.random.normal((n,))} for _ in range(2)]
        mx.eval([s["x"] for s in sets])
        # mx.abs: a built-in unary op (no scalar broadcast) whose output MLX allocates itself; if it
        # outruns the copy kernel, the gap is in how custom-kernel outputs are placed, not in
        # the kernel.
        row = {
            "traffic_mib": mib,
            "kernel_gbs": nbytes / med_us(kernel_fn(cand, sets), sets) * 1e6 / 1e9,
            "mlx_add0_gbs": nbytes / med_us(lambda s: s["x"] + 0, sets) * 1e6 / 1e9,
            "mlx_abs_gbs": nbytes / med_us(lambda s: mx.abs(s["x"]), sets) * 1e6 / 1e9,
        }
        del sets
        mx.clear_cache()
        row["torch_copy_gbs"] = torch_copy_gbs(nbytes)
        rows.append(row)
        print(row, flush=True)
    return rows


def _constants(cand: KernelCandidate, reads: dict[str, str]) -> KernelCandidate:
    """The port with some scalar inputs folded into the kernel as template constants: ``reads``
    maps each input's read in the source (``eps[0]``) to its constant expression."""
    source = cand.source
    for old, new in reads.items():
        assert old in source, old
        source = source.replace(old, new)
    drop = {r.split("[")[0] for r in reads}
    return cand.model_copy(
        update={
            "name": cand.name + "_const",
            "source": source,
            "input_names": [n for n in cand.input_names if n not in drop],
        }
    )


def f32_bits(v: float) -> int:
    return int(np.array(v, np.float32).view(np.int32))


def scalars() -> list[dict]:
    """Where 0-d inputs live. MLX's CUDA allocator serves every buffer of 8 bytes or less from a
    small pool of managed memory that the host writes, so a kernel reading a 0-d input may reach
    across the bus for it. Ports that read scalars (rmsnorm's eps, rope's offset and base), with
    the scalars as 0-d arrays (what the benchmark passed before), as the device arrays mlxport now
    passes (``mlx_kernel.scalar_input``; session 3 timed 4096-element ones), and folded into the
    kernel as template constants; native beside."""
    rows = []
    for name, reads in (
        ("rmsnorm", lambda p: {"eps[0]": "__int_as_float(MLXP_EPS)"}),
        ("rope", lambda p: {"base[0]": "__int_as_float(MLXP_BASE)", "offset[0]": "MLXP_OFFSET"}),
    ):
        task = load_task(name)
        port = expert_ports(task)[LANG]
        for case in task.bench_cases():
            params = task.param_values(case)
            consts = {
                "MLXP_EPS": f32_bits(params.get("eps", 0.0)),
                "MLXP_BASE": f32_bits(params.get("base", 0.0)),
                "MLXP_OFFSET": int(params.get("offset", 0)),
            }
            const = _constants(port, reads(params))
            const = const.model_copy(
                update={
                    "template": {
                        **const.template,
                        **{
                            k: v
                            for k, v in consts.items()
                            if any(k in r for r in reads(params).values())
                        },
                    }
                }
            )
            for dtype in ("bfloat16", "float32"):
                sets = [make_inputs(task, case, dtype, s) for s in range(3)]
                zero_d = {k: mx.array(v) for k, v in params.items() if k in port.input_names}
                mx.eval(list(zero_d.values()))
                pf = kernel_fn(port, sets, params)
                cf = kernel_fn(const, sets, params)
                fns = {
                    "port_0d": lambda s, pf=pf, z=zero_d: pf({**s, **z}),
                    # caller passes scalars as mlx_kernel.scalar_input makes them
                    "port_device_array": pf,
                    "port_constants": lambda s, cf=cf: cf(s),
                    "native": baseline(task, task.baselines.native, params),
                }
                row = {"task": name, "case": str(case), "dtype": dtype}
                for _ in range(2):  # two interleaved rounds
                    for label, fn in fns.items():
                        row.setdefault(label + "_us", []).append(med_us(fn, sets, iters=15))
                rows.append(row)
                print(row, flush=True)
    return rows


def concurrency() -> list[dict]:
    """Independent calls in one evaluation: MLX's CUDA graphs order kernels only by the buffers
    they share, so independent calls may run at once. A port that keeps state in module globals
    (reduce_sum's earlier v2: ticket and partials) then mixes calls. Each call's result against the
    same input alone; then v2, the port (per-call scratch; v3 in session 3, v4 since) and native
    timed side by side."""
    task = load_task("reduce_sum_atomic")
    v2 = KernelCandidate.from_toml(HERE / "variants" / "reduce_sum_v2.toml")
    port = expert_ports(task)[LANG]
    rows = []
    for cand in (v2, port):
        for dtype, n in (("bfloat16", 1 << 24), ("float32", 1 << 20)):
            sets = [make_inputs(task, {"N": n}, dtype, s) for s in range(8)]
            fn = kernel_fn(cand, sets)
            alone = []
            for s in sets:
                o = fn(s)[0]
                mx.eval(o)
                alone.append(float(o[0].item()))
            wrong = 0
            for _ in range(20):
                outs = [fn(s)[0] for s in sets]
                mx.eval(outs)
                wrong += sum(
                    abs(float(o[0].item()) - a) > 1e-3 * max(1.0, abs(a))
                    for o, a in zip(outs, alone, strict=True)
                )
            exact = [float(mx.sum(s["x"].astype(mx.float32)).item()) for s in sets]
            row = {
                "port": cand.name,
                "dtype": dtype,
                "N": n,
                "calls_per_eval": len(sets),
                "evals": 20,
                "wrong_results": wrong,
                "alone_max_rel_err": max(
                    abs(a - e) / max(1.0, abs(e)) for a, e in zip(alone, exact, strict=True)
                ),
            }
            rows.append(row)
            print(row, flush=True)
    for dtype in ("bfloat16", "float32"):
        for n in (1 << 24, 1 << 26):
            sets = [make_inputs(task, {"N": n}, dtype, s) for s in range(3)]
            fns = {
                "v2_us": kernel_fn(v2, sets),
                "port_us": kernel_fn(port, sets),
                "native_us": baseline(task, task.baselines.native, {}),
            }
            row = {"dtype": dtype, "N": n}
            for _ in range(2):
                for label, fn in fns.items():
                    row.setdefault(label, []).append(med_us(fn, sets, iters=15))
            rows.append(row)
            print(row, flush=True)
    return rows


def serial() -> dict:
    """The same functions with MLX_USE_CUDA_GRAPHS=0 (a child process): kernels go straight to
    one stream, so calls cannot overlap; against this process's grouped, graph-built timing."""
    env = {**os.environ, "MLX_USE_CUDA_GRAPHS": "0", "PYTHONUNBUFFERED": "1"}
    out = {"graphs": serial_child()}
    r = subprocess.run(
        [sys.executable, __file__, "--serial-child"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out["no_graphs"] = (
        json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else r.stderr[-2000:]
    )
    return out


def serial_child() -> dict:
    fn, sets = empty_kernel()
    rows = {
        "empty_kernel": {
            "grouped": med_us(fn, sets, iters=15),
            "one_eval_per_call": med_us(fn, sets, group=1, iters=15),
        }
    }
    for name, case in (
        ("selective_scan", None),
        ("rmsnorm", {"R": 8192, "D": 4096}),
        ("reduce_sum_atomic", {"N": 1 << 24}),
        ("softmax_rows", {"R": 4096, "C": 4096}),
    ):
        task = load_task(name)
        port = expert_ports(task)[LANG]
        case = case or task.bench_cases()[0]
        params = task.param_values(case)
        sets = [make_inputs(task, case, "bfloat16", s) for s in range(3)]
        fns = {
            "port": kernel_fn(port, sets, params),
            "native": baseline(task, task.baselines.native, params),
        }
        rows[name] = {
            label: {
                "grouped": med_us(fn, sets, iters=15),
                "one_eval_per_call": med_us(fn, sets, group=1, iters=15),
            }
            for label, fn in fns.items()
        }
        print(name, rows[name], file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--stages", default="floor,overlap,scalars,concurrency,serial,copy")
    ap.add_argument("--serial-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serial_child:
        print(json.dumps(serial_child()))
        return
    if args.out is None:
        ap.error("--out DIR is required")
    args.out.mkdir(parents=True, exist_ok=True)
    info = dict(mx.device_info()) if hasattr(mx, "device_info") else {}
    result = {
        "device": str(info.get("device_name", LANG)),
        "mlx_version": mx.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(sys.argv),
    }
    stages = {
        "floor": floor,
        "overlap": overlap,
        "scalars": scalars,
        "concurrency": concurrency,
        "serial": serial,
        "copy": copies,
    }
    for name in args.stages.split(","):
        try:
            result[name] = stages[name]()
        except Exception:
            result[name] = {"error": traceback.format_exc()[-3000:]}
        (args.out / "timing_method.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
