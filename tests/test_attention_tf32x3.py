"""benchmarks/variants/attention_tf32x3.toml, the attention port with float32 prefill on tensor
cores in 3xTF32: its launch differs from the port's only there, and its kernel, run on the CPU
executor with its PTX (cp.async, cvt.rna.tf32.f32, mma.sync m16n8k8 tf32) written as C++ from the
PTX ISA's definitions, matches float64 attention within the task's float32 tolerance."""

import math
from pathlib import Path

import numpy as np
import pytest

from mlxport.backends.cuda_cpu import CudaExecutor, Launch
from mlxport.tasks import case_infos, expert_ports, load_candidate, load_task

VARIANT = Path(__file__).parents[1] / "benchmarks" / "variants" / "attention_tf32x3.toml"


def test_the_variant_changes_float32_prefill_alone():
    """Float32 prefill runs MODE 0 with 64 query rows a block and (64 + 2 * 2 * 32) rows of D + 4
    floats of shared memory; 16-bit prefill and decode launch as the port does, from its code."""
    task = load_task("attention_fwd")
    port, variant = expert_ports(task)["cuda"], load_candidate(VARIANT)
    scalar = (
        "template <typename T, int D, bool CAUSAL>\n__device__ __forceinline__ void mlxp_attn_sc"
    )
    assert port.header.split(scalar)[0] in variant.header  # the 16-bit and decode engines
    for case in task.all_cases():
        for dtype in task.dtypes:
            infos = case_infos(task, case, dtype)
            mine, theirs = variant.launch(infos), port.launch(infos)
            if dtype == "float32" and case["Tq"] > 4:
                assert dict(mine.template)["MODE"] == 0
                assert mine.grid[1] == math.ceil(case["Tq"] / 64)
                assert mine.shared_memory == 192 * (case["D"] + 4) * 4
            else:
                assert mine == theirs, (task.case_label(case), dtype)


PTX_AS_CPP = r"""
#include <cuda_runtime.h>
#include <stdint.h>
constexpr float MLXP_LOG2E = 1.4426950408889634f;
__device__ void mlxp_cp16(unsigned char* dst, const void* src, bool ok) {  // lands at once
    for (int i = 0; i < 4; ++i)
        reinterpret_cast<float*>(dst)[i] = ok ? reinterpret_cast<const float*>(src)[i] : 0.0f;
}
__device__ void mlxp_cp_commit() {}
template <int N> __device__ void mlxp_cp_wait() {}
__device__ uint32_t mlxp_rna_tf32(float x) {  // nearest, ties away from zero
    return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}
__device__ void mlxp_split_tf32(float x, uint32_t& big, uint32_t& small) {
    big = mlxp_rna_tf32(x);
    small = mlxp_rna_tf32(x - __uint_as_float(big));
}
// A (16 x 8): a0 (g, t4), a1 (g + 8, t4), a2 (g, t4 + 4), a3 (g + 8, t4 + 4); B (8 x 8):
// b0 (t4, g), b1 (t4 + 4, g); C: c0, c1 (g, 2 t4 + e), c2, c3 (g + 8, 2 t4 + e); operands as tf32.
__device__ void mlxp_mma_tf32(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    double acc[4] = {c[0], c[1], c[2], c[3]};
    for (int kk = 0; kk < 8; ++kk) {
        float av[2], bv[2];
        for (int hr = 0; hr < 2; ++hr) {
            const uint32_t x = __shfl_sync(0xffffffffu, a[hr + 2 * (kk / 4)], g * 4 + kk % 4);
            av[hr] = __uint_as_float(x & 0xffffe000u);
        }
        for (int e = 0; e < 2; ++e) {
            const int from = (2 * t4 + e) * 4 + kk % 4;
            const uint32_t x = __shfl_sync(0xffffffffu, kk < 4 ? b0 : b1, from);
            bv[e] = __uint_as_float(x & 0xffffe000u);
        }
        for (int i = 0; i < 4; ++i) acc[i] += (double)av[i / 2] * (double)bv[i % 2];
    }
    for (int i = 0; i < 4; ++i) c[i] = (float)acc[i];
}
"""
SHARED_ADDRESSES = {  # shared memory addressed by pointer, as the C++ copy above takes it
    "const uint32_t aQ = static_cast<uint32_t>(__cvta_generic_to_shared(sQ));": (
        "unsigned char* aQ = reinterpret_cast<unsigned char*>(sQ);"
    ),
    "const uint32_t aKV = static_cast<uint32_t>(__cvta_generic_to_shared(sKV));": (
        "unsigned char* aKV = reinterpret_cast<unsigned char*>(sKV);"
    ),
    "auto load = [&](uint32_t dst,": "auto load = [&](unsigned char* dst,",
    "const uint32_t buf = aKV": "unsigned char* buf = aKV",
}


def float32_prefill_source(header: str) -> str:
    def between(start: str, end: str) -> str:
        i = header.index(start)
        return header[i : header.index(end, i)]

    kernel = between("template <int D, bool CAUSAL>\n__device__", "// A template, so that")
    for old, new in SHARED_ADDRESSES.items():
        assert kernel.count(old) == 1, old
        kernel = kernel.replace(old, new)
    return (
        PTX_AS_CPP
        + between(
            "template <bool CAUSAL>\n__device__", "__device__ __forceinline__ float mlxp_exp2"
        )
        + between("// c (16 x 8) += a (16 x 8) * b (8 x 8)", "// Float32 prefill: Flash")
        + kernel
        + "template <int D, bool CAUSAL>\n__global__ void attn(const float* q, const float* k, "
        "const float* v, const float* scale, float* out, int Tq, int Tk) {\n"
        "    mlxp_attn_tf32x3<D, CAUSAL>(q, k, v, scale, out, Tq, Tk);\n}\n"
    )


def attention64(q, k, v, scale: float) -> np.ndarray:  # causal, aligned at the last key
    tq, tk = q.shape[-2], k.shape[-2]
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * scale
    s = np.where(np.arange(tk)[None, :] <= np.arange(tq)[:, None] + tk - tq, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("hqk,hkd->hqd", p / p.sum(-1, keepdims=True), v.astype(np.float64))


@pytest.mark.parametrize(("tq", "tk", "d"), [(70, 100, 32)])
def test_the_float32_prefill_kernel_matches_float64_attention_on_the_executor(tmp_path, tq, tk, d):
    """Two row blocks, the second partly past Tq; keys in 32-key tiles, the last partly past Tk;
    causal with Tq < Tk. Rows past Tq are never written; the executor sees no race."""
    path = tmp_path / "attn.cu"
    path.write_text(float32_prefill_source(load_candidate(VARIANT).header))
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, tq, d)).astype(np.float32)
    k, v = (rng.standard_normal((1, tk, d)).astype(np.float32) for _ in range(2))
    tol = load_task("attention_fwd").tolerance["float32"]
    ex = CudaExecutor()
    try:
        kernel = ex.compile(ex.source(path), "attn", [str(d), "true"])
        launch = Launch((1, math.ceil(tq / 64), 1), (128, 1, 1), shared_bytes=192 * (d + 4) * 4)
        out = np.full((1, tq, d), np.nan, np.float32)
        args = [q, k, v, np.array([0.3], np.float32), out, np.int32(tq), np.int32(tk)]
        r = ex.run(kernel, launch, args)
    finally:
        ex.close()
    assert r.ok, r.error
    assert not r.races
    want = attention64(q, k, v, 0.3)
    np.testing.assert_allclose(r.buffers["out"], want, rtol=tol.rtol, atol=tol.atol)
