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
                res.add({"label": label, "case": r.case, "dtype": dtype, "us": r.candidate.median_us,
                         "gbs": r.candidate.gbs, "spread": r.candidate.spread,
                         **{b.name + "_us": b.median_us for b in r.baselines}})
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
    warp_rows = {"TPR": "min(1024, ceildiv(x.shape[1], 1024) * 32)",
                 "RPB": "max(1, 128 // min(1024, ceildiv(x.shape[1], 1024) * 32))"}
    shapes = {
        "persistent_128": {"grid": ["min(ceildiv(x.shape[0], RPB), 270336 // (TPR * RPB)) * TPR * RPB", 1, 1],
                           "threadgroup": ["TPR * RPB", 1, 1], "template": {**port.template, **warp_rows}},
        "rows_128": {"grid": [rows, 1, 1], "threadgroup": ["TPR * RPB", 1, 1],
                     "template": {**port.template, **warp_rows}},
        "one_vector": {"grid": ["x.shape[0] * TPR", 1, 1], "threadgroup": ["TPR", 1, 1],
                       "template": {**port.template, "TPR": one_vec, "RPB": 1}},
        "rows_256": {"grid": ["x.shape[0] * TPR", 1, 1], "threadgroup": ["TPR", 1, 1],
                     "template": {**port.template, "TPR": "min(256, ceildiv(x.shape[1], 1024) * 64)", "RPB": 1}},
    }
    out = {label: port.model_copy(update={"name": f"rms_{label}", **update}) for label, update in shapes.items()}
    # Load orders: the weight's vectors loaded with the row, before the reduction, so they are not
    # fetched after the barrier; streaming hints for the row and the output, which are touched once.
    weight_early = {
        "uint4 q[VEC ? NPT : 1];": "uint4 q[VEC ? NPT : 1], wq[VEC ? NPT : 1];",
        "__ldg(reinterpret_cast<const uint4*>(xr) + ch) : make_uint4(0u, 0u, 0u, 0u);":
            "__ldg(reinterpret_cast<const uint4*>(xr) + ch) : make_uint4(0u, 0u, 0u, 0u);\n"
            "            wq[k] = ch < NCH ? __ldg(reinterpret_cast<const uint4*>(weight) + ch) : make_uint4(0u, 0u, 0u, 0u);",
        "MlxpVec<T>::unpack(__ldg(reinterpret_cast<const uint4*>(weight) + ch), g);": "MlxpVec<T>::unpack(wq[k], g);"}
    stream = {"__ldg(reinterpret_cast<const uint4*>(xr) + ch)": "__ldcs(reinterpret_cast<const uint4*>(xr) + ch)",
              "reinterpret_cast<uint4*>(outr)[ch] = MlxpVec<T>::pack(f);":
                  "__stcs(reinterpret_cast<uint4*>(outr) + ch, MlxpVec<T>::pack(f));"}
    for label, edits in (("weight_early", weight_early), ("stream", stream),
                         ("weight_early_stream", {**weight_early, **stream})):
        out[label] = port.model_copy(update={"name": f"rms_{label}", "source": _edit(port.source, edits)})
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
    return {f"hpt{hpt}": port.model_copy(update={
        "name": f"rope_hpt{hpt}", "source": port.source.replace("constexpr int HPT = 4;", f"constexpr int HPT = {hpt};"),
        "grid": [port.grid[0], f"ceildiv(x.shape[0] * x.shape[1], {hpt})", 1]}) for hpt in (1, 2, 4)}


def rope(res: Results, backend) -> None:
    task = load_task("rope")
    for label, variant in rope_variants(expert_ports(task)["cuda"]).items():
        bench(res, backend, task, variant, f"rope {label[3:]} heads per thread", iters=12)


def reduce_sum_variants(port: KernelCandidate) -> dict[str, KernelCandidate]:
    """The main loop: the earlier port (v3) issued U loads per thread only while U strides fit,
    then one at a time (at 16M bf16 elements a quarter of the threads made one 4-load trip and then
    3 single loads); the port (v4) issues U = 4 on every trip, padding with zeros; and U = 8."""
    return {"v3_unguarded": KernelCandidate.from_toml(HERE / "variants" / "reduce_sum_v3.toml"),
            "port": port,
            "guarded_u8": port.model_copy(update={"name": "reduce_sum_guarded_u8", "source": _edit(
                port.source, {"constexpr int U = 4;": "constexpr int U = 8;"})})}


def reduce_sum(res: Results, backend) -> None:
    """Each variant's correctness on every case (with the GPU's 8-calls-at-once check), then timed."""
    task = load_task("reduce_sum_atomic")
    for label, variant in reduce_sum_variants(expert_ports(task)["cuda"]).items():
        rep = run_correctness(task, variant, backend, seed=2026, heldout=True, extra_seeds=1)
        res.add({"label": f"reduce_sum {label} correctness", "ok": rep.ok, "summary": rep.summary()[:1500]})
        if rep.ok:
            bench(res, backend, task, variant, f"reduce_sum {label}", iters=12)


# Where the wgmma path's loop over key tiles starts and ends in the port: each tile's S = Q K^T,
# softmax and O += P V back to back, each product waited for before the next step.
WGMMA_LOOP = ("    for (int t = 0; t < n_tiles; ++t) {\n        const uint32_t buf = sKV + (t % STAGES) * 2 * TILE;\n",
              "\n#pragma unroll\n    for (int hr = 0; hr < 2; ++hr) {\n        float tot = l[hr];")


def pipelined(header: str) -> str:
    """The port's header with the wgmma loop replaced by WGMMA_PIPELINED."""
    start = header.index(WGMMA_LOOP[0])
    end = header.index(WGMMA_LOOP[1], start)
    assert header.count(WGMMA_LOOP[0]) == 1 and "fill(t + STAGES);" in header[start:end]
    return header[:start] + WGMMA_PIPELINED + header[end:]


# The same steps software-pipelined (FlashAttention-3's intra-warpgroup overlap): tile t + 1's
# S = Q K^T is issued before tile t's O += P V, and its softmax runs while P V is in flight; O is
# rescaled and P packed (P V reads p from registers) once P V is done, before the next P V, as in the
# port, so the arithmetic is the port's.
# Tile t + 1 must have landed a step earlier: the copy waits leave STAGES - 2 groups in flight.
WGMMA_PIPELINED = """    float s[NT * 4];
    uint32_t p[BK / 16][4];
    auto issue_scores = [&](int t) {  // S = Q K_t^T as one wgmma group
        const uint32_t buf = sKV + (t % STAGES) * 2 * TILE;
        mlxp_wg_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            const uint32_t at = (ks % 4) * 32;
            mlxp_wg_ss<BK, T>(s, mlxp_desc(sQ + (ks / 4) * BQ * 128 + wg * 64 * 128 + at, 16, 1024),
                              mlxp_desc(buf + (ks / 4) * BK * 128 + at, 16, 1024), ks > 0);
        }
        mlxp_wg_commit();
    };
    auto softmax = [&](int t) {  // S of tile t (completed) to probabilities in place, m, l and alpha
        const bool masked = (t + 1) * BK > Tk || (CAUSAL && (t + 1) * BK - 1 > row0 + offset);
        mlxp_wg_softmax<NT, CAUSAL>(s, m, l, alpha, qs, masked, t * BK, row, t4, Tk, offset);
    };
    auto pack = [&]() {  // P as P V's A operand: only once the last P V that read p is done
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
#pragma unroll
            for (int i = 0; i < 4; ++i) p[kk][i] = Mma::pack(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
    };
    auto rescale = [&]() {
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {  // a row's maximum moved
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                o[dt * 4 + 0] *= alpha[0];
                o[dt * 4 + 1] *= alpha[0];
                o[dt * 4 + 2] *= alpha[1];
                o[dt * 4 + 3] *= alpha[1];
            }
        }
    };
    auto issue_pv = [&](int t) {  // O += P V_t as one wgmma group
        const uint32_t buf = sKV + (t % STAGES) * 2 * TILE;
        mlxp_wg_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
            mlxp_wg_rs<D, T>(o, p[kk], mlxp_desc(buf + TILE + kk * 16 * 128, BK * 128, 1024), 1);
        mlxp_wg_commit();
    };
    // One warpgroup a block: every tile below n_tiles is the warpgroup's, causal or not, so the loop
    // issues and waits on no condition (ptxas serializes wgmma issued and waited on divergent paths).
    static_assert(WGS == 1, "the pipelined loop takes every tile below n_tiles");
    mlxp_cp_wait<STAGES - 1>();
    mlxp_fence_async_smem();
    __syncthreads();  // tile 0 and Q landed
    if (n_tiles > 0) {
        issue_scores(0);
        mlxp_wg_wait<0>();
        mlxp_wg_hold<NT * 4>(s);
        softmax(0);
        rescale();
        pack();
    }
    for (int t = 0; t + 1 < n_tiles; ++t) {
        mlxp_cp_wait<STAGES - 2>();
        mlxp_fence_async_smem();
        __syncthreads();  // tile t + 1 landed
        issue_scores(t + 1);
        issue_pv(t);
        mlxp_wg_wait<1>();  // S done; P V may run on
        mlxp_wg_hold<NT * 4>(s);
        softmax(t + 1);
        mlxp_wg_wait<0>();
        mlxp_wg_hold<DT * 4>(o);
        rescale();
        pack();
        __syncthreads();  // every warp is done with tile t's buffer: refill it STAGES tiles ahead
        fill(t + STAGES);
    }
    if (n_tiles > 0) {
        issue_pv(n_tiles - 1);
        mlxp_wg_wait<0>();
        mlxp_wg_hold<DT * 4>(o);
    }
"""


# The wgmma path's first copies as the port has them, and for K in three buffers and V in two:
# Q with K0, then (K1, V0), then (K2, V1); after tile t, (K t+3, V t+2) refill what tile t used, so
# each step has the next K and this V landed one step ahead (a copy wait that leaves one group).
WGMMA_PROLOGUE = """    load(sQ, qb, q0, BQ, Tq);
#pragma unroll
    for (int st = 0; st < STAGES; ++st) fill(st);
"""
WGMMA_PROLOGUE_K3V2 = """    const uint32_t sK = sKV, sV = sKV + 3 * TILE;
    auto refill = [&](int t) {  // after tile t: K t + 3 and V t + 2 into its buffers, one copy group
        if (t + 3 < n_tiles) load_tile(sK + (t % 3) * TILE, kb, (t + 3) * BK);
        if (t + 2 < n_tiles) load_tile(sV + (t % 2) * TILE, vb, (t + 2) * BK);
        mlxp_cp_commit();
    };
    load(sQ, qb, q0, BQ, Tq);
    if (0 < n_tiles) load_tile(sK, kb, 0);
    mlxp_cp_commit();
    if (1 < n_tiles) load_tile(sK + TILE, kb, BK);
    if (0 < n_tiles) load_tile(sV, vb, 0);
    mlxp_cp_commit();
    if (2 < n_tiles) load_tile(sK + 2 * TILE, kb, 2 * BK);
    if (1 < n_tiles) load_tile(sV + TILE, vb, BK);
    mlxp_cp_commit();
"""


def attention_variants(port: KernelCandidate) -> dict[str, KernelCandidate]:
    """The 16-bit prefill path's choices: wgmma (WG 1, where the compiler targets sm_90a) or mma.sync
    (WG 0, 16 * MT query rows a warp), warpgroups a block sharing the K and V tiles (WGS), keys a
    tile (BK) and buffers in flight (STAGES). The port takes WG 1, WGS 1, MT 1, BK 64, 2 stages at
    every head dimension; WG 0, WGS 1, MT 2 is session 5's port, WG 1, WGS 2, BK 64 session 6's.
    And the scalar port of session 4, session 6's causal block order (longest rows first within each
    head, heads one after another), and session 7's non-causal order (heads interleaved, as the
    causal order has them)."""
    dec, pre, h16 = "(1 - min(1, q.shape[2] // 5))", "min(1, q.shape[2] // 5)", "((4 - q.itemsize) // 2)"
    out = {"v1_scalar": KernelCandidate.from_toml(HERE / "variants" / "attention_v1.toml")}
    for wg, wgs, mt, bk, st in ((0, 1, 2, 64, 2), (0, 1, 1, 64, 2), (1, 1, 1, 64, 2), (1, 2, 1, 64, 2),
                                (1, 1, 1, 64, 3), (1, 1, 1, 128, 2), (1, 1, 1, 128, 3), (1, 2, 1, 128, 3)):
        data = json.loads(port.model_dump_json())
        data["template"].update(WG=str(wg), WGS=str(wgs), MT=str(mt), BK=str(bk), STAGES=str(st))
        bq = 64 * wgs * (mt if wg == 0 else 1)
        threads = f"128 + 384 * {dec} + {128 * (wgs - 1)} * {pre} * {h16}"
        data["grid"][:2] = [threads, f"{dec} * q.shape[2] + {pre} * ({h16} * ceildiv(q.shape[2], {bq}) + "
                                     f"(1 - {h16}) * ceildiv(q.shape[2], 16))"]
        data["threadgroup"][0] = threads
        data["shared_memory"] = f"{pre} * {h16} * (({bq} + 2 * {st} * {bk}) * q.shape[3] * 2 + 1024)"
        label = f"{'wgmma' if wg else 'mma'}_wgs{wgs}_mt{mt}_bk{bk}_s{st}"
        out[label] = KernelCandidate.model_validate({**data, "name": f"attention_fwd_{label}"})
    order = "    const int i = blockIdx.y + gridDim.y * blockIdx.z;\n    bh = i % gridDim.z;\n    return gridDim.y - 1 - i / gridDim.z;"
    assert order in port.header
    per_head = port.header.replace(order, "    bh = blockIdx.z;\n    return gridDim.y - 1 - blockIdx.y;")
    out["longest_first_per_head"] = port.model_copy(update={"header": per_head, "name": "attention_fwd_per_head"})
    for st in (2, 3):  # the wgmma path's loop pipelined, at 2 and 3 buffers
        data = json.loads(out[f"wgmma_wgs1_mt1_bk64_s{st}"].model_dump_json())
        data["header"] = pipelined(data["header"])
        out[f"wgmma_overlap_s{st}"] = KernelCandidate.model_validate({**data, "name": f"attention_fwd_overlap_s{st}"})
    data = json.loads(out["wgmma_overlap_s2"].model_dump_json())  # K in three buffers, V in two: 99,328 bytes at D = 128
    loop = WGMMA_PIPELINED
    for old, new in (("mlxp_cp_wait<STAGES - 1>();", "mlxp_cp_wait<2>();"), ("mlxp_cp_wait<STAGES - 2>();", "mlxp_cp_wait<1>();"),
                     ("buf = sKV + (t % STAGES) * 2 * TILE;\n        mlxp_wg_fence();\n#pragma unroll\n        for (int ks",
                      "buf = sK + (t % 3) * TILE;\n        mlxp_wg_fence();\n#pragma unroll\n        for (int ks"),
                     ("buf = sKV + (t % STAGES) * 2 * TILE;\n        mlxp_wg_fence();\n#pragma unroll\n        for (int kk",
                      "buf = sV + (t % 2) * TILE;\n        mlxp_wg_fence();\n#pragma unroll\n        for (int kk"),
                     ("mlxp_desc(buf + TILE + kk * 16 * 128", "mlxp_desc(buf + kk * 16 * 128"), ("fill(t + STAGES);", "refill(t);"),
                     ("    if (n_tiles > 0) {\n        issue_pv(n_tiles - 1);",  # the last V came with a K past the end
                      "    mlxp_cp_wait<0>();\n    mlxp_fence_async_smem();\n    __syncthreads();\n"
                      "    if (n_tiles > 0) {\n        issue_pv(n_tiles - 1);")):
        assert loop.count(old) == 1, old
        loop = loop.replace(old, new)
    data["header"] = data["header"].replace(WGMMA_PROLOGUE, WGMMA_PROLOGUE_K3V2).replace(WGMMA_PIPELINED, loop)
    assert data["shared_memory"].count("(64 + 2 * 2 * 64)") == 1
    data["shared_memory"] = data["shared_memory"].replace("(64 + 2 * 2 * 64)", "(64 + 5 * 64)")
    out["wgmma_overlap_k3v2"] = KernelCandidate.model_validate({**data, "name": "attention_fwd_overlap_k3v2"})
    by_head = "    if constexpr (!CAUSAL) {"
    assert by_head in port.header
    out["all_heads_noncausal"] = port.model_copy(update={"header": port.header.replace(by_head, "    if constexpr (false) {"),
                                                         "name": "attention_fwd_all_heads"})
    return out


def copies(res: Results, backend=None) -> None:
    variants = {  # label: (load, store, vectors per thread)
        "ldg_st_4": ("__ldg", "dst[i] = v[k]", 4), "ldcs_stcs_4": ("__ldcs", "__stcs(dst + i, v[k])", 4),
        "ldg_stcs_4": ("__ldg", "__stcs(dst + i, v[k])", 4), "ldlu_stcs_4": ("__ldlu", "__stcs(dst + i, v[k])", 4),
        "ldg_st_8": ("__ldg", "dst[i] = v[k]", 8), "ldcs_stcs_8": ("__ldcs", "__stcs(dst + i, v[k])", 8),
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
    parts = {"cumsum": cumsum, "rmsnorm": rmsnorm, "rope": rope, "reduce_sum": reduce_sum, "copy": copies}
    for name in args.parts.split(","):
        parts[name](res, backend)


if __name__ == "__main__":
    main()
