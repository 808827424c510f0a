"""Host-side launch analysis: the launch a port makes of its kernel, from the launches of the host
function that makes them (evaluated in `symbolic`): one launch, or several whose branch
conditions become arithmetic choices in each launch value."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tree_sitter import Node

from mlxport.cuda_syntax import function_name, walk
from mlxport.translate.host.binding import Binder
from mlxport.translate.host.cexpr import CExprError, num
from mlxport.translate.host.device import DeviceQueries
from mlxport.translate.host.symbolic import (
    HostFunction,
    LaunchValues,
    SiteValues,
    TypeSize,
    file_constants,
    find_unknown,
)
from mlxport.translate.reading.cudafile import CudaFile, KernelInfo, LaunchSite

__all__ = ["CONCRETE_TYPES", "LaunchPlan", "file_constants", "find_unknown", "plan_launch"]

CONCRETE_TYPES = {
    "float",
    "double",
    "int",
    "__half",
    "half",
    "__nv_bfloat16",
    "nv_bfloat16",
    "bfloat16",
    "int8_t",
    "uint8_t",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "unsigned",
    "char",
    "short",
    "bool",
    "float16",
    "at::Half",
    "at::BFloat16",
    "c10::Half",
    "c10::BFloat16",
}


@dataclass
class LaunchPlan(LaunchValues):
    host: str = ""
    notes: list[str] = field(default_factory=list)


def _is_type(arg: str) -> bool:
    return arg.replace("const ", "").strip() in CONCRETE_TYPES


def choose_sites(cf: CudaFile, kernel: KernelInfo) -> list[LaunchSite]:
    sites = [s for s in cf.launches if s.kernel == kernel.name]
    typename_pos = [i for i, t in enumerate(kernel.template_params) if t.kind == "typename"]
    generic = [
        s
        for s in sites
        if not any(i < len(s.template_args) and _is_type(s.template_args[i]) for i in typename_pos)
    ]
    sites = generic or sites
    if not sites:
        return []
    first = sites[0].enclosing_function
    return [s for s in sites if s.enclosing_function == first]


def _combine(values: list[tuple[list[ast.expr], ast.expr | None]]) -> ast.expr | None:
    """Nested choice over the sites: the last one is the default."""
    conds, out = values[-1]
    for conds, v in reversed(values[:-1]):
        if out is None or v is None:
            return v if out is None else out
        if ast.dump(v) == ast.dump(out):
            continue
        test = conds[0] if len(conds) == 1 else ast.BoolOp(ast.And(), conds) if conds else num(True)
        out = ast.IfExp(test, v, out)
    return out


def plan_launch(
    cf: CudaFile, root: Node, kernel: KernelInfo, binder: Binder, type_size: TypeSize
) -> LaunchPlan | None:
    got = launch_sites(cf, root, kernel, binder, type_size)
    return None if got is None else combined(got)


@dataclass
class Sites:
    """The host function launching the kernel, the values at each of its launches, and notes on
    what fixed them (device queries)."""

    host: str
    values: list[SiteValues]
    notes: list[str]


def launch_sites(
    cf: CudaFile,
    root: Node,
    kernel: KernelInfo,
    binder: Binder,
    type_size: TypeSize,
    target: str = "msl",
) -> Sites | None:
    sites = choose_sites(cf, kernel)
    if not sites:
        return None
    host_name = sites[0].enclosing_function
    fn = _host_function(root, host_name, sites[0].line)
    if fn is None:
        raise CExprError(f"the launch at line {sites[0].line} outside a function", sites[0].line)
    host = HostFunction(fn, cf, kernel, binder, type_size, root, DeviceQueries(root, target))
    values = host.run(sites)
    if not values:
        raise CExprError(
            "the launch of the kernel (not reached in its host function)", sites[0].line
        )
    return Sites(host_name or "", values, [*host.device.notes, *host.notes])


def one_site(found: Sites, site: SiteValues, note: str) -> LaunchPlan:
    return LaunchPlan(
        site.blocks,
        site.threads,
        site.smem,
        site.targs,
        site.kargs,
        site.line,
        found.host,
        [*found.notes, note],
    )


def combined(found: Sites) -> LaunchPlan:
    """One launch whose values choose, by the branch conditions, among the sites' values."""
    host_name, values = found.host, found.values
    notes = list(found.notes)
    if len(values) > 1:
        lines = ", ".join(str(v.line) for v in values)
        notes.append(
            f"{len(values)} launch sites in {host_name}() (lines {lines}): "
            "their branch conditions became arithmetic choices in the launch expressions"
        )
    if any(find_unknown(c) for v in values[:-1] for c in v.conds):
        bad = next(find_unknown(c) for v in values[:-1] for c in v.conds if find_unknown(c))
        raise CExprError(
            f"the branch condition choosing between launches ({bad.what})",
            bad.line or values[0].line,
        )

    def field_(get) -> ast.expr | None:
        return _combine([(v.conds, get(v)) for v in values])

    blocks = [field_(lambda v, i=i: v.blocks[i]) for i in range(3)]
    threads = [field_(lambda v, i=i: v.threads[i]) for i in range(3)]
    smem = field_(lambda v: v.smem) if any(v.smem is not None for v in values) else None
    targs = {k: field_(lambda v, k=k: v.targs.get(k)) for k in values[0].targs}
    kargs: dict[str, ast.expr | CExprError] = {}
    for k in values[0].kargs:
        errs = [v.kargs.get(k) for v in values if isinstance(v.kargs.get(k), CExprError)]
        kargs[k] = errs[0] if errs else field_(lambda v, k=k: v.kargs.get(k))
    return LaunchPlan(blocks, threads, smem, targs, kargs, values[0].line, host_name, notes)


def _host_function(root: Node, name: str | None, ln: int) -> Node | None:
    best = None
    for n in walk(root):
        if (
            n.type == "function_definition"
            and n.start_point[0] + 1 <= ln <= n.end_point[0] + 1
            and (name is None or function_name(n)[0] == name)
        ):
            best = n
    return best
