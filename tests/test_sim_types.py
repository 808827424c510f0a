"""The simulator's MSL value headers (msl_types.h, msl_math.h, mlx_utils.h) against numpy.

One C++ program is generated, compiled with ziglang's clang and run; every check prints
bit patterns that are compared here. A second tiny compile checks that MSL-invalid code
(writing a swizzle with repeated components) is rejected.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mlxport.backends.sim.compiler import find_compiler

INCLUDE = Path(__file__).parents[1] / "mlxport" / "backends" / "sim" / "include"


def flags(march: str | None = None) -> list[str]:
    """The simulator's own compile flags (warnings on), optionally with a pinned target CPU."""
    base = [f for f in find_compiler().flags() if f != "-w"]
    return [*base, "-Wall", "-Wextra", "-Werror", *([march] if march else [])]


def pinned_march() -> str:
    """A target CPU other than the compiler's default, so the simulator must round alike on both:
    zig's clang targets the native CPU (which may fuse or hold half natively), so the other is a
    baseline without FMA or half instructions; GCC targets that baseline, so the other is native."""
    if platform.machine().lower() in ("arm64", "aarch64"):
        return "-mcpu=generic"
    cc = find_compiler()
    if cc.gcc_major is not None:
        return "-march=native"
    zig = any("zig" in part for part in cc.command)
    # zig spells LLVM's CPU names with underscores
    return "-march=x86_64" if zig else "-march=x86-64"


RNG = np.random.default_rng(1234)
F32 = np.concatenate(
    [
        np.array([0.0, -0.0, 1.0, -1.5, 65504.0, 65520.0, 1e-5, 6.1e-5, 3.0e-8, 1e30, -1e30]),
        RNG.normal(0, 50, 40),
        RNG.uniform(-2, 2, 40),
    ]
).astype(np.float32)

UNARY = {
    "exp": (np.exp, (-10, 10)),
    "exp2": (np.exp2, (-10, 10)),
    "exp10": (lambda x: np.power(10.0, x), (-5, 5)),
    "log": (np.log, (1e-3, 1e4)),
    "log2": (np.log2, (1e-3, 1e4)),
    "log10": (np.log10, (1e-3, 1e4)),
    "sqrt": (np.sqrt, (0, 1e4)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (1e-3, 1e4)),
    "sin": (np.sin, (-10, 10)),
    "cos": (np.cos, (-10, 10)),
    "tan": (np.tan, (-1.5, 1.5)),
    "asin": (np.arcsin, (-1, 1)),
    "acos": (np.arccos, (-1, 1)),
    "atan": (np.arctan, (-20, 20)),
    "sinh": (np.sinh, (-5, 5)),
    "cosh": (np.cosh, (-5, 5)),
    "tanh": (np.tanh, (-5, 5)),
    "asinh": (np.arcsinh, (-20, 20)),
    "acosh": (np.arccosh, (1, 20)),
    "atanh": (np.arctanh, (-0.99, 0.99)),
    "floor": (np.floor, (-10, 10)),
    "ceil": (np.ceil, (-10, 10)),
    "trunc": (np.trunc, (-10, 10)),
    "rint": (np.rint, (-10, 10)),
    "fabs": (np.abs, (-10, 10)),
    "fract": (lambda x: x - np.floor(x), (-10, 10)),
}
BINARY = {
    "pow": (np.power, (0.1, 5), (-3, 3)),
    "atan2": (np.arctan2, (-5, 5), (-5, 5)),
    "fmod": (np.fmod, (-20, 20), (0.5, 4)),
    "fmin": (np.fmin, (-5, 5), (-5, 5)),
    "fmax": (np.fmax, (-5, 5), (-5, 5)),
    "copysign": (np.copysign, (-5, 5), (-5, 5)),
}
N_MATH = 24


def hexf(x: float) -> str:
    return float(np.float32(x)).hex() + "f"


def bf16_rne_bits(x: np.ndarray) -> np.ndarray:
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def ulps32(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    got = got.astype(np.float32)
    want32 = want.astype(np.float32)
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want32)).astype(np.float64)


def math_inputs(lo: float, hi: float, salt: int) -> np.ndarray:
    rng = np.random.default_rng(salt)
    return rng.uniform(lo, hi, N_MATH).astype(np.float32)


PROGRAM = r"""
#include "mlx_utils.h"
#include <cstdio>

static void P(const char* k, unsigned long v) { std::printf("%s %lu\n", k, v); }
static unsigned long F(float x) { return as_type<uint>(x); }
static unsigned long H(half x) { return as_type<ushort>(x); }
static unsigned long B(bfloat x) { return as_type<ushort>(x); }

int main() {
  if (!msl_sim_half_rounds_per_op()) { std::printf("half-excess-precision\n"); return 3; }
  static const float f32[] = {@F32@};
  const int n = int(sizeof(f32) / sizeof(f32[0]));
  for (int i = 0; i < n; ++i) {
    const float a = f32[i], b = f32[(i * 7 + 3) % n], c = f32[(i * 5 + 1) % n];
    const half ha = half(a), hb = half(b), hc = half(c);
    P("h_cvt", H(ha));
    P("h_add", H(ha + hb));
    P("h_mul", H(ha * hb));
    P("h_div", H(hb != 0 ? ha / hb : ha));
    P("h_chain", H(ha * hb + hc - ha));
    P("h_int", H(ha + 3));
    P("h_float", F(ha + 0.1f));
    const bfloat ba = bfloat(a), bb = bfloat(b);
    P("b_cvt", B(ba));
    P("b_add", B(ba + bb));
    P("b_mul", B(ba * bb));
    P("b_to_f", F(float(ba)));
  }
  P("b_nan", B(bfloat(as_type<float>(0x7fa00000u))));

  // Sizes and alignment as in MSL.
  P("sz_float3", sizeof(float3)); P("sz_packed_float3", sizeof(packed_float3));
  P("sz_half3", sizeof(half3)); P("sz_packed_half4", sizeof(packed_half4));
  P("sz_bool3", sizeof(bool3)); P("sz_char3", sizeof(char3)); P("sz_long3", sizeof(long3));
  P("al_float4", alignof(float4)); P("al_float2", alignof(float2));
  P("al_packed_float4", alignof(packed_float4));

  // Swizzles.
  float4 v(1, 2, 3, 4);
  float4 w = v.wzyx; P("sw_w0", (ulong)w.x); P("sw_w3", (ulong)w.w);
  float3 t = v.xxy; P("sw_xxy", (ulong)(t.x * 100 + t.y * 10 + t.z));
  float4 rg(v.rg, v.ba); P("sw_rgba", (ulong)(rg.x * 1000 + rg.y * 100 + rg.z * 10 + rg.w));
  v.xy = float2(9, 8); v.zw = v.yx; v.wz += 1.0f;
  P("sw_write", (ulong)(v.x * 1000 + v.y * 100 + v.z * 10 + v.w));
  float4 u(1, 2, 3, 4); u.xy = u.yx;
  P("sw_self", (ulong)(u.x * 1000 + u.y * 100 + u.z * 10 + u.w));
  float4 x4(float2(1, 2), float2(3, 4)); float4 y4(x4.xy, 5, 6); float4 s4(7);
  P("ctor", (ulong)(x4.w * 100 + y4.w * 10 + s4.z));
  int4 iv(7, -8, 9, 10); iv <<= 1; iv = iv % 5; iv |= int4(16); iv[3] = -iv[3];
  P("ivec", (ulong)((iv.x + 100) * 1000000 + (iv.y + 100) * 1000 + (iv.w + 100)));
  bool4 m = float4(1, 5, 3, 0) < float4(2, 2, 3, 1);
  P("cmp", (ulong)(m.x * 1000 + m.y * 100 + m.z * 10 + m.w));
  P("not", (ulong)all((!m) == bool4(false, true, true, false)));
  half4 h4 = half4(float4(1.0f, 2.5f, 65520.0f, 1e-8f)); float4 back = float4(h4);
  P("h4_2", F(back.z)); P("h4_3", F(back.w));
  packed_float3 pk(1, 2, 3); float3 f3 = pk; pk = f3 * 2.0f; pk += 1.0f;
  P("packed", (ulong)(pk.x * 100 + pk.y * 10 + pk[2]));
  P("post", (ulong)(v++).x); P("pre", (ulong)(++v).x);

  // as_type.
  P("as_h2u", as_type<uint>(half2(1.0h, -2.0h)));
  P("as_f2u", as_type<uint>(1.0f));
  P("as_u2f", F(as_type<float>(0x40490fdbu)));
  P("as_u2h2", H(as_type<half2>(0x3c00c000u).y));
  P("as_sw", as_type<ulong>(float4(1, 2, 3, 4).zw));
  P("as_bf", as_type<ushort>(bfloat(1.0f)));

  // select / clamp / mix / step / smoothstep.
  float4 sel = select(float4(1, 2, 3, 4), float4(-1, -2, -3, -4), bool4(true, false, true, false));
  P("select", (ulong)(sel.x + 10) * 1000 + (ulong)(sel.y + 10) * 100 + (ulong)(sel.z + 10) * 10 +
              (ulong)(sel.w + 10));
  P("select_s", (ulong)select(1, 2, true));
  P("clamp", F(clamp(2.5f, 0.0f, 1.0f)));
  P("clamp_v", F(clamp(float4(-1, 0.5f, 2, 3), 0.0f, 1.0f).y));
  P("clamp_i", (ulong)clamp(-5, 0, 3) + 10 * (ulong)clamp(7u, 1u, 4u));
  P("mix", F(mix(1.0f, 3.0f, 0.25f)));
  P("mix_v", F(mix(float2(0, 1), float2(2, 3), float2(0.5f, 0.5f)).y));
  P("step", F(step(1.0f, 0.5f)) * 2 + F(step(1.0f, 2.0f)));
  P("smooth", F(smoothstep(0.0f, 1.0f, 0.25f)));
  P("sat", F(saturate(1.5f)) + F(saturate(-1.0f)));
  P("sign", F(sign(-3.0f)));
  P("fma", F(fma(1.0f + 0x1p-23f, 1.0f - 0x1p-23f, -1.0f)));
  P("dot", F(dot(float3(1, 2, 3), float3(4, 5, 6))));
  P("len", F(length(float4(1, 2, 3, 4).xy)));
  P("cross", F(cross(float3(1, 0, 0), float3(0, 1, 0)).z));
  P("norm", F(normalize(float2(3, 4)).y));
  P("dist", F(distance(float2(0, 0), float2(3, 4))));
  P("isnan", (ulong)isnan(0.0f / 0.0f) * 10 + (ulong)isinf(1.0f / 0.0f));
  P("popcount", popcount(0xF0F0u)); P("clz", clz(1u)); P("clz_u8", clz(uchar(1))); P("ctz", ctz(8));
  P("reverse", reverse_bits(1u)); P("rotate", rotate(0x80000001u, 4u));
  P("mulhi", mulhi(0x80000000u, 6u));
  P("extract", (ulong)extract_bits(0xABCD1234u, 8u, 8u));
  P("insert", insert_bits(0u, 0xFFu, 4u, 4u));
  P("extract_s", (ulong)(extract_bits(int(0xF0), 4u, 4u) + 100));
  P("vec_any", (ulong)any(int4(1, 2, 3, 4) > 3) * 10 + (ulong)all(int4(1, 2, 3, 4) > 3));
  P("min_h", H(min(half(2), half(3)))); P("max_bf", B(max(bfloat(2.0f), bfloat(3.0f))));
  P("abs_i", (ulong)abs(-7)); P("exp_h", H(exp(half(1.0f)))); P("exp_bf", B(exp(bfloat(1.0f))));
  P("exp_v", F(exp(float4(0, 1, 2, 3)).w)); P("exp_sw", F(exp(float4(0, 1, 2, 3).wz).x));
  P("pow_i", F(pow(2.0f, 10)));
  P("fast", F(fast::exp(1.0f)) - F(precise::exp(1.0f)) + F(metal::exp(1.0f)));
  float ip; P("modf", F(modf(-3.25f, ip))); P("modf_i", F(ip));
  int e; P("frexp", F(frexp(12.0f, e))); P("frexp_e", (ulong)e); P("ldexp", F(ldexp(0.75f, 4)));
  float cv; P("sincos", F(sincos(0.5f, cv))); P("sincos_c", F(cv));
  P("nextafter", F(nextafter(1.0f, 2.0f))); P("nextafter_h", H(nextafter(half(1), half(2))));

  // mlx utils.
  int shape[3] = {2, 3, 4}; int64_t strides[3] = {1, 2, 6};
  P("e2l", (ulong)elem_to_loc(uint(23), shape, strides, 3));
  P("e2l_64", (ulong)elem_to_loc(int64_t(13), shape, strides, 3));
  P("e2l_3", (ulong)elem_to_loc_3(uint3(1, 2, 1), strides));
  P("e2l_u3", (ulong)elem_to_loc(uint3(3, 2, 1), shape, strides, 3));
  P("ceildiv", (ulong)ceildiv(10, 4));
  P("lim_f", F(Limits<float>::max)); P("lim_h", H(Limits<half>::finite_max));
  P("lim_bf", B(Limits<bfloat16_t>::finite_min));
  P("lim_i", (ulong)(Limits<int>::max)); P("lim_u8", (ulong)Limits<uint8_t>::max);
  complex64_t z(1, 2); z = z * z + 1.0f; P("complex", (ulong)((z.real + 100) * 1000 + z.imag));
  P("log1p", F(log1p(1e-7f)));
@MATH@
  return 0;
}
"""

FAILING = r"""
#include "mlx_utils.h"
void k(float4 v) { v.xx = float2(1, 2); }
"""


def compile_cpp(
    source: str, out_dir: Path, name: str, march: str | None = None
) -> subprocess.CompletedProcess[str]:
    src = out_dir / f"{name}.cpp"
    src.write_text(source)
    cmd = [
        *find_compiler().command,
        *flags(march),
        f"-I{INCLUDE}",
        str(src),
        "-o",
        str(out_dir / name),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def math_lines() -> tuple[list[str], dict[str, tuple[np.ndarray, ...]]]:
    lines, inputs = [], {}
    for salt, (name, (_, (lo, hi))) in enumerate(UNARY.items()):
        xs = math_inputs(lo, hi, salt)
        inputs[name] = (xs,)
        for x in xs:
            lines.append(f'  P("m_{name}", F({name}({hexf(x)})));')
            lines.append(f'  P("mh_{name}", H({name}(half({hexf(x)}))));')
    for salt, (name, (_, (lo, hi), (lo2, hi2))) in enumerate(BINARY.items(), start=100):
        xs, ys = math_inputs(lo, hi, salt), math_inputs(lo2, hi2, salt + 1)
        inputs[name] = (xs, ys)
        for x, y in zip(xs, ys, strict=True):
            lines.append(f'  P("m_{name}", F({name}({hexf(x)}, {hexf(y)})));')
    return lines, inputs


@pytest.fixture(scope="module", params=["default", "pinned"])
def results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[int]]:
    """Every check runs twice: for the compiler's default CPU (the native one, with zig) and for a
    pinned baseline CPU. Rounding must not depend on which instructions the machine has."""
    out = tmp_path_factory.mktemp("sim_types")
    lines, inputs = math_lines()
    source = PROGRAM.replace("@F32@", ", ".join(hexf(x) for x in F32)).replace(
        "@MATH@", "\n".join(lines)
    )
    done = compile_cpp(source, out, "types", pinned_march() if request.param == "pinned" else None)
    assert done.returncode == 0, done.stderr[-4000:]
    assert not done.stderr.strip(), done.stderr[-4000:]  # no warnings either
    run = subprocess.run([str(out / "types")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    values: dict[str, list[int]] = {}
    for line in run.stdout.splitlines():
        key, value = line.split()
        values.setdefault(key, []).append(int(value))
    values["__inputs__"] = inputs  # type: ignore[assignment]
    return values


def f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def f16(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint16).view(np.float16)


def one(results: dict[str, list[int]], key: str) -> int:
    (value,) = results[key]
    return value


def test_half_rounds_like_numpy_float16(results: dict[str, list[int]]) -> None:
    n = len(F32)
    a = F32
    b = F32[(np.arange(n) * 7 + 3) % n]
    c = F32[(np.arange(n) * 5 + 1) % n]
    with np.errstate(all="ignore"):
        ha, hb, hc = a.astype(np.float16), b.astype(np.float16), c.astype(np.float16)
        want = {
            "h_cvt": ha,
            "h_add": ha + hb,
            "h_mul": ha * hb,
            "h_div": np.where(hb != 0, ha / np.where(hb != 0, hb, 1), ha).astype(np.float16),
            "h_chain": ((ha * hb) + hc) - ha,
            "h_int": ha + np.float16(3),
        }
        for key, expected in want.items():
            np.testing.assert_array_equal(f16(results[key]), expected, err_msg=key)
        np.testing.assert_array_equal(
            f32(results["h_float"]), ha.astype(np.float32) + np.float32(0.1)
        )


def test_bfloat_rounds_to_nearest_even(results: dict[str, list[int]]) -> None:
    n = len(F32)
    a = F32
    b = F32[(np.arange(n) * 7 + 3) % n]
    ba, bb = bf16_rne_bits(a), bf16_rne_bits(b)
    fa, fb = bf16_to_f32(ba), bf16_to_f32(bb)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.array(results["b_cvt"], dtype=np.uint16), ba)
        np.testing.assert_array_equal(
            np.array(results["b_add"], dtype=np.uint16), bf16_rne_bits(fa + fb)
        )
        np.testing.assert_array_equal(
            np.array(results["b_mul"], dtype=np.uint16), bf16_rne_bits(fa * fb)
        )
    np.testing.assert_array_equal(f32(results["b_to_f"]), fa)
    assert one(results, "b_nan") == 0x7FE0  # NaN stays NaN (quiet), no rounding into infinity


def test_sizes_and_alignment(results: dict[str, list[int]]) -> None:
    expected = {
        "sz_float3": 16, "sz_packed_float3": 12, "sz_half3": 8, "sz_packed_half4": 8,
        "sz_bool3": 4, "sz_char3": 4, "sz_long3": 32,
        "al_float4": 16, "al_float2": 8, "al_packed_float4": 4,
    }  # fmt: skip
    assert {k: one(results, k) for k in expected} == expected


def test_vectors_and_swizzles(results: dict[str, list[int]]) -> None:
    assert one(results, "sw_w0") == 4 and one(results, "sw_w3") == 1
    assert one(results, "sw_xxy") == 112
    assert one(results, "sw_rgba") == 1234
    # v = (9, 8, 8, 9) after v.zw = v.yx, then v.wz += 1 -> (9, 8, 9, 10)
    assert one(results, "sw_write") == 9000 + 800 + 90 + 10
    assert one(results, "sw_self") == 2134  # u.xy = u.yx swaps
    assert one(results, "ctor") == 4 * 100 + 6 * 10 + 7
    # (7, -8, 9, 10) << 1 = (14, -16, 18, 20); % 5 truncates: (4, -1, 3, 0); | 16; negate w.
    assert one(results, "ivec") == (20 + 100) * 1000000 + (-1 + 100) * 1000 + (-16 + 100)
    assert one(results, "cmp") == 1001
    assert one(results, "not") == 1
    assert f32(results["h4_2"])[0] == np.inf  # 65520 rounds to infinity in half
    assert f32(results["h4_3"])[0] == np.float32(np.float16(1e-8))
    assert one(results, "packed") == 300 + 50 + 7
    assert one(results, "post") == 9 and one(results, "pre") == 11


def test_as_type_bit_patterns(results: dict[str, list[int]]) -> None:
    assert one(results, "as_h2u") == 0xC0003C00
    assert one(results, "as_f2u") == 0x3F800000
    assert f32(results["as_u2f"])[0] == np.float32(np.pi)
    assert f16(results["as_u2h2"])[0] == 1.0  # .y is the high 16 bits (little-endian lanes)
    assert one(results, "as_sw") == int(np.array([3.0, 4.0], dtype=np.float32).view(np.uint64)[0])
    assert one(results, "as_bf") == 0x3F80


def test_select_clamp_mix_and_friends(results: dict[str, list[int]]) -> None:
    def val(key: str) -> float:
        return float(f32(results[key])[0])

    assert one(results, "select") == 9 * 1000 + 12 * 100 + 7 * 10 + 14
    assert one(results, "select_s") == 2
    assert val("clamp") == 1.0 and val("clamp_v") == 0.5
    assert one(results, "clamp_i") == 0 + 10 * 4
    assert val("mix") == 1.5 and val("mix_v") == 2.0
    assert one(results, "step") == 2 * 0 + int(np.float32(1).view(np.uint32))
    assert val("smooth") == np.float32(0.15625)
    assert one(results, "sat") == int(np.float32(1).view(np.uint32))
    assert val("sign") == -1.0
    assert val("fma") == -(2.0**-46)  # fused: the product is not rounded first
    assert val("dot") == 32 and val("len") == np.float32(np.sqrt(5)) and val("cross") == 1
    assert val("norm") == np.float32(0.8) and val("dist") == 5
    assert one(results, "isnan") == 11
    assert [one(results, k) for k in ("popcount", "clz", "clz_u8", "ctz")] == [8, 31, 7, 3]
    assert one(results, "reverse") == 0x80000000 and one(results, "rotate") == 0x18
    assert one(results, "mulhi") == 3
    assert one(results, "extract") == 0x12 and one(results, "insert") == 0xF0
    assert one(results, "extract_s") == 100 - 1  # signed extract sign-extends 0b1111
    assert one(results, "vec_any") == 10
    assert (
        f16(results["min_h"])[0] == 2
        and bf16_to_f32(np.array(results["max_bf"], np.uint16))[0] == 3
    )
    assert one(results, "abs_i") == 7
    assert f16(results["exp_h"])[0] == np.float16(np.e)
    assert one(results, "exp_bf") == bf16_rne_bits(np.array([np.e], np.float32))[0]
    assert ulps32(f32(results["exp_v"]), np.exp(np.float64([3.0])))[0] <= 1
    assert val("exp_sw") == val("exp_v")
    assert val("pow_i") == 1024
    assert one(results, "fast") == int(np.float32(np.e).view(np.uint32))
    assert val("modf") == -0.25 and val("modf_i") == -3.0
    assert val("frexp") == 0.75 and one(results, "frexp_e") == 4 and val("ldexp") == 12
    assert abs(val("sincos") - np.sin(0.5)) < 1e-7 and abs(val("sincos_c") - np.cos(0.5)) < 1e-7
    assert val("nextafter") == np.nextafter(np.float32(1), np.float32(2))
    assert f16(results["nextafter_h"])[0] == np.nextafter(np.float16(1), np.float16(2))


def test_mlx_utils(results: dict[str, list[int]]) -> None:
    shape, strides = np.array([2, 3, 4]), np.array([1, 2, 6])

    def loc(elem: int) -> int:
        idx = np.unravel_index(elem, shape)
        return int(np.dot(idx, strides))

    assert one(results, "e2l") == loc(23) and one(results, "e2l_64") == loc(13)
    assert one(results, "e2l_3") == 1 * 6 + 2 * 2 + 1 * 1
    assert one(results, "e2l_u3") == 3 * 6 + 2 * 2 + 1 * 1  # x is the last (fastest) dim
    assert one(results, "ceildiv") == 3
    assert f32(results["lim_f"])[0] == np.inf
    assert f16(results["lim_h"])[0] == np.float16(65504)
    assert (
        bf16_to_f32(np.array(results["lim_bf"], np.uint16))[0]
        == -bf16_to_f32(np.array([0x7F7F], np.uint16))[0]
    )
    assert one(results, "lim_i") == 2**31 - 1 and one(results, "lim_u8") == 255
    assert one(results, "complex") == (-3 + 1 + 100) * 1000 + 4
    assert ulps32(f32(results["log1p"]), np.log1p(np.float64([np.float32(1e-7)])))[0] <= 2


def test_math_matches_numpy(results: dict[str, list[int]]) -> None:
    inputs = results["__inputs__"]
    for name, (fn, _) in UNARY.items():
        (xs,) = inputs[name]
        want = fn(xs.astype(np.float64))
        got = f32(results[f"m_{name}"])
        assert np.all(ulps32(got, want) <= 2), (name, xs, got, want)
        # half: computed in float and rounded once, so within 1 half-ulp step of numpy's.
        hx = xs.astype(np.float16)
        with np.errstate(all="ignore"):
            hwant = fn(hx.astype(np.float64)).astype(np.float16)
        hgot = f16(results[f"mh_{name}"])
        finite = np.isfinite(hwant)
        step = np.spacing(np.abs(hwant[finite])).astype(np.float64)
        herr = np.abs(hgot[finite].astype(np.float64) - hwant[finite].astype(np.float64))
        assert np.all(herr <= step), (name, hx, hgot, hwant)
        assert np.array_equal(np.isinf(hgot), np.isinf(hwant)), name
    for name, (fn, _, _) in BINARY.items():
        xs, ys = inputs[name]
        want = fn(xs.astype(np.float64), ys.astype(np.float64))
        got = f32(results[f"m_{name}"])
        assert np.all(ulps32(got, want) <= 2), (name, xs, ys, got, want)


def test_repeated_swizzle_is_not_assignable(tmp_path: Path) -> None:
    done = compile_cpp(FAILING, tmp_path, "bad")
    assert done.returncode != 0
    assert "xx" in done.stderr
