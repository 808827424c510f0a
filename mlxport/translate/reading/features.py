"""CUDA feature catalogue and the CUDA -> Metal porting assessment.

Facts come from shared/reference/apple-gpu-facts.md §3-4 and mlx-custom-kernels.md. The reader
uses the name tables here to detect features; `assess` turns detected features into a table
the model sees: each feature's Metal mapping, or "needs rewrite" with the reason. What a CUDA
function becomes is read from the one entry calls.py has for it, which the translator reads too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel

from mlxport.translate.reading.calls import ATOMICS
from mlxport.translate.reading.calls import CALLS as CUDA_CALLS

if TYPE_CHECKING:
    from mlxport.translate.reading.cudafile import KernelInfo


class Assessment(BaseModel):
    feature: str
    line: int
    metal: str | None
    needs_rewrite: bool
    reason: str = ""


class Rule(NamedTuple):
    category: str
    metal: str | None
    needs_rewrite: bool = False
    reason: str = ""


_SIMD = "SIMD width is 32 on Apple GPUs, as a warp"

# Built-in index variables (identifiers).
BUILTINS: dict[str, Rule] = {
    "threadIdx": Rule("builtin", "thread_position_in_threadgroup"),
    "blockIdx": Rule("builtin", "threadgroup_position_in_grid"),
    "blockDim": Rule(
        "builtin", "threads_per_threadgroup", reason="edge threadgroups can be smaller"
    ),
    "gridDim": Rule(
        "builtin", "threadgroups_per_grid", reason="MLX grid= counts threads, not blocks"
    ),
    "warpSize": Rule("builtin", "threads_per_simdgroup (32)", reason=_SIMD),
}

# What the model is told of each CUDA function: its entry in calls.py.
CALLS: dict[str, Rule] = {
    name: Rule(c.category, c.metal, c.needs_rewrite, c.reason) for name, c in CUDA_CALLS.items()
}

TYPES: dict[str, Rule] = {
    "__half": Rule("type", "half"),
    "half": Rule("type", "half"),
    "__half2": Rule("type", "half2"),
    "half2": Rule("type", "half2"),
    "__nv_bfloat16": Rule("type", "bfloat", reason="MSL 3.1+; emulated (slow) on M1/M2"),
    "nv_bfloat16": Rule("type", "bfloat", reason="MSL 3.1+; emulated (slow) on M1/M2"),
    "__nv_bfloat162": Rule("type", "bfloat2", reason="MSL 3.1+; emulated (slow) on M1/M2"),
    "nv_bfloat162": Rule("type", "bfloat2", reason="MSL 3.1+; emulated (slow) on M1/M2"),
    "double": Rule("type", None, True, "Metal has no double: use float (check the tolerance)"),
    "double2": Rule("type", None, True, "Metal has no double: use float2"),
    "double4": Rule("type", None, True, "Metal has no double: use float4"),
    "cudaTextureObject_t": Rule(
        "texture", None, True, "texture objects: pass a device buffer instead"
    ),
    "cudaSurfaceObject_t": Rule(
        "texture", None, True, "surface objects: pass a device buffer instead"
    ),
    "texture": Rule("texture", None, True, "texture references: pass a device buffer instead"),
}
for _v in ("float", "int", "uint", "short", "ushort", "char", "uchar"):
    for _k in (2, 3, 4):
        TYPES[f"{_v}{_k}"] = Rule(
            "vector",
            f"{_v}{_k}" if _v != "uchar" else f"uchar{_k}",
            reason="Metal float3 is 16 bytes (CUDA's is 12)" if _k == 3 else "",
        )
for _k in (2, 3, 4):
    TYPES[f"make_float{_k}"] = Rule("vector", f"float{_k}(...)")
    TYPES[f"make_int{_k}"] = Rule("vector", f"int{_k}(...)")
    TYPES[f"make_uint{_k}"] = Rule("vector", f"uint{_k}(...)")
for _n in ("longlong2", "longlong4", "ulonglong2", "long2", "long4", "ulong2"):
    TYPES[_n] = Rule("vector", _n.replace("longlong", "long"))

# Cooperative-groups members (qualified by cooperative_groups:: or an alias of it).
COOP: dict[str, Rule] = {
    "this_thread_block": Rule("coop_groups", "the threadgroup; thread_index_in_threadgroup"),
    "thread_block": Rule("coop_groups", "the threadgroup"),
    "tiled_partition": Rule(
        "coop_groups",
        "SIMD-group (tile of 32) or quad (tile of 4)",
        reason="other tile sizes: compute sub-group lane ids yourself",
    ),
    "thread_block_tile": Rule(
        "coop_groups",
        "SIMD-group (tile of 32) or quad (tile of 4)",
        reason="other tile sizes: compute sub-group lane ids yourself",
    ),
    "coalesced_threads": Rule(
        "coop_groups",
        "simd_active_threads_mask()",
        reason="lane ranks within the active set need simd_prefix_exclusive_sum",
    ),
    "reduce": Rule("coop_groups", "simd_sum / simd_max / simd_min", reason="for tiles of 32 lanes"),
    "inclusive_scan": Rule("coop_groups", "simd_prefix_inclusive_sum"),
    "exclusive_scan": Rule("coop_groups", "simd_prefix_exclusive_sum"),
    "this_grid": Rule("coop_groups", "thread_position_in_grid (no grid-wide sync)"),
    "grid_group": Rule("coop_groups", "thread_position_in_grid (no grid-wide sync)"),
    "grid.sync": Rule(
        "grid_sync",
        None,
        True,
        "no grid-wide barrier in Metal: split the kernel into several dispatches",
    ),
    "memcpy_async": Rule(
        "async_copy", None, True, "no async copy in Metal: load through registers"
    ),
    "this_multi_grid": Rule("grid_sync", None, True, "no multi-device groups in Metal"),
    "cluster_group": Rule("cluster", None, True, "no thread-block clusters or DSMEM in Metal"),
    "this_cluster": Rule("cluster", None, True, "no thread-block clusters or DSMEM in Metal"),
}

WMMA = Rule(
    "tensor_core",
    "simdgroup_matrix 8x8 (simdgroup_load / simdgroup_multiply_accumulate)",
    True,
    "wmma fragments are 16x16x16; re-tile for 8x8 simdgroup_matrix (or MSL 4 matmul2d on M5)",
)
CUB_WARP = Rule(
    "cub",
    "simd_sum / simd_prefix_*_sum",
    True,
    "cub is not available in Metal: write the reduction with simd_* and threadgroup memory",
)
CUB_REDUCE = Rule(
    "reduction",
    "simd_sum / simd_max / simd_min, and threadgroup memory across SIMD-groups",
    reason="BlockReduce and WarpReduce (Sum, Reduce) translate; the result is every thread's",
)
_CUB_REDUCE_NAMES = frozenset({"BlockReduce", "WarpReduce", "Sum", "Max", "Min"})
CUB = Rule(
    "cub",
    None,
    True,
    "cub is not available in Metal: write it with simd_* functions and threadgroup memory",
)
THRUST = Rule(
    "thrust", None, True, "thrust is host-side/device library code: use MLX ops or a kernel"
)
# libcu++'s cuda::memcpy_async, cuda::barrier and cuda::pipeline (<cuda/barrier>, <cuda/pipeline>)
LIBCUDACXX_ASYNC = Rule(
    "async_copy",
    None,
    True,
    "no async copy in Metal: load through registers, and wait at threadgroup_barrier where the "
    "kernel waits on the cuda::barrier",
)
LIBCUDACXX_ASYNC_NAMES = frozenset({"memcpy_async", "barrier", "pipeline"})

# Features detected from syntax rather than names.
SYNTAX: dict[str, Rule] = {
    "inline_ptx": Rule(
        "ptx",
        "plain MSL loads and stores, if for predicates, the SIMD lane for %laneid",
        reason="the subset the CPU executor reads (ld/st of 1, 2 or 4 values, mov, cvt, setp)",
    ),
    "mma_ptx": Rule(
        "tensor_core", "simdgroup_matrix 8x8", True, "mma.sync PTX: re-tile for simdgroup_matrix"
    ),
    "dynamic_parallelism": Rule(
        "dynamic_parallelism",
        None,
        True,
        "kernels cannot launch kernels in Metal: launch from the host",
    ),
    "grid_stride_loop": Rule(
        "pattern",
        "loop with stride threads_per_grid (or one thread per element)",
        reason="MLX grid= counts threads; a grid-stride loop still works",
    ),
    "static_shared": Rule(
        "shared", "threadgroup T a[N]; in the body", reason="32 KB per threadgroup at most"
    ),
    "dynamic_shared": Rule(
        "shared",
        "fixed-size threadgroup array",
        True,
        "mx.fast.metal_kernel has no dynamic threadgroup memory: size it at compile "
        "time, e.g. template=[('N', n)]",
    ),
    "volatile_shared": Rule(
        "shared",
        "threadgroup array + simdgroup_barrier",
        True,
        "warp-synchronous code on volatile shared memory: use simd_* reductions",
    ),
    "launch_bounds": Rule(
        "attribute",
        "[[max_total_threads_per_threadgroup(N)]]",
        reason="MLX generates the signature: usually just drop it",
    ),
    "constant_memory": Rule(
        "memory",
        "pass as an input (constant address space if < 8 elements)",
        reason="__constant__ globals do not exist in metal_kernel bodies",
    ),
    "device_global": Rule(
        "memory",
        None,
        True,
        "__device__ globals do not exist in metal_kernel bodies: pass a buffer",
    ),
    "restrict": Rule(
        "memory", "const device T*", reason="whether Metal honours __restrict is uncertain"
    ),
}


def rule_for(name: str) -> Rule | None:
    for table in (SYNTAX, BUILTINS, CALLS, TYPES, COOP):
        if name in table:
            return table[name]
    if name.startswith("wmma::") or name.startswith("mma::"):
        return WMMA
    if name.startswith("cub::") and name[5:] in _CUB_REDUCE_NAMES:
        return CUB_REDUCE
    if name.startswith("cub::"):
        return CUB_WARP if name.split("::")[1].startswith("Warp") else CUB
    if name.startswith("thrust::"):
        return THRUST
    if name.startswith("cuda::") and name[len("cuda::") :] in LIBCUDACXX_ASYNC_NAMES:
        return LIBCUDACXX_ASYNC
    if name.startswith("cg::"):
        return COOP.get(name[4:])
    return None


_SIXTY_FOUR = re.compile(
    r"\b(unsigned\s+long\s+long|long\s+long|u?int64_t|size_t|double|ulonglong)\b"
)
_NARROW = re.compile(r"\b(__half2?|half2?|__nv_bfloat162?|nv_bfloat162?|bfloat16|short|char)\b")


def _atomic(name: str, detail: str) -> tuple[str | None, bool, str]:
    base = name.split("_")[0]
    call = CUDA_CALLS[base]
    op = call.metal
    if "double" in detail:
        return None, True, f"{base} on double: Metal has no double"
    if _SIXTY_FOUR.search(detail):
        if base in ("atomicCAS", "atomicExch"):
            return (
                None,
                True,
                f"64-bit {base}: Apple9+ only and reported not to compile; restructure",
            )
        return (
            f"{op} on atomic_ulong",
            True,
            "64-bit atomics need Apple9+ (M3 or later); M1 has none",
        )
    if _NARROW.search(detail):
        return (
            "CAS loop on a 32-bit word (MLX mlx_atomic pattern)",
            True,
            f"{base} on a 16/8-bit type",
        )
    own = CUDA_CALLS.get(name, call)
    if own.needs_rewrite:  # no rule: a scoped variant, compare-and-swap, atomicInc
        return own.metal, True, own.reason
    if not re.search(r"\b(float|int|unsigned|uint|uint32_t|int32_t)\b", detail):
        return (
            f"{op} on device atomic_int/atomic_uint/atomic<float>",
            False,
            f"element type {detail or 'unknown'}: int/uint map directly, float needs MSL 3.0+ "
            "(device memory only), half/bf16/64-bit need rewrites",
        )
    if "float" in detail and base in ("atomicMax", "atomicMin"):
        return "CAS loop on as_type<uint> bits", True, "no float atomic max/min in Metal"
    if "float" in detail:
        return (
            f"{op} on device atomic<float>",
            False,
            "device memory only; slow: reduce with simd_sum first, one atomic per SIMD-group",
        )
    target = "device atomic_int/atomic_uint"
    return f"{op}(p, v, memory_order_relaxed) on {target}", False, "relaxed order only"


def _shuffle(name: str, detail: str, rule: Rule) -> tuple[str | None, bool, str]:
    reasons = [rule.reason] if rule.reason else []
    rewrite = False
    width = re.search(r"width=(\S+)", detail)
    if width and width.group(1) not in ("32", "warpSize", "WARP_SIZE"):
        reasons.append(
            f"width {width.group(1)} < 32 has no direct form: use quad_* for 4 or compute "
            "lane ids within the sub-group"
        )
        rewrite = "xor" not in name
    mask = re.search(r"mask=(\S+)", detail)
    if mask and mask.group(1).lower() not in (
        "0xffffffff",
        "0xffffffffu",
        "full_mask",
        "~0",
        "~0u",
        "-1",
        "__activemask()",
        "final_mask",
        "0xfffffffful",
    ):
        reasons.append(f"partial mask {mask.group(1)}: check which lanes are active")
    return rule.metal, rewrite, "; ".join(reasons)


def assess_feature(name: str, detail: str = "") -> tuple[str | None, bool, str]:
    """Metal mapping, needs-rewrite flag and reason for one detected feature."""
    base = name.split("_block")[0].split("_system")[0]
    if base in ATOMICS:
        return _atomic(name, detail)
    rule = rule_for(name)
    if rule is None:
        return None, False, "unknown feature"
    if name.startswith("__shfl"):
        return _shuffle(name, detail, rule)
    if name in ("tiled_partition", "thread_block_tile"):
        size = re.search(r"size=(\d+)", detail)
        if size and size.group(1) not in ("32", "4"):
            return (
                rule.metal,
                True,
                f"tile of {size.group(1)} lanes: compute sub-group lane ids yourself",
            )
    if name == "static_shared":
        size = re.search(r"bytes=(\d+)", detail)
        if size and int(size.group(1)) > 32768:
            return (
                rule.metal,
                True,
                f"{size.group(1)} bytes exceeds the 32 KB threadgroup-memory limit",
            )
    return rule.metal, rule.needs_rewrite, rule.reason


def assess(kernel: KernelInfo) -> list[Assessment]:
    """One row per distinct feature (and detail) of the kernel, at its first line."""
    rows: dict[tuple[str, str], Assessment] = {}
    for feat in sorted(kernel.features, key=lambda f: f.line):
        # a library's names share a row (wmma::, cub::); libcu++'s async copies (cuda::) each
        # have a row of their own, refused by its rule
        group = feat.name.split("::")[0] if "::" in feat.name else ""
        group = "" if group == "cuda" else group
        key = (group, "") if group else (feat.name, _detail_key(feat.name, feat.detail))
        if key in rows:
            if group and feat.name not in rows[key].feature.split(", "):
                rows[key].feature += f", {feat.name}"
            continue
        metal, rewrite, reason = assess_feature(feat.name, feat.detail)
        rows[key] = Assessment(
            feature=_label(feat.name, feat.detail),
            line=feat.line,
            metal=metal,
            needs_rewrite=rewrite,
            reason=reason,
        )
    return list(rows.values())


def _detail_key(name: str, detail: str) -> str:
    if (
        name.split("_")[0] in ATOMICS
        or name.startswith("__shfl")
        or name in ("tiled_partition", "static_shared")
    ):
        return re.sub(r"via macro \w+", "", detail).strip()
    return ""


def _label(name: str, detail: str) -> str:
    key = _detail_key(name, detail)
    return f"{name}({key})" if key else name
