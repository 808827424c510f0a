"""The CPU executor's CUDA value headers (cuda_types.h, cuda_fp16.h, cuda_bf16.h, cuda_math.h,
math_constants.h) against numpy and exact rational arithmetic.

One C++ program is generated, compiled with the simulator's flags (warnings on) and run, for the
compiler's default CPU and for a pinned baseline one; every check prints bit patterns that are
compared here. A second compile checks what must not compile: operators CUDA does not have
(float4 + float4; __half * float is ambiguous with nvcc too), with cuda_fp16.h included alone
first and the C/C++ library headers after the executor's.

The 16-bit formats, the conversions and the intrinsics with a rounding mode are checked bit for bit
(against exact rational arithmetic, and numpy where it has the operation); the math functions
within the ulp bounds of the tables below, against numpy's float64 (or Python's math, or a
bisection on erf/erfc for the inverse functions).
"""

from __future__ import annotations

import math
import platform
import re
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from mlxport.backends.sim.compiler import compiler_env, find_compiler

INCLUDE = Path(__file__).parents[1] / "mlxport" / "backends" / "cuda_cpu" / "include"
FREESTANDING = {"cstdint", "cstddef", "type_traits", "limits", "new", "bit", "concepts"}


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


# ---------------------------------------------------------------- CUDA's layouts (64-bit Linux)
# name: (sizeof, alignof)
LAYOUT = {
    **{f"{t}1": (s, s) for t, s in [
        ("char", 1), ("uchar", 1), ("short", 2), ("ushort", 2), ("int", 4), ("uint", 4),
        ("float", 4), ("long", 8), ("ulong", 8), ("longlong", 8), ("ulonglong", 8), ("double", 8)]},
    "char2": (2, 2), "uchar2": (2, 2), "char3": (3, 1), "uchar3": (3, 1),
    "char4": (4, 4), "uchar4": (4, 4),
    "short2": (4, 4), "ushort2": (4, 4), "short3": (6, 2), "ushort3": (6, 2),
    "short4": (8, 8), "ushort4": (8, 8),
    "int2": (8, 8), "uint2": (8, 8), "int3": (12, 4), "uint3": (12, 4),
    "int4": (16, 16), "uint4": (16, 16),
    "float2": (8, 8), "float3": (12, 4), "float4": (16, 16),
    "long2": (16, 16), "ulong2": (16, 16), "long3": (24, 8), "ulong3": (24, 8), "long4": (32, 16),
    "ulong4": (32, 16), "longlong2": (16, 16), "ulonglong2": (16, 16), "longlong3": (24, 8),
    "ulonglong3": (24, 8), "longlong4": (32, 16), "ulonglong4": (32, 16),
    "double2": (16, 16), "double3": (24, 8), "double4": (32, 16),
    **{f"{t}4_{a}a": (32, a)
       for t in ("long", "ulong", "longlong", "ulonglong", "double") for a in (16, 32)},
    "dim3": (12, 4), "__half": (2, 2), "__half2": (4, 4),
    "__half_raw": (2, 2), "__half2_raw": (4, 4),
    "__nv_bfloat16": (2, 2), "__nv_bfloat162": (4, 4), "half": (2, 2), "nv_bfloat162": (4, 4),
}  # fmt: skip

# ---------------------------------------------------------------- inputs
RNG = np.random.default_rng(2024)
F32 = np.concatenate([
    np.array([0.0, -0.0, 1.0, -1.5, 65504.0, 65520.0, 65519.0, 1e-5, 6.1e-5, 3.0e-8, 1e30, -1e30,
              2.5, -2.5, 0.5, 3.0e38, -7e-39, 1.00048828125, 1.0009765625 + 2.0**-23]),
    RNG.normal(0, 50, 40), RNG.uniform(-2, 2, 40),
    RNG.normal(0, 1, 20) * 10.0 ** RNG.uniform(-30, 30, 20),
]).astype(np.float32)  # fmt: skip
F64 = np.concatenate([
    np.array([1.0 + 2.0**-11 + 2.0**-40, 1.0 + 2.0**-11, 1.0 + 2.0**-8 + 2.0**-60,
              65520.0 - 2.0**-30, 3.4e38, 3.5e38, 1e-40, -2.0**-149 * 0.75, 2.0**-24 * 1.5, 0.1,
              -1e300, 1e-300]),
    RNG.normal(0, 1, 40) * 10.0 ** RNG.uniform(-45, 40, 40),
])  # fmt: skip
I64 = [0, 1, -1, 2047, 2049, 65504, 65519, 65520, -65521, 2**24 + 1, 2**31 - 1, -(2**31), 2**53 + 1,
       2**62 + 2**38 + 1, 2**62 + 2**38, 2**62 + 2**54 + 1, -(2**62 + 2**54 + 1),
       2**63 - 1, -(2**63),
       *[int(v) for v in RNG.integers(-(2**63), 2**63 - 1, 20, dtype=np.int64)]]  # fmt: skip
U64 = [
    0,
    1,
    2**64 - 1,
    2**63,
    2**63 + 2**39 + 1,
    2**64 - 2**39,
    *[int(v) for v in RNG.integers(0, 2**63, 10)],
]
CONV = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -3.7, 1e10, -1e10, 2147483520.0,
                 4294967040.0, -2147483904.0, 9.3e18, -9.3e18, 1.9e19, np.inf, -np.inf, np.nan,
                 65535.5, 126.9, 255.5, *RNG.normal(0, 1e5, 12)])  # fmt: skip


def mixed(n: int, lo: int, hi: int, salt: int) -> np.ndarray:
    rng = np.random.default_rng(salt)
    return rng.normal(0, 1, n) * 2.0 ** rng.integers(lo, hi, n)


FA = np.concatenate(
    [mixed(60, -140, 127, 1), [1.0, 1.0, 3.4e38, -3.4e38, 1e-45, 1.5, 2.0**-126]]
).astype(np.float32)
FB = np.concatenate(
    [mixed(60, -140, 127, 2), [2.0**-24, -1.0, 3.4e38, 3.4e38, 1e-45, -1.5 * (1 + 2**-20), 3.0]]
)
FB = FB.astype(np.float32)
FC = np.concatenate(
    [mixed(60, -140, 127, 3), [-1.0, 2.0**-30, 1.0, -0.0, -1e-45, 1.0, 1.0]]
).astype(np.float32)
DA = np.concatenate([mixed(40, -1070, 1020, 4), [1.0, 1.7e308, 1e-310, 3.0]])
DB = np.concatenate([mixed(40, -1070, 1020, 5), [2.0**-53, 1.7e308, -1e-310, 7.0]])
MODES = ("rn", "rz", "rd", "ru")

N_MATH = 24
# for references that need more than double
PI_L = np.longdouble("3.141592653589793238462643383279502884")
# name: (reference in float64, input range, ulp bound). The C library's float functions (glibc's
# are within an ulp) get 2, as CUDA's own bounds are 1 to 4; those computed in double here get 1.
F_UNARY = {
    "sqrtf": (np.sqrt, (0, 1e4), 0.5), "cbrtf": (np.cbrt, (-1e4, 1e4), 2),
    "rcbrtf": (lambda x: 1 / np.cbrt(x), (0.01, 1e4), 1), "expf": (np.exp, (-80, 80), 2),
    "exp2f": (np.exp2, (-120, 120), 2), "exp10f": (lambda x: 10.0**x, (-35, 35), 2),
    "expm1f": (np.expm1, (-5, 5), 2), "logf": (np.log, (1e-30, 1e30), 2),
    "log2f": (np.log2, (1e-30, 1e30), 2), "log10f": (np.log10, (1e-30, 1e30), 2),
    "log1pf": (np.log1p, (-0.9, 10), 2), "sinf": (np.sin, (-100, 100), 2),
    "cosf": (np.cos, (-100, 100), 2), "tanf": (np.tan, (-1.5, 1.5), 2),
    "asinf": (np.arcsin, (-1, 1), 2), "acosf": (np.arccos, (-1, 1), 2),
    "atanf": (np.arctan, (-50, 50), 2), "sinhf": (np.sinh, (-10, 10), 2),
    "coshf": (np.cosh, (-10, 10), 2), "tanhf": (np.tanh, (-8, 8), 2),
    "asinhf": (np.arcsinh, (-50, 50), 2), "acoshf": (np.arccosh, (1, 50), 2),
    "atanhf": (np.arctanh, (-0.99, 0.99), 2), "erff": (np.vectorize(math.erf), (-4, 4), 2),
    "erfcf": (np.vectorize(math.erfc), (-2, 9), 2),
    "lgammaf": (np.vectorize(math.lgamma), (2.5, 30), 1),
    "tgammaf": (np.vectorize(math.gamma), (0.1, 30), 1),
    "sinpif": (lambda x: np.sin(np.pi * np.fmod(x, 2)), (-50, 50), 1),
    "cospif": (lambda x: np.cos(np.pi * np.fmod(x, 2)), (-50, 50), 1),
    "erfinvf": (None, (-0.9999, 0.9999), 1), "erfcinvf": (None, (1e-30, 1.99), 1),
    "normcdff": (None, (-12, 8), 1), "normcdfinvf": (None, (1e-20, 0.9999), 1),
    "erfcxf": (None, (-3, 25), 1), "floorf": (np.floor, (-1e3, 1e3), 0),
    "ceilf": (np.ceil, (-1e3, 1e3), 0), "truncf": (np.trunc, (-1e3, 1e3), 0),
    "roundf": (lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x), (-1e3, 1e3), 0),
    "rintf": (np.rint, (-1e3, 1e3), 0), "nearbyintf": (np.rint, (-1e3, 1e3), 0),
    "fabsf": (np.abs, (-1e3, 1e3), 0),
    "logbf": (lambda x: np.floor(np.log2(np.abs(x))), (1e-30, 1e30), 0),
}  # fmt: skip
F_BINARY = {
    "powf": (np.power, (0.01, 10), (-20, 20), 2), "atan2f": (np.arctan2, (-5, 5), (-5, 5), 2),
    "hypotf": (np.hypot, (-1e20, 1e20), (-1e20, 1e20), 2),
    "rhypotf": (lambda x, y: 1 / np.hypot(x, y), (-1e3, 1e3), (-1e3, 1e3), 1),
    "fmodf": (np.fmod, (-1e4, 1e4), (0.5, 40), 0),
    "remainderf": (np.vectorize(math.remainder), (-1e4, 1e4), (0.5, 40), 0),
    "fminf": (np.fmin, (-5, 5), (-5, 5), 0), "fmaxf": (np.fmax, (-5, 5), (-5, 5), 0),
    "fdimf": (lambda x, y: np.maximum(x - y, 0), (-5, 5), (-5, 5), 0.5),
    "copysignf": (np.copysign, (-5, 5), (-5, 5), 0),
}  # fmt: skip
D_UNARY = {
    "sqrt": (np.sqrt, (0, 1e300), 0.5), "cbrt": (np.cbrt, (-1e300, 1e300), 2),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (1e-300, 1e300), 2), "exp": (np.exp, (-700, 700), 1),
    "exp2": (np.exp2, (-1000, 1000), 1), "exp10": (lambda x: 10.0**x, (-300, 300), 2),
    "expm1": (np.expm1, (-5, 5), 1), "log": (np.log, (1e-300, 1e300), 1),
    "log2": (np.log2, (1e-300, 1e300), 1), "log10": (np.log10, (1e-300, 1e300), 1),
    "log1p": (np.log1p, (-0.9, 10), 1), "sin": (np.sin, (-100, 100), 1),
    "cos": (np.cos, (-100, 100), 1), "tan": (np.tan, (-1.5, 1.5), 1),
    "asin": (np.arcsin, (-1, 1), 1), "acos": (np.arccos, (-1, 1), 1),
    "atan": (np.arctan, (-50, 50), 1), "sinh": (np.sinh, (-10, 10), 1),
    "cosh": (np.cosh, (-10, 10), 1), "tanh": (np.tanh, (-8, 8), 2),
    "asinh": (np.arcsinh, (-50, 50), 1), "acosh": (np.arccosh, (1, 50), 1),
    "atanh": (np.arctanh, (-0.99, 0.99), 1), "erf": (np.vectorize(math.erf), (-4, 4), 1),
    "erfc": (np.vectorize(math.erfc), (-2, 9), 2),
    "sinpi": (lambda x: np.sin(PI_L * np.fmod(x, 2).astype(np.longdouble)), (-40, 40), 2),
    "cospi": (lambda x: np.cos(PI_L * np.fmod(x, 2).astype(np.longdouble)), (-40, 40), 2),
    # the references' own error grows in the tails (x / sqrt(2) is rounded there): |x| <= 2.5
    "erfinv": (None, (-0.9999, 0.9999), 2), "normcdf": (None, (-2.5, 2.5), 4),
    "erfcinv": (None, (1e-300, 1.99), 2), "rcbrt": (lambda x: 1 / np.cbrt(x), (1e-300, 1e300), 2),
    "lgamma": (np.vectorize(math.lgamma), (2.5, 30), 2),
    "tgamma": (np.vectorize(math.gamma), (0.1, 30), 4),
}  # fmt: skip
D_BINARY = {
    "pow": (np.power, (0.01, 10), (-200, 200), 1), "atan2": (np.arctan2, (-5, 5), (-5, 5), 1),
    "hypot": (np.hypot, (-1e200, 1e200), (-1e200, 1e200), 1),
    "fmod": (np.fmod, (-1e10, 1e10), (0.5, 40), 0),
}  # fmt: skip
H_UNARY = {  # half and bfloat16 functions: computed in float, rounded once
    "hexp": (np.exp, (-8, 8)), "hexp2": (np.exp2, (-12, 12)), "hlog": (np.log, (1e-3, 1e4)),
    "hlog2": (np.log2, (1e-3, 1e4)), "hsqrt": (np.sqrt, (0, 6e4)),
    "hrcp": (lambda x: 1 / x, (0.01, 100)), "hsin": (np.sin, (-10, 10)),
    "hcos": (np.cos, (-10, 10)), "htanh": (np.tanh, (-4, 4)), "hfloor": (np.floor, (-100, 100)),
    "hceil": (np.ceil, (-100, 100)), "htrunc": (np.trunc, (-100, 100)),
    "hrint": (np.rint, (-100, 100)), "hrsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 1e4)),
    "hexp10": (lambda x: 10.0**x, (-4, 4)), "hlog10": (np.log10, (1e-3, 1e4)),
}  # fmt: skip


def math_inputs(lo: float, hi: float, salt: int, dtype: type = np.float32) -> np.ndarray:
    rng = np.random.default_rng(salt)
    if lo > 0 and hi / lo > 1e3:  # log-uniform over wide positive ranges
        return np.exp(rng.uniform(np.log(lo), np.log(hi), N_MATH)).astype(dtype)
    return rng.uniform(lo, hi, N_MATH).astype(dtype)


# ---------------------------------------------------------------- exact references
def round_frac(x: Fraction, p: int, emin: int, emax: int, mode: str) -> float:
    """x rounded to a binary format of p significand bits and normal exponents emin..emax."""
    if x == 0:
        return 0.0
    neg, a = x < 0, abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e += 1 if Fraction(2) ** (e + 1) <= a else -1 if Fraction(2) ** e > a else 0
    e = max(e, emin)
    q = Fraction(2) ** (e - p + 1)
    t = a / q
    n = t.numerator // t.denominator
    fr = t - n
    direction = {
        "rz": "down",
        "rn": "near",
        "rd": "away" if neg else "down",
        "ru": "down" if neg else "away",
    }[mode]
    if direction == "down":
        m = n
    elif direction == "away":
        m = n + (1 if fr else 0)
    else:
        m = n + 1 if fr > Fraction(1, 2) or (fr == Fraction(1, 2) and n % 2) else n
    r = m * q
    max_finite = (2**p - 1) * Fraction(2) ** (emax - p + 1)
    v = (math.inf if direction != "down" else float(max_finite)) if r > max_finite else float(r)
    return -v if neg else v


FORMATS = {
    "f32": (24, -126, 127),
    "f64": (53, -1022, 1023),
    "f16": (11, -14, 15),
    "bf16": (8, -126, 127),
}


def rounded(x: Fraction, fmt: str, mode: str = "rn") -> float:
    return round_frac(x, *FORMATS[fmt], mode)


def zero_sum(x: float, y: float, mode: str) -> float:
    """IEEE's sign for an exact zero sum: the operands' when they agree, else -0 rounding down."""
    if x == 0 and y == 0 and math.copysign(1, x) == math.copysign(1, y):
        return x
    return -0.0 if mode == "rd" else 0.0


def bits32(v: float) -> int:
    return int(np.array([v], np.float32).view(np.uint32)[0])


def bits64(v: float) -> int:
    return int(np.array([v], np.float64).view(np.uint64)[0])


def to_f16(x) -> np.ndarray:
    with np.errstate(over="ignore"):  # beyond 65520 is infinity
        return np.asarray(x).astype(np.float16)


def bits16(v: float) -> int:
    return 0x7FFF if v != v else int(to_f16(np.array([v])).view(np.uint16)[0])


def bitsbf(v: float) -> int:
    return 0x7FFF if v != v else bits32(v) >> 16


def bf16_rne(v: float) -> int:
    """A float32 value rounded to bfloat16, to nearest even (NaN as the canonical 0x7fff)."""
    if v != v:
        return 0x7FFF
    u = bits32(v)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def round_value(x: float, fmt: str, mode: str = "rn") -> float:
    """A double rounded to a format as named; zeros, infinities and NaN as they are."""
    return x if x == 0 or not math.isfinite(x) else rounded(Fraction(x), fmt, mode)


def op_round(x: float, y: float, op: str, fmt: str) -> float:
    """x op y of two values of a format, rounded to it once (to nearest even)."""
    if not (math.isfinite(x) and math.isfinite(y)) or (op == "/" and y == 0):
        with np.errstate(all="ignore"):
            a, b = np.float64(x), np.float64(y)
            return float({"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op])
    fx, fy = Fraction(x), Fraction(y)
    exact = fx + fy if op == "+" else fx - fy if op == "-" else fx * fy if op == "*" else fx / fy
    if exact == 0:
        if op in "*/":
            return math.copysign(0.0, x) * math.copysign(1.0, y)
        return zero_sum(x, y if op == "+" else -y, "rn")
    return rounded(exact, fmt)


def bf_value(b: int) -> float:
    return float(np.array([b << 16], np.uint32).view(np.float32)[0])


def canon16(bits: np.ndarray, inf: int) -> np.ndarray:
    """NaNs of a 16-bit format as the canonical 0x7fff."""
    b = np.asarray(bits, dtype=np.uint16)
    return np.where((b & 0x7FFF) > inf, np.uint16(0x7FFF), b)


def f32_bits_to_float(b: int) -> float:
    return float(np.array([b], np.uint32).view(np.float32)[0])


def bisect_inverse(f, target: float, lo: float, hi: float, increasing: bool) -> float:
    """The double x in [lo, hi] where the monotonic f crosses target, to the last bit."""
    for _ in range(2000):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return lo if abs(f(lo) - target) <= abs(f(hi) - target) else hi


def erfinv_ref(y: float) -> float:
    if y == 0:
        return y
    a = abs(y)
    x = (
        bisect_inverse(math.erf, a, 0.0, 10.0, True)
        if a <= 0.5
        else bisect_inverse(math.erfc, 1 - a, 0.0, 10.0, False)
    )
    return math.copysign(x, y)


def erfcinv_ref(y: float) -> float:
    if y > 1:
        return -erfcinv_ref(2 - y)
    return bisect_inverse(math.erfc, y, 0.0, 30.0, False)


def erfcx_ref(x: float) -> float:
    return math.exp(x * x) * math.erfc(x)


SPECIAL_REFS = {
    "erfinvf": erfinv_ref, "erfinv": erfinv_ref, "erfcinvf": erfcinv_ref, "erfcinv": erfcinv_ref,
    "normcdff": lambda x: 0.5 * math.erfc(-x / math.sqrt(2)),
    "normcdf": lambda x: 0.5 * math.erfc(-x / math.sqrt(2)),
    "normcdfinvf": lambda p: -math.sqrt(2) * erfcinv_ref(2 * p), "erfcxf": erfcx_ref,
}  # fmt: skip


def reference(name: str, fn, *xs: np.ndarray) -> np.ndarray:
    if fn is None:
        return np.array([SPECIAL_REFS[name](float(x)) for x in xs[0]])
    with np.errstate(all="ignore"):
        return fn(*(x.astype(np.float64) for x in xs))


def ulps(got: np.ndarray, want: np.ndarray, dtype: type) -> np.ndarray:
    """|got - want| in ulps of the format at want (want in float64)."""
    spacing = np.spacing(np.abs(want.astype(dtype))).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


# ---------------------------------------------------------------- the program
PROGRAM = r"""
#include <cmath>  // this directory's own: the CUDA math API
#include "cuda_values.h"
#include <cfloat>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <math.h>
#include <new>

#ifndef __device__
#define __device__
#endif

using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;

static void P(const char* k, u64 v) { std::printf("%s %llu\n", k, v); }
static void S(const char* k, long long v) { std::printf("%s %lld\n", k, v); }
static u64 F(float x) { return __float_as_uint(x); }
static u64 D(double x) { return u64(__double_as_longlong(x)); }
static u64 H(__half x) { return __half_as_ushort(x); }
static u64 B(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
static u64 H2(__half2 x) { return __builtin_bit_cast(u32, x); }
static u64 B2(__nv_bfloat162 x) { return __builtin_bit_cast(u32, x); }

// A kernel's own vector arithmetic: CUDA has none, so it must be possible to define it.
__device__ float4 operator+(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ int2 operator*(int2 a, int s) { return make_int2(a.x * s, a.y * s); }

template <class T, class R>
static void run1(const char* k, R (*f)(T), const T* x, int n) {
  for (int i = 0; i < n; ++i) {
    if constexpr (sizeof(R) == 8) P(k, D(f(x[i])));
    else P(k, F(f(x[i])));
  }
}
template <class T>
static void run2(const char* k, T (*f)(T, T), const T* x, const T* y, int n) {
  for (int i = 0; i < n; ++i) {
    if constexpr (sizeof(T) == 8) P(k, D(f(x[i], y[i])));
    else P(k, F(f(x[i], y[i])));
  }
}
template <class H, class R>
static void runh(const char* k, R (*f)(H), const float* x, int n) {
  for (int i = 0; i < n; ++i) P(k, __builtin_bit_cast(u16, f(H(x[i]))));
}

template <class H, class H2T>
static void halfish(const char* p, float a, float b, float c) {
  char k[64];
  auto K = [&](const char* s) { std::snprintf(k, sizeof k, "%s_%s", p, s); return k; };
  auto bits = [](H h) { return u64(__builtin_bit_cast(u16, h)); };
  const H ha = H(a), hb = H(b), hc = H(c);
  P(K("cvt"), bits(ha));
  P(K("tof"), F(float(ha)));
  P(K("add"), bits(__hadd(ha, hb)));
  P(K("sub"), bits(__hsub(ha, hb)));
  P(K("mul"), bits(__hmul(ha, hb)));
  P(K("div"), bits(__hdiv(ha, hb)));
  P(K("fma"), bits(__hfma(ha, hb, hc)));
  P(K("chain"), bits(ha * hb + hc - ha));
  H acc = ha;
  acc += hb;
  acc *= hc;
  P(K("compound"), bits(acc));
  P(K("neg"), bits(-ha));
  P(K("abs"), bits(__habs(ha)));
  P(K("max"), bits(__hmax(ha, hb)));
  P(K("min"), bits(__hmin(ha, hb)));
  P(K("cmp"), u64(__hlt(ha, hb)) | u64(__hle(ha, hb)) << 1 | u64(__hgt(ha, hb)) << 2 |
              u64(__hge(ha, hb)) << 3 | u64(__heq(ha, hb)) << 4 | u64(__hne(ha, hb)) << 5 |
              u64(__hneu(ha, hb)) << 6 | u64(__hltu(ha, hb)) << 7 | u64(ha < hb) << 8 |
              u64(ha != hb) << 9 | u64(ha == hb) << 10);
  const H2T pa(ha, hb), pb(hc, ha);
  P(K("pack"), __builtin_bit_cast(u32, pa));
  P(K("add2"), __builtin_bit_cast(u32, __hadd2(pa, pb)));
  P(K("mul2"), __builtin_bit_cast(u32, pa * pb));
  P(K("fma2"), __builtin_bit_cast(u32, __hfma2(pa, pb, pa)));
  P(K("lt2"), __builtin_bit_cast(u32, __hlt2(pa, pb)));
  P(K("lt2mask"), __hlt2_mask(pa, pb));
  P(K("blt2"), __hblt2(pa, pb));
  P(K("swap"), __builtin_bit_cast(u32, __lowhigh2highlow(pa)));
  P(K("lo"), F(__low2float(pa)));
  P(K("hi"), F(__high2float(pa)));
}

int main() {
  // ------------------------------------------------ layouts
@LAYOUT@
  P("off_float3_z", offsetof(float3, z)); P("off_double4_w", offsetof(double4, w));
  P("off_char3_z", offsetof(char3, z));
  P("off_half2_y", offsetof(__half2, y)); P("off_dim3_z", offsetof(dim3, z));
  const float4 v4 = make_float4(1, 2, 3, 4) + make_float4(10, 20, 30, 40);
  P("user_op", u64(v4.x) + u64(v4.y) * 100 + u64(v4.z) * 10000 + u64(v4.w) * 1000000);
  const int2 i2 = make_int2(3, -4) * 5;
  S("user_op2", i2.x * 1000 + i2.y);
  const dim3 d0, d1(7), d2(7, 8), d3(make_uint3(2, 3, 4));
  const uint3 back = d2;
  P("dim3", d0.x + 10 * d0.y + 100 * d0.z + 1000 * d1.x + 10000 * d1.y + 100000 * d2.y +
            1000000 * d3.z + 10000000 * back.y);
  const double4 dd = make_double4(1, 2, 3, 4); const longlong2 ll2 = make_longlong2(-5, 6);
  const uchar4 uc = make_uchar4(1, 2, 3, 250);
  const char4 c4 = make_char4(-1, 2, -3, 4);
  S("make", (long long)(dd.w * 1000 + ll2.x * 100 + uc.w) * 100 + c4.x + c4.z);

  // ------------------------------------------------ half and bfloat16
  static const float f32[] = {@F32@};
  const int n = int(sizeof(f32) / sizeof(f32[0]));
  for (int i = 0; i < n; ++i) {
    const float a = f32[i], b = f32[(i * 7 + 3) % n], c = f32[(i * 5 + 1) % n];
    halfish<__half, __half2>("h", a, b, c);
    halfish<__nv_bfloat16, __nv_bfloat162>("b", a, b, c);
    P("h_rz", H(__float2half_rz(a))); P("h_rd", H(__float2half_rd(a)));
    P("h_ru", H(__float2half_ru(a)));
    P("b_rz", B(__float2bfloat16_rz(a))); P("b_rd", B(__float2bfloat16_rd(a)));
    P("b_ru", B(__float2bfloat16_ru(a)));
    const __half h = __float2half(a);
    const __nv_bfloat16 bf = __float2bfloat16(a);
    S("h_toi_rn", __half2int_rn(h)); S("h_toi_rz", __half2int_rz(h));
    S("h_toi_rd", __half2int_rd(h)); S("h_toi_ru", __half2int_ru(h));
    S("h_tos_rz", __half2short_rz(h)); P("h_tou_rn", __half2uint_rn(h));
    P("h_tous_rz", __half2ushort_rz(h));
    S("h_toll_rd", __half2ll_rd(h)); P("h_toull_ru", __half2ull_ru(h));
    S("h_toc_rz", __half2char_rz(h));
    S("h_impl_int", int(h)); S("h_impl_short", short(h)); P("h_impl_bool", bool(h));
    S("b_toi_rn", __bfloat162int_rn(bf)); S("b_toi_rz", __bfloat162int_rz(bf));
    S("b_toll_rz", __bfloat162ll_rz(bf));
    P("b_tou_rd", __bfloat162uint_rd(bf)); S("b_tos_ru", __bfloat162short_ru(bf));
    P("hb_cross", B(__nv_bfloat16(h)) | H(__half(bf)) << 16);
    P("h2_f2", H2(__floats2half2_rn(a, b))); P("b2_f2", B2(__floats2bfloat162_rn(a, b)));
    const float2 hf = __half22float2(__floats2half2_rn(a, b)),
                 bff = __bfloat1622float2(__floats2bfloat162_rn(a, b));
    P("h2_back", F(hf.x)); P("h2_back", F(hf.y)); P("b2_back", F(bff.x)); P("b2_back", F(bff.y));
  }
  static const double f64[] = {@F64@};
  for (double d : f64) {
    P("d2h", H(__double2half(d))); P("d2b", B(__double2bfloat16(d))); P("d2h_ctor", H(__half(d)));
    P("d2f_rn", F(__double2float_rn(d))); P("d2f_rz", F(__double2float_rz(d)));
    P("d2f_rd", F(__double2float_rd(d))); P("d2f_ru", F(__double2float_ru(d)));
  }
  static const long long i64[] = {@I64@};
  for (long long v : i64) {
    P("ll2h_rn", H(__ll2half_rn(v))); P("ll2h_rz", H(__ll2half_rz(v)));
    P("ll2h_rd", H(__ll2half_rd(v))); P("ll2h_ru", H(__ll2half_ru(v)));
    P("ll2b_rn", B(__ll2bfloat16_rn(v))); P("ll2b_rz", B(__ll2bfloat16_rz(v)));
    P("ll2b_rd", B(__ll2bfloat16_rd(v))); P("ll2b_ru", B(__ll2bfloat16_ru(v)));
    P("ll2f_rn", F(__ll2float_rn(v))); P("ll2f_rz", F(__ll2float_rz(v)));
    P("ll2f_rd", F(__ll2float_rd(v))); P("ll2f_ru", F(__ll2float_ru(v)));
    P("ll2d_rn", D(__ll2double_rn(v))); P("ll2d_rz", D(__ll2double_rz(v)));
    P("ll2d_rd", D(__ll2double_rd(v))); P("ll2d_ru", D(__ll2double_ru(v)));
    P("ll2b_ctor", B(__nv_bfloat16(v))); P("ll2h_ctor", H(__half(v)));
    const int i = int(v);  // the low 32 bits
    P("i2h_rn", H(__int2half_rn(i))); P("i2h_rz", H(__int2half_rz(i)));
    P("i2b_ru", B(__int2bfloat16_ru(i)));
    P("i2f_rn", F(__int2float_rn(i))); P("i2f_rz", F(__int2float_rz(i)));
    P("i2f_rd", F(__int2float_rd(i))); P("i2f_ru", F(__int2float_ru(i)));
    P("u2f_rd", F(__uint2float_rd(u32(i)))); P("i2b_ctor", B(__nv_bfloat16(i)));
    P("i2h_ctor", H(__half(i)));
  }
  static const u64 u64s[] = {@U64@};
  for (u64 v : u64s) {
    P("ull2f_rn", F(__ull2float_rn(v))); P("ull2f_rz", F(__ull2float_rz(v)));
    P("ull2f_ru", F(__ull2float_ru(v)));
    P("ull2d_rd", D(__ull2double_rd(v))); P("ull2d_ru", D(__ull2double_ru(v)));
    P("ull2b_rn", B(__ull2bfloat16_rn(v)));
  }
  static const double conv[] = {@CONV@};
  for (double d : conv) {
    const float f = float(d);
    S("f2i_rn", __float2int_rn(f)); S("f2i_rz", __float2int_rz(f));
    S("f2i_rd", __float2int_rd(f)); S("f2i_ru", __float2int_ru(f));
    P("f2u_rn", __float2uint_rn(f)); P("f2u_rz", __float2uint_rz(f));
    P("f2u_rd", __float2uint_rd(f)); P("f2u_ru", __float2uint_ru(f));
    S("f2ll_rn", __float2ll_rn(f)); S("f2ll_rz", __float2ll_rz(f));
    S("f2ll_rd", __float2ll_rd(f)); S("f2ll_ru", __float2ll_ru(f));
    P("f2ull_rn", __float2ull_rn(f)); P("f2ull_rz", __float2ull_rz(f));
    P("f2ull_rd", __float2ull_rd(f)); P("f2ull_ru", __float2ull_ru(f));
    S("d2i_rn", __double2int_rn(d)); S("d2i_rz", __double2int_rz(d));
    S("d2i_rd", __double2int_rd(d)); S("d2i_ru", __double2int_ru(d));
    P("d2u_rz", __double2uint_rz(d)); S("d2ll_ru", __double2ll_ru(d));
    P("d2ull_rd", __double2ull_rd(d));
    S("lrintf", lrintf(f)); S("llroundf", llroundf(f)); S("lround", lround(d));
  }

  // ------------------------------------------------ explicit rounding modes
  static const float fa[] = {@FA@}, fb[] = {@FB@}, fc[] = {@FC@};
  for (int i = 0; i < int(sizeof(fa) / sizeof(fa[0])); ++i) {
    const float a = fa[i], b = fb[i], c = fc[i];
#define MODE(m)                                                                                \
    P("fadd_" #m, F(__fadd_##m(a, b))); P("fsub_" #m, F(__fsub_##m(a, b)));                    \
    P("fmul_" #m, F(__fmul_##m(a, b))); P("fdiv_" #m, F(__fdiv_##m(a, b)));                    \
    P("fmaf_" #m, F(__fmaf_##m(a, b, c)));                                                     \
    P("frcp_" #m, F(__frcp_##m(b))); P("fsqrt_" #m, F(__fsqrt_##m(__builtin_fabsf(a))));
    MODE(rn) MODE(rz) MODE(rd) MODE(ru)
#undef MODE
    P("frsqrt_rn", F(__frsqrt_rn(__builtin_fabsf(a)))); P("rsqrtf", F(rsqrtf(__builtin_fabsf(b))));
  }
  static const double da[] = {@DA@}, db[] = {@DB@};
  for (int i = 0; i < int(sizeof(da) / sizeof(da[0])); ++i) {
    const double a = da[i], b = db[i];
#define MODE(m)                                                                                \
    P("dadd_" #m, D(__dadd_##m(a, b))); P("dsub_" #m, D(__dsub_##m(a, b)));                    \
    P("dmul_" #m, D(__dmul_##m(a, b))); P("ddiv_" #m, D(__ddiv_##m(a, b)));                    \
    P("dsqrt_" #m, D(__dsqrt_##m(__builtin_fabs(a)))); P("drcp_" #m, D(__drcp_##m(b)));
    MODE(rn) MODE(rz) MODE(rd) MODE(ru)
#undef MODE
  }
  P("zero_rn", F(__fadd_rn(1.0f, -1.0f))); P("zero_rd", F(__fadd_rd(1.0f, -1.0f)));
  P("zero_rz", F(__fsub_rz(2.0f, 2.0f)));
  P("zero_rd_neg", F(__fadd_rd(-0.0f, -0.0f))); P("zero_ru_mixed", F(__fadd_ru(-0.0f, 0.0f)));
  P("zero_fma_rd", F(__fmaf_rd(2.0f, 3.0f, -6.0f))); P("zero_d_rd", D(__dadd_rd(1.5, -1.5)));

  // ------------------------------------------------ math
@MATH@

  // ------------------------------------------------ type punning and integer intrinsics
  static const u32 iu[] = {@IU@};
  const int ni = int(sizeof(iu) / sizeof(iu[0]));
  for (int i = 0; i < ni; ++i) {
    const u32 x = iu[i], y = iu[(i * 7 + 3) % ni], z = iu[(i * 5 + 1) % ni];
    P("popc", __popc(x)); P("clz", __clz(int(x))); P("ffs", __ffs(int(x))); P("brev", __brev(x));
    P("byte_perm", __byte_perm(x, y, z)); P("fsl", __funnelshift_l(x, y, z));
    P("fslc", __funnelshift_lc(x, y, z % 40));
    P("fsr", __funnelshift_r(x, y, z)); P("fsrc", __funnelshift_rc(x, y, z % 40));
    S("mul24", __mul24(int(x), int(y))); P("umul24", __umul24(x, y));
    S("mulhi", __mulhi(int(x), int(y)));
    P("umulhi", __umulhi(x, y)); P("sad", __sad(int(x), int(y), z)); P("usad", __usad(x, y, z));
    S("ihadd", __hadd(int(x), int(y))); S("rhadd", __rhadd(int(x), int(y)));
    P("uhadd", __uhadd(x, y)); P("urhadd", __urhadd(x, y));
    S("dp4a", __dp4a(int(x), int(y), int(z))); P("dp4a_u", __dp4a(x, y, z));
    S("dp2a_lo", __dp2a_lo(int(x), int(y), int(z)));
    S("dp2a_hi", __dp2a_hi(int(x), int(y), int(z)));
    P("int_as_float", F(__int_as_float(int(x))));
    P("uint_as_float", __float_as_int(__uint_as_float(x)) == int(x));
    P("umax_mixed", max(int(x), y)); P("umin_mixed", min(x, int(y)));
    S("imax", max(int(x), int(y)));
  }
  static const u64 lu[] = {@LU@};
  const int nl = int(sizeof(lu) / sizeof(lu[0]));
  for (int i = 0; i < nl; ++i) {
    const u64 x = lu[i], y = lu[(i * 7 + 3) % nl];
    P("popcll", __popcll(x)); P("clzll", __clzll((long long)x));
    P("ffsll", __ffsll((long long)x)); P("brevll", __brevll(x));
    S("mul64hi", __mul64hi((long long)x, (long long)y)); P("umul64hi", __umul64hi(x, y));
    S("hiint", __double2hiint(__longlong_as_double((long long)x)));
    S("loint", __double2loint(__longlong_as_double((long long)x)));
    P("hilo", D(__hiloint2double(int(x >> 32), int(x))));
    P("ullmax", max(x, (long long)y)); S("llmin", min((long long)x, (long long)y));
  }

  // ------------------------------------------------ specials, overloads and constants
  // a * b is a midpoint of the format and c pulls it down by less than float can hold: fmaf, then
  // rounding to 16 bits, would tie twice and round up; the exact sum rounds down.
  P("h_fma_hard", H(__hfma(__float2half(1.0f + 0x1p-10f), __float2half(1.5f),
                           __float2half(-0x1p-24f))));
  P("b_fma_hard", B(__hfma(__float2bfloat16(1.0f + 0x1p-7f), __float2bfloat16(1.5f),
                           __float2bfloat16(-0x1p-24f))));
  P("h_nan", H(__float2half(__builtin_nanf(""))));
  P("h_nan_op", H(__hadd(CUDART_INF_FP16, -CUDART_INF_FP16)));
  P("b_nan", B(__float2bfloat16(-__builtin_nanf(""))));
  P("b_nan_op", B(__hmul(CUDART_INF_BF16, CUDART_ZERO_BF16)));
  P("h_max_nan", H(__hmax(CUDART_NAN_FP16, __float2half(1))));
  P("h_maxnan_nan", H(__hmax_nan(CUDART_NAN_FP16, __float2half(1))));
  P("h_max_zero", H(__hmax(CUDART_NEG_ZERO_FP16, CUDART_ZERO_FP16)));
  P("h_min_zero", H(__hmin(CUDART_ZERO_FP16, CUDART_NEG_ZERO_FP16)));
  P("b_min_nan2", B(__hmin(CUDART_NAN_BF16, CUDART_NAN_BF16)));
  S("h_isinf", __hisinf(-CUDART_INF_FP16) * 10 + __hisinf(CUDART_INF_FP16) * 100 +
               __hisinf(CUDART_MAX_NORMAL_FP16));
  P("h_isnan", __hisnan(CUDART_NAN_FP16) * 10 + __hisnan(CUDART_INF_FP16));
  P("h_nan_cmp",
    u64(CUDART_NAN_FP16 != CUDART_NAN_FP16) * 10 + __hne(CUDART_NAN_FP16, CUDART_ONE_FP16));
  P("h_sat", H(__hadd_sat(__float2half(0.75f), __float2half(0.5f))) |
             H(__hmul_sat(CUDART_NAN_FP16, CUDART_ONE_FP16)) << 16);
  P("h_relu", H(__hfma_relu(__float2half(-2), __float2half(3), __float2half(1))) |
              H(__hfma_relu(__float2half(2), __float2half(3), __float2half(1))) << 16);
  P("h_isnan2", H2(__hisnan2(__halves2half2(CUDART_NAN_FP16, CUDART_ONE_FP16))));
  P("h2_eq_bool", u64(__floats2half2_rn(1, 2) == __floats2half2_rn(1, 2)) * 10 +
                  (__floats2half2_rn(1, 2) == __floats2half2_rn(1, 3)));
  __half hinc = __float2half(1.5f); hinc++; ++hinc; hinc--;
  __half2 h2inc = __floats2half2_rn(1, 2); ++h2inc;
  P("h_inc", H(hinc) | H2(h2inc) << 16);
  P("h_int_ctor", H(__half(70000)) | H(__half(3)) << 16);
  S("h_sat_short", (long long)short(__half(65504.0f)) * 100000 + int(__half(-3.9f)));
  P("h_sat_ushort", (unsigned short)(__half(-3.0f)) + u64((unsigned)(CUDART_INF_FP16)) * 10);
  S("h_ll_nan", (long long)__half2ll_rz(CUDART_NAN_FP16));
  S("h_int_nan", __half2int_rz(CUDART_NAN_FP16));
  P("h2_halves", H2(__halves2half2(__float2half(1), __float2half(-2))));
  P("h2_dup", H2(__half2half2(__float2half(3))));
  P("h2_lows", H2(__lows2half2(__floats2half2_rn(1, 2), __floats2half2_rn(3, 4))));
  P("h2_highs", H2(__highs2half2(__floats2half2_rn(1, 2), __floats2half2_rn(3, 4))));
  P("h2_lohi",
    H(__low2half(__floats2half2_rn(5, 6))) | H(__high2half(__floats2half2_rn(5, 6))) << 16);
  P("b2_lows", B2(__lows2bfloat162(__floats2bfloat162_rn(1, 2), __floats2bfloat162_rn(3, 4))));
  P("b2_dup", B2(__bfloat162bfloat162(__float2bfloat16(3))));
  P("b2_lohi", B(__low2bfloat16(__floats2bfloat162_rn(5, 6))) |
               B(__high2bfloat16(__floats2bfloat162_rn(5, 6))) << 16);
  P("raw", H(__half(__half_raw{0x3c00})) | u64(__half2_raw(__floats2half2_rn(1, 2)).y) << 16);
  volatile __half vh = __float2half(2.0f);
  // GCC warns on a volatile result left unread
  [[maybe_unused]] volatile __half& assigned = (vh = __half_raw{0x4400});
  const __half hv = __half_raw(vh);
  P("volatile", H(hv));
  constexpr __half ch = 0.5f;
  constexpr __nv_bfloat16 cb = 0.5;
  static_assert(__half_as_ushort(ch) == 0x3800 && __bfloat16_as_ushort(cb) == 0x3f00);
  static_assert(sizeof(decltype(max(2.0f, 3.0))) == 8 && sizeof(decltype(min(2.0f, 3.0f))) == 4);
  static_assert(sizeof(decltype(sqrt(4))) == 8 && sizeof(decltype(pow(2.0f, 3))) == 8 &&
                sizeof(decltype(std::sqrt(2.0f))) == 4);
  static_assert(sizeof(decltype(abs(-2.5f))) == 4 && sizeof(decltype(std::abs(-2.5))) == 8 &&
                sizeof(decltype(abs(-2LL))) == 8);
  S("abs", abs(-7) + labs(-8L) * 10 + llabs(-9LL) * 100 + (long long)(abs(-2.5f) * 1000) +
           (long long)(std::abs(-1.5) * 10000) + abs(-4LL) * 100000);
  P("minmax", u64(max(-1, 1u)) + u64(min(-1, 1u)) * 10000000000ULL); P("minmax_l", max(-1L, 1UL));
  P("fminmax", F(min(1.5f, __builtin_nanf(""))) | u64(F(max(-1.0f, -2.0f))) << 32);
  P("dmax", D(max(2.0f, 3.5)));
  P("classify", u64(isnan(NAN)) | u64(isinf(-INFINITY)) << 1 | u64(signbit(-0.0f)) << 2 |
                u64(isfinite(1.0)) << 3 | u64(std::isnan(1.0f)) << 4 | u64(isnormal(1e-40f)) << 5 |
                u64(signbit(-3)) << 6);
  P("saturatef", F(__saturatef(__builtin_nanf(""))) | u64(F(__saturatef(1.5f))) << 32);
  P("saturatef2", F(__saturatef(0.25f)));
  P("fdividef", F(__fdividef(1.0f, 0x1p127f)) | u64(F(__fdividef(6.0f, 3.0f))) << 32);
  P("fdividef_inf", F(__fdividef(INFINITY, 0x1p127f)));
  P("sinpi_exact", F(sinpif(1.0f)) | u64(F(sinpif(-2.0f))) << 32);
  P("cospi_exact", F(cospif(0.5f)) | u64(F(cospif(-1.5f))) << 32);
  P("sinpi_d", D(sinpi(1.0e300))); P("cospi_d", D(cospi(2.5)));
  P("special_f", F(rsqrtf(0.0f)) | u64(F(erfinvf(1.0f))) << 32);
  P("special_f2", F(erfcinvf(0.0f)) | u64(F(rsqrtf(-1.0f))) << 32);
  P("lrint_sat", u64(lrintf(1e30f)) == u64(LONG_MAX)); S("llrint_nan", llrintf(NAN));
  S("i_nan", __float2int_rz(NAN)); P("u_neg", __float2uint_rn(-1.0f));
  float s, c; sincosf(0.5f, &s, &c); P("sincosf", F(s) | u64(F(c)) << 32);
  sincospif(0.25f, &s, &c); P("sincospif", F(s) | u64(F(c)) << 32);
  double sd, cd; sincos(0.5, &sd, &cd); P("sincos", D(sd)); P("sincos", D(cd));
  int e; P("frexpf", F(frexpf(12.0f, &e)) | u64(e) << 32);
  P("ldexpf", F(ldexpf(0.75f, 4)) | u64(F(scalbnf(0.75f, 5))) << 32);
  float ip; P("modff", F(modff(-3.25f, &ip)) | u64(F(ip)) << 32);
  int q; P("remquof", F(remquof(7.0f, 2.0f, &q)) | u64(q) << 32);
  P("ilogbf", ilogbf(1e10f)); P("nextafterf", F(nextafterf(1.0f, 2.0f)));
  P("fmaf", F(fmaf(1.0f + 0x1p-23f, 1.0f - 0x1p-23f, -1.0f)));
  const float pts[3] = {3, 4, 12}; P("normf", F(normf(3, pts)) | u64(F(norm3df(3, 4, 12))) << 32);
  P("rnorm3df", F(rnorm3df(3, 4, 12)));
  P("norm4df", F(norm4df(1, 2, 2, 4))); P("norm", D(norm3d(3, 4, 12)));
  P("std_math", F(std::sqrt(2.0f)) | u64(F(std::exp(1.0f))) << 32);
  P("std_math_d", D(std::pow(2.0, 0.5)));
  P("c_inf", F(INFINITY) | u64(F(HUGE_VALF)) << 32); P("c_nan", F(NAN) != F(NAN) || isnan(NAN));
  P("c_huge", D(HUGE_VAL));
  P("c_pi", D(M_PI)); P("c_pi2", D(M_PI_2)); P("c_e", D(M_E));
  P("c_ln2", D(M_LN2)); P("c_sqrt2", D(M_SQRT2)); P("c_1pi", D(M_1_PI));
  P("c_flt", F(FLT_MAX)); P("c_flt", F(FLT_MIN)); P("c_flt", F(FLT_EPSILON));
  P("c_dbl", D(DBL_MAX)); P("c_dbl", D(DBL_MIN)); P("c_dbl", D(DBL_EPSILON));
  S("c_int", INT_MAX); S("c_int", INT_MIN); P("c_int", UINT_MAX);
  S("c_int", LLONG_MAX); S("c_int", LLONG_MIN); P("c_int", ULLONG_MAX);
  S("c_int", SHRT_MIN); S("c_int", CHAR_MIN); P("c_int", UCHAR_MAX); S("c_int", LONG_MAX);
  P("cudart_f", F(CUDART_PI_F)); P("cudart_f", F(CUDART_INF_F));
  P("cudart_f", F(CUDART_NAN_F)); P("cudart_f", F(CUDART_NEG_ZERO_F));
  P("cudart_f", F(CUDART_MAX_NORMAL_F)); P("cudart_f", F(CUDART_MIN_DENORM_F));
  P("cudart_f", F(CUDART_SQRT_HALF_F)); P("cudart_f", F(CUDART_L2E_F));
  P("cudart_d", D(CUDART_PI)); P("cudart_d", D(CUDART_INF)); P("cudart_d", D(CUDART_NAN));
  P("cudart_d", D(CUDART_NEG_ZERO)); P("cudart_d", D(CUDART_LN2));
  P("cudart_h", H(CUDART_MAX_NORMAL_FP16) | H(CUDART_ONE_FP16) << 16);
  P("cudart_b", B(CUDART_MAX_NORMAL_BF16) | B(CUDART_ONE_BF16) << 16);
  return 0;
}
"""

FAILING = r"""#include "cuda_fp16.h"
#include <cstdlib>
#include <new>
#include <climits>
#include <cfloat>
#include <math.h>
#include <cmath>
#include "cuda_values.h"
#include <cstdio>
float4 no_vector_ops(float4 a, float4 b) { return a + b; }
__half no_mixed_half(__half h) { return h * 2.0f; }
int fine() {
  return abs(-1) + INT_MAX / 2 + int(FLT_MAX > 0) + int(std::sqrt(4.0)) + int(sqrtf(M_PI) > 1);
}
"""
# clang's words, GCC's
FAILING_LINES = {10: ("invalid operands", "no match for"), 11: ("ambiguous",)}


def hexf(x: float) -> str:
    return float(np.float32(x)).hex() + "f"


def hexd(x: float) -> str:
    return float(x).hex()


def c_list(values, fmt) -> str:
    return ", ".join(fmt(v) for v in values)


def integer_inputs() -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(77)
    iu = [
        0,
        1,
        0xFFFFFFFF,
        0x80000000,
        0x7FFFFFFF,
        0x00800000,
        0x00FFFFFF,
        0x12345678,
        0x3210,
        0x7531,
        0xF0F0,
    ]
    iu += [int(v) for v in rng.integers(0, 2**32, 40, dtype=np.uint64)]
    lu = [0, 1, 2**64 - 1, 2**63, 0x3FF0000000000000, 0x0123456789ABCDEF]
    lu += [int(v) for v in rng.integers(0, 2**63, 14, dtype=np.uint64)]
    return iu, lu


def math_lines() -> tuple[list[str], dict[str, tuple[np.ndarray, ...]]]:
    lines, inputs = [], {}
    for salt, (name, (_, (lo, hi), _)) in enumerate(F_UNARY.items()):
        inputs[name] = (xs := math_inputs(lo, hi, salt),)
        lines.append(
            f"  {{ static const float x[] = {{{c_list(xs, hexf)}}};"
            f' run1<float, float>("m_{name}", {name}, x, {len(xs)}); }}'
        )
    for salt, (name, (_, (lo, hi), (lo2, hi2), _)) in enumerate(F_BINARY.items(), start=100):
        xs, ys = math_inputs(lo, hi, salt), math_inputs(lo2, hi2, salt + 1)
        inputs[name] = (xs, ys)
        lines.append(
            f"  {{ static const float x[] = {{{c_list(xs, hexf)}}}, y[] = {{{c_list(ys, hexf)}}};"
            f' run2<float>("m_{name}", {name}, x, y, {len(xs)}); }}'
        )
    for salt, (name, (_, (lo, hi), _)) in enumerate(D_UNARY.items(), start=200):
        inputs[name] = (xs := math_inputs(lo, hi, salt, np.float64),)
        lines.append(
            f"  {{ static const double x[] = {{{c_list(xs, hexd)}}};"
            f' run1<double, double>("m_{name}", static_cast<double (*)(double)>({name}),'
            f" x, {len(xs)}); }}"
        )
    for salt, (name, (_, (lo, hi), (lo2, hi2), _)) in enumerate(D_BINARY.items(), start=250):
        xs, ys = math_inputs(lo, hi, salt, np.float64), math_inputs(lo2, hi2, salt + 1, np.float64)
        inputs[name] = (xs, ys)
        lines.append(
            f"  {{ static const double x[] = {{{c_list(xs, hexd)}}}, y[] = {{{c_list(ys, hexd)}}};"
            f' run2<double>("m_{name}", static_cast<double (*)(double, double)>({name}),'
            f" x, y, {len(xs)}); }}"
        )
    for salt, (name, (_, (lo, hi))) in enumerate(H_UNARY.items(), start=300):
        inputs[name] = (xs := math_inputs(lo, hi, salt),)
        for t, key in (("__half", "h"), ("__nv_bfloat16", "b")):
            lines.append(
                f"  {{ static const float x[] = {{{c_list(xs, hexf)}}};"
                f' runh<{t}, {t}>("{key}m_{name}", static_cast<{t} (*)({t})>({name}),'
                f" x, {len(xs)}); }}"
            )
    return lines, inputs


def compile_cpp(
    source: str, out_dir: Path, name: str, extra: list[str]
) -> subprocess.CompletedProcess[str]:
    src = out_dir / f"{name}.cpp"
    src.write_text(source)
    cmd = [*find_compiler().command, *extra, f"-I{INCLUDE}", str(src)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=compiler_env())


def link(obj: Path, exe: Path) -> subprocess.CompletedProcess[str]:
    # Linked for the default CPU: only the object is built for the pinned one, so zig does not
    # build its whole C++ library a second time for that CPU (a minute on 2 cores).
    cmd = [*find_compiler().command, str(obj), "-o", str(exe)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=compiler_env())


@pytest.fixture(scope="module", params=["default", "pinned"])
def results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[int]]:
    """Every check runs twice: for the compiler's default CPU (the native one, with zig) and for a
    pinned baseline CPU. Rounding must not depend on which instructions the machine has."""
    out = tmp_path_factory.mktemp("cuda_types")
    lines, inputs = math_lines()
    iu, lu = integer_inputs()
    layout = "\n".join(f'  P("sz_{t}", sizeof({t})); P("al_{t}", alignof({t}));' for t in LAYOUT)
    source = (
        PROGRAM.replace("@LAYOUT@", layout)
        .replace("@MATH@", "\n".join(lines))
        .replace("@F32@", c_list(F32, hexf))
        .replace("@F64@", c_list(F64, hexd))
        .replace("@I64@", c_list(I64, lambda v: f"(long long){v:#x}ULL" if v < 0 else f"{v:#x}LL"))
        .replace("@U64@", c_list(U64, lambda v: f"{v:#x}ULL"))
        .replace(
            "@CONV@",
            c_list(
                CONV,
                lambda v: (
                    '__builtin_nan("")'
                    if v != v
                    else "__builtin_inf()"
                    if v == np.inf
                    else "-__builtin_inf()"
                    if v == -np.inf
                    else hexd(v)
                ),
            ),
        )
        .replace("@FA@", c_list(FA, hexf))
        .replace("@FB@", c_list(FB, hexf))
        .replace("@FC@", c_list(FC, hexf))
        .replace("@DA@", c_list(DA, hexd))
        .replace("@DB@", c_list(DB, hexd))
        .replace("@IU@", c_list(iu, lambda v: f"{v:#x}u"))
        .replace("@LU@", c_list(lu, lambda v: f"{v:#x}ULL"))
    )
    march = pinned_march() if request.param == "pinned" else None
    done = compile_cpp(source, out, "types", [*flags(march), "-c", "-o", str(out / "types.o")])
    assert done.returncode == 0, done.stderr[-4000:]
    assert not done.stderr.strip(), done.stderr[-4000:]  # no warnings either
    done = link(out / "types.o", out / "types")
    assert done.returncode == 0, done.stderr[-4000:]
    run = subprocess.run([str(out / "types")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    values: dict[str, list[int]] = {}
    for line in run.stdout.splitlines():
        key, value = line.split()
        values.setdefault(key, []).append(int(value))
    values["__inputs__"] = inputs  # type: ignore[assignment]
    values["__ints__"] = (iu, lu)  # type: ignore[assignment]
    return values


def one(results: dict[str, list[int]], key: str) -> int:
    (value,) = results[key]
    return value


def f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


def f64(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint64).view(np.float64)


def f16(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint16).view(np.float16)


# ---------------------------------------------------------------- tests
def test_headers_include_only_freestanding_headers() -> None:
    """The value half reaches no C library header of its own (the toolchain's <cstdint> may)."""
    for header in [
        *INCLUDE.glob("cuda_*.h"),
        INCLUDE / "math_constants.h",
        INCLUDE / "math.h",
        INCLUDE / "cmath",
    ]:
        if header.name == "cuda_exec.h":
            continue  # the execution half's
        for m in re.finditer(
            r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', header.read_text(), re.MULTILINE
        ):
            kind, name = m.groups()
            if kind == "<":
                assert name in FREESTANDING, f"{header.name} includes <{name}>"
            else:
                assert (INCLUDE / name).exists(), f'{header.name} includes a missing "{name}"'


def test_sizes_and_alignments_match_cuda(results: dict[str, list[int]]) -> None:
    got = {t: (one(results, f"sz_{t}"), one(results, f"al_{t}")) for t in LAYOUT}
    assert got == LAYOUT
    offsets = {
        k: one(results, k)
        for k in ("off_float3_z", "off_double4_w", "off_char3_z", "off_half2_y", "off_dim3_z")
    }
    assert offsets == {
        "off_float3_z": 8,
        "off_double4_w": 24,
        "off_char3_z": 2,
        "off_half2_y": 2,
        "off_dim3_z": 8,
    }


def test_vector_constructors_dim3_and_user_operators(results: dict[str, list[int]]) -> None:
    assert one(results, "user_op") == 11 + 22 * 100 + 33 * 10000 + 44 * 1000000
    assert one(results, "user_op2") == 15 * 1000 - 20
    # dim3() = (1,1,1); dim3(7) = (7,1,1); dim3(7,8).y = 8; dim3(uint3(2,3,4)).z = 4;
    # uint3(dim3(7,8)).y = 8
    assert one(results, "dim3") == 1 + 10 + 100 + 7000 + 10000 + 800000 + 4000000 + 80000000
    assert one(results, "make") == (4000 - 500 + 250) * 100 - 4


def half_cases() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(F32)
    return F32, F32[(np.arange(n) * 7 + 3) % n], F32[(np.arange(n) * 5 + 1) % n]


def fma_ref(a: float, b: float, c: float, fmt: str) -> float:
    if not all(map(math.isfinite, (a, b, c))):
        with np.errstate(all="ignore"):
            return float(np.float64(a) * np.float64(b) + np.float64(c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return zero_sum(
            math.copysign(0.0, a) * math.copysign(1.0, b) if a * b == 0 else a * b, c, "rn"
        )
    return rounded(exact, fmt)


def format_of(kind: str):
    """For "h" and "b": the format's name, float32 inputs converted to it, and its values' bits."""
    if kind == "h":
        return "f16", lambda x: to_f16(np.asarray(x, np.float32)).astype(np.float64), bits16
    return (
        "bf16",
        lambda x: np.array([bf_value(bf16_rne(float(v))) for v in np.asarray(x, np.float32)]),
        bitsbf,
    )


@pytest.mark.parametrize("kind", ["h", "b"])
def test_half_and_bfloat16_round_once_per_operation(
    results: dict[str, list[int]], kind: str
) -> None:
    """Each operation of the 16-bit formats against the exact result rounded once."""
    a, b, c = half_cases()
    fmt, q, to_bits = format_of(kind)
    with np.errstate(all="ignore"):
        qa, qb, qc = q(a), q(b), q(c)

    def each(f) -> list[int]:
        return [to_bits(f(x, y, z)) for x, y, z in zip(qa, qb, qc, strict=True)]

    def op(x: float, y: float, o: str) -> float:
        return op_round(x, y, o, fmt)

    want = {
        "cvt": [to_bits(v) for v in qa],
        "add": each(lambda x, y, z: op(x, y, "+")), "sub": each(lambda x, y, z: op(x, y, "-")),
        "mul": each(lambda x, y, z: op(x, y, "*")), "div": each(lambda x, y, z: op(x, y, "/")),
        "fma": each(lambda x, y, z: fma_ref(x, y, z, fmt)),
        "chain": each(lambda x, y, z: op(op(op(x, y, "*"), z, "+"), x, "-")),
        "compound": each(lambda x, y, z: op(op(x, y, "+"), z, "*")),
        "add2": [to_bits(op(x, z, "+")) | to_bits(op(y, x, "+")) << 16
                 for x, y, z in zip(qa, qb, qc, strict=True)],
        "mul2": [to_bits(op(x, z, "*")) | to_bits(op(y, x, "*")) << 16
                 for x, y, z in zip(qa, qb, qc, strict=True)],
        "fma2": [to_bits(fma_ref(x, z, x, fmt)) | to_bits(fma_ref(y, x, y, fmt)) << 16
                 for x, y, z in zip(qa, qb, qc, strict=True)],
    }  # fmt: skip
    for key, expected in want.items():
        assert results[f"{kind}_{key}"] == expected, key
    # and as numpy computes them: float16 directly, bfloat16 as float32 rounded to nearest even
    with np.errstate(all="ignore"):
        fa, fb = qa.astype(np.float32), qb.astype(np.float32)
        for key, fn in (
            ("add", np.add),
            ("sub", np.subtract),
            ("mul", np.multiply),
            ("div", np.divide),
        ):
            if kind == "h":
                expected = canon16(
                    fn(fa.astype(np.float16), fb.astype(np.float16)).view(np.uint16), 0x7C00
                )
            else:
                expected = np.array([bf16_rne(float(v)) for v in fn(fa, fb)], np.uint16)
            np.testing.assert_array_equal(
                np.array(results[f"{kind}_{key}"], np.uint16), expected, err_msg=key
            )
    np.testing.assert_array_equal(f32(results[f"{kind}_tof"]), qa.astype(np.float32))
    bits = np.array(results[f"{kind}_cvt"], np.uint16)
    np.testing.assert_array_equal(np.array(results[f"{kind}_neg"], np.uint16), bits ^ 0x8000)
    np.testing.assert_array_equal(np.array(results[f"{kind}_abs"], np.uint16), bits & 0x7FFF)
    with np.errstate(invalid="ignore"):
        lt, le, gt, ge, eq = qa < qb, qa <= qb, qa > qb, qa >= qb, qa == qb
        ne = lt | gt
        cmp = (lt * 1 | le * 2 | gt * 4 | ge * 8 | eq * 16 | ne * 32 | ~eq * 64 | ~ge * 128
               | lt * 256 | ~eq * 512 | eq * 1024)  # fmt: skip
    np.testing.assert_array_equal(np.array(results[f"{kind}_cmp"]), cmp)
    differ = qa != qb  # equal operands (+-0) are checked in test_nan_zero_and_saturation_rules
    for key, fn in (("max", np.fmax), ("min", np.fmin)):
        with np.errstate(invalid="ignore"):
            expected = np.array([to_bits(v) for v in fn(qa, qb)])
        np.testing.assert_array_equal(
            np.array(results[f"{kind}_{key}"])[differ], expected[differ], err_msg=key
        )
    np.testing.assert_array_equal(f32(results[f"{kind}_lo"]), qa.astype(np.float32))
    np.testing.assert_array_equal(f32(results[f"{kind}_hi"]), qb.astype(np.float32))


@pytest.mark.parametrize("kind", ["h", "b"])
def test_pairs_pack_low_lane_first(results: dict[str, list[int]], kind: str) -> None:
    lo = np.array(results[f"{kind}_cvt"], np.uint32)
    n = len(lo)
    hi = lo[(np.arange(n) * 7 + 3) % n]
    np.testing.assert_array_equal(np.array(results[f"{kind}_pack"], np.uint32), lo | hi << 16)
    np.testing.assert_array_equal(np.array(results[f"{kind}_swap"], np.uint32), hi | lo << 16)
    mask = np.array(results[f"{kind}_lt2mask"], np.uint32)
    ones = np.array(results[f"{kind}_lt2"], np.uint32)
    one_bits = 0x3C00 if kind == "h" else 0x3F80
    np.testing.assert_array_equal(ones & 0xFFFF, np.where(mask & 0xFFFF, one_bits, 0))
    np.testing.assert_array_equal(ones >> 16, np.where(mask >> 16, one_bits, 0))
    np.testing.assert_array_equal(
        np.array(results[f"{kind}_blt2"]), (mask == 0xFFFFFFFF).astype(int)
    )
    key2 = "h2_f2" if kind == "h" else "b2_f2"
    np.testing.assert_array_equal(np.array(results[key2], np.uint32), lo | hi << 16)
    back = f32(results["h2_back" if kind == "h" else "b2_back"])
    np.testing.assert_array_equal(back[0::2], f32(results[f"{kind}_tof"]))


def test_pair_helpers(results: dict[str, list[int]]) -> None:
    h = lambda v: bits16(v)  # noqa: E731
    b = lambda v: bitsbf(v)  # noqa: E731
    assert one(results, "h2_halves") == h(1) | h(-2) << 16
    assert one(results, "h2_dup") == h(3) | h(3) << 16
    assert (
        one(results, "h2_lows") == h(1) | h(3) << 16
        and one(results, "h2_highs") == h(2) | h(4) << 16
    )
    assert one(results, "h2_lohi") == h(5) | h(6) << 16
    assert (
        one(results, "b2_lows") == b(1) | b(3) << 16 and one(results, "b2_dup") == b(3) | b(3) << 16
    )
    assert one(results, "b2_lohi") == b(5) | b(6) << 16
    assert one(results, "raw") == 0x3C00 | h(2) << 16
    assert one(results, "volatile") == 0x4400
    assert one(results, "h_isnan2") == 0x3C00
    assert one(results, "h2_eq_bool") == 10
    assert one(results, "h_inc") == h(2.5) | (h(2) | h(3) << 16) << 16


def test_fma_rounds_once(results: dict[str, list[int]]) -> None:
    assert one(results, "h_fma_hard") == bits16(1.5 + 2.0**-10)
    assert one(results, "b_fma_hard") == bitsbf(1.5 + 2.0**-7)


def test_nan_zero_and_saturation_rules(results: dict[str, list[int]]) -> None:
    # canonical, as the GPU's
    assert one(results, "h_nan") == 0x7FFF and one(results, "h_nan_op") == 0x7FFF
    assert one(results, "b_nan") == 0x7FFF and one(results, "b_nan_op") == 0x7FFF
    assert one(results, "h_max_nan") == 0x3C00 and one(results, "h_maxnan_nan") == 0x7FFF
    assert one(results, "h_max_zero") == 0x0000 and one(results, "h_min_zero") == 0x8000  # +0 > -0
    assert one(results, "b_min_nan2") == 0x7FFF
    assert one(results, "h_isinf") == -10 + 100 and one(results, "h_isnan") == 10
    assert one(results, "h_nan_cmp") == 10  # != is unordered (true for NaN), __hne ordered
    assert one(results, "h_sat") == 0x3C00 | 0 << 16  # [0, 1], NaN to +0
    assert one(results, "h_relu") == 0 | bits16(7) << 16
    assert one(results, "h_int_ctor") == 0x7C00 | bits16(3) << 16  # 70000 rounds to infinity
    # conversions to integers truncate and saturate
    assert one(results, "h_sat_short") == 32767 * 100000 - 3
    assert one(results, "h_sat_ushort") == 0 + 0xFFFFFFFF * 10
    assert one(results, "h_ll_nan") == -(2**63) and one(results, "h_int_nan") == 0


def test_conversions_to_16_bits_round_as_named(results: dict[str, list[int]]) -> None:
    for mode in ("rz", "rd", "ru"):
        want_h = [bits16(round_value(float(x), "f16", mode)) for x in F32]
        want_b = [bitsbf(round_value(float(x), "bf16", mode)) for x in F32]
        assert results[f"h_{mode}"] == want_h, mode
        assert results[f"b_{mode}"] == want_b, mode
    want = [bits16(rounded(Fraction(d), "f16")) for d in F64]
    assert results["d2h"] == want and results["d2h_ctor"] == want
    assert results["d2b"] == [bitsbf(rounded(Fraction(d), "bf16")) for d in F64]
    for mode in MODES:
        assert results[f"d2f_{mode}"] == [bits32(rounded(Fraction(d), "f32", mode)) for d in F64], (
            mode
        )
        for fmt, key, to in (
            ("f16", "ll2h", bits16),
            ("bf16", "ll2b", bitsbf),
            ("f32", "ll2f", bits32),
            ("f64", "ll2d", bits64),
        ):
            assert results[f"{key}_{mode}"] == [to(rounded(Fraction(v), fmt, mode)) for v in I64], (
                key,
                mode,
            )
    assert results["ll2b_ctor"] == [bitsbf(rounded(Fraction(v), "bf16")) for v in I64]
    assert results["ll2h_ctor"] == [bits16(rounded(Fraction(v), "f16")) for v in I64]
    low32 = [int(np.array([v], np.int64).astype(np.int32)[0]) for v in I64]
    for key, fmt, mode, to in (("i2h_rn", "f16", "rn", bits16), ("i2h_rz", "f16", "rz", bits16),
                               ("i2b_ru", "bf16", "ru", bitsbf), ("i2b_ctor", "bf16", "rn", bitsbf),
                               ("i2h_ctor", "f16", "rn", bits16),
                               *((f"i2f_{m}", "f32", m, bits32) for m in MODES)):  # fmt: skip
        assert results[key] == [to(rounded(Fraction(v), fmt, mode)) for v in low32], key
    assert results["u2f_rd"] == [bits32(rounded(Fraction(v % 2**32), "f32", "rd")) for v in low32]
    for key, fmt, mode, to in (("ull2f_rn", "f32", "rn", bits32), ("ull2f_rz", "f32", "rz", bits32),
                               ("ull2f_ru", "f32", "ru", bits32), ("ull2d_rd", "f64", "rd", bits64),
                               ("ull2d_ru", "f64", "ru", bits64),
                               ("ull2b_rn", "bf16", "rn", bitsbf)):  # fmt: skip
        assert results[key] == [to(rounded(Fraction(v), fmt, mode)) for v in U64], key


def int_ref(x: float, mode: str, bits: int, signed: bool) -> int:
    """cvt's float-to-integer: rounded as named, saturated, NaN to 0 (0x8000... for 64 bits)."""
    if x != x:
        return -(2**63) if bits == 64 and signed else 2**63 if bits == 64 else 0
    if math.isinf(x):
        v = x
    else:
        f = Fraction(x)
        fl = math.floor(f)
        v = {"rz": math.trunc(f), "rd": fl, "ru": math.ceil(f),
             "rn": fl + (1 if f - fl > Fraction(1, 2) or (f - fl == Fraction(1, 2) and fl % 2)
                         else 0),
             "rna": math.copysign(math.floor(abs(f) + Fraction(1, 2)), x)}[mode]  # fmt: skip
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return int(min(max(v, lo), hi))


def test_float_to_integer_conversions(results: dict[str, list[int]]) -> None:
    fl = CONV.astype(np.float32).astype(np.float64)
    for mode in MODES:
        for key, xs, bits, signed in (("f2i", fl, 32, True), ("f2u", fl, 32, False),
                                      ("f2ll", fl, 64, True), ("f2ull", fl, 64, False),
                                      ("d2i", CONV, 32, True)):  # fmt: skip
            assert results[f"{key}_{mode}"] == [
                int_ref(float(x), mode, bits, signed) for x in xs
            ], (key, mode)
    assert results["d2u_rz"] == [int_ref(float(x), "rz", 32, False) for x in CONV]
    assert results["d2ll_ru"] == [int_ref(float(x), "ru", 64, True) for x in CONV]
    assert results["d2ull_rd"] == [int_ref(float(x), "rd", 64, False) for x in CONV]
    assert results["lrintf"] == [int_ref(float(x), "rn", 64, True) for x in fl]
    assert results["llroundf"] == [int_ref(float(x), "rna", 64, True) for x in fl]
    assert results["lround"] == [int_ref(float(x), "rna", 64, True) for x in CONV]
    a = half_cases()[0]
    qa = format_of("h")[1](a)
    for key, mode, bits, signed in (("h_toi_rn", "rn", 32, True), ("h_toi_rz", "rz", 32, True),
                                    ("h_toi_rd", "rd", 32, True), ("h_toi_ru", "ru", 32, True),
                                    ("h_tos_rz", "rz", 16, True), ("h_tou_rn", "rn", 32, False),
                                    ("h_tous_rz", "rz", 16, False), ("h_toll_rd", "rd", 64, True),
                                    ("h_toull_ru", "ru", 64, False), ("h_toc_rz", "rz", 8, True),
                                    ("h_impl_int", "rz", 32, True),
                                    ("h_impl_short", "rz", 16, True)):  # fmt: skip
        assert results[key] == [int_ref(float(x), mode, bits, signed) for x in qa], key
    assert results["h_impl_bool"] == [int(x != 0) for x in qa]
    qb = format_of("b")[1](a)
    for key, mode, bits, signed in (("b_toi_rn", "rn", 32, True), ("b_toi_rz", "rz", 32, True),
                                    ("b_toll_rz", "rz", 64, True), ("b_tou_rd", "rd", 32, False),
                                    ("b_tos_ru", "ru", 16, True)):  # fmt: skip
        assert results[key] == [int_ref(float(x), mode, bits, signed) for x in qb], key
    assert results["hb_cross"] == [
        bf16_rne(float(h)) | bits16(float(b)) << 16 for h, b in zip(qa, qb, strict=True)
    ]


def sqrt_ref(x: float, fmt: str, mode: str) -> float:
    """The square root of x rounded as named: the candidates around the float one,
    decided exactly."""
    if x == 0 or not math.isfinite(x):
        return math.sqrt(x)
    dtype = np.float32 if fmt == "f32" else np.float64
    r = dtype(math.sqrt(x))
    fx = Fraction(x)
    while Fraction(float(r)) ** 2 > fx:
        r = np.nextafter(r, dtype(0))
    while Fraction(float(np.nextafter(r, dtype(np.inf)))) ** 2 <= fx:
        r = np.nextafter(r, dtype(np.inf))
    up = np.nextafter(r, dtype(np.inf))
    if Fraction(float(r)) ** 2 == fx or mode in ("rz", "rd"):
        return float(r)
    if mode == "ru":
        return float(up)
    mid = (Fraction(float(r)) + Fraction(float(up))) / 2
    return float(up) if mid * mid < fx else float(r)


def rsqrt_ref(x: float) -> float:
    if x == 0:
        return math.inf
    r = np.float32(1 / math.sqrt(x))
    fx = Fraction(x)
    for _ in range(2):
        up, down = np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(0))
        if fx * ((Fraction(float(r)) + Fraction(float(up))) / 2) ** 2 < 1:
            r = up
        elif fx * ((Fraction(float(r)) + Fraction(float(down))) / 2) ** 2 > 1:
            r = down
    return float(r)


def op_ref(op: str, a: float, b: float, c: float, fmt: str, mode: str) -> float:
    if op == "sqrt":
        return sqrt_ref(abs(a), fmt, mode)
    if op in ("div", "rcp") and (b if op == "div" else a) == 0:
        return (
            (a if op == "div" else 1.0)
            / math.copysign(math.inf, b if op == "div" else a)
            * math.inf
        )
    x, y = (1.0, a) if op == "rcp" else (a, b)
    exact = {"add": lambda: Fraction(x) + Fraction(y), "sub": lambda: Fraction(x) - Fraction(y),
             "mul": lambda: Fraction(x) * Fraction(y), "div": lambda: Fraction(x) / Fraction(y),
             "rcp": lambda: 1 / Fraction(y),
             "fma": lambda: Fraction(x) * Fraction(y) + Fraction(c)}[op]()  # fmt: skip
    if exact == 0:
        if op == "mul":
            return math.copysign(0.0, x) * math.copysign(1.0, y)
        if op == "div":
            return math.copysign(0.0, x) / math.copysign(1.0, y)
        if op == "fma":
            return zero_sum(math.copysign(0.0, x) * math.copysign(1.0, y), c, mode)
        return zero_sum(x, y if op == "add" else -y, mode)
    return rounded(exact, fmt, mode)


def test_float_intrinsics_round_exactly_as_named(results: dict[str, list[int]]) -> None:
    for mode in MODES:
        for op in ("add", "sub", "mul", "div", "fma"):
            want = [
                bits32(op_ref(op, float(a), float(b), float(c), "f32", mode))
                for a, b, c in zip(FA, FB, FC, strict=True)
            ]
            assert results[f"f{op if op != 'fma' else 'maf'}_{mode}"] == want, (op, mode)
        assert results[f"frcp_{mode}"] == [
            bits32(op_ref("rcp", float(b), 0, 0, "f32", mode)) for b in FB
        ], mode
        assert results[f"fsqrt_{mode}"] == [
            bits32(sqrt_ref(abs(float(a)), "f32", mode)) for a in FA
        ], mode
    assert results["frsqrt_rn"] == [bits32(rsqrt_ref(abs(float(a)))) for a in FA]
    assert results["rsqrtf"] == [bits32(rsqrt_ref(abs(float(b)))) for b in FB]
    assert f32(results["zero_rn"])[0] == 0 and not np.signbit(f32(results["zero_rn"])[0])
    assert np.signbit(f32(results["zero_rd"])[0]) and not np.signbit(f32(results["zero_rz"])[0])
    assert np.signbit(f32(results["zero_rd_neg"])[0]) and not np.signbit(
        f32(results["zero_ru_mixed"])[0]
    )
    assert np.signbit(f32(results["zero_fma_rd"])[0]) and np.signbit(f64(results["zero_d_rd"])[0])


def test_double_intrinsics_round_exactly_as_named(results: dict[str, list[int]]) -> None:
    for mode in MODES:
        for op in ("add", "sub", "mul", "div"):
            want = [
                bits64(op_ref(op, float(a), float(b), 0, "f64", mode))
                for a, b in zip(DA, DB, strict=True)
            ]
            assert results[f"d{op}_{mode}"] == want, (op, mode)
        assert results[f"drcp_{mode}"] == [
            bits64(op_ref("rcp", float(b), 0, 0, "f64", mode)) for b in DB
        ], mode
        assert results[f"dsqrt_{mode}"] == [
            bits64(sqrt_ref(abs(float(a)), "f64", mode)) for a in DA
        ], mode


def test_math_within_stated_ulps(results: dict[str, list[int]]) -> None:
    inputs = results["__inputs__"]
    failures = []
    for table, dtype in (
        (F_UNARY, np.float32),
        (F_BINARY, np.float32),
        (D_UNARY, np.float64),
        (D_BINARY, np.float64),
    ):
        for name, spec in table.items():
            fn, bound = spec[0], spec[-1]
            want = reference(name, fn, *inputs[name])
            got = (f32 if dtype == np.float32 else f64)(results[f"m_{name}"])
            err = ulps(got, want, dtype)
            if not np.all(err <= bound):
                i = int(np.argmax(err))
                failures.append(
                    f"{name}({inputs[name][0][i]!r}): {got[i]!r} vs {want[i]!r},"
                    f" {err[i]:.2f} ulp > {bound}"
                )
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind", ["h", "b"])
def test_half_functions_within_an_ulp(results: dict[str, list[int]], kind: str) -> None:
    inputs = results["__inputs__"]
    for name, (fn, _) in H_UNARY.items():
        (xs,) = inputs[name]
        if kind == "h":
            q = xs.astype(np.float16).astype(np.float64)
            got = f16(results[f"hm_{name}"]).astype(np.float64)
            want = fn(q).astype(np.float16).astype(np.float64)
            step = np.spacing(np.abs(want.astype(np.float16))).astype(np.float64)
        else:
            q = format_of("b")[1](xs)
            got = np.array([bf_value(int(b)) for b in results[f"bm_{name}"]])
            want = np.array([bf_value(bf16_rne(float(v))) for v in fn(q)])
            step = np.abs(want) * 2.0**-7 + 1e-38
        assert np.all(np.abs(got - want) <= step), (kind, name, q, got, want)


def test_special_values_and_overloads(results: dict[str, list[int]]) -> None:
    def pair(key: str) -> tuple[float, float]:
        v = one(results, key)
        return f32_bits_to_float(v & 0xFFFFFFFF), f32_bits_to_float(v >> 32)

    assert one(results, "abs") == 7 + 80 + 900 + 2500 + 15000 + 400000
    # int and unsigned compare as unsigned
    assert one(results, "minmax") == 0xFFFFFFFF + 1 * 10000000000
    assert one(results, "minmax_l") == 2**64 - 1
    assert pair("fminmax") == (1.5, -1.0) and f64(results["dmax"])[0] == 3.5
    assert one(results, "classify") == 0b1001111  # isnormal(1e-40f) is false: subnormal
    assert pair("saturatef") == (0.0, 1.0) and f32(results["saturatef2"])[0] == 0.25
    # CUDA's documented corner
    assert pair("fdividef") == (0.0, 2.0) and np.isnan(f32(results["fdividef_inf"])[0])
    s1, s2 = pair("sinpi_exact")
    # sinpi(n) is +-0
    assert (s1, math.copysign(1, s1), s2, math.copysign(1, s2)) == (0.0, 1.0, 0.0, -1.0)
    c1, c2 = pair("cospi_exact")
    # cospi(n + 1/2) is +0
    assert (c1, math.copysign(1, c1), c2, math.copysign(1, c2)) == (0.0, 1.0, 0.0, 1.0)
    assert f64(results["sinpi_d"])[0] == 0 and f64(results["cospi_d"])[0] == 0
    assert pair("special_f") == (math.inf, math.inf)
    inf_, nan_ = pair("special_f2")
    assert inf_ == math.inf and math.isnan(nan_)
    assert one(results, "lrint_sat") == 1 and one(results, "llrint_nan") == -(2**63)
    assert one(results, "i_nan") == 0 and one(results, "u_neg") == 0
    assert pair("sincosf") == (float(np.float32(np.sin(0.5))), float(np.float32(np.cos(0.5))))
    sp, cp = pair("sincospif")
    assert sp == cp == float(np.float32(np.sqrt(0.5)))
    assert list(f64(results["sincos"])) == [math.sin(0.5), math.cos(0.5)]
    v = one(results, "frexpf")
    assert (f32_bits_to_float(v & 0xFFFFFFFF), v >> 32) == (0.75, 4)
    assert pair("ldexpf") == (12.0, 24.0) and pair("modff") == (-0.25, -3.0)
    v = one(results, "remquof")
    # 7 = 4 * 2 - 1, quotient 4
    assert (f32_bits_to_float(v & 0xFFFFFFFF), (v >> 32) & 7) == (-1.0, 4)
    assert one(results, "ilogbf") == 33 and f32(results["nextafterf"])[0] == np.nextafter(
        np.float32(1), np.float32(2)
    )
    assert f32(results["fmaf"])[0] == -(2.0**-46)  # fused: the product is not rounded first
    assert pair("normf") == (13.0, 13.0) and f32(results["rnorm3df"])[0] == np.float32(1 / 13)
    assert f32(results["norm4df"])[0] == 5.0 and f64(results["norm"])[0] == 13.0
    assert pair("std_math") == (float(np.float32(np.sqrt(2))), float(np.float32(np.e)))
    assert f64(results["std_math_d"])[0] == math.sqrt(2)


def test_constants(results: dict[str, list[int]]) -> None:
    v = one(results, "c_inf")
    assert (
        v == 0x7F800000 | 0x7F800000 << 32
        and one(results, "c_nan") == 1
        and f64(results["c_huge"])[0] == math.inf
    )
    assert [f64(results[k])[0] for k in ("c_pi", "c_pi2", "c_e", "c_ln2", "c_sqrt2", "c_1pi")] == [
        math.pi,
        math.pi / 2,
        math.e,
        math.log(2),
        math.sqrt(2),
        1 / math.pi,
    ]
    fi, di = np.finfo(np.float32), np.finfo(np.float64)
    assert list(f32(results["c_flt"])) == [fi.max, fi.tiny, fi.eps]
    assert list(f64(results["c_dbl"])) == [di.max, di.tiny, di.eps]
    assert results["c_int"] == [
        2**31 - 1,
        -(2**31),
        2**32 - 1,
        2**63 - 1,
        -(2**63),
        2**64 - 1,
        -(2**15),
        -128,
        255,
        2**63 - 1,
    ]
    assert results["cudart_f"] == [
        bits32(3.141592654),
        0x7F800000,
        0x7FFFFFFF,
        0x80000000,
        0x7F7FFFFF,
        1,
        bits32(0.707106781),
        bits32(1.442695041),
    ]
    assert results["cudart_d"] == [
        bits64(math.pi),
        0x7FF0000000000000,
        0xFFF8000000000000,
        0x8000000000000000,
        bits64(math.log(2)),
    ]
    assert (
        one(results, "cudart_h") == 0x7BFF | 0x3C00 << 16
        and one(results, "cudart_b") == 0x7F7F | 0x3F80 << 16
    )


def popc(x: int) -> int:
    return bin(x).count("1")


def sx(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def test_type_punning_and_integer_intrinsics(results: dict[str, list[int]]) -> None:
    iu, lu = results["__ints__"]
    n = len(iu)
    m32 = 0xFFFFFFFF
    want: dict[str, list[int]] = {k: [] for k in (
        "popc", "clz", "ffs", "brev", "byte_perm", "fsl", "fslc", "fsr", "fsrc", "mul24", "umul24",
        "mulhi", "umulhi", "sad", "usad", "ihadd", "rhadd", "uhadd", "urhadd", "dp4a", "dp4a_u",
        "dp2a_lo", "dp2a_hi", "int_as_float", "uint_as_float", "umax_mixed", "umin_mixed",
        "imax")}  # fmt: skip
    for i in range(n):
        x, y, z = iu[i], iu[(i * 7 + 3) % n], iu[(i * 5 + 1) % n]
        v = y << 32 | x
        sb = lambda w, k: sx(w >> (8 * k), 8)  # noqa: E731
        ub = lambda w, k: (w >> (8 * k)) & 0xFF  # noqa: E731
        s16 = lambda w, k: sx(w >> (16 * k), 16)  # noqa: E731
        want["popc"].append(popc(x))
        want["clz"].append(32 - x.bit_length())
        want["ffs"].append((x & -x).bit_length())
        want["brev"].append(int(f"{x:032b}"[::-1], 2))
        want["byte_perm"].append(
            sum(((v >> (8 * ((z >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))
        )
        want["fsl"].append(((v << (z & 31)) >> 32) & m32)
        want["fslc"].append(((v << min(z % 40, 32)) >> 32) & m32)
        want["fsr"].append((v >> (z & 31)) & m32)
        want["fsrc"].append((v >> min(z % 40, 32)) & m32)
        want["mul24"].append(sx(sx(x, 24) * sx(y, 24), 32))
        want["umul24"].append(((x & 0xFFFFFF) * (y & 0xFFFFFF)) & m32)
        want["mulhi"].append(sx((sx(x, 32) * sx(y, 32)) >> 32, 32))
        want["umulhi"].append((x * y) >> 32)
        want["sad"].append((abs(sx(x, 32) - sx(y, 32)) + z) & m32)
        want["usad"].append((abs(x - y) + z) & m32)
        want["ihadd"].append((sx(x, 32) + sx(y, 32)) >> 1)
        want["rhadd"].append((sx(x, 32) + sx(y, 32) + 1) >> 1)
        want["uhadd"].append((x + y) >> 1)
        want["urhadd"].append((x + y + 1) >> 1)
        want["dp4a"].append(sx(sum(sb(x, k) * sb(y, k) for k in range(4)) + sx(z, 32), 32))
        want["dp4a_u"].append((sum(ub(x, k) * ub(y, k) for k in range(4)) + z) & m32)
        want["dp2a_lo"].append(sx(sum(s16(x, k) * sb(y, k) for k in range(2)) + sx(z, 32), 32))
        want["dp2a_hi"].append(sx(sum(s16(x, k) * sb(y, k + 2) for k in range(2)) + sx(z, 32), 32))
        want["int_as_float"].append(x)
        want["uint_as_float"].append(1)
        want["umax_mixed"].append(max(x, y))
        want["umin_mixed"].append(min(x, y))
        want["imax"].append(max(sx(x, 32), sx(y, 32)))
    for key, expected in want.items():
        assert results[key] == expected, key
    m = len(lu)
    want64: dict[str, list[int]] = {
        k: []
        for k in (
            "popcll",
            "clzll",
            "ffsll",
            "brevll",
            "mul64hi",
            "umul64hi",
            "hiint",
            "loint",
            "hilo",
            "ullmax",
            "llmin",
        )
    }
    for i in range(m):
        x, y = lu[i], lu[(i * 7 + 3) % m]
        want64["popcll"].append(popc(x))
        want64["clzll"].append(64 - x.bit_length())
        want64["ffsll"].append((x & -x).bit_length())
        want64["brevll"].append(int(f"{x:064b}"[::-1], 2))
        want64["mul64hi"].append(sx((sx(x, 64) * sx(y, 64)) >> 64, 64))
        want64["umul64hi"].append((x * y) >> 64)
        want64["hiint"].append(sx(x >> 32, 32))
        want64["loint"].append(sx(x, 32))
        want64["hilo"].append(x)
        want64["ullmax"].append(max(x, y))
        want64["llmin"].append(min(sx(x, 64), sx(y, 64)))
    for key, expected in want64.items():
        assert results[key] == expected, key


def test_what_cuda_rejects_does_not_compile(tmp_path: Path) -> None:
    """No arithmetic on float4, no mixed __half/float arithmetic: each a compile error, as with
    nvcc, and nothing else fails (cuda_fp16.h stands alone; the library headers may come
    either side)."""
    done = compile_cpp(FAILING, tmp_path, "bad", [*flags(), "-c", "-o", str(tmp_path / "bad.o")])
    assert done.returncode != 0
    errors = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"bad\.cpp:(\d+):\d+: error: (.*)", done.stderr)
    }
    assert set(errors) == set(FAILING_LINES), done.stderr[-3000:]
    for line, words in FAILING_LINES.items():
        assert any(w in errors[line] for w in words), errors[line]
