"""CUDA -> MSL name tables: types, reserved words, math, conversions, half arithmetic, warp
shuffles and votes, atomics, and the constructs with no rule (with the reason)."""

from __future__ import annotations

BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
TYPE_MAP = {
    "__half": "half", "__half2": "half2", "__nv_bfloat16": "bfloat", "nv_bfloat16": "bfloat",
    "__nv_bfloat162": "bfloat2", "nv_bfloat162": "bfloat2", "unsigned long long": "ulong", "long long": "long",
    "unsigned long long int": "ulong", "long long int": "long", "unsigned int": "uint", "unsigned": "uint",
    "unsigned short": "ushort", "unsigned char": "uchar", "signed char": "char", "longlong2": "long2",
    "ulonglong2": "ulong2", "longlong4": "long4", "ulonglong4": "ulong4",
}
RESERVED = {"half", "bfloat", "kernel", "vertex", "fragment", "device", "constant", "threadgroup", "thread",
            "sampler", "texture", "uint", "ushort", "uchar", "vec", "access", "metal", "simd", "quad", "ulong",
            "threadgroup_imageblock", "ray_data", "object_data", "visible", "stage_in", "patch", "array", "atomic",
            "as_type", "mem_flags", "bfloat16_t", "float16_t", "fast", "precise"}  # metal::fast, metal::precise
MATH = {
    "expf": "metal::exp", "exp": "metal::exp", "__expf": "metal::fast::exp", "exp2f": "metal::exp2",
    "exp2": "metal::exp2", "exp10f": "metal::exp10", "__exp10f": "metal::fast::exp10", "logf": "metal::log",
    "log": "metal::log", "__logf": "metal::fast::log", "log2f": "metal::log2", "log2": "metal::log2",
    "__log2f": "metal::fast::log2", "log10f": "metal::log10", "__log10f": "metal::fast::log10",
    "log1pf": "log1p", "log1p": "log1p", "sqrtf": "metal::sqrt", "sqrt": "metal::sqrt", "rsqrtf": "metal::rsqrt",
    "rsqrt": "metal::rsqrt", "__frsqrt_rn": "metal::rsqrt", "__fsqrt_rn": "metal::precise::sqrt",
    "powf": "metal::pow", "pow": "metal::pow", "__powf": "metal::fast::pow", "tanhf": "metal::precise::tanh",
    "tanh": "metal::precise::tanh", "sinhf": "metal::sinh", "coshf": "metal::cosh", "sinf": "metal::sin",
    "sin": "metal::sin", "cosf": "metal::cos", "cos": "metal::cos", "tanf": "metal::tan", "__sinf": "metal::fast::sin",
    "__cosf": "metal::fast::cos", "__tanf": "metal::fast::tan", "asinf": "metal::asin", "acosf": "metal::acos",
    "atanf": "metal::atan", "atan2f": "metal::atan2", "fabsf": "metal::abs", "fabs": "metal::abs",
    "fmaxf": "metal::max", "fminf": "metal::min", "fmax": "metal::max", "fmin": "metal::min", "fmaf": "metal::fma",
    "fma": "metal::fma", "__fmaf_rn": "metal::fma", "floorf": "metal::floor", "floor": "metal::floor",
    "ceilf": "metal::ceil", "ceil": "metal::ceil", "roundf": "metal::round", "round": "metal::round",
    "truncf": "metal::trunc", "rintf": "metal::rint", "nearbyintf": "metal::rint", "fmodf": "metal::fmod",
    "copysignf": "metal::copysign", "__fdividef": "metal::fast::divide", "__saturatef": "metal::saturate",
    "isnan": "metal::isnan", "isinf": "metal::isinf", "isfinite": "metal::isfinite", "signbit": "metal::signbit",
    "__popc": "metal::popcount", "__popcll": "metal::popcount", "__clz": "metal::clz", "__clzll": "metal::clz",
    "__brev": "metal::reverse_bits", "__umulhi": "metal::mulhi", "__mulhi": "metal::mulhi", "hexp": "metal::exp",
    "h2exp": "metal::exp", "hsqrt": "metal::sqrt", "hrsqrt": "metal::rsqrt", "__hfma": "metal::fma",
    "__hfma2": "metal::fma", "__hmax": "metal::max", "__hmin": "metal::min", "__habs": "metal::abs",
    "hlog": "metal::log", "hexp2": "metal::exp2", "htanh": "metal::precise::tanh",
}
CASTS = {  # intrinsic -> constructor-style conversion
    "__float2half": "half", "__float2half_rn": "half", "__float2half_rz": "half", "__half2float": "float",
    "__float2bfloat16": "bfloat", "__float2bfloat16_rn": "bfloat", "__float2bfloat16_rz": "bfloat",
    "__bfloat162float": "float", "__float22half2_rn": "half2", "__half22float2": "float2",
    "__float2half2_rn": "half2", "__floats2half2_rn": "half2", "__halves2half2": "half2", "__int2float_rn": "float",
    "__uint2float_rn": "float", "__float2int_rz": "int", "__float2uint_rz": "uint", "__ll2float_rn": "float",
    "__int2half_rn": "half", "__half2int_rz": "int", "__floats2bfloat162_rn": "bfloat2", "__float2bfloat162_rn": "bfloat2",
    "__bfloat1622float2": "float2", "make_half2": "half2", "__float_as_int": "as_type<int>",
    "__int_as_float": "as_type<float>", "__float_as_uint": "as_type<uint>", "__uint_as_float": "as_type<float>",
    "__half_as_ushort": "as_type<ushort>", "__ushort_as_half": "as_type<half>", "__half_as_short": "as_type<short>",
    "__short_as_half": "as_type<half>",
}
BINARY = {"__hadd": "+", "__hsub": "-", "__hmul": "*", "__hdiv": "/", "__hadd2": "+", "__hsub2": "-",
          "__hmul2": "*", "__h2div": "/", "__fadd_rn": "+", "__fmul_rn": "*", "__fsub_rn": "-", "__fdiv_rn": "/",
          "__mul24": "*", "__umul24": "*", "__hlt": "<", "__hgt": ">", "__hle": "<=", "__hge": ">=", "__heq": "==",
          "__hne": "!="}
UNARY = {"__low2float": "float(({0}).x)", "__high2float": "float(({0}).y)", "__low2half": "({0}).x",
         "__high2half": "({0}).y", "__hneg": "(-({0}))", "__frcp_rn": "(1.0f / ({0}))", "__ldg": "(*({0}))",
         "__ldcg": "(*({0}))", "__ldcs": "(*({0}))", "__ldca": "(*({0}))", "__ldlu": "(*({0}))",
         "__ffs": "(({0}) == 0 ? 0 : int(metal::ctz({0})) + 1)", "__float2int_rn": "int(metal::rint({0}))",
         "__float2uint_rn": "uint(metal::rint({0}))", "__expm1f": "(metal::exp({0}) - 1.0f)",
         "expm1f": "(metal::exp({0}) - 1.0f)"}
STORES = {n: "(*({0}) = ({1}))" for n in ("__stcs", "__stcg", "__stwb", "__stwt")}  # cache hints: plain stores
SHUFFLES = {"__shfl_sync": "simd_shuffle", "__shfl_up_sync": "simd_shuffle_up",
            "__shfl_down_sync": "simd_shuffle_down", "__shfl_xor_sync": "simd_shuffle_xor"}
OLD_SHUFFLES = {"__shfl": "simd_shuffle", "__shfl_up": "simd_shuffle_up", "__shfl_down": "simd_shuffle_down",
                "__shfl_xor": "simd_shuffle_xor"}
VOTES = {"__any_sync": "simd_any({1})", "__all_sync": "simd_all({1})",
         "__ballot_sync": "((uint)(simd_vote::vote_t)simd_ballot({1}))", "__reduce_add_sync": "simd_sum({1})",
         "__reduce_min_sync": "simd_min({1})", "__reduce_max_sync": "simd_max({1})",
         "__reduce_and_sync": "simd_and({1})", "__reduce_or_sync": "simd_or({1})",
         "__reduce_xor_sync": "simd_xor({1})"}
ATOMICS = {"atomicAdd": "atomic_fetch_add_explicit", "atomicSub": "atomic_fetch_sub_explicit",
           "atomicMax": "atomic_fetch_max_explicit", "atomicMin": "atomic_fetch_min_explicit",
           "atomicAnd": "atomic_fetch_and_explicit", "atomicOr": "atomic_fetch_or_explicit",
           "atomicXor": "atomic_fetch_xor_explicit", "atomicExch": "atomic_exchange_explicit"}

# Constructs with no rule: (reason) by callee name.
CONSTRUCT_ERRORS = {
    "__syncthreads_or": "no barrier-with-predicate in Metal", "__syncthreads_and": "no barrier-with-predicate in Metal",
    "__syncthreads_count": "no barrier-with-count in Metal", "__threadfence": "Metal atomics are relaxed only: "
    "fence-based hand-off between threadgroups is unreliable", "__threadfence_system": "no system fence in Metal",
    "__match_any_sync": "no match in Metal", "__match_all_sync": "no match in Metal",
    "atomicCAS": "compare-and-swap has a different form in Metal (rewrite with "
                 "atomic_compare_exchange_weak_explicit)", "atomicInc": "no atomicInc in Metal",
    "atomicDec": "no atomicDec in Metal", "printf": "no printf in metal_kernel bodies", "malloc": "no device heap",
    "free": "no device heap", "clock": "no cycle counter in Metal", "clock64": "no cycle counter in Metal",
    "__nanosleep": "no sleep in Metal", "__trap": "no trap in Metal", "tex1Dfetch": "textures: pass a buffer",
    "tex2D": "textures: pass a buffer", "__pipeline_memcpy_async": "no cp.async in Metal", "erff": "no erf in Metal",
    "erfcf": "no erfc in Metal", "erfinvf": "no erfinv in Metal", "lgammaf": "no lgamma in Metal",
    "tgammaf": "no tgamma in Metal", "cbrtf": "no cbrt in Metal", "sincospif": "no sincospi in Metal",
    "__shfl_sync_partial": "",
}

# every CUDA builtin the rules above give a Metal form
BUILTIN_NAMES = frozenset({*MATH, *CASTS, *BINARY, *UNARY, *STORES, *SHUFFLES, *OLD_SHUFFLES, *VOTES, *ATOMICS})
