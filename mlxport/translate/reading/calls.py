"""The one table of CUDA functions: what each becomes in Metal, read by the rule translator
(render/msl_render.py) and by the notes the model is shown (features.py).

Each name has one entry, of one of three kinds:
- a rule: the translator writes ``form`` with ``target`` (``metal::exp(x)`` for ``expf(x)``), and
  the model is told ``metal``;
- a refusal: there is no Metal equivalent; the translator stops with ``reason``, and the model is
  told to rewrite, with the same reason (``metal`` may suggest the rewrite);
- a hint: Metal has an equivalent the translator does not write; it stops, and ``metal`` tells the
  model what to write by hand.
"""

from __future__ import annotations

from typing import NamedTuple

RULE, REFUSAL, HINT = "rule", "refusal", "hint"
# How a rule is written: the forms the translator's table-driven path knows, and "code" for the
# calls the renderer writes with code of its own (barriers, sincos as a statement, assert).
FORMS = ("call", "cast", "operator", "unary", "store", "shuffle", "old_shuffle", "vote", "atomic")


class Call(NamedTuple):
    category: str  # the reader's feature category (math, half, warp, atomic, barrier, ...)
    kind: str  # RULE, REFUSAL or HINT
    metal: str | None  # what the model is told it becomes (None: nothing)
    reason: str = ""  # why a refusal or hint stops the translator; a rule's caveat
    form: str = ""  # a rule's form: one of FORMS, or "code"
    target: str = ""  # the Metal name, operator or format string the form writes

    @property
    def needs_rewrite(self) -> bool:
        return self.kind != RULE

    def refusal(self) -> str:
        """What the translator says when it stops at this call."""
        return f"{self.reason}; by hand: {self.metal}" if self.kind == HINT else self.reason


def _rule(category: str, form: str, target: str, metal: str | None = None, reason: str = ""):
    return Call(category, RULE, target if metal is None else metal, reason, form, target)


def _rounded(ty: str, widen: bool = False) -> Call:
    """A round-to-nearest conversion to an integer type (a half or bfloat16 widened first)."""
    x = "float({0})" if widen else "{0}"
    return _rule("conversion", "unary", f"{ty}(metal::rint({x}))", f"{ty}(rint(x))")


def _refusal(category: str, reason: str, metal: str | None = None) -> Call:
    return Call(category, REFUSAL, metal, reason)


def _hint(category: str, metal: str, reason: str) -> Call:
    return Call(category, HINT, metal, reason)


_FAST = "fast variant; MLX compiles with math_mode='safe' by default"
_MASK = "Metal SIMD functions take no mask; they act on the active lanes"
_OLD = "pre-CUDA 9 form without mask"
_TORCH = "PyTorch's shuffle, its mask full by default"
_CAS_LOOP = "an atomic_compare_exchange_weak_explicit loop"
_BALLOT = "returns a 64-bit simd_vote; use the low 32 bits"
_TEXTURE = "texture fetches: pass the data as a device buffer"
_LOAD = "(*({0}))"
_STORE = "(*({0}) = ({1}))"


def _math(target: str, fast: bool = False) -> Call:
    return _rule("math", "call", target, reason=_FAST if fast else "")


CALLS: dict[str, Call] = {
    # math: metal::* functions
    "expf": _math("metal::exp"),
    "exp": _math("metal::exp"),
    "__expf": _math("metal::fast::exp", fast=True),
    "exp2f": _math("metal::exp2"),
    "exp2": _math("metal::exp2"),
    "exp10f": _math("metal::exp10"),
    "__exp10f": _math("metal::fast::exp10", fast=True),
    "logf": _math("metal::log"),
    "log": _math("metal::log"),
    "__logf": _math("metal::fast::log", fast=True),
    "log2f": _math("metal::log2"),
    "log2": _math("metal::log2"),
    "__log2f": _math("metal::fast::log2", fast=True),
    "log10f": _math("metal::log10"),
    "__log10f": _math("metal::fast::log10", fast=True),
    "log1pf": _math("log1p"),
    "log1p": _math("log1p"),
    "sqrtf": _math("metal::sqrt"),
    "sqrt": _math("metal::sqrt"),
    "rsqrtf": _math("metal::rsqrt"),
    "rsqrt": _math("metal::rsqrt"),
    "__frsqrt_rn": _math("metal::rsqrt"),
    "__fsqrt_rn": _math("metal::precise::sqrt"),
    "powf": _math("metal::pow"),
    "pow": _math("metal::pow"),
    "__powf": _math("metal::fast::pow", fast=True),
    "tanhf": _math("metal::precise::tanh"),
    "tanh": _math("metal::precise::tanh"),
    "sinhf": _math("metal::sinh"),
    "coshf": _math("metal::cosh"),
    "sinf": _math("metal::sin"),
    "sin": _math("metal::sin"),
    "cosf": _math("metal::cos"),
    "cos": _math("metal::cos"),
    "tanf": _math("metal::tan"),
    "__sinf": _math("metal::fast::sin", fast=True),
    "__cosf": _math("metal::fast::cos", fast=True),
    "__tanf": _math("metal::fast::tan", fast=True),
    "asinf": _math("metal::asin"),
    "acosf": _math("metal::acos"),
    "atanf": _math("metal::atan"),
    "atan2f": _math("metal::atan2"),
    "fabsf": _math("metal::abs"),
    "fabs": _math("metal::abs"),
    "fmaxf": _math("metal::max"),
    "fminf": _math("metal::min"),
    "fmax": _math("metal::max"),
    "fmin": _math("metal::min"),
    "fmaf": _math("metal::fma"),
    "fma": _math("metal::fma"),
    "__fmaf_rn": _math("metal::fma"),
    "floorf": _math("metal::floor"),
    "floor": _math("metal::floor"),
    "ceilf": _math("metal::ceil"),
    "ceil": _math("metal::ceil"),
    "roundf": _math("metal::round"),
    "round": _math("metal::round"),
    "truncf": _math("metal::trunc"),
    "rintf": _math("metal::rint"),
    "nearbyintf": _math("metal::rint"),
    "fmodf": _math("metal::fmod"),
    "copysignf": _math("metal::copysign"),
    "__fdividef": _math("metal::fast::divide", fast=True),
    "__saturatef": _math("metal::saturate"),
    "isnan": _math("metal::isnan"),
    "isinf": _math("metal::isinf"),
    "isfinite": _math("metal::isfinite"),
    "signbit": _math("metal::signbit"),
    "hlog": _math("metal::log"),
    "hexp2": _math("metal::exp2"),
    "htanh": _math("metal::precise::tanh"),
    "expm1f": _rule("math", "unary", "(metal::exp({0}) - 1.0f)", "metal::exp(x) - 1"),
    "__expm1f": _rule("math", "unary", "(metal::exp({0}) - 1.0f)", "metal::exp(x) - 1"),
    "__frcp_rn": _rule("math", "unary", "(1.0f / ({0}))", "1.0f / x"),
    "__fadd_rn": _rule("math", "operator", "+"),
    "__fsub_rn": _rule("math", "operator", "-"),
    "__fmul_rn": _rule("math", "operator", "*"),
    "__fdiv_rn": _rule("math", "operator", "/"),
    "sincosf": _rule(
        "math", "code", "", "metal::sincos", "translated as a statement `sincosf(x, &s, &c);`"
    ),
    "sincos": _rule(
        "math", "code", "", "metal::sincos", "translated as a statement `sincos(x, &s, &c);`"
    ),
    "__sincosf": _rule(
        "math",
        "code",
        "",
        "metal::fast::sincos",
        "translated as a statement `__sincosf(x, &s, &c);`; " + _FAST,
    ),
    "erff": _hint(
        "math",
        "an erf written in the kernel (a polynomial, as MLX's kernels/erf.h)",
        "no erf in Metal",
    ),
    "erfinvf": _hint(
        "math", "an erfinv written in the kernel (as MLX's kernels/erf.h)", "no erfinv in Metal"
    ),
    "erfcf": _refusal("math", "no erfc in Metal"),
    "lgammaf": _refusal("math", "no lgamma in Metal"),
    "tgammaf": _refusal("math", "no tgamma in Metal"),
    "cbrtf": _refusal("math", "no cbrt in Metal"),
    "sincospif": _refusal("math", "no sincospi in Metal"),
    # bits
    "__popc": _rule("bits", "call", "metal::popcount"),
    "__popcll": _rule("bits", "call", "metal::popcount", "metal::popcount (64-bit)"),
    "__clz": _rule("bits", "call", "metal::clz"),
    "__clzll": _rule("bits", "call", "metal::clz", "metal::clz (64-bit)"),
    "__brev": _rule("bits", "call", "metal::reverse_bits"),
    "__umulhi": _rule("bits", "call", "metal::mulhi"),
    "__mulhi": _rule("bits", "call", "metal::mulhi"),
    "__ffs": _rule(
        "bits",
        "unary",
        "(({0}) == 0 ? 0 : int(metal::ctz({0})) + 1)",
        "ctz(x) + 1 (0 when x == 0)",
    ),
    "__mul24": _rule("bits", "operator", "*"),
    "__umul24": _rule("bits", "operator", "*"),
    "__float_as_int": _rule("bits", "cast", "as_type<int>"),
    "__int_as_float": _rule("bits", "cast", "as_type<float>"),
    "__float_as_uint": _rule("bits", "cast", "as_type<uint>"),
    "__uint_as_float": _rule("bits", "cast", "as_type<float>"),
    "__byte_perm": _hint("bits", "bit manipulation by hand", "no byte permute in Metal"),
    # conversions
    "__int2float_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__uint2float_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__ll2float_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__ull2float_rn": _rule("conversion", "cast", "float", "float(x)"),
    # Metal has no double: a double is computed in float (msl_render.type_name)
    "__int2double_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__uint2double_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__ll2double_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__ull2double_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__double2float_rn": _rule("conversion", "cast", "float", "float(x)"),
    "__double2int_rn": _rounded("int"),
    "__half2int_rn": _rounded("int", widen=True),
    "__bfloat162int_rn": _rounded("int", widen=True),
    "__float2ll_rn": _rounded("long"),
    "__double2ll_rn": _rounded("long"),
    "__half2ll_rn": _rounded("long", widen=True),
    "__bfloat162ll_rn": _rounded("long", widen=True),
    "__double2uint_rn": _rounded("uint"),
    "__half2uint_rn": _rounded("uint", widen=True),
    "__bfloat162uint_rn": _rounded("uint", widen=True),
    "__float2ull_rn": _rounded("ulong"),
    "__double2ull_rn": _rounded("ulong"),
    "__half2ull_rn": _rounded("ulong", widen=True),
    "__bfloat162ull_rn": _rounded("ulong", widen=True),
    "__ll2half_rn": _rule("half", "cast", "half", "half(x)"),
    "__short2half_rn": _rule("half", "cast", "half", "half(x)"),
    "__uint2half_rn": _rule("half", "cast", "half", "half(x)"),
    "__ull2half_rn": _rule("half", "cast", "half", "half(x)"),
    "__ushort2half_rn": _rule("half", "cast", "half", "half(x)"),
    "__int2bfloat16_rn": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__ll2bfloat16_rn": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__short2bfloat16_rn": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__uint2bfloat16_rn": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__ull2bfloat16_rn": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__ushort2bfloat16_rn": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__double2half": _rule("half", "cast", "half", "half(x)"),
    "__double2bfloat16": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__float22bfloat162_rn": _rule("half", "cast", "bfloat2", "bfloat2(x)"),
    "__float2int_rz": _rule("conversion", "cast", "int", "int(x)"),
    "__float2uint_rz": _rule("conversion", "cast", "uint", "uint(x)"),
    "__float2int_rn": _rounded("int"),
    "__float2uint_rn": _rounded("uint"),
    # half and bfloat16
    "__float2half": _rule("half", "cast", "half", "half(x)"),
    "__float2half_rn": _rule("half", "cast", "half", "half(x)"),
    "__float2half_rz": _rule("half", "cast", "half", "half(x)"),
    "__half2float": _rule("half", "cast", "float", "float(x)"),
    "__int2half_rn": _rule("half", "cast", "half", "half(x)"),
    "__half2int_rz": _rule("half", "cast", "int", "int(x)"),
    "__float2bfloat16": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__float2bfloat16_rn": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__float2bfloat16_rz": _rule("half", "cast", "bfloat", "bfloat(x)"),
    "__bfloat162float": _rule("half", "cast", "float", "float(x)"),
    "__float22half2_rn": _rule("half", "cast", "half2", "half2(x)"),
    "__half22float2": _rule("half", "cast", "float2", "float2(x)"),
    "__float2half2_rn": _rule("half", "cast", "half2", "half2(x)"),
    "__floats2half2_rn": _rule("half", "cast", "half2", "half2(a, b)"),
    "__halves2half2": _rule("half", "cast", "half2", "half2(a, b)"),
    "make_half2": _rule("half", "cast", "half2", "half2(a, b)"),
    "__floats2bfloat162_rn": _rule("half", "cast", "bfloat2", "bfloat2(a, b)"),
    "__float2bfloat162_rn": _rule("half", "cast", "bfloat2", "bfloat2(x)"),
    "__bfloat1622float2": _rule("half", "cast", "float2", "float2(x)"),
    "__half_as_ushort": _rule("half", "cast", "as_type<ushort>"),
    "__ushort_as_half": _rule("half", "cast", "as_type<half>"),
    "__half_as_short": _rule("half", "cast", "as_type<short>"),
    "__short_as_half": _rule("half", "cast", "as_type<half>"),
    "__hadd": _rule("half", "operator", "+"),
    "__hsub": _rule("half", "operator", "-"),
    "__hmul": _rule("half", "operator", "*"),
    "__hdiv": _rule("half", "operator", "/"),
    "__hadd2": _rule("half", "operator", "+", "+ on half2"),
    "__hsub2": _rule("half", "operator", "-", "- on half2"),
    "__hmul2": _rule("half", "operator", "*", "* on half2"),
    "__h2div": _rule("half", "operator", "/", "/ on half2"),
    "__hlt": _rule("half", "operator", "<"),
    "__hgt": _rule("half", "operator", ">"),
    "__hle": _rule("half", "operator", "<="),
    "__hge": _rule("half", "operator", ">="),
    "__heq": _rule("half", "operator", "=="),
    "__hne": _rule("half", "operator", "!="),
    "__hneg": _rule("half", "unary", "(-({0}))", "-x"),
    "__low2float": _rule("half", "unary", "float(({0}).x)", "float(x.x)"),
    "__high2float": _rule("half", "unary", "float(({0}).y)", "float(x.y)"),
    "__low2half": _rule("half", "unary", "({0}).x", "x.x"),
    "__high2half": _rule("half", "unary", "({0}).y", "x.y"),
    "__hfma": _rule("half", "call", "metal::fma"),
    "__hfma2": _rule("half", "call", "metal::fma", "metal::fma on half2"),
    "__hmax": _rule("half", "call", "metal::max"),
    "__hmin": _rule("half", "call", "metal::min"),
    "__habs": _rule("half", "call", "metal::abs"),
    "hexp": _rule("half", "call", "metal::exp"),
    "h2exp": _rule("half", "call", "metal::exp", "metal::exp on half2"),
    "hsqrt": _rule("half", "call", "metal::sqrt"),
    "hrsqrt": _rule("half", "call", "metal::rsqrt"),
    # memory: cache hints are plain loads and stores
    "__ldg": _rule(
        "memory",
        "unary",
        _LOAD,
        "plain load from a const device pointer",
        "Metal has no read-only texture path",
    ),
    "__ldcg": _rule("memory", "unary", _LOAD, "plain load"),
    "__ldcs": _rule("memory", "unary", _LOAD, "plain load"),
    "__ldca": _rule("memory", "unary", _LOAD, "plain load"),
    "__ldlu": _rule("memory", "unary", _LOAD, "plain load"),
    "__stcs": _rule("memory", "store", _STORE, "plain store"),
    "__stcg": _rule("memory", "store", _STORE, "plain store"),
    "__stwb": _rule("memory", "store", _STORE, "plain store"),
    "__stwt": _rule("memory", "store", _STORE, "plain store"),
    "malloc": _refusal("memory", "no device-side heap in Metal: preallocate an output buffer"),
    "free": _refusal("memory", "no device-side heap in Metal"),
    # barriers and fences
    "__syncthreads": _rule(
        "barrier",
        "code",
        "",
        "threadgroup_barrier(mem_flags::mem_threadgroup)",
        "add mem_device when threads exchange data through global memory; never in divergent code",
    ),
    "__barrier_sync": _rule(
        "barrier", "code", "", "threadgroup_barrier(mem_flags::mem_threadgroup)"
    ),
    "__syncwarp": _rule("barrier", "code", "", "simdgroup_barrier(mem_flags::mem_threadgroup)"),
    "__syncthreads_or": _refusal(
        "barrier",
        "no barrier-with-predicate in Metal: reduce the predicate through threadgroup memory",
        "threadgroup_barrier + a threadgroup flag",
    ),
    "__syncthreads_and": _refusal(
        "barrier",
        "no barrier-with-predicate in Metal: reduce the predicate through threadgroup memory",
        "threadgroup_barrier + a threadgroup flag",
    ),
    "__syncthreads_count": _refusal(
        "barrier",
        "no barrier-with-count in Metal: count through threadgroup memory",
        "threadgroup_barrier + a threadgroup counter",
    ),
    "__threadfence": _refusal(
        "barrier",
        "Metal atomics are relaxed only (before MSL 4.1): fence-based hand-off between "
        "threadgroups is unreliable",
        "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst)",
    ),
    "__threadfence_block": _refusal(
        "barrier",
        "a fence without a barrier has no Metal form",
        "threadgroup_barrier(mem_flags::mem_threadgroup) where every thread of the group meets",
    ),
    "__threadfence_system": _refusal("barrier", "no system fence in Metal"),
    # warp: SIMD-group functions
    "__shfl_sync": _rule("warp", "shuffle", "simd_shuffle", "simd_shuffle(v, lane)", _MASK),
    "__shfl_up_sync": _rule("warp", "shuffle", "simd_shuffle_up", "simd_shuffle_up(v, d)", _MASK),
    "__shfl_down_sync": _rule(
        "warp", "shuffle", "simd_shuffle_down", "simd_shuffle_down(v, d)", _MASK
    ),
    "__shfl_xor_sync": _rule(
        "warp", "shuffle", "simd_shuffle_xor", "simd_shuffle_xor(v, m)", _MASK
    ),
    "__shfl": _rule("warp", "old_shuffle", "simd_shuffle", "simd_shuffle(v, lane)", _OLD),
    "__shfl_up": _rule("warp", "old_shuffle", "simd_shuffle_up", "simd_shuffle_up(v, d)", _OLD),
    "__shfl_down": _rule(
        "warp", "old_shuffle", "simd_shuffle_down", "simd_shuffle_down(v, d)", _OLD
    ),
    "__shfl_xor": _rule("warp", "old_shuffle", "simd_shuffle_xor", "simd_shuffle_xor(v, m)", _OLD),
    # PyTorch's (ATen/cuda/DeviceUtils.cuh): (value, lane or delta[, width[, mask]])
    "WARP_SHFL": _rule("warp", "old_shuffle", "simd_shuffle", "simd_shuffle(v, lane)", _TORCH),
    "WARP_SHFL_UP": _rule(
        "warp", "old_shuffle", "simd_shuffle_up", "simd_shuffle_up(v, d)", _TORCH
    ),
    "WARP_SHFL_DOWN": _rule(
        "warp", "old_shuffle", "simd_shuffle_down", "simd_shuffle_down(v, d)", _TORCH
    ),
    "WARP_SHFL_XOR": _rule(
        "warp", "old_shuffle", "simd_shuffle_xor", "simd_shuffle_xor(v, m)", _TORCH
    ),
    "__any_sync": _rule("warp", "vote", "simd_any({1})", "simd_any(p)", _MASK),
    "__all_sync": _rule("warp", "vote", "simd_all({1})", "simd_all(p)", _MASK),
    "__ballot_sync": _rule(
        "warp", "vote", "((uint)(simd_vote::vote_t)simd_ballot({1}))", "simd_ballot(p)", _BALLOT
    ),
    "__reduce_add_sync": _rule("warp", "vote", "simd_sum({1})", "simd_sum(v)"),
    "__reduce_min_sync": _rule("warp", "vote", "simd_min({1})", "simd_min(v)"),
    "__reduce_max_sync": _rule("warp", "vote", "simd_max({1})", "simd_max(v)"),
    "__reduce_and_sync": _rule("warp", "vote", "simd_and({1})", "simd_and(v)"),
    "__reduce_or_sync": _rule("warp", "vote", "simd_or({1})", "simd_or(v)"),
    "__reduce_xor_sync": _rule("warp", "vote", "simd_xor({1})", "simd_xor(v)"),
    "__activemask": _rule(
        "warp", "code", "", "simd_active_threads_mask()", "64-bit vote; use the low 32 bits"
    ),
    "__ballot": _hint("warp", "simd_ballot(p)", f"no rule for the {_OLD}: it {_BALLOT}"),
    "__any": _hint("warp", "simd_any(p)", f"no rule for the {_OLD}"),
    "__all": _hint("warp", "simd_all(p)", f"no rule for the {_OLD}"),
    "__match_any_sync": _refusal(
        "warp", "no match in Metal: loop over simd_broadcast or sort keys"
    ),
    "__match_all_sync": _refusal("warp", "no match in Metal: compare with simd_broadcast_first"),
    # atomics on MLX's atomic outputs, relaxed
    "atomicAdd": _rule("atomic", "atomic", "atomic_fetch_add_explicit"),
    "atomicSub": _rule("atomic", "atomic", "atomic_fetch_sub_explicit"),
    "atomicMax": _rule("atomic", "atomic", "atomic_fetch_max_explicit"),
    "atomicMin": _rule("atomic", "atomic", "atomic_fetch_min_explicit"),
    "atomicAnd": _rule("atomic", "atomic", "atomic_fetch_and_explicit"),
    "atomicOr": _rule("atomic", "atomic", "atomic_fetch_or_explicit"),
    "atomicXor": _rule("atomic", "atomic", "atomic_fetch_xor_explicit"),
    "atomicExch": _rule("atomic", "atomic", "atomic_exchange_explicit"),
    # no such call in Metal: an atomic_compare_exchange_weak_explicit loop each (msl_atomics.py)
    "atomicCAS": _rule("atomic", "atomic", "mlxport_atomic_cas", _CAS_LOOP),
    "atomicInc": _rule("atomic", "atomic", "mlxport_atomic_inc", _CAS_LOOP),
    "atomicDec": _rule("atomic", "atomic", "mlxport_atomic_dec", _CAS_LOOP),
    # debugging
    "assert": _rule("debug", "code", "", "nothing: dropped", "Metal kernels have no assert"),
    "__assert_fail": _rule("debug", "code", "", "nothing: dropped", "Metal kernels have no assert"),
    "printf": _rule(
        "debug",
        "code",
        "",
        "nothing: dropped",
        "no printf in metal_kernel bodies (os_log needs MSL 3.2 and MLX debug builds); what it "
        "prints is no result",
    ),
    "clock": _refusal("debug", "no cycle counter in Metal: drop it"),
    "clock64": _refusal("debug", "no cycle counter in Metal: drop it"),
    "__nanosleep": _refusal("debug", "no sleep in Metal: drop it"),
    "__trap": _refusal("debug", "no trap in Metal: drop it"),
    "__prof_trigger": _refusal("debug", "no profiler trigger in Metal: drop it"),
    # what Metal has no counterpart for
    "cudaGetLastError": _refusal(
        "dynamic_parallelism", "device-side CUDA runtime calls do not exist"
    ),
    "tex1Dfetch": _refusal("texture", _TEXTURE),
    "tex1D": _refusal("texture", _TEXTURE),
    "tex2D": _refusal("texture", _TEXTURE),
    "tex3D": _refusal("texture", _TEXTURE),
    "surf2Dwrite": _refusal("texture", "surface writes: write a device buffer instead"),
    "__pipeline_memcpy_async": _refusal(
        "async_copy", "no cp.async in Metal: load through registers"
    ),
    "__pipeline_commit": _refusal("async_copy", "no cp.async in Metal"),
    "__pipeline_wait_prior": _refusal("async_copy", "no cp.async in Metal"),
}
# Scoped atomics: Metal's atomics are device-scope, and the translator writes only the plain ones.
for _base in [n for n, c in CALLS.items() if c.category == "atomic"]:
    for _scope in ("_block", "_system"):
        CALLS[_base + _scope] = _hint(
            "atomic",
            CALLS[_base].metal or "",
            f"no rule for the scoped variant: Metal atomics are device-scope; write {_base}'s form",
        )

# The atomic functions (not their scoped variants).
ATOMICS = frozenset(
    n for n, c in CALLS.items() if c.category == "atomic" and not n.endswith(("_block", "_system"))
)
# Every CUDA function the table-driven rules give a Metal form.
BUILTIN_NAMES = frozenset(n for n, c in CALLS.items() if c.kind == RULE and c.form in FORMS)


def rule(name: str) -> Call | None:
    """The rule the translator writes for a call of ``name``, if it has one."""
    call = CALLS.get(name)
    return call if call is not None and call.kind == RULE else None
