"""Reading a whole .cu file with tree-sitter-cuda: `read_cuda` returns its kernels, device
functions, launches and defines as a CudaFile; `summary` renders the compact text the model
sees; `assess` (from features.py) maps each CUDA feature to Metal."""

from __future__ import annotations

import re
from pathlib import Path

from mlxport.cuda_syntax import reading_source
from mlxport.translate.reading.cudafile import (
    CudaFile,
    CudaReadError,
    Feature,
    GlobalVar,
    KernelInfo,
    LaunchSite,
    MacroDef,
    Param,
    SharedDecl,
    TemplateParam,
)
from mlxport.translate.reading.features import Assessment, assess
from mlxport.translate.reading.macros import preprocess
from mlxport.translate.reading.parsing import (
    load,
    parse_within,
    read_deadline,
    remembered_read,
    source_text_of,
)
from mlxport.translate.reading.structure import build_file

__all__ = [
    "Assessment",
    "CudaFile",
    "CudaReadError",
    "Feature",
    "KernelInfo",
    "LaunchSite",
    "MacroDef",
    "Param",
    "SharedDecl",
    "TemplateParam",
    "GlobalVar",
    "assess",
    "read_cuda",
    "summary",
]

PARSE_SECONDS = 10.0
READ_SECONDS = 20.0  # everything after the parse; walks check it every few thousand nodes


def read_cuda(source: str | Path, *, name: str = "<source>") -> CudaFile:
    """Read CUDA source text or a .cu path into a CudaFile; raises CudaReadError on bad input.

    A `str` that is a single line ending in .cu/.cuh/.h/... is taken as a path; any other `str` is
    source text.
    """
    data, file = load(source, name)
    return remembered_read(source_text_of(data, file).encode("utf-8"), file, _read)


def _read(data: bytes, file: str) -> CudaFile:
    macros, expanded, spans = preprocess(data, file)
    tree = parse_within(expanded, file, PARSE_SECONDS)
    with reading_source(expanded), read_deadline(READ_SECONDS):
        return build_file(tree, file, macros, spans)


def summary(cf: CudaFile) -> str:
    """Compact text for the model: kernels, params with r/w, shared memory, features, launches."""
    lines = [
        f"{cf.path}: {len(cf.kernels)} kernel(s), {len(cf.device_functions)} device function(s), "
        f"{len(cf.launches)} launch(es)"
    ]
    kernel_defines = {m.name for m in cf.macros if m.params is None and len(m.body) < 40 and m.body}
    if kernel_defines:
        shown = list(sorted(kernel_defines))[:12]
        lines.append(
            "defines: "
            + ", ".join(f"{n}={cf.defines[n]}" for n in shown)
            + (" ..." if len(kernel_defines) > 12 else "")
        )
    for k in cf.kernels:
        lines.extend(_kernel_summary(k, cf.launches))
    for d in cf.device_functions:
        lines.extend(_kernel_summary(d, cf.launches))
    known = {k.name for k in cf.kernels}
    other = [ln for ln in cf.launches if ln.kernel not in known]
    for ln in other[:4]:
        lines.append("launch of unknown kernel: " + _launch_text(ln))
    host = sorted(
        {f.name for f in cf.features if f.category in ("host", "library", "thrust", "memory")}
    )
    if host:
        lines.append("host/file: " + ", ".join(host))
    return "\n".join(lines)


def _kernel_summary(k: KernelInfo, launches: list[LaunchSite]) -> list[str]:
    head = f"{k.kind} {k.name}{k.specialization or ''} (line {k.line}"
    head += f", from macro {k.macro})" if k.macro else ")"
    if k.template_params:
        tps = ", ".join(
            f"{t.kind} {t.name}" + (f"={t.default}" if t.default else "") for t in k.template_params
        )
        head += f" template<{tps}>"
    lines = [head]
    if k.instantiations:
        lines.append(f"  instantiations: {', '.join(k.instantiations)}")
    if k.params:
        lines.append("  params: " + "; ".join(_param_line(p) for p in k.params))
    for sh in k.shared:
        dims = "".join(f"[{d}]" for d in sh.dims)
        kind = "dynamic" if sh.dynamic else (f"{sh.bytes} B" if sh.bytes is not None else "static")
        lines.append(f"  shared: {sh.type} {sh.name}{dims} ({kind}, line {sh.line})")
    if k.calls:
        lines.append(f"  calls: {', '.join(k.calls)}")
    lines += _kernel_features(k, launches) if k.kind == "global" else _device_features(k)
    for w in k.warnings[:2]:
        lines.append(f"  warning: {w}")
    return lines


def _param_line(p: Param) -> str:
    rw = ("r" if p.read else "") + ("w" if p.written else "")
    if not (p.is_pointer or p.is_reference):
        rw = "scalar"
    return f"{p.name}: {p.type} [{rw or 'unused'}]"


def _kernel_features(k: KernelInfo, launches: list[LaunchSite]) -> list[str]:
    rows = assess(k)
    lines = [
        f"  ! {r.feature} (line {r.line}): needs rewrite: {r.reason}"
        + (f" [try {r.metal}]" if r.metal else "")
        for r in rows
        if r.needs_rewrite
    ]
    maps = sorted(
        {
            f"{r.feature}->{_short(r.metal)}"
            for r in rows
            if not r.needs_rewrite
            and r.metal
            and r.feature not in ("restrict",)
            and not r.feature.startswith("static_shared")
        }
    )
    if maps:
        lines.append("  maps: " + "; ".join(maps))
    lines += ["  launch: " + _launch_text(ln) for ln in launches if ln.kernel == k.name]
    return lines


def _device_features(k: KernelInfo) -> list[str]:
    rows = assess(k)
    flagged = [f"{r.feature}(l{r.line})" for r in rows if r.needs_rewrite]
    plain = sorted({r.feature for r in rows if not r.needs_rewrite})
    return (
        ["  features: " + ", ".join(plain + [f"!{f}" for f in flagged])] if plain or flagged else []
    )


def _short(metal: str) -> str:
    return re.split(r" \(|; | or ", metal)[0]


def _launch_text(ln: LaunchSite) -> str:
    targs = f"<{', '.join(ln.template_args)}>" if ln.template_args else ""
    cfg = (
        [ln.grid, ln.block]
        + ([ln.shared_mem] if ln.shared_mem else [])
        + ([ln.stream] if ln.stream else [])
    )
    where = f" in {ln.enclosing_function}" if ln.enclosing_function else ""
    return f"{ln.kernel}{targs}<<<{', '.join(cfg)}>>> line {ln.line}{where}"
