"""Conformance of the Metal simulator: real compiles, real runs, numpy expectations."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from mlxport.backends import availability, get_backend
from mlxport.backends.sim import SimBackend
from mlxport.spec import KernelCandidate

MSL = Path(__file__).parent / "msl"
RNG = np.random.default_rng(0)


@pytest.fixture(scope="module", params=["sim", "metal"])
def sim(request):
    """The simulator everywhere; the same kernels on the real Metal backend where Metal exists."""
    if request.param == "metal":
        status = availability()["metal"]
        if not status.ok:
            pytest.skip(f"the metal backend is unavailable here: {status.reason}")
        yield get_backend("metal")
        return
    backend = SimBackend()
    yield backend
    backend.close()


def kernel(
    source: str,
    inputs: list[str],
    outputs: list[str],
    shapes: list,
    dtypes: list[str],
    grid: list,
    tg: list,
    **extra,
) -> KernelCandidate:
    name = extra.pop("name", "k")
    return KernelCandidate(
        name=name,
        source=source,
        input_names=inputs,
        output_names=outputs,
        output_shapes=shapes,
        output_dtypes=dtypes,
        grid=grid,
        threadgroup=tg,
        **extra,
    )


def run_ok(sim: SimBackend, c: KernelCandidate, **inputs):
    r = sim.run(c, inputs)
    assert r.error is None, r.error
    return r


def test_elementwise_2d_edge_threadgroups(sim):
    c = KernelCandidate.from_toml(MSL / "elementwise_2d.toml")
    a, b = (
        RNG.normal(size=(23, 37)).astype(np.float32),
        RNG.normal(size=(23, 37)).astype(np.float32),
    )
    r = run_ok(sim, c, a=a, b=b)
    np.testing.assert_allclose(r.outputs[0], a * 2 + b, rtol=1e-6)
    assert not r.unwritten[0].any()


ATTRS = [
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "dispatch_threads_per_threadgroup",
    "threadgroups_per_grid",
    "threads_per_grid",
    "grid_size",
    "grid_origin",
]
SCALAR_ATTRS = [
    "thread_index_in_threadgroup",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "simdgroups_per_threadgroup",
    "dispatch_simdgroups_per_threadgroup",
    "thread_index_in_quadgroup",
    "quadgroup_index_in_threadgroup",
    "quadgroups_per_threadgroup",
    "dispatch_quadgroups_per_threadgroup",
    "threads_per_simdgroup",
    "thread_execution_width",
]


def expected_attrs(grid, tg) -> np.ndarray:
    nf = 3 * len(ATTRS) + len(SCALAR_ATTRS)
    out = np.zeros((grid[2], grid[1], grid[0], nf), dtype=np.uint32)
    groups = [-(-g // t) for g, t in zip(grid, tg, strict=True)]
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                pos = (x, y, z)
                g = tuple(p // t for p, t in zip(pos, tg, strict=True))
                local = tuple(p % t for p, t in zip(pos, tg, strict=True))
                size = tuple(min(t, n - gi * t) for t, n, gi in zip(tg, grid, g, strict=True))
                vals3 = [
                    pos,
                    local,
                    g,
                    size,
                    tuple(tg),
                    tuple(groups),
                    tuple(grid),
                    tuple(grid),
                    (0, 0, 0),
                ]
                idx = local[0] + size[0] * (local[1] + size[1] * local[2])
                n, dn = size[0] * size[1] * size[2], tg[0] * tg[1] * tg[2]
                scal = [
                    idx,
                    idx % 32,
                    idx // 32,
                    -(-n // 32),
                    -(-dn // 32),
                    idx % 4,
                    idx // 4,
                    -(-n // 4),
                    -(-dn // 4),
                    32,
                    32,
                ]
                out[z, y, x] = [v for t3 in vals3 for v in t3] + scal
    return out


def test_all_attributes_with_edge_threadgroups(sim):
    lines = [
        "uint3 p = thread_position_in_grid;",
        "uint base = ((p.z * threads_per_grid.y + p.y) * threads_per_grid.x + p.x) * NF;",
        "uint f = 0;",
    ]
    for a in ATTRS:
        lines += [
            f"out[base + f++] = {a}.x;",
            f"out[base + f++] = {a}.y;",
            f"out[base + f++] = {a}.z;",
        ]
    lines += [f"out[base + f++] = {a};" for a in SCALAR_ATTRS]
    nf = 3 * len(ATTRS) + len(SCALAR_ATTRS)
    grid, tg = (10, 3, 5), (4, 2, 2)
    c = kernel(
        "\n".join(lines),
        ["x"],
        ["out"],
        [[grid[2], grid[1], grid[0], "NF"]],
        ["uint32"],
        list(grid),
        list(tg),
        template={"NF": nf},
    )
    r = run_ok(sim, c, x=np.zeros(8, np.float32))
    np.testing.assert_array_equal(r.outputs[0], expected_attrs(grid, tg))


def test_scalar_inputs_follow_mlx_rules(sim):
    src = (
        "uint i = thread_position_in_grid.x;\n"
        "out[i] = x[i] * s + float(n) + (flag ? 100.0f : 0.0f);"
    )
    c = kernel(
        src,
        ["x", "s", "n", "flag"],
        ["out"],
        ["x.shape"],
        ["float32"],
        ["x.size", 1, 1],
        [32, 1, 1],
    )
    x = RNG.normal(size=50).astype(np.float32)
    r = run_ok(sim, c, x=x, s=1.5, n=3, flag=True)
    np.testing.assert_allclose(r.outputs[0], x * 1.5 + 3 + 100, rtol=1e-6)


def test_small_inputs_use_constant_space(sim):
    src = "uint i = thread_position_in_grid.x;\nout[i] = x[i] + w[i % 3];"
    c = kernel(src, ["x", "w"], ["out"], ["x.shape"], ["float32"], ["x.size", 1, 1], [16, 1, 1])
    x, w = np.arange(20, dtype=np.float32), np.array([1, 2, 3], np.float32)
    r = run_ok(sim, c, x=x, w=w)
    np.testing.assert_array_equal(r.outputs[0], x + w[np.arange(20) % 3])


def test_strided_input_with_elem_to_loc(sim):
    # int64_t elements: with a uint the offset of a negative stride wraps, on a GPU as here.
    src = (
        "uint i = thread_position_in_grid.x;\n"
        "int64_t loc = elem_to_loc(int64_t(i), x_shape, x_strides, x_ndim);\n"
        "out[i] = x[loc];"
    )
    c = kernel(
        src,
        ["x"],
        ["out"],
        ["x.shape"],
        ["float32"],
        ["x.size", 1, 1],
        [64, 1, 1],
        ensure_row_contiguous=False,
    )
    base = RNG.normal(size=(12, 9)).astype(np.float32)
    for view in (base.T, base[::-2, 1::3], np.broadcast_to(base[:1], (5, 9))):
        r = run_ok(sim, c, x=view)
        np.testing.assert_array_equal(r.outputs[0], np.ascontiguousarray(view))


def test_strided_mlx_input(sim):
    src = (
        "uint i = thread_position_in_grid.x;\n"
        "out[i] = x[elem_to_loc(i, x_shape, x_strides, x_ndim)];"
    )
    c = kernel(
        src,
        ["x"],
        ["out"],
        ["x.shape"],
        ["float32"],
        ["x.size", 1, 1],
        [64, 1, 1],
        ensure_row_contiguous=False,
    )
    x = mx.arange(30, dtype=mx.float32).reshape(5, 6).T
    r = run_ok(sim, c, x=x)
    np.testing.assert_array_equal(r.outputs[0], np.arange(30, dtype=np.float32).reshape(5, 6).T)


def test_templates_int_bool_dtype(sim):
    src = (
        "uint i = thread_position_in_grid.x;\n"
        "T v = T(x[i]);\n"
        "out[i] = float(v) * N + (B ? 0.5f : 0.0f);"
    )
    c = kernel(
        src,
        ["x"],
        ["out"],
        ["x.shape"],
        ["float32"],
        ["x.size", 1, 1],
        [32, 1, 1],
        template={"T": "float16", "N": 3, "B": "True"},
    )
    x = np.array([1.0001, 2.5, -3.25] * 10, np.float32)
    r = run_ok(sim, c, x=x)
    np.testing.assert_array_equal(r.outputs[0], x.astype(np.float16).astype(np.float32) * 3 + 0.5)


def test_half_io(sim):
    src = "uint i = thread_position_in_grid.x;\nout[i] = x[i] * half(2) + 1.0h;"
    c = kernel(src, ["x"], ["out"], ["x.shape"], ["x.dtype"], ["x.size", 1, 1], [32, 1, 1])
    x = RNG.normal(size=40).astype(np.float16)
    r = run_ok(sim, c, x=x)
    assert r.outputs[0].dtype == np.float16
    np.testing.assert_array_equal(r.outputs[0], x * np.float16(2) + np.float16(1))


def test_bfloat_io(sim):
    src = "uint i = thread_position_in_grid.x;\nout[i] = bfloat16_t(float(x[i]) * 2.0f);"
    c = kernel(src, ["x"], ["out"], ["x.shape"], ["x.dtype"], ["x.size", 1, 1], [32, 1, 1])
    x = mx.array(RNG.normal(size=40).astype(np.float32)).astype(mx.bfloat16)
    r = run_ok(sim, c, x=x)
    expect = np.array(x.astype(mx.float32)) * 2
    np.testing.assert_array_equal(r.outputs[0], expect)


def test_vector_loads_through_casts(sim):
    src = (
        "uint i = thread_position_in_grid.x;\n"
        "const device float4* x4 = (const device float4*)x;\n"
        "device float4* o4 = reinterpret_cast<device float4*>(out);\n"
        "float4 v = x4[i];\n"
        "o4[i] = v.wzyx * 2.0f;"
    )
    c = kernel(src, ["x"], ["out"], ["x.shape"], ["float32"], ["x.size // 4", 1, 1], [8, 1, 1])
    x = RNG.normal(size=64).astype(np.float32)
    r = run_ok(sim, c, x=x)
    np.testing.assert_array_equal(r.outputs[0], (x.reshape(-1, 4)[:, ::-1] * 2).reshape(-1))
    assert not r.unwritten[0].any()


def test_threadgroup_reduction_softmax(sim):
    c = KernelCandidate.from_toml(MSL / "softmax_rows.toml")
    x = RNG.normal(size=(7, 200)).astype(np.float32)
    r = run_ok(sim, c, x=x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(r.outputs[0], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_simd_sum_rows(sim):
    c = KernelCandidate.from_toml(MSL / "simd_sum_rows.toml")
    x = RNG.integers(-4, 5, size=(5, 300)).astype(np.float32)
    r = run_ok(sim, c, x=x)
    np.testing.assert_array_equal(r.outputs[0], x.sum(1))


def test_multidimensional_threadgroup_array(sim):
    src = (
        "uint2 t = thread_position_in_threadgroup.xy;\n"
        "threadgroup float tile[8][9];\n"
        "tile[t.y][t.x] = x[t.y * 8 + t.x];\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "out[t.y * 8 + t.x] = tile[t.x][t.y];"
    )
    c = kernel(src, ["x"], ["out"], ["x.shape"], ["float32"], [8, 8, 1], [8, 8, 1])
    x = np.arange(64, dtype=np.float32)
    r = run_ok(sim, c, x=x)
    np.testing.assert_array_equal(r.outputs[0], x.reshape(8, 8).T.reshape(-1))


# -------------------------------------------------------- SIMD-group and quad-group functions

FLOAT_OPS = [
    "simd_sum(v)",
    "simd_product(v)",
    "simd_min(v)",
    "simd_max(v)",
    "simd_prefix_inclusive_sum(v)",
    "simd_prefix_exclusive_sum(v)",
    "simd_prefix_inclusive_product(v)",
    "simd_prefix_exclusive_product(v)",
    "simd_shuffle(v, (lane * 7 + 3) % 32)",
    "simd_shuffle_up(v, 3)",
    "simd_shuffle_down(v, 5)",
    "simd_shuffle_xor(v, 6)",
    "simd_shuffle_rotate_up(v, 2)",
    "simd_shuffle_rotate_down(v, 9)",
    "simd_broadcast(v, 4)",
    "simd_broadcast_first(v)",
    "simd_shuffle_and_fill_up(v, v + 100.0f, 3)",
    "simd_shuffle_and_fill_down(v, v + 100.0f, 3)",
    "quad_sum(v)",
    "quad_product(v)",
    "quad_min(v)",
    "quad_max(v)",
    "quad_prefix_inclusive_sum(v)",
    "quad_prefix_exclusive_sum(v)",
    "quad_shuffle(v, (lane + 1) % 4)",
    "quad_shuffle_up(v, 1)",
    "quad_shuffle_down(v, 1)",
    "quad_shuffle_xor(v, 2)",
    "quad_broadcast(v, 2)",
    "quad_broadcast_first(v)",
    "quad_shuffle_rotate_up(v, 1)",
    "quad_shuffle_rotate_down(v, 1)",
    "quad_prefix_inclusive_product(v)",
    "quad_prefix_exclusive_product(v)",
    "(lane % 2 == 0) ? simd_sum(v) : -simd_sum(v)",
]
UINT_OPS = [
    "simd_and(w)",
    "simd_or(w)",
    "simd_xor(w)",
    "uint(uint64_t(simd_vote::vote_t(simd_ballot(v > 1.0f))))",
    "uint(simd_all(v > 0.0f))",
    "uint(simd_any(v > 1.5f))",
    "uint(simd_is_first())",
    "uint((uint64_t)(simd_vote::vote_t)simd_active_threads_mask())",
    "quad_and(w)",
    "quad_or(w)",
    "quad_xor(w)",
    "uint(quad_vote::vote_t(quad_ballot(v > 1.0f)))",
    "uint(quad_all(v > 0.7f))",
    "uint(quad_any(v > 1.5f))",
    "uint(quad_is_first())",
    "uint(simd_ballot(true).all())",
]


def _segments(values: np.ndarray, width: int, active: int) -> list[np.ndarray]:
    return [values[i : min(i + width, active)] for i in range(0, active, width)]


def _lane_ref(op: str, v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Expected result per lane for one simdgroup of ``len(v)`` active lanes (numpy, float64)."""
    n = len(v)
    lanes = np.arange(n)
    width = 4 if op.startswith(("quad", "uint(quad")) else 32

    def seg_apply(fn):
        out = np.empty(n)
        for s in range(0, n, width):
            out[s : s + width] = fn(
                v[s : s + width], w[s : s + width], np.arange(min(width, n - s))
            )
        return out

    def src_pick(src_of):
        def fn(sv, _, i):
            src = src_of(i)
            ok = (src >= 0) & (src < len(sv))
            return np.where(ok, sv[np.clip(src, 0, len(sv) - 1)], sv)

        return seg_apply(fn)

    red = {"sum": np.sum, "product": np.prod, "min": np.min, "max": np.max}
    for name, f in red.items():
        if op in (f"simd_{name}(v)", f"quad_{name}(v)"):
            return seg_apply(lambda sv, _w, i, f=f: np.full(len(sv), f(sv)))
    if "prefix" in op:
        cum = np.cumsum if "sum" in op else np.cumprod
        ident = 0.0 if "sum" in op else 1.0
        if "inclusive" in op:
            return seg_apply(lambda sv, _w, i: cum(sv))
        return seg_apply(lambda sv, _w, i: np.concatenate([[ident], cum(sv)[:-1]]))
    table = {
        "simd_shuffle(v, (lane * 7 + 3) % 32)": lambda i: (i * 7 + 3) % 32,
        "simd_shuffle_up(v, 3)": lambda i: i - 3,
        "simd_shuffle_down(v, 5)": lambda i: np.where(i + 5 < 32, i + 5, -1),
        "simd_shuffle_xor(v, 6)": lambda i: i ^ 6,
        "simd_shuffle_rotate_up(v, 2)": lambda i: (i - 2) % 32,
        "simd_shuffle_rotate_down(v, 9)": lambda i: (i + 9) % 32,
        "simd_broadcast(v, 4)": lambda i: i * 0 + 4,
        "simd_broadcast_first(v)": lambda i: i * 0,
        "quad_shuffle(v, (lane + 1) % 4)": lambda i: (i + 1) % 4,
        "quad_shuffle_up(v, 1)": lambda i: i - 1,
        "quad_shuffle_down(v, 1)": lambda i: np.where(i + 1 < 4, i + 1, -1),
        "quad_shuffle_xor(v, 2)": lambda i: i ^ 2,
        "quad_broadcast(v, 2)": lambda i: i * 0 + 2,
        "quad_broadcast_first(v)": lambda i: i * 0,
        "quad_shuffle_rotate_up(v, 1)": lambda i: (i - 1) % 4,
        "quad_shuffle_rotate_down(v, 1)": lambda i: (i + 1) % 4,
    }
    if op in table:
        return src_pick(table[op])
    if "fill_up" in op:
        return seg_apply(
            lambda sv, _w, i: np.where(
                i >= 3,
                sv[np.clip(i - 3, 0, None)],
                (sv + 100)[np.clip(i - 3 + 32, 0, len(sv) - 1)] if len(sv) == 32 else sv,
            )
        )
    if "fill_down" in op:
        return seg_apply(
            lambda sv, _w, i: np.where(
                i + 3 < len(sv),
                sv[np.clip(i + 3, 0, len(sv) - 1)],
                (sv + 100)[np.clip(i + 3 - 32, 0, len(sv) - 1)] if len(sv) == 32 else sv,
            )
        )
    if op.startswith("(lane % 2"):
        even = v[lanes % 2 == 0].sum()
        odd = v[lanes % 2 == 1].sum()
        return np.where(lanes % 2 == 0, even, -odd)
    raise AssertionError(op)


def _uint_ref(op: str, v: np.ndarray, w: np.ndarray) -> np.ndarray:
    n = len(v)
    width = 4 if "quad" in op else 32
    out = np.zeros(n, dtype=np.uint64)
    for s in range(0, n, width):
        sv, sw, k = v[s : s + width], w[s : s + width], len(v[s : s + width])
        bits = lambda m, k=k: sum(1 << j for j in range(k) if m[j])  # noqa: E731
        val = {
            "and": np.bitwise_and.reduce(sw),
            "or": np.bitwise_or.reduce(sw),
            "xor": np.bitwise_xor.reduce(sw),
            "ballot": bits(sv > 1.0),
            "all": int((sv > (0.0 if width == 32 else 0.7)).all()),
            "any": int((sv > 1.5).any()),
            "mask": bits(np.ones(k, bool)),
            "ballot(true).all": int(k == 32),
        }
        if "is_first" in op:
            out[s : s + k] = np.arange(k) == 0
            continue
        key = (
            next(
                x
                for x in ("ballot(true).all", "and", "xor", "or", "ballot", "all", "any")
                if x in op
            )
            if "active_threads_mask" not in op
            else "mask"
        )
        out[s : s + k] = val[key]
    return out


def test_every_simd_and_quad_function(sim):
    nf, nu = len(FLOAT_OPS), len(UINT_OPS)
    lines = [
        "uint gid = thread_position_in_grid.x;",
        "uint lane = thread_index_in_simdgroup;",
        "float v = x[gid];",
        "uint w = gid ^ 0x5Au;",
        "float r; uint q;",
    ]
    for i, op in enumerate(FLOAT_OPS):
        lines.append(f"r = {op}; f[gid * {nf} + {i}] = r;")
    for i, op in enumerate(UINT_OPS):
        lines.append(f"q = {op}; u[gid * {nu} + {i}] = q;")
    tg, grid = 48, 96  # the second SIMD-group of each threadgroup has 16 lanes
    c = kernel(
        "\n".join(lines),
        ["x"],
        ["f", "u"],
        [[grid, nf], [grid, nu]],
        ["float32", "uint32"],
        [grid, 1, 1],
        [tg, 1, 1],
    )
    x = (2.0 ** RNG.integers(-1, 2, size=grid)).astype(np.float32)
    r = run_ok(sim, c, x=x)
    w = (np.arange(grid) ^ 0x5A).astype(np.uint32)
    for g in range(0, grid, tg):
        for s0 in range(g, g + tg, 32):
            s1 = min(s0 + 32, g + tg)
            for i, op in enumerate(FLOAT_OPS):
                got, want = (
                    r.outputs[0][s0:s1, i],
                    _lane_ref(op, x[s0:s1].astype(np.float64), w[s0:s1]),
                )
                np.testing.assert_array_equal(
                    got, want.astype(np.float32), err_msg=f"{op} lanes {s0}..{s1}"
                )
            for i, op in enumerate(UINT_OPS):
                got, want = r.outputs[1][s0:s1, i], _uint_ref(op, x[s0:s1], w[s0:s1])
                np.testing.assert_array_equal(
                    got, want.astype(np.uint32), err_msg=f"{op} lanes {s0}..{s1}"
                )


def test_simdgroup_barrier_and_reconvergence(sim):
    # Lanes leave the loop at different trip counts; simd_sum after the loop sees them all again.
    src = (
        "uint lane = thread_index_in_simdgroup;\nfloat acc = 0;\n"
        "for (uint k = 0; k < lane % 4 + 1; ++k) "
        "{ acc += simd_sum(1.0f); simdgroup_barrier(mem_flags::mem_none); }\n"
        "out[thread_position_in_grid.x] = simd_sum(acc);"
    )
    c = kernel(src, ["x"], ["out"], [[32]], ["float32"], [32, 1, 1], [32, 1, 1])
    r = run_ok(sim, c, x=np.zeros(8, np.float32))
    lanes = np.arange(32)
    trips = lanes % 4 + 1
    active = np.array([(trips > k).sum() for k in range(4)])
    acc = np.array([active[:t].sum() for t in trips])
    np.testing.assert_array_equal(r.outputs[0], np.full(32, acc.sum(), np.float32))


# ---------------------------------------------------------------- atomics


def test_device_atomic_float_add_with_init_value(sim):
    src = (
        "uint i = thread_position_in_grid.x;\n"
        "atomic_fetch_add_explicit(&out[i % 7], x[i], memory_order_relaxed);"
    )
    c = kernel(
        src,
        ["x"],
        ["out"],
        [[7]],
        ["float32"],
        ["x.size", 1, 1],
        [64, 1, 1],
        atomic_outputs=True,
        init_value=10.0,
    )
    x = RNG.integers(-8, 9, size=1000).astype(np.float32)
    r = run_ok(sim, c, x=x)
    np.testing.assert_array_equal(r.outputs[0], np.bincount(np.arange(1000) % 7, weights=x) + 10)


def test_device_atomic_int_ops(sim):
    src = (
        "uint i = thread_position_in_grid.x;\nint v = x[i];\n"
        "atomic_fetch_max_explicit(&out[0], v, memory_order_relaxed);\n"
        "atomic_fetch_min_explicit(&out[1], v, memory_order_relaxed);\n"
        "atomic_fetch_add_explicit(out + 2, 1, memory_order_relaxed);\n"
        "atomic_fetch_or_explicit(&out[3], 1 << (i % 31), memory_order_relaxed);\n"
        "int expected = 0;\n"
        "if (i == 0) while (!atomic_compare_exchange_weak_explicit(&out[4], &expected, 42, "
        "memory_order_relaxed, memory_order_relaxed)) {}\n"
        "if (i == 1) atomic_store_explicit(&out[5], 7, memory_order_relaxed);\n"
        "if (i == 2) atomic_exchange_explicit(&out[6], "
        "atomic_load_explicit(&out[6], memory_order_relaxed) + 5, memory_order_relaxed);"
    )
    c = kernel(
        src,
        ["x"],
        ["out"],
        [[8]],
        ["int32"],
        ["x.size", 1, 1],
        [32, 1, 1],
        atomic_outputs=True,
        init_value=0,
    )
    x = RNG.integers(-1000, 1000, size=300).astype(np.int32)
    r = run_ok(sim, c, x=x)
    got = r.outputs[0]
    assert got[0] == max(0, x.max()) and got[1] == min(0, x.min()) and got[2] == 300
    assert got[3] == (1 << 31) - 1 and got[4] == 42 and got[5] == 7 and got[6] == 5


def test_threadgroup_atomic_counter(sim):
    src = (
        "uint t = thread_index_in_threadgroup;\n"
        "threadgroup atomic_uint count;\n"
        "if (t == 0) atomic_store_explicit(&count, 0u, memory_order_relaxed);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "if (x[thread_position_in_grid.x] > 0) "
        "atomic_fetch_add_explicit(&count, 1u, memory_order_relaxed);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "if (t == 0) out[threadgroup_position_in_grid.x] = "
        "atomic_load_explicit(&count, memory_order_relaxed);"
    )
    c = kernel(
        src, ["x"], ["out"], [["ceildiv(x.size, 64)"]], ["uint32"], ["x.size", 1, 1], [64, 1, 1]
    )
    x = RNG.normal(size=200).astype(np.float32)
    r = run_ok(sim, c, x=x)
    want = [(x[i : i + 64] > 0).sum() for i in range(0, 200, 64)]
    np.testing.assert_array_equal(r.outputs[0], want)


# ---------------------------------------------------------------- simdgroup_matrix


def test_simdgroup_matrix_matmul(sim):
    src = (
        "simdgroup_float8x8 a, b, bt;\n"
        "simdgroup_float8x8 c = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);\n"
        "simdgroup_load(a, A, 8);\nsimdgroup_load(b, B, 8);\n"
        "simdgroup_load(bt, B, 8, ulong2(0, 0), true);\n"
        "simdgroup_multiply_accumulate(c, a, b, c);\nsimdgroup_store(c, C, 8);\n"
        "simdgroup_float8x8 d;\nsimdgroup_multiply(d, a, bt);\nsimdgroup_store(d, D, 8);\n"
        "simdgroup_half8x8 h;\nsimdgroup_load(h, H, 16, ulong2(8, 0));\n"
        "simdgroup_float8x8 e;\nsimdgroup_multiply(e, h, h);\nsimdgroup_store(e, E, 8);"
    )
    c = kernel(
        src,
        ["A", "B", "H"],
        ["C", "D", "E"],
        [[8, 8], [8, 8], [8, 8]],
        ["float32"] * 3,
        [32, 1, 1],
        [32, 1, 1],
    )
    a = RNG.integers(-3, 4, size=(8, 8)).astype(np.float32)
    b = RNG.integers(-3, 4, size=(8, 8)).astype(np.float32)
    h = RNG.integers(-3, 4, size=(8, 16)).astype(np.float16)
    r = run_ok(sim, c, A=a, B=b, H=h)
    np.testing.assert_array_equal(r.outputs[0], a @ b + 1)
    np.testing.assert_array_equal(r.outputs[1], a @ b.T)
    hh = h[:, 8:].astype(np.float32)
    np.testing.assert_array_equal(r.outputs[2], hh @ hh)


# ---------------------------------------------------------------- regressions


@pytest.mark.parametrize("sizes", [(256,) * 5, (12, 12, 28, 28, 56, 56)])
def test_many_threadgroup_arrays_keep_their_addresses(sizes):
    # Lane 0 declares the arrays one by one; each declaration used to grow a std::vector of slots
    # and move the Buffer records earlier arrays point at: stale records gave spurious, random
    # out-of-bounds faults with garbage buffer names (or crashed printing them). The second size
    # set makes the heap hand the freed records straight to the next arrays: it failed every time.
    names = "abcdefgh"[: len(sizes)]
    src = "uint t = thread_position_in_threadgroup.x;\nuint g = thread_position_in_grid.x;\n"
    src += "".join(f"threadgroup float {n}[{k}];\n" for n, k in zip(names, sizes, strict=True))
    src += "".join(
        f"if (t < {k}) {n}[t] = {i + 1} * x[g];\n"
        for i, (n, k) in enumerate(zip(names, sizes, strict=True))
    )
    src += "threadgroup_barrier(mem_flags::mem_threadgroup);\nout[g] = "
    src += (
        " + ".join(
            f"{n}[(t + {i + 1}) % {k}]" for i, (n, k) in enumerate(zip(names, sizes, strict=True))
        )
        + ";"
    )
    c = kernel(src, ["x"], ["out"], ["x.shape"], ["float32"], ["x.size", 1, 1], [256, 1, 1])
    x = np.arange(256 * 4, dtype=np.float32)
    xs = x.reshape(4, 256)
    t = np.arange(256)
    want = sum((i + 1) * xs[:, (t + i + 1) % k] for i, k in enumerate(sizes)).reshape(-1)
    for _ in range(6):
        sim = SimBackend(threads=1)  # a fresh worker: its first threadgroup declares from scratch
        try:
            r = run_ok(sim, c, x=x)
        finally:
            sim.close()
        np.testing.assert_array_equal(r.outputs[0], want)


SOFTMAX_HEADER = """
inline void merge(thread float& m, thread float& s, float om, float os) {
  float nm = max(m, om);
  s = s * exp(m - nm) + os * exp(om - nm);
  m = nm;
}
template <int BLOCK>
inline void block_reduce(thread float& m, thread float& s, uint t, threadgroup float* warp_m,
                         threadgroup float* warp_s) {
  const int lane = t % 32, warp = t / 32;
  for (int off = 16; off > 0; off >>= 1)
    merge(m, s, simd_shuffle_xor(m, off), simd_shuffle_xor(s, off));
  if (lane == 0) { warp_m[warp] = m; warp_s[warp] = s; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (warp == 0) {
    m = lane < BLOCK / 32 ? warp_m[lane] : -FLT_MAX;
    s = lane < BLOCK / 32 ? warp_s[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1)
      merge(m, s, simd_shuffle_xor(m, off), simd_shuffle_xor(s, off));
    if (lane == 0) { warp_m[0] = m; warp_s[0] = s; }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  m = warp_m[0];
  s = warp_s[0];
}
"""
SOFTMAX_SOURCE = """
uint t = thread_position_in_threadgroup.x;
int rows = x_shape[0], cols = x_shape[1];
threadgroup float warp_m[BLOCK / 32];
threadgroup float warp_s[BLOCK / 32];
int row = threadgroup_position_in_grid.x;
if (row >= rows) return;
const device float* xr = x + row * cols;
float m = -FLT_MAX, s = 0.0f;
for (int c = t; c < cols; c += BLOCK) {
  float v = xr[c];
  if (v > m) { s = s * exp(m - v) + 1.0f; m = v; } else { s += exp(v - m); }
}
block_reduce<BLOCK>(m, s, t, warp_m, warp_s);
for (int c = t; c < cols; c += BLOCK) out[row * cols + c] = exp(xr[c] - m) / s;
"""


@pytest.mark.parametrize("block", [64, 512, 1024])
def test_online_softmax_with_warp_arrays_in_header_function(block):
    # The translated softmax that crashed the worker (SIGSEGV) with 512-thread threadgroups:
    # its two 16-float warp arrays hit the moved-slot bug above (lane 0's warp_m record was
    # freed memory; the fault report then dereferenced its garbage name).
    c = kernel(
        SOFTMAX_SOURCE,
        ["x"],
        ["out"],
        ["x.shape"],
        ["float32"],
        [f"x.shape[0] * {block}", 1, 1],
        [block, 1, 1],
        header=SOFTMAX_HEADER,
        template={"BLOCK": block},
    )
    x = RNG.normal(size=(7, 4097)).astype(np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    for threads in (1, None):
        sim = SimBackend(threads=threads)
        try:
            r = run_ok(sim, c, x=x)
        finally:
            sim.close()
        np.testing.assert_allclose(r.outputs[0], e / e.sum(1, keepdims=True), rtol=2e-5, atol=1e-8)


MSL_CONSTANTS = {
    "FLT_MAX": np.finfo(np.float32).max,
    "-FLT_MAX": -np.finfo(np.float32).max,
    "FLT_MIN": np.finfo(np.float32).tiny,
    "FLT_EPSILON": np.finfo(np.float32).eps,
    "MAXFLOAT": np.finfo(np.float32).max,
    "FLT_DIG": 6,
    "FLT_MANT_DIG": 24,
    "FLT_MAX_EXP": 128,
    "FLT_MIN_EXP": -125,
    "FLT_MAX_10_EXP": 38,
    "FLT_MIN_10_EXP": -37,
    "FLT_RADIX": 2,
    "HALF_MAX": 65504.0,
    "MAXHALF": 65504.0,
    "HALF_MIN": 2.0**-14,
    "HALF_EPSILON": 2.0**-10,
    "HALF_DIG": 3,
    "HALF_MANT_DIG": 11,
    "HALF_MAX_EXP": 16,
    "HALF_MIN_EXP": -13,
    "HALF_MAX_10_EXP": 4,
    "HALF_MIN_10_EXP": -4,
    "HALF_RADIX": 2,
    "INFINITY": np.inf,
    "-INFINITY": -np.inf,
    "HUGE_VALF": np.inf,
    "HUGE_VALH": np.inf,
    "M_PI_F": np.pi,
    "M_PI_2_F": np.pi / 2,
    "M_PI_4_F": np.pi / 4,
    "M_1_PI_F": 1 / np.pi,
    "M_2_PI_F": 2 / np.pi,
    "M_E_F": np.e,
    "M_SQRT2_F": np.sqrt(2),
    "M_SQRT1_2_F": np.sqrt(0.5),
    "M_LN2_F": np.log(2),
    "M_LN10_F": np.log(10),
    "M_LOG2E_F": np.log2(np.e),
    "M_LOG10E_F": np.log10(np.e),
    "M_2_SQRTPI_F": 2 / np.sqrt(np.pi),
    "M_PI_H": np.pi,
    "M_E_H": np.e,
    "M_SQRT2_H": np.sqrt(2),
    "M_LN2_H": np.log(2),
    "M_LOG2E_H": np.log2(np.e),
    "M_SQRT1_2_H": np.sqrt(0.5),
    "CHAR_BIT": 8,
    "INT_MAX": 2**31 - 1,
    "SCHAR_MIN": -128,
    "CHAR_MAX": 127,
}


def test_metal_stdlib_constants(sim):
    names = list(MSL_CONSTANTS)
    src = "\n".join(f"out[{i}] = float({n});" for i, n in enumerate(names))
    src += f"\nout[{len(names)}] = float(isnan(NAN));"
    src += (
        f"\nout[{len(names) + 1}] = float(sizeof(HALF_MAX) == 2 && sizeof(M_PI_H) == 2"
        " && sizeof(FLT_MAX) == 4);"
    )
    c = kernel(src, ["x"], ["out"], [[len(names) + 2]], ["float32"], [1, 1, 1], [1, 1, 1])
    r = run_ok(sim, c, x=np.zeros(1, np.float32))
    half_names = {n for n in names if n.endswith("_H")}
    want = [
        np.float32(np.float16(v)) if n in half_names else np.float32(v)
        for n, v in MSL_CONSTANTS.items()
    ]
    np.testing.assert_array_equal(r.outputs[0][:-2], np.array(want, np.float32))
    assert list(r.outputs[0][-2:]) == [1.0, 1.0]


def test_half_rounds_after_every_operation_and_char_is_signed(sim):
    # 1 + 2^-11 is a tie that rounds to even (1.0) in half; with float excess precision (clang
    # without -ffloat16-excess-precision=none) a+b+c would be 1 + 2^-10 rounded once.
    src = (
        "half a = 1, b = 0.0004883, c = 0.0004883;\n"
        "out[0] = a + b + c;\n"
        "half p = half(x[0]), q = half(x[1]), r = half(x[1]);\n"
        "out[1] = p + q + r;\n"
        "half u = p + q;\n"
        "out[2] = u + r;\n"
        "char ch = char(int(x[2]));\n"
        "out[3] = ch < 0 ? half(1) : half(0);"
    )
    c = kernel(src, ["x"], ["out"], [[4]], ["float16"], [1, 1, 1], [1, 1, 1])
    r = run_ok(sim, c, x=np.array([1.0, 0.0004883, 200.0], np.float32))
    assert list(r.outputs[0]) == [1.0, 1.0, 1.0, 1.0]
    if sim.name != "sim":
        return
    from mlxport.backends.sim.compiler import find_compiler

    cc = find_compiler()
    if cc.is_clang:
        assert "-ffloat16-excess-precision=none" in sim.device_info()["flags"]
    elif (cc.gcc_major or 0) >= 13:
        assert "-fexcess-precision=16" in sim.device_info()["flags"]
    assert "-fsigned-char" in sim.device_info()["flags"]


def test_calibration_copy_kernel_copies_every_element(sim):
    from mlxport.backends.calibration import copy_candidate

    x = RNG.standard_normal(4 * 1000 + 4).astype(np.float32)  # not a multiple of the threadgroup
    r = run_ok(sim, copy_candidate("msl"), x=x)
    np.testing.assert_array_equal(r.outputs[0], x)
    assert not r.unwritten[0].any()
