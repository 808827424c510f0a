"""Variants of expert CUDA ports side by side on the GPU: the measurements behind the choice of
each port's launch shape (see BENCHMARKS.md).

    python benchmarks/port_variants.py --out OUT_DIR [--parts cumsum,rmsnorm,rope,reduce_sum,copy]

- cumsum: the striped port (cumsum_v3, correctness on every case first) against the earlier
  contiguous-chunk port (benchmarks/variants/cumsum_v2.toml);
- rmsnorm: the earlier persistent grid of 128-thread rows against one row per block with 128
  threads, one 16-byte vector per thread, and 256 threads; the weight loaded with the row, and
  streaming cache hints;
- rope: 1, 2 and 4 heads per thread (the port: 4);
- reduce_sum: the earlier port (v3) against the port (v4: every trip issues 4 loads) and 8 loads;
- copy: the calibration's copy kernel with other cache hints and vectors per thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlx.core as mx  # noqa: E402

from mlxport.backends import get_backend, mlx_kernel  # noqa: E402
from mlxport.backends.calibration import copy_candidate  # noqa: E402
from mlxport.spec import KernelCandidate  # noqa: E402
from mlxport.tasks import expert_ports, load_task  # noqa: E402
from mlxport.verify.benchmark import benchmark  # noqa: E402
from mlxport.verify.correctness import run_correctness  # noqa: E402

HERE = Path(__file__).parent


class Results:
    def __init__(self, out: Path):
        self.rows: list[dict] = []
        self.path = out / "port_variants.json"

    def add(self, row: dict) -> None:
        self.rows.append(row)
        print(row, flush=True)
        self.path.write_text(json.dumps(self.rows, indent=1))


def bench(res: Results, backend, task, cand: KernelCandidate, label: str, iters: int) -> None:
    for case in task.bench_cases():
        for dtype in ("bfloat16", "float32"):
            try:
                r = benchmark(task, cand, backend, case=case, dtype=dtype, seed=11, iters=iters)
                res.add(
                    {
                        "label": label,
                        "case": r.case,
                        "dtype": dtype,
                        "us": r.candidate.median_us,
                        "gbs": r.candidate.gbs,
                        "spread": r.candidate.spread,
                        **{b.name + "_us": b.median_us for b in r.baselines},
                    }
                )
            except Exception as e:
                res.add({"label": label, "case": str(case), "dtype": dtype, "error": str(e)[:400]})


def cumsum(res: Results, backend) -> None:
    task = load_task("cumsum")
    new = expert_ports(task)["cuda"]
    try:
        rep = run_correctness(task, new, backend, seed=2026, heldout=True, extra_seeds=1)
        res.add({"label": f"{new.name} correctness", "ok": rep.ok, "summary": rep.summary()[:2000]})
    except Exception:
        res.add({"label": f"{new.name} correctness", "error": traceback.format_exc()[-2000:]})
    bench(res, backend, task, new, new.name, iters=20)
    old = KernelCandidate.from_toml(HERE / "variants" / "cumsum_v2.toml")
    bench(res, backend, task, old, old.name, iters=20)


def rmsnorm_variants(port: KernelCandidate) -> dict[str, KernelCandidate]:
    """Launch shapes and load orders of the rmsnorm port (``kernel_profile.py`` times them too)."""
    rows = "ceildiv(x.shape[0], RPB) * TPR * RPB"
    one_vec = "min(1024, max(32, ceildiv(ceildiv(x.shape[1], 16 // x.itemsize), 32) * 32))"
    warp_rows = {
        "TPR": "min(1024, ceildiv(x.shape[1], 1024) * 32)",
        "RPB": "max(1, 128 // min(1024, ceildiv(x.shape[1], 1024) * 32))",
    }
    shapes = {
        "persistent_128": {
            "grid": ["min(ceildiv(x.shape[0], RPB), 270336 // (TPR * RPB)) * TPR * RPB", 1, 1],
            "threadgroup": ["TPR * RPB", 1, 1],
            "template": {**port.template, **warp_rows},
        },
        "rows_128": {
            "grid": [rows, 1, 1],
            "threadgroup": ["TPR * RPB", 1, 1],
            "template": {**port.template, **warp_rows},
        },
        "one_vector": {
            "grid": ["x.shape[0] * TPR", 1, 1],
            "threadgroup": ["TPR", 1, 1],
            "template": {**port.template, "TPR": one_vec, "RPB": 1},
        },
        "rows_256": {
            "grid": ["x.shape[0] * TPR", 1, 1],
            "threadgroup": ["TPR", 1, 1],
            "template": {
                **port.template,
                "TPR": "min(256, ceildiv(x.shape[1], 1024) * 64)",
                "RPB": 1,
            },
        },
    }
    out = {
        label: port.model_copy(update={"name": f"rms_{label}", **update})
        for label, update in shapes.items()
    }
    # Load orders: the weight's vectors loaded with the row, before the reduction, so they are not
    # fetched after the barrier; streaming hints for the row and the output, which are touched once.
    weight_early = {
        "uint4 q[VEC ? NPT : 1];": "uint4 q[VEC ? NPT : 1], wq[VEC ? NPT : 1];",
        "__ldg(reinterpret_cast<const uint4*>(xr) + ch) : make_uint4(0u, 0u, 0u, 0u);": (
            "__ldg(reinterpret_cast<const uint4*>(xr) + ch) : make_uint4(0u, 0u, 0u, 0u);\n"
            "            wq[k] = ch < NCH ? __ldg(reinterpret_cast<const uint4*>(weight) + ch)"
            " : make_uint4(0u, 0u, 0u, 0u);"
        ),
        "MlxpVec<T>::unpack(__ldg(reinterpret_cast<const uint4*>(weight) + ch), g);": (
            "MlxpVec<T>::unpack(wq[k], g);"
        ),
    }
    stream = {
        "__ldg(reinterpret_cast<const uint4*>(xr) + ch)": (
            "__ldcs(reinterpret_cast<const uint4*>(xr) + ch)"
        ),
        "reinterpret_cast<uint4*>(outr)[ch] = MlxpVec<T>::pack(f);": (
            "__stcs(reinterpret_cast<uint4*>(outr) + ch, MlxpVec<T>::pack(f));"
        ),
    }
    for label, edits in (
        ("weight_early", weight_early),
        ("stream", stream),
        ("weight_early_stream", {**weight_early, **stream}),
    ):
        out[label] = port.model_copy(
            update={"name": f"rms_{label}", "source": _edit(port.source, edits)}
        )
    return out


def _edit(source: str, edits: dict[str, str]) -> str:
    for old, new in edits.items():
        assert old in source, old
        source = source.replace(old, new)
    return source


def rmsnorm(res: Results, backend) -> None:
    task = load_task("rmsnorm")
    for label, variant in rmsnorm_variants(expert_ports(task)["cuda"]).items():
        bench(res, backend, task, variant, f"rmsnorm {label}", iters=12)


def rope_variants(port: KernelCandidate) -> dict[str, KernelCandidate]:
    """Heads per thread: the port shares each thread's sincos over 4 heads, so at B=1,H=32,T=4096
    it launches one wave of 1024 blocks, which overlapping calls hide and calls in order do not.
    1 and 2 heads per thread launch 4x and 2x the blocks."""
    assert "constexpr int HPT = 4;" in port.source
    return {
        f"hpt{hpt}": port.model_copy(
            update={
                "name": f"rope_hpt{hpt}",
                "source": port.source.replace(
                    "constexpr int HPT = 4;", f"constexpr int HPT = {hpt};"
                ),
                "grid": [port.grid[0], f"ceildiv(x.shape[0] * x.shape[1], {hpt})", 1],
            }
        )
        for hpt in (1, 2, 4)
    }


def rope(res: Results, backend) -> None:
    task = load_task("rope")
    for label, variant in rope_variants(expert_ports(task)["cuda"]).items():
        bench(res, backend, task, variant, f"rope {label[3:]} heads per thread", iters=12)


def reduce_sum_variants(port: KernelCandidate) -> dict[str, KernelCandidate]:
    """The main loop: the earlier port (v3) issued U loads per thread only while U strides fit,
    then one at a time (at 16M bf16 elements a quarter of the threads made one 4-load trip and then
    3 single loads); the port (v4) issues U = 4 on every trip, padding with zeros; and U = 8."""
    return {
        "v3_unguarded": KernelCandidate.from_toml(HERE / "variants" / "reduce_sum_v3.toml"),
        "port": port,
        "guarded_u8": port.model_copy(
            update={
                "name": "reduce_sum_guarded_u8",
                "source": _edit(port.source, {"constexpr int U = 4;": "constexpr int U = 8;"}),
            }
        ),
    }


def reduce_sum(res: Results, backend) -> None:
    """Each variant's correctness on every case (with the GPU's 8-calls-at-once check),
    then timed."""
    task = load_task("reduce_sum_atomic")
    for label, variant in reduce_sum_variants(expert_ports(task)["cuda"]).items():
        rep = run_correctness(task, variant, backend, seed=2026, heldout=True, extra_seeds=1)
        res.add(
            {
                "label": f"reduce_sum {label} correctness",
                "ok": rep.ok,
                "summary": rep.summary()[:1500],
            }
        )
        if rep.ok:
            bench(res, backend, task, variant, f"reduce_sum {label}", iters=12)


def attention_variants(port: KernelCandidate) -> dict[str, KernelCandidate]:
    """The 16-bit prefill path's engines: wgmma (WG 1, where the compiler targets sm_90a; the port's
    pipelined loop) or mma.sync (WG 0, 16 * MT query rows a warp, 2 buffers of 64-key tiles, the
    engine of GPUs before Hopper). MT 2 is session 5's port. And the scalar port of session 4,
    session 6's causal block order (longest rows first within each head, heads one after another),
    and session 7's non-causal order (heads interleaved, as the causal order has them). And the
    port with float32 prefill on 3xTF32 tensor cores (unmeasured)."""
    dec, pre, h16 = (
        "(1 - min(1, q.shape[2] // 5))",
        "min(1, q.shape[2] // 5)",
        "((4 - q.itemsize) // 2)",
    )
    out = {
        "v1_scalar": KernelCandidate.from_toml(HERE / "variants" / "attention_v1.toml"),
        "tf32x3": KernelCandidate.from_toml(HERE / "variants" / "attention_tf32x3.toml"),
    }
    for wg, mt in ((0, 2), (0, 1), (1, 1)):
        data = json.loads(port.model_dump_json())
        data["template"].update(WG=str(wg), WGS="1", MT=str(mt), BK="64", STAGES="2")
        bq = 64 * (mt if wg == 0 else 1)
        rows = "(64 + 5 * 64)" if wg else f"({bq} + 2 * 2 * 64)"
        data["grid"][1] = (
            f"{dec} * q.shape[2] + {pre} * ({h16} * ceildiv(q.shape[2], {bq}) + "
            f"(1 - {h16}) * ceildiv(q.shape[2], 16))"
        )
        data["shared_memory"] = f"{pre} * {h16} * ({rows} * q.shape[3] * 2 + 1024)"
        label = f"{'wgmma' if wg else 'mma'}_mt{mt}"
        out[label] = KernelCandidate.model_validate({**data, "name": f"attention_fwd_{label}"})
    order = (
        "    const int i = blockIdx.y + gridDim.y * blockIdx.z;\n"
        "    bh = i % gridDim.z;\n"
        "    return gridDim.y - 1 - i / gridDim.z;"
    )
    assert order in port.header
    per_head = port.header.replace(
        order, "    bh = blockIdx.z;\n    return gridDim.y - 1 - blockIdx.y;"
    )
    out["longest_first_per_head"] = port.model_copy(
        update={"header": per_head, "name": "attention_fwd_per_head"}
    )
    by_head = "    if constexpr (!CAUSAL) {"
    assert by_head in port.header
    out["all_heads_noncausal"] = port.model_copy(
        update={
            "header": port.header.replace(by_head, "    if constexpr (false) {"),
            "name": "attention_fwd_all_heads",
        }
    )
    return out


def copies(res: Results, backend=None) -> None:
    variants = {  # label: (load, store, vectors per thread)
        "ldg_st_4": ("__ldg", "dst[i] = v[k]", 4),
        "ldcs_stcs_4": ("__ldcs", "__stcs(dst + i, v[k])", 4),
        "ldg_stcs_4": ("__ldg", "__stcs(dst + i, v[k])", 4),
        "ldlu_stcs_4": ("__ldlu", "__stcs(dst + i, v[k])", 4),
        "ldg_st_8": ("__ldg", "dst[i] = v[k]", 8),
        "ldcs_stcs_8": ("__ldcs", "__stcs(dst + i, v[k])", 8),
        "ldg_st_1": ("__ldg", "dst[i] = v[k]", 1),
    }
    for mib in (64, 1024):
        n = (mib << 20) // 8
        sets = [{"x": mx.random.normal((n,))} for _ in range(2)]
        mx.eval([s["x"] for s in sets])
        for label, (load, store, nvec) in variants.items():
            cand = copy_candidate("cuda", load=load, store=store, nvec=nvec, name=f"cp_{label}")
            launch = mlx_kernel.caller(cand, sets[0])
            try:
                ok = bool(mx.array_equal(launch(sets[0])[0], sets[0]["x"]).item())
                t = statistics.median(mlx_kernel.time_calls(launch, sets, warmup=3, iters=20))
                res.add({"copy": label, "mib": mib, "ok": ok, "gbs": (mib << 20) / t / 1e9})
            except Exception as e:
                res.add({"copy": label, "mib": mib, "error": str(e)[:300]})
        del sets
        mx.clear_cache()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", default="cumsum,rmsnorm,rope,reduce_sum,copy")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    res = Results(args.out)
    backend = get_backend("cuda")
    parts = {
        "cumsum": cumsum,
        "rmsnorm": rmsnorm,
        "rope": rope,
        "reduce_sum": reduce_sum,
        "copy": copies,
    }
    for name in args.parts.split(","):
        parts[name](res, backend)


if __name__ == "__main__":
    main()
