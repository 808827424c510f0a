"""CUDA -> MSL rewriting rules, applied bottom-up over the tree-sitter tree of the .cu file.

`Render` copies a node's source text, replacing children by their rendering; rules replace
whole nodes (calls, declarations, loops). Pointers get Metal address spaces from where they
point (an input may be `device` or, under 8 elements, `constant`: helpers get one overload
per address space, locals of uncertain space become `auto`). CUDA built-ins stay as names:
the kernel defines them once from Metal attributes and helpers receive them as parameters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import product

from tree_sitter import Node

from mlxport.translate.cexpr import CExprError, CToAst, const_value, simplify
from mlxport.translate.tsutil import callee, function_name, line, text, walk

__all__ = ["CONSTRUCT_ERRORS", "FnCtx", "MslRender", "RenderError", "TYPE_MAP"]

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
            "as_type", "mem_flags", "bfloat16_t", "float16_t"}
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
FULL_MASKS = {0xFFFFFFFF, -1}
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


class RenderError(Exception):
    def __init__(self, construct: str, node_line: int, reason: str):
        super().__init__(f"{construct} at line {node_line}: {reason}")
        self.construct = construct
        self.line = node_line
        self.reason = reason


@dataclass
class FnCtx:
    """What names mean in the function being rendered."""

    kind: str  # "kernel" | "helper"
    spaces: dict[str, frozenset[str]] = field(default_factory=dict)  # pointer/array/ref -> address spaces
    name: str = ""
    template_params: set[str] = field(default_factory=set)


@dataclass
class KernelFacts:
    """Per-kernel decisions the renderer needs (filled by the translator)."""

    inputs: set[str] = field(default_factory=set)  # pointer params read only
    outputs: set[str] = field(default_factory=set)  # pointer params written
    rw: dict[str, str] = field(default_factory=dict)  # read+written param -> its output name
    atomic: bool = False
    dynamic: dict[str, str] = field(default_factory=dict)  # extern shared name -> element-count constant
    barrier_flags: str = "mem_flags::mem_threadgroup"
    generic_float: str | None = None  # float -> this typename (a float-only kernel run on other dtypes)


class MslRender:
    def __init__(self, src: bytes, macros: dict[str, tuple[list[str] | None, str]], helpers: dict[str, list[Node]],
                 facts: KernelFacts, notes: list[str]):
        self.src = src
        self.macros = macros
        self.helpers = helpers  # name -> definition nodes (function_definition, maybe in template_declaration)
        self.facts = facts
        self.notes = notes
        self.variants: dict[str, set[tuple]] = {}
        self.helper_builtins: dict[str, list[str]] = {}
        self.helper_shared: dict[str, list[tuple[str, str, Node]]] = {}  # name -> [(owner, var, decl)]
        self.hoisted_calls: dict[str, Node] = {}  # owner -> first call node in the kernel
        self.used_builtins: set[str] = set()
        self.uses_simd = False
        self.override: dict[int, Callable[[Node], str]] = {}
        self.ptr_casts = False
        self.renames = _user_type_renames(src)
        self._analyze_helpers()

    # ------------------------------------------------------------------ generic rendering

    def render(self, node: Node, ctx: FnCtx) -> str:
        hook = self.override.get(node.id)
        if hook is not None:
            return hook(node)
        rule = self.rule(node, ctx)
        if rule is not None:
            return rule
        return self.copy(node, ctx)

    def copy(self, node: Node, ctx: FnCtx, skip: Callable[[Node], str | None] | None = None) -> str:
        if not node.children:
            return self.leaf(node, ctx)
        out, pos = [], node.start_byte
        for c in node.children:
            out.append(self.src[pos:c.start_byte].decode("utf-8", "replace"))
            got = skip(c) if skip is not None else None
            out.append(got if got is not None else self.render(c, ctx))
            pos = c.end_byte
        out.append(self.src[pos:node.end_byte].decode("utf-8", "replace"))
        return "".join(out)

    def leaf(self, node: Node, ctx: FnCtx) -> str:
        t = text(node)
        if node.type in ("__device__", "__host__", "__global__", "__noinline__", "__restrict__", "__restrict",
                         "__launch_bounds__"):
            return ""
        if node.type == "__forceinline__":
            return "inline"
        if node.type == "__shared__":
            return "threadgroup"
        if node.type == "identifier":
            if t == "warpSize":
                return "32"
            if t in BUILTINS:
                self.used_builtins.add(t)
            if t in RESERVED:
                return t + "_"
            return t
        if node.type in ("type_identifier", "primitive_type"):
            if t in self.renames:
                return self.renames[t]
            return self.type_name(t, node)
        if node.type == "number_literal":
            return re.sub(r"(?i)ull$", "ul", re.sub(r"(?i)(?<!u)ll$", "l", t))
        return t

    def type_name(self, t: str, node: Node) -> str:
        if t in ("double", "double2", "double4"):
            raise RenderError(t, line(node), "Metal has no double precision")
        g = self.facts.generic_float
        if g is not None:
            if t == "float":
                return g
            m = re.fullmatch(r"float([234])", t)
            if m:
                return f"vec<{g}, {m.group(1)}>"
        if t in ("cudaTextureObject_t", "cudaSurfaceObject_t"):
            raise RenderError(t, line(node), "textures: pass the data as a device buffer")
        return TYPE_MAP.get(t, t)

    # ------------------------------------------------------------------ rules

    def rule(self, node: Node, ctx: FnCtx) -> str | None:
        t = node.type
        if t == "sized_type_specifier":
            key = re.sub(r"\s+", " ", text(node)).strip()
            return TYPE_MAP.get(key, key)
        if t == "call_expression":
            return self.call(node, ctx)
        if t == "cast_expression":
            return self.cast(node, ctx)
        if t == "declaration":
            return self.declaration(node, ctx)
        if t == "for_statement":
            return self.warp_reduction(node, ctx)
        if t == "expression_statement":
            return self.statement(node, ctx)
        if t == "assignment_expression" or t == "update_expression":
            return self.assignment(node, ctx)
        if t in ("gnu_asm_expression", "asm_statement"):
            raise RenderError("inline PTX asm", line(node), "inline PTX has no Metal form")
        if t in ("new_expression", "delete_expression", "throw_statement", "try_statement"):
            raise RenderError(t.replace("_", " "), line(node), "not available in Metal kernels")
        if t == "identifier" and ctx.kind == "kernel" and self.facts.atomic and text(node) in self.facts.outputs:
            raise RenderError(f"non-atomic use of output `{text(node)}`", line(node),
                              "MLX makes every output atomic when one is, so it can only be used by atomics "
                              "and plain stores")
        if t == "qualified_identifier" and text(node).startswith(("cub::", "wmma::", "nvcuda::", "thrust::")):
            raise RenderError(text(node).split("<")[0], line(node), "library code has no Metal form")
        return None

    def args(self, node: Node) -> list[Node]:
        a = node.child_by_field_name("arguments")
        return [c for c in a.named_children if c.type != "comment"] if a is not None else []

    def call(self, node: Node, ctx: FnCtx) -> str | None:
        name = callee(node)
        args = self.args(node)
        r = lambda n: self.render(n, ctx)  # noqa: E731
        ln = line(node)
        if name in CONSTRUCT_ERRORS:
            raise RenderError(name, ln, CONSTRUCT_ERRORS[name])
        if name.startswith(("cub::", "wmma::", "nvcuda::", "thrust::", "cooperative_groups::", "cg::")):
            raise RenderError(name.split("<")[0], ln, "library code has no Metal form")
        if name in ("__syncthreads", "__barrier_sync"):
            return f"threadgroup_barrier({self.facts.barrier_flags})"
        if name == "__syncwarp":
            if args:
                self.check_mask(args[0], name)
            self.uses_simd = True
            return "simdgroup_barrier(mem_flags::mem_threadgroup)"
        if name == "__threadfence_block":
            return "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup)" \
                if False else self.fail(name, ln, "a fence without a barrier has no Metal form")
        if name in SHUFFLES:
            if len(args) < 3:
                return None
            self.check_mask(args[0], name)
            if len(args) > 3:
                self.check_width(args[3], name)
            self.uses_simd = True
            lane = r(args[2])
            if name == "__shfl_sync":
                lane = f"ushort(({lane}) & 31)"
            return f"{SHUFFLES[name]}({r(args[1])}, {lane})"
        if name in OLD_SHUFFLES and len(args) >= 2:
            if len(args) > 2:
                self.check_width(args[2], name)
            self.uses_simd = True
            return f"{OLD_SHUFFLES[name]}({r(args[0])}, {r(args[1])})"
        if name in VOTES and len(args) >= 2:
            self.check_mask(args[0], name)
            self.uses_simd = True
            return VOTES[name].format(None, r(args[1]))
        if name == "__activemask":
            self.uses_simd = True
            return "((uint)(simd_vote::vote_t)simd_active_threads_mask())"
        if name in ATOMICS:
            return self.atomic(node, name, args, ctx)
        if name == "sincosf" or name == "sincos":
            raise RenderError(name, ln, "sincos is translated only as a statement `sincosf(x, &s, &c);`")
        if name in MATH:
            return f"{MATH[name]}({', '.join(r(a) for a in args)})"
        if name in CASTS:
            return f"{CASTS[name]}({', '.join(r(a) for a in args)})"
        if name in BINARY and len(args) == 2:
            return f"(({r(args[0])}) {BINARY[name]} ({r(args[1])}))"
        if name in UNARY and len(args) == 1:
            return UNARY[name].format(r(args[0]))
        m = re.fullmatch(r"make_(float|int|uint|short|ushort|char|uchar|half|long|ulong)([234])", name)
        if m:
            base = self.type_name(m.group(1), node) if m.group(1) == "float" else m.group(1)
            ty = base + m.group(2) if not base.startswith("vec<") else base[:-2] + m.group(2) + ">"
            if base != m.group(1) and not base.startswith("vec<"):
                ty = f"vec<{base}, {m.group(2)}>"
            return f"{ty}({', '.join(r(a) for a in args)})"
        if name in ("reinterpret_cast", "static_cast", "const_cast") and len(args) == 1:
            fn = node.child_by_field_name("function")
            targs = fn.child_by_field_name("arguments") if fn.type == "template_function" else None
            if targs is not None and targs.named_children:
                td = targs.named_children[0]
                if _is_pointer_type(td):
                    return self.pointer_cast(td, args[0], ctx)
            return None
        if name in self.helpers:
            return self.helper_call(node, name, args, ctx)
        return None

    def fail(self, construct: str, ln: int, reason: str) -> str:
        raise RenderError(construct, ln, reason)

    def check_mask(self, mask: Node, name: str) -> None:
        t = text(mask).strip()
        if t in ("__activemask()", "0xffffffff", "0xffffffffu", "0xFFFFFFFF", "0xFFFFFFFFu", "-1", "~0", "~0u"):
            return
        try:
            v = const_value(simplify(CToAst(lambda _n: None, self.macros, lambda _t: None).node(mask)))
        except CExprError:
            v = None
        if v is None and re.fullmatch(r"\w+\s*\(\s*\)", t) and "activemask" in t:
            return
        if not isinstance(v, int) or (v & 0xFFFFFFFF) != 0xFFFFFFFF:
            raise RenderError(f"{name} with mask {t}", line(mask),
                              "partial-mask warp operations have no Metal form (SIMD functions act on all "
                              "active lanes)")

    def check_width(self, width: Node, name: str) -> None:
        try:
            v = const_value(simplify(CToAst(lambda _n: None, self.macros, lambda _t: None).node(width)))
        except CExprError:
            v = None
        if v != 32 and text(width).strip() not in ("warpSize", "WARP_SIZE"):
            raise RenderError(f"{name} with width {text(width)}", line(width),
                              "sub-warp shuffle widths have no direct Metal form")

    # ------------------------------------------------------------------ pointers and address spaces

    def spaces_of(self, node: Node | None, ctx: FnCtx) -> frozenset[str] | None:
        """Address spaces a pointer/lvalue expression can point into (None when unknown)."""
        for _ in range(64):
            if node is None:
                return None
            t = node.type
            if t == "identifier":
                return ctx.spaces.get(text(node))
            if t in ("parenthesized_expression", "cast_expression"):
                node = node.child_by_field_name("value") if t == "cast_expression" else node.named_children[-1]
            elif t == "pointer_expression" or t == "subscript_expression" or t == "field_expression":
                node = node.child_by_field_name("argument")
            elif t == "binary_expression":
                left = self.spaces_of(node.child_by_field_name("left"), ctx)
                return left if left is not None else self.spaces_of(node.child_by_field_name("right"), ctx)
            elif t == "conditional_expression":
                a = self.spaces_of(node.child_by_field_name("consequence"), ctx)
                b = self.spaces_of(node.child_by_field_name("alternative"), ctx)
                return (a or frozenset()) | (b or frozenset()) or None
            elif t == "call_expression" and callee(node) in ("reinterpret_cast", "static_cast", "const_cast",
                                                             "__ldg"):
                args = self.args(node)
                node = args[0] if args else None
            elif t == "update_expression":
                node = node.child_by_field_name("argument")
            elif t == "assignment_expression":
                node = node.child_by_field_name("left")
            else:
                return None
        return None

    def root_name(self, node: Node | None) -> str | None:
        for _ in range(64):
            if node is None:
                return None
            t = node.type
            if t == "identifier":
                return text(node)
            if t == "binary_expression":
                node = node.child_by_field_name("left")
            elif t == "cast_expression":
                node = node.child_by_field_name("value")
            elif t in ("pointer_expression", "subscript_expression", "field_expression", "update_expression"):
                node = node.child_by_field_name("argument")
            elif t == "parenthesized_expression":
                node = node.named_children[-1]
            elif t == "call_expression" and callee(node) in ("reinterpret_cast", "static_cast", "const_cast"):
                args = self.args(node)
                node = args[0] if args else None
            else:
                return None
        return None

    def pointer_cast(self, type_desc: Node, arg: Node, ctx: FnCtx) -> str:
        pointee = self.pointee(type_desc, ctx)
        spaces = self.spaces_of(arg, ctx)
        if spaces is None:
            raise RenderError(f"pointer cast `{_short(text(type_desc))}`", line(type_desc),
                              "the address space of its operand cannot be inferred")
        self.ptr_casts = True
        return f"mlxport_ptr_cast<{pointee}>({self.render(arg, ctx)})"

    def pointee(self, type_desc: Node, ctx: FnCtx) -> str:
        parts = []
        for c in type_desc.children:
            if c.type == "abstract_pointer_declarator":
                if any(x.type == "abstract_pointer_declarator" for x in c.children):
                    raise RenderError("pointer to pointer", line(c), "Metal buffers cannot hold pointers")
                continue
            if c.type == "type_qualifier" and text(c) == "const":
                continue
            parts.append(self.render(c, ctx))
        return " ".join(p for p in parts if p).strip()

    def cast(self, node: Node, ctx: FnCtx) -> str | None:
        td = node.child_by_field_name("type")
        if td is not None and _is_pointer_type(td):
            return self.pointer_cast(td, node.child_by_field_name("value"), ctx)
        return None

    # ------------------------------------------------------------------ declarations

    def declaration(self, node: Node, ctx: FnCtx) -> str | None:
        quals = {text(c) for c in node.children if c.type == "type_qualifier"}
        storage = {text(c) for c in node.children if c.type == "storage_class_specifier"}
        declarators = node.children_by_field_name("declarator")
        if "__shared__" in quals:
            return self.shared(node, ctx, "extern" in storage, declarators)
        for d in declarators:
            self.register(d, ctx, node)
        pointerish = [d for d in declarators if _declarator_kind(d) in ("pointer", "reference")]
        if not pointerish:
            return None
        pieces = []
        for d in declarators:
            pieces.append(self.one_declaration(node, d, ctx))
        return " ".join(pieces)

    def one_declaration(self, node: Node, d: Node, ctx: FnCtx) -> str:
        """`[quals] type declarator;` for one declarator, with an address space for pointers."""
        kind = _declarator_kind(d)
        prefix = []
        for c in node.children:
            if c == node.child_by_field_name("type") or c.type in ("type_qualifier", "storage_class_specifier"):
                prefix.append(self.render(c, ctx))
        type_text = " ".join(p for p in prefix if p)
        if kind not in ("pointer", "reference"):
            return f"{type_text} {self.render(d, ctx)};"
        name = _declared_name(d)
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        spaces = ctx.spaces.get(name)
        if spaces is None:
            raise RenderError(f"pointer `{name}`", line(d), "its address space cannot be inferred "
                              "(declare it with an initializer that points into a buffer or array)")
        if len(spaces) > 1:
            if value is None:
                raise RenderError(f"pointer `{name}`", line(d), "declared without an initializer")
            amp = "&" if kind == "reference" else ""
            return f"auto{amp} {name} = {self.render(value, ctx)};"
        space = next(iter(spaces))
        return f"{space} {type_text} {self.render(d, ctx)};"

    def register(self, d: Node, ctx: FnCtx, decl: Node) -> None:
        kind = _declarator_kind(d)
        name = _declared_name(d)
        if not name:
            return
        if kind == "array" or kind == "value":
            ctx.spaces[name] = frozenset({"thread"})
            return
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        got = self.spaces_of(value, ctx) if value is not None else None
        if got is not None:
            ctx.spaces[name] = got
        elif name in ctx.spaces:
            del ctx.spaces[name]

    def shared(self, node: Node, ctx: FnCtx, extern: bool, declarators: list[Node]) -> str:
        out = []
        type_node = node.child_by_field_name("type")
        ty = self.render(type_node, ctx)
        volatile = any(text(c) == "volatile" for c in node.children if c.type == "type_qualifier")
        if volatile:
            raise RenderError("volatile __shared__", line(node), "warp-synchronous code on volatile shared "
                              "memory has no safe Metal form: use simd_* reductions and barriers")
        for d in declarators:
            name = _declared_name(d)
            ctx.spaces[name] = frozenset({"threadgroup"})
            if ctx.kind == "helper":
                continue  # hoisted into the kernel, passed as a parameter
            if extern:
                size = self.facts.dynamic.get(name)
                if size is None:
                    raise RenderError(f"extern __shared__ {name}[]", line(node),
                                      "dynamic shared memory needs a size from the launch's shared-memory argument")
                out.append(f"threadgroup {ty} {name}[{size}];")
            else:
                out.append(f"threadgroup {ty} {self.render(d, ctx)};")
        return " ".join(out)

    # ------------------------------------------------------------------ statements

    def statement(self, node: Node, ctx: FnCtx) -> str | None:
        e = node.named_children[0] if node.named_children else None
        if e is not None and e.type == "call_expression" and callee(e) in ("sincosf", "sincos", "__sincosf"):
            args = self.args(e)
            if len(args) == 3 and all(a.type == "pointer_expression" and text(a).startswith("&") for a in args[1:]):
                s = self.render(args[1].child_by_field_name("argument"), ctx)
                c = self.render(args[2].child_by_field_name("argument"), ctx)
                fn = "metal::fast::sincos" if callee(e) == "__sincosf" else "metal::sincos"
                return f"{s} = {fn}({self.render(args[0], ctx)}, {c});"
        if e is not None and e.type == "call_expression" and callee(e) in ("assert", "__assert_fail"):
            self.notes.append(f"assert at line {line(e)} dropped: Metal kernels have no assert")
            return ";"
        return None

    def assignment(self, node: Node, ctx: FnCtx) -> str | None:
        if ctx.kind != "kernel":
            return None
        left = node.child_by_field_name("left") if node.type == "assignment_expression" else \
            node.child_by_field_name("argument")
        root = self.root_name(left)
        deref = left is not None and left.type in ("subscript_expression", "pointer_expression", "field_expression")
        if root in self.facts.rw and deref:
            if node.type == "update_expression":
                raise RenderError(f"`{text(node)}`", line(node), f"in-place update of read-write `{root}`")
            op = text(node.child_by_field_name("operator"))
            target = self.rename_root(left, root, self.facts.rw[root], ctx)
            right = self.render(node.child_by_field_name("right"), ctx)
            if op == "=":
                return f"{target} = {right}"
            return f"{target} = {self.render(left, ctx)} {op[:-1]} ({right})"
        if self.facts.atomic and root in self.facts.outputs and deref and node.type == "assignment_expression":
            if text(node.child_by_field_name("operator")) != "=":
                raise RenderError(f"`{_short(text(node))}`", line(node), "read-modify-write of an atomic output "
                                  "without an atomic function")
            addr = self.address(left, ctx)
            return f"atomic_store_explicit({addr}, {self.render(node.child_by_field_name('right'), ctx)}, " \
                   "memory_order_relaxed)"
        return None

    def rename_root(self, node: Node, root: str, new: str, ctx: FnCtx) -> str:
        if node.type == "identifier" and text(node) == root:
            return new
        if not node.children:
            return self.render(node, ctx)
        out, pos = [], node.start_byte
        arg = node.child_by_field_name("argument") or node.child_by_field_name("left")
        for c in node.children:
            out.append(self.src[pos:c.start_byte].decode())
            out.append(self.rename_root(c, root, new, ctx) if c == arg else self.render(c, ctx))
            pos = c.end_byte
        out.append(self.src[pos:node.end_byte].decode())
        return "".join(out)

    def address(self, lvalue: Node, ctx: FnCtx) -> str:
        """`&x[i]` for an element lvalue, without touching the atomic-output guard."""
        if lvalue.type == "pointer_expression" and text(lvalue.child_by_field_name("operator")) == "*":
            return self.raw(lvalue.child_by_field_name("argument"), ctx)
        return f"&{self.raw(lvalue, ctx)}"

    def raw(self, node: Node, ctx: FnCtx) -> str:
        """Render allowing the atomic outputs' names."""
        saved = self.facts.atomic
        self.facts.atomic = False
        try:
            return self.render(node, ctx)
        finally:
            self.facts.atomic = saved

    def atomic(self, node: Node, name: str, args: list[Node], ctx: FnCtx) -> str:
        ln = line(node)
        if len(args) != 2:
            raise RenderError(name, ln, "unexpected argument count")
        spaces = self.spaces_of(args[0], ctx)
        root = self.root_name(args[0])
        if spaces != frozenset({"device"}) or ctx.kind != "kernel" or root not in self.facts.outputs:
            where = "threadgroup memory" if spaces == frozenset({"threadgroup"}) else "this pointer"
            raise RenderError(f"{name} on {where}", ln, "only atomics on kernel outputs map to MLX atomic outputs")
        return f"{ATOMICS[name]}({self.raw(args[0], ctx)}, {self.render(args[1], ctx)}, memory_order_relaxed)"

    def warp_reduction(self, node: Node, ctx: FnCtx) -> str | None:
        """`for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(full, v, o);` -> `v = simd_sum(v);`."""
        init, cond, upd = (node.child_by_field_name(f) for f in ("initializer", "condition", "update"))
        body = node.child_by_field_name("body")
        if init is None or cond is None or upd is None or body is None:
            return None
        m = re.fullmatch(r"(?:int|unsigned|uint|unsigned int)?\s*(\w+)\s*=\s*(.+?);?", text(init).strip())
        if not m:
            return None
        var = m.group(1)
        try:
            start = const_value(simplify(CToAst(lambda _n: None, self.macros, lambda _t: None).text(m.group(2))))
        except CExprError:
            return None
        if start != 16 or re.sub(r"\s", "", text(cond)) not in (f"{var}>0", f"{var}>=1", f"0<{var}"):
            return None
        if re.sub(r"\s", "", text(upd)) not in (f"{var}>>=1", f"{var}/=2", f"{var}={var}/2", f"{var}={var}>>1"):
            return None
        stmt = body.named_children[0] if body.type == "compound_statement" and len(body.named_children) == 1 \
            else body
        s = re.sub(r"\s", "", text(stmt))
        shfl = r"__shfl_(?:xor|down)_sync\(([^,()]+),(\w+),(\w+)\)"
        pats = [(rf"(\w+)\+={shfl};", "simd_sum"), (rf"(\w+)=(\w+)\+{shfl};", "simd_sum"),
                (rf"(\w+)=(?:fmaxf|max|metal::max)\((\w+),{shfl}\);", "simd_max"),
                (rf"(\w+)=(?:fminf|min|metal::min)\((\w+),{shfl}\);", "simd_min")]
        for pat, fn in pats:
            mm = re.fullmatch(pat, s)
            if not mm:
                continue
            g = mm.groups()
            v, vals, offset = g[0], [x for x in g[1:-3]] + [g[-2]], g[-1]
            if offset != var or any(x != v for x in vals):
                return None
            call = next(c for c in walk(stmt) if c.type == "call_expression" and callee(c).startswith("__shfl"))
            self.check_mask(self.args(call)[0], callee(call))
            self.uses_simd = True
            self.notes.append(f"warp reduction loop at line {line(node)} -> {fn}")
            return f"{self.leaf_name(v)} = {fn}({self.leaf_name(v)});"
        return None

    def leaf_name(self, v: str) -> str:
        return v + "_" if v in RESERVED else v

    # ------------------------------------------------------------------ helpers

    def _analyze_helpers(self) -> None:
        direct: dict[str, set[str]] = {}
        calls: dict[str, set[str]] = {}
        shared: dict[str, list[tuple[str, str, Node]]] = {}
        for name, defs in self.helpers.items():
            used, called, own = set(), set(), []
            for d in defs:
                fn = _function_node(d)
                body = fn.child_by_field_name("body") if fn is not None else None
                if body is None:
                    continue
                for n in walk(body):
                    if n.type == "identifier" and text(n) in BUILTINS:
                        used.add(text(n))
                    elif n.type == "call_expression" and callee(n) in self.helpers:
                        called.add(callee(n))
                    elif n.type == "declaration" and any(text(c) == "__shared__" for c in n.children
                                                         if c.type == "type_qualifier"):
                        for dd in n.children_by_field_name("declarator"):
                            if not any(o[1] == _declared_name(dd) for o in own):
                                own.append((name, _declared_name(dd), n))
            direct[name], calls[name], shared[name] = used, called - {name}, own
        for name in self.helpers:
            seen, stack, b, s = set(), [name], set(), []
            while stack:
                cur = stack.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                b |= direct.get(cur, set())
                s.extend(x for x in shared.get(cur, []) if x not in s)
                stack.extend(calls.get(cur, set()))
            self.helper_builtins[name] = [x for x in BUILTINS if x in b]
            self.helper_shared[name] = s

    def helper_call(self, node: Node, name: str, args: list[Node], ctx: FnCtx) -> str:
        positions = self.pointer_positions(name, len(args))
        choices = []
        for i, a in enumerate(args):
            if i in positions:
                sp = self.spaces_of(a, ctx)
                if sp is None:
                    sp = frozenset({"thread"}) if positions[i] == "reference" else None
                if sp is None:
                    raise RenderError(f"argument `{_short(text(a))}` of {name}()", line(a),
                                      "its address space cannot be inferred")
                choices.append(sorted(sp))
            else:
                choices.append([None])
        for combo in product(*choices):
            self.variants.setdefault(name, set()).add(tuple(combo))
        rendered = self.copy(node, ctx)
        extra = list(self.helper_builtins.get(name, []))
        self.used_builtins.update(extra)
        for owner, var, _decl in self.helper_shared.get(name, []):
            extra.append(var if (ctx.kind == "helper" and ctx.name == owner) else f"{owner}_{var}")
            if ctx.kind == "kernel":
                self.hoisted_calls.setdefault(owner, node)
        if not extra:
            return rendered
        close = rendered.rstrip().rfind(")")
        inner = rendered[:close].rstrip()
        sep = "" if inner.endswith("(") else ", "
        return f"{inner}{sep}{', '.join(extra)}{rendered[close:]}"

    def variant_for(self, d: Node, variant: tuple | None) -> tuple | None:
        """The part of a call-site variant that matters to this definition's own pointer params."""
        params = _params(d)
        if variant is None or len(variant) != len(params):
            return None
        kinds = [_declarator_kind(p.child_by_field_name("declarator")) for p in params]
        out = tuple(v if k in ("pointer", "reference", "array") else None for v, k in zip(variant, kinds, strict=True))
        return out if any(out) else None

    def pointer_positions(self, name: str, arity: int) -> dict[int, str]:
        out: dict[int, str] = {}
        for d in self.helpers.get(name, []):
            params = _params(d)
            if len(params) != arity:
                continue
            for i, p in enumerate(params):
                k = _declarator_kind(p.child_by_field_name("declarator"))
                if k in ("pointer", "reference", "array"):
                    out[i] = k
        return out

    def render_helper(self, d: Node, variant: tuple | None) -> str:
        """One helper definition (or template declaration) with address spaces from `variant`."""
        fn = _function_node(d)
        name, decl = function_name(fn)
        ctx = FnCtx("helper", name=name)
        spaces: dict[int, str] = {}
        for i, p in enumerate(_params(d)):
            k = _declarator_kind(p.child_by_field_name("declarator"))
            if k in ("pointer", "reference", "array"):
                space = variant[i] if variant is not None and i < len(variant) and variant[i] else "thread"
                spaces[p.id] = space
                ctx.spaces[_declared_name(p.child_by_field_name("declarator"))] = frozenset({space})
        for owner, var, _decl in self.helper_shared.get(name, []):
            ctx.spaces[var if owner == name else f"{owner}_{var}"] = frozenset({"threadgroup"})
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        if plist is None:
            return self.render(d, ctx)
        self.override[plist.id] = lambda n: self.param_list(n, name, ctx, spaces)
        try:
            return self.render(d, ctx)
        finally:
            self.override.pop(plist.id, None)

    def param_list(self, plist: Node, name: str, ctx: FnCtx, spaces: dict[int, str]) -> str:
        body = self.copy(plist, ctx, lambda c: f"{spaces[c.id]} {self.copy(c, ctx)}" if c.id in spaces else None)
        extra = [f"uint3 {b}" for b in self.helper_builtins.get(name, [])]
        for owner, var, decl_node in self.helper_shared.get(name, []):
            pname = var if owner == name else f"{owner}_{var}"
            extra.append(self.shared_param(decl_node, var, pname, owner == name, ctx))
        if not extra:
            return body
        inner = body.rstrip()[:-1].rstrip()
        if inner.endswith("(void"):
            inner = inner[:-4]
        sep = "" if inner.endswith("(") else ", "
        return f"{inner}{sep}{', '.join(extra)})"

    def shared_param(self, decl_node: Node, var: str, pname: str, own: bool, ctx: FnCtx) -> str:
        ty = self.render(decl_node.child_by_field_name("type"), ctx)
        d = next(x for x in decl_node.children_by_field_name("declarator") if _declared_name(x) == var)
        dims = _array_dims(d)
        if not dims:
            return f"threadgroup {ty}& {pname}"
        if len(dims) == 1:
            return f"threadgroup {ty}* {pname}"
        if not own:
            raise RenderError(f"__shared__ {var}", line(decl_node), "a multi-dimensional shared array passed "
                              "through several helper functions")
        rest = "".join(f"[{self.render(x, ctx)}]" for x in dims)
        return f"threadgroup {ty} (&{pname}){rest}"


_MSL_TYPE = re.compile(r"(packed_)?(half|float|int|uint|short|ushort|char|uchar|bool|long|ulong|bfloat)"
                       r"([234](x[234])?)?|vec|array|atomic|simd_vote")


def _user_type_renames(src: bytes) -> dict[str, str]:
    """User structs/typedefs named like MSL built-in types (a `struct half4`) get a trailing `_`."""
    out = {}
    for m in re.finditer(rb"\b(?:struct|class|union)\s+(?:alignas\s*\(\s*\w+\s*\)\s*)?(\w+)\s*\{", src):
        name = m.group(1).decode()
        if _MSL_TYPE.fullmatch(name):
            out[name] = name + "_"
    for m in re.finditer(rb"\btypedef\b[^;{}]*?\b(\w+)\s*;", src):
        name = m.group(1).decode()
        if _MSL_TYPE.fullmatch(name) and not re.search(rb"\b" + m.group(1) + rb"\b", m.group(0)[:-len(m.group(1)) - 1]):
            out[name] = name + "_"
    return out


def _short(s: str) -> str:
    s = re.sub(r"\s+", " ", s)
    return s if len(s) <= 48 else s[:45] + "..."


def _is_mask_text(s: str) -> bool:
    return bool(re.fullmatch(r"0x[fF]{8}[uU]?|FULL_MASK|-1|~0u?", s))


def _is_pointer_type(td: Node) -> bool:
    return any(c.type == "abstract_pointer_declarator" for c in td.children)


def _declarator_kind(d: Node | None) -> str:
    cur = d
    for _ in range(32):
        if cur is None:
            return "value"
        t = cur.type
        if t == "init_declarator":
            cur = cur.child_by_field_name("declarator")
        elif t in ("pointer_declarator", "abstract_pointer_declarator"):
            return "pointer"
        elif t in ("reference_declarator", "abstract_reference_declarator"):
            return "reference"
        elif t == "array_declarator":
            return "array"
        else:
            return "value"
    return "value"


def _declared_name(d: Node | None) -> str:
    cur = d
    for _ in range(32):
        if cur is None:
            return ""
        if cur.type == "identifier":
            return text(cur)
        nxt = cur.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in cur.named_children if c.type in ("identifier", "pointer_declarator",
                                                                    "reference_declarator", "array_declarator",
                                                                    "init_declarator")), None)
        cur = nxt
    return ""


def _array_dims(d: Node) -> list[Node]:
    dims = []
    cur = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
    while cur is not None and cur.type == "array_declarator":
        size = cur.child_by_field_name("size")
        if size is not None:
            dims.insert(0, size)
        cur = cur.child_by_field_name("declarator")
    return dims


def _function_node(d: Node) -> Node | None:
    if d.type == "function_definition":
        return d
    for c in d.named_children:
        if c.type == "function_definition":
            return c
        if c.type == "template_declaration":
            return _function_node(c)
    return None


def _params(d: Node) -> list[Node]:
    fn = _function_node(d)
    if fn is None:
        return []
    _, decl = function_name(fn)
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    return [p for p in plist.named_children if p.type in ("parameter_declaration", "optional_parameter_declaration")] \
        if plist is not None else []
