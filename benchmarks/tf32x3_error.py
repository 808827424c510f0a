"""The error of attention in 3xTF32 (benchmarks/variants/attention_tf32x3.toml's float32
prefill) against float64, in a model of its arithmetic: operands rounded to tf32 (round to nearest,
ties away, as cvt.rna.tf32.f32) as big + small, products exact, sums in float32 after every 8 terms
(one m16n8k8 step), softmax in float32 in base 2. Inputs as the task draws them (standard normal),
at the task's float32 tolerance; runs on any machine (numpy):

    python benchmarks/tf32x3_error.py [--terms 3]

``--terms 1`` is plain TF32 (big * big alone), which the tolerance rejects.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.tasks import load_task  # noqa: E402


def tf32(x: np.ndarray) -> np.ndarray:
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def matmul(a: np.ndarray, b: np.ndarray, terms: int) -> np.ndarray:
    a_big, b_big = tf32(a), tf32(b)
    a_small, b_small = tf32(a - a_big), tf32(b - b_big)
    pairs = [(a_small, b_big), (a_big, b_small), (a_big, b_big)][3 - terms :]
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(0, a.shape[1], 8):
        for x, y in pairs:
            step = x[:, k : k + 8].astype(np.float64) @ y[k : k + 8].astype(np.float64)
            acc = (acc + step).astype(np.float32)
    return acc


def attention(q, k, v, scale: float, terms: int) -> np.ndarray:
    s = matmul(q, k.T, terms) * np.float32(scale * 1.4426950408889634)
    p = np.exp2(s - s.max(1, keepdims=True)).astype(np.float32)
    return matmul(p, v, terms) / p.sum(1, keepdims=True, dtype=np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--terms", type=int, default=3, choices=(1, 2, 3))
    args = ap.parse_args()
    tol = load_task("attention_fwd").tolerance["float32"]
    rng = np.random.default_rng(0)
    for d, t, scale in ((64, 512, 0.125), (128, 512, 0.0884), (128, 256, 0.3)):
        q, k, v = (rng.standard_normal((t, d)).astype(np.float32) for _ in range(3))
        s = q.astype(np.float64) @ k.T.astype(np.float64) * scale
        p = np.exp(s - s.max(1, keepdims=True))
        ref = p / p.sum(1, keepdims=True) @ v
        diff = np.abs(attention(q, k, v, scale, args.terms) - ref)
        worst = float((diff / (tol.atol + tol.rtol * np.abs(ref))).max())
        norm = float(np.linalg.norm(diff) / np.linalg.norm(ref))
        print(
            f"D={d} T={t} scale={scale}: max abs {diff.max():.2e}, worst element at "
            f"{worst:.3f} of its bound, error norm {norm:.2e} (bound {tol.norm:g})"
        )


if __name__ == "__main__":
    main()
