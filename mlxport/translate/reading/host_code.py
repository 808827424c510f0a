"""What the reader records of host code: kernel launch sites (`<<<>>>` and cudaLaunchKernel*)
and the host-side CUDA API and library calls outside kernels."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import (
    bare_callee,
    collapse_spaces,
    enclosing,
    line,
    source_function_name,
    source_text,
)
from mlxport.translate.reading.cudafile import Feature, LaunchSite
from mlxport.translate.reading.feature_scan import dedupe
from mlxport.translate.reading.parsing import timed_walk

_LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cudaLaunchKernelEx")


def launch_sites(root: Node) -> list[LaunchSite]:
    """Every kernel launch in the file, in source order."""
    out = []
    for node in timed_walk(root):
        if node.type == "kernel_call_syntax" and node.parent is not None:
            site = _chevron_launch(node.parent, node)
        elif node.type == "call_expression" and bare_callee(node) in _LAUNCH_APIS:
            site = _api_launch(node)
        else:
            continue
        if site is not None:
            out.append(site)
    return out


def _enclosing_function(node: Node) -> str | None:
    fn = enclosing(node, ("function_definition",))
    return (source_function_name(fn)[0] or None) if fn is not None else None


def _chevron_launch(call: Node, config: Node) -> LaunchSite | None:
    fn = call.child_by_field_name("function")
    targs: list[str] = []
    if fn is not None and fn.type == "template_function":
        targs = _texts(fn.child_by_field_name("arguments"))
        fn = fn.child_by_field_name("name")
    parts = _texts(config)
    if len(parts) < 2 or fn is None:
        return None
    return LaunchSite(
        kernel=collapse_spaces(source_text(fn)).split("::")[-1],
        template_args=targs,
        grid=parts[0],
        block=parts[1],
        shared_mem=parts[2] if len(parts) > 2 else None,
        stream=parts[3] if len(parts) > 3 else None,
        args=_texts(call.child_by_field_name("arguments")),
        line=line(call),
        enclosing_function=_enclosing_function(call),
    )


def _texts(node: Node | None) -> list[str]:
    """The arguments' texts; a comment between them (`k<<<g, b>>>(x, /*mask*/ n)`) is none."""
    if node is None:
        return []
    return [collapse_spaces(source_text(c)) for c in node.named_children if c.type != "comment"]


def _api_launch(call: Node) -> LaunchSite | None:
    parts = _texts(call.child_by_field_name("arguments"))
    if len(parts) < 3:
        return None
    m = re.search(r"([A-Za-z_]\w*)\s*(<[^()]*>)?\s*\)?\s*$", parts[0])
    if not m:
        return None
    targs = [a.strip() for a in m.group(2)[1:-1].split(",")] if m.group(2) else []
    return LaunchSite(
        kernel=m.group(1),
        template_args=targs,
        grid=parts[1],
        block=parts[2],
        shared_mem=parts[4] if len(parts) > 4 else None,
        stream=parts[5] if len(parts) > 5 else None,
        args=[parts[3]] if len(parts) > 3 else [],
        line=line(call),
        enclosing_function=_enclosing_function(call),
        api=bare_callee(call),
    )


_HOST_APIS = {
    "cudaMalloc": "device allocation (MLX arrays replace it)",
    "cudaMallocManaged": "unified memory",
    "cudaMemcpy": "copy (not needed: unified memory)",
    "cudaMemcpyAsync": "copy (not needed: unified memory)",
    "cudaMemset": "fill (mx.zeros / init_value)",
    "cudaFree": "free (MLX manages memory)",
    "cudaStreamCreate": "stream (mx.new_stream)",
    "cudaDeviceSynchronize": "sync (mx.eval)",
    "cudaFuncSetAttribute": "kernel attribute (dynamic shared memory > 48 KB?)",
    "cudaLaunchCooperativeKernel": "cooperative launch (grid sync: split into dispatches)",
    "cudaMallocHost": "pinned memory (not needed)",
    "cudaEventRecord": "timing (use the benchmark tool)",
    "cudaGetLastError": "error check",
    "cudaMemcpyToSymbol": "constant memory upload (pass an input)",
    "cudaBindTexture": "texture (pass a buffer)",
    "cudaCreateTextureObject": "texture (pass a buffer)",
}


def host_features(root: Node, kernel_ranges: list[tuple[int, int]]) -> list[Feature]:
    """CUDA runtime, library and thrust calls outside the byte ranges of kernels and device
    functions."""
    out = []
    for node in timed_walk(root):
        if node.type != "call_expression":
            continue
        if any(s <= node.start_byte < e for s, e in kernel_ranges):
            continue
        name = bare_callee(node)
        if name.startswith(("cublas", "cudnn", "cufft", "curand", "cusparse")):
            out.append(
                Feature(
                    name=name.split("_")[0],
                    category="library",
                    line=line(node),
                    detail="library call: use the matching MLX op",
                )
            )
        elif name in _HOST_APIS:
            out.append(
                Feature(name=name, category="host", line=line(node), detail=_HOST_APIS[name])
            )
        elif "thrust::" in source_text(node.child_by_field_name("function")):
            out.append(Feature(name=f"thrust::{name}", category="thrust", line=line(node)))
    return dedupe(out)
