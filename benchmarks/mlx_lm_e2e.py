"""Mamba-1 prefill in mlx-lm, end to end: stock mlx-lm against the same model patched with the
mamba_scan port (mlxport.integrations.mlx_lm.patch_mamba), side by side in one process.

    python benchmarks/mlx_lm_e2e.py [--out results.json] [--configs 130m,370m] [--lengths 512,2048]

Random weights of the 130M and 370M Mamba-1 configurations (mlx-lm's own ModelArgs), bf16 and
float32. Per row: prefill tokens/s of each (wall clock around mx.eval, after a warm-up; the
stock model is timed once, it takes seconds), the speedup, the largest logit difference relative
to the largest logit, and whether the 32 tokens generated greedily after the prefill (mlx-lm's
own decode step, continuing from the state the prefill left in its cache) are identical.
mlx-lm's package __init__ imports transformers: the model module is loaded without it
(mlx_lm.models.mamba only needs mlx). Where no GPU runs the port the patched model runs it on
mlxport's simulator, which is for checking, not timing: such rows say so.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.backends import GPUS, resolve  # noqa: E402
from mlxport.integrations.mlx_lm import mamba_module, patch_mamba, scan_op  # noqa: E402

CONFIGS = {  # the published Mamba-1 (state-spaces/mamba-*) shapes
    "130m": dict(hidden_size=768, intermediate_size=1536, num_hidden_layers=24, time_step_rank=48),
    "370m": dict(hidden_size=1024, intermediate_size=2048, num_hidden_layers=48, time_step_rank=64),
}
GENERATED = 32


def model_pair(name: str, dtype):
    m = mamba_module()
    args = m.ModelArgs(
        model_type="mamba",
        vocab_size=50280,
        state_size=16,
        conv_kernel=4,
        use_bias=False,
        use_conv_bias=True,
        **CONFIGS[name],
    )
    mx.random.seed(0)
    stock = m.Model(args)
    stock.set_dtype(dtype)
    mx.eval(stock.parameters())
    patched = m.Model(args)
    patched.update(stock.parameters())
    mx.eval(patched.parameters())
    return stock, patched


def prefill(model, tokens):
    cache = model.make_cache()
    t0 = time.perf_counter()
    logits = model(tokens, cache)
    mx.eval(logits, *[c.state for c in cache])
    return time.perf_counter() - t0, logits, cache


def generate(model, logits, cache, n: int) -> list[int]:
    out, nxt = [], logits[:, -1].argmax(-1)
    for _ in range(n):
        out.append(int(nxt.item()))
        nxt = model(nxt[:, None], cache)[:, -1].argmax(-1)
    return out


def row(name: str, T: int, dtype, op, timed: bool) -> dict:
    stock, patched = model_pair(name, dtype)
    patch_mamba(patched, op)
    tokens = mx.random.randint(0, 50280, (1, T))
    prefill(stock, tokens[:, :16])  # warm-up: compiles and allocations
    prefill(patched, tokens)
    t_stock, l_stock, c_stock = prefill(stock, tokens)
    runs = [prefill(patched, tokens) for _ in range(3 if timed else 1)]
    t_port, l_port, c_port = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    diff = float(mx.abs(l_stock.astype(mx.float32) - l_port.astype(mx.float32)).max())
    scale = float(mx.abs(l_stock.astype(mx.float32)).max())
    g_stock, g_port = (
        generate(stock, l_stock, c_stock, GENERATED),
        generate(patched, l_port, c_port, GENERATED),
    )
    return {
        "config": name,
        "T": T,
        "dtype": str(dtype).split(".")[-1],
        "stock_tok_s": T / t_stock,
        "port_tok_s": T / t_port if timed else None,
        "speedup": t_stock / t_port if timed else None,
        "logit_rel_diff": diff / scale,
        "generated_identical": g_stock == g_port,
        "first_differing_token": next(
            (i for i, (a, b) in enumerate(zip(g_stock, g_port, strict=True)) if a != b), None
        ),
    }


def verify(backend: str) -> str:
    """The port the model runs, checked on this GPU against the task's reference at every case,
    held-out ones included, before it is timed."""
    from mlxport.backends import get_backend
    from mlxport.integrations.mlx_lm import TASK_DIR
    from mlxport.spec import KernelCandidate
    from mlxport.tasks import load_task
    from mlxport.verify.correctness import run_correctness

    candidate = KernelCandidate.from_toml(
        TASK_DIR / "ports" / f"{'cuda' if backend == 'cuda' else 'msl'}.toml"
    )
    try:
        report = run_correctness(
            load_task(TASK_DIR), candidate, get_backend(backend), seed=7, heldout=True
        )
    except Exception as e:  # recorded: the rows below then say the port was not verified here
        print(f"verification did not run: {type(e).__name__}: {e}", flush=True)
        return f"not run: {type(e).__name__}: {e}"
    print(report.summary(), flush=True)
    return report.summary()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="130m,370m")
    ap.add_argument("--lengths", default="512,2048")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--out", type=Path, default=Path("mlx_lm_e2e.json"))
    args = ap.parse_args()
    backend = resolve("auto")
    timed = backend in GPUS
    op = scan_op(backend)
    device = mx.default_device()
    verification = verify(backend) if timed else None
    rows = []
    for name in args.configs.split(","):
        for T in map(int, args.lengths.split(",")):
            for dtype in args.dtypes.split(","):
                rows.append(row(name, T, getattr(mx, dtype), op, timed))
                print(json.dumps(rows[-1]), flush=True)
                args.out.write_text(
                    json.dumps(
                        {
                            "device": str(device),
                            "host": platform.node(),
                            "date": time.strftime("%Y-%m-%d"),
                            "timed": timed,
                            "verification": verification,
                            "rows": rows,
                        },
                        indent=1,
                    )
                )
    print(
        "\n| config | T | dtype | stock tok/s | port tok/s | speedup | logit diff (rel) "
        "| 32 tokens identical |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        port = f"{r['port_tok_s']:,.0f}" if r["port_tok_s"] else "not timed (simulator)"
        speed = f"{r['speedup']:.0f}x" if r["speedup"] else "-"
        print(
            f"| {r['config']} | {r['T']} | {r['dtype']} | {r['stock_tok_s']:,.0f} | {port} "
            f"| {speed} | {r['logit_rel_diff']:.1e} | {r['generated_identical']} |"
        )


if __name__ == "__main__":
    main()
