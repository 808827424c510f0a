"""The rule-based translation's search space: the same kernel translated with other settings of what
its speed is tuned by, most promising first. Each variant is a candidate like any other: it ships
only after passing every check. The knobs:

- ``__restrict__`` (CUDA): the buffers become ``__restrict__`` kernel parameters
  (``cuda_kernel.restrict_buffers``), so loads of inputs take the read-only path and may be issued
  ahead of earlier stores. It changes no result (MLX hands a kernel distinct, fresh outputs and
  never writes its inputs), so every CUDA variant carries it and the first is it alone.
- ``unroll=U``: ``#pragma unroll U`` before each block- or grid-stride loop (a ``+=`` step, a bound
  known only at run time) of the kernel and the device functions it calls. Each thread still runs
  the same operations in the same order (the CPU executor's results match bit for bit); the
  compiler may issue several iterations' loads before the first is used, past an earlier
  iteration's store only where the buffers are ``__restrict__``.
- integers the launch is tuned by: ``#define NAME 256``, host or file-scope ``constexpr int NAME =
  256;`` (every declaration of that name at once), and a literal that a launch passes both as a
  template argument and as its block size (``k<T, 512><<<rows, 512>>>``). A value can change what
  a kernel computes (a tile that no longer divides its loop), which the checks catch. Hardware
  constants (the warp size) are left alone, and a value that sizes the block stays within 1024
  threads.

The order: ``__restrict__`` alone, then unroll=4 and unroll=8 (what the translation loses against
the expert ports is mostly bytes in flight per thread), then the integers taking turns (one value
of each, then the next), so the cap keeps each in the search. A variant that would time the same
code and launch as the translation or an earlier variant is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tree_sitter import Node

from mlxport.cuda_syntax import parse, text, walk
from mlxport.errors import UserError
from mlxport.expr import ArrayInfo, Dtype
from mlxport.translate.cuda_kernel import restrict_buffers
from mlxport.translate.cudafile import CudaFile
from mlxport.translate.kernel_scope import helper_nodes, kernel_node, pick_kernel, reachable
from mlxport.translate.launch import file_constants
from mlxport.translate.macros import normalize
from mlxport.translate.result import Translation
from mlxport.verify.benchmark import primary_dtype

THREADGROUP_SIZES = (64, 128, 256, 512, 1024)
UNROLL = (4, 8)
MAX_VARIANTS = 10
RESTRICT = "__restrict__"
_DEFINE = re.compile(r"^[ \t]*#define[ \t]+(\w+)[ \t]+(\d+)[ \t]*(?://.*)?$", re.M)
_CONSTEXPR = re.compile(r"\bconstexpr\s+(?:unsigned\s+|signed\s+)?(?:int|long|size_t|short)\s+(\w+)\s*=\s*(\d+)\s*;")
_LAUNCH_PAIR = re.compile(r"<[^<>;]*?\b(\d+)\b[^<>;]*>\s*<<<\s*[^,;]+?,\s*(\d+)\b")  # k<T, 512><<<g, 512
_BOUND_OPS = ("<", "<=", ">", ">=", "!=")


def tuning_variants(task, target: str) -> list[tuple[str, Translation]]:
    """(label such as ``LN_BLOCK=512``, Translation) for each setting worth timing, at most
    MAX_VARIANTS, none timing the same code and launch as another or as the translation itself (a
    value in a branch the timed launch does not take changes nothing there)."""
    from mlxport.translate.reader import read_cuda
    from mlxport.translate.translator import Untranslatable, translate

    source = task.source_text()
    cf = read_cuda(source, name=task.source)
    launch = next((site for site in cf.launches if site.kernel == task.kernel), None)
    if launch is None:
        return []
    try:
        base = translate(source, kernel=task.kernel, target=target, task=task)
    except Untranslatable:
        return []
    restrict = target == "cuda" and restrict_buffers(base) is not None
    seen = {_as_timed(task, base)}

    def variant(label: str, edited: str) -> tuple[str, Translation] | None:
        try:
            translation = translate(edited, kernel=task.kernel, target=target, task=task)
        except Untranslatable:
            return None
        if restrict:
            translation, label = restrict_buffers(translation), " + ".join(filter(None, [label, RESTRICT]))
        if (key := _as_timed(task, translation)) in seen:
            return None
        seen.add(key)
        return label, translation

    leading = [("", source)] if restrict else []
    if loops := stride_loops(source, cf, task.kernel):
        leading += [(f"unroll={u}", unrolled(source, loops, u)) for u in UNROLL]
    first = [v for label, edited in leading if (v := variant(label, edited))]
    knobs = [[v for label, edited in values if (v := variant(label, edited))]
             for values in _integer_knobs(source, launch.block.strip())]
    return (first + _interleave(knobs))[:MAX_VARIANTS]


def _as_timed(task, translation: Translation) -> str:
    """The code and its launch at the size and dtype a variant is timed at (the first bench case,
    the primary dtype): a variant that differs only in a branch not taken there times the same."""
    cand = translation.candidate
    case, dtype = task.bench_cases()[0], primary_dtype(task)
    shapes = task.shapes(case, dtype)
    infos: dict[str, Any] = {t.name: ArrayInfo(shapes[t.name], Dtype(t.resolve_dtype(dtype))) for t in task.inputs}
    infos.update(task.param_values(case))
    try:
        launch = cand.launch(infos).model_dump_json()
    except UserError:
        launch = cand.id
    return json.dumps([cand.source, cand.header, launch])


def stride_loops(source: str, cf: CudaFile, kernel: str) -> list[int]:
    """Byte offsets of the lines holding each block- or grid-stride ``for`` of the kernel and the
    device functions it calls: a ``+=`` step other than 1, a bound that is not a compile-time
    constant, no pragma of its own, and a line to itself in a block (room for a pragma line)."""
    data = normalize(source.encode("utf-8", "replace"))  # what the translator parses, offsets kept
    root = parse(data).root_node
    info = pick_kernel(cf, kernel)
    functions = [kernel_node(root, info)] + [n for ns in helper_nodes(root, reachable(cf, info)).values() for n in ns]
    constants = _constants(root, cf)
    starts = set()
    for fn in functions:
        for loop in walk(fn):
            if loop.type == "for_statement" and _is_stride_loop(loop, constants) and not _has_pragma(loop) \
                    and loop.parent is not None and loop.parent.type == "compound_statement":
                start = data.rfind(b"\n", 0, loop.start_byte) + 1
                if not data[start:loop.start_byte].strip():
                    starts.add(start)
    return sorted(starts)


def unrolled(source: str, loops: list[int], factor: int) -> str:
    """The source with ``#pragma unroll factor`` on its own line before each of ``loops``."""
    data = source.encode("utf-8", "replace")
    for start in reversed(loops):
        indent = data[start:len(data) - len(data[start:].lstrip(b" \t"))]
        data = data[:start] + indent + f"#pragma unroll {factor}\n".encode() + data[start:]
    return data.decode("utf-8", "replace")


def _is_stride_loop(loop: Node, constants: set[str]) -> bool:
    update, condition = loop.child_by_field_name("update"), loop.child_by_field_name("condition")
    if update is None or condition is None or update.type != "assignment_expression" \
            or condition.type != "binary_expression":
        return False
    step = update.child_by_field_name("right")
    if text(update.child_by_field_name("operator")) != "+=" or step is None or text(step).strip() == "1":
        return False
    var = text(update.child_by_field_name("left")).strip()
    left, right = condition.child_by_field_name("left"), condition.child_by_field_name("right")
    if text(condition.child_by_field_name("operator")) not in _BOUND_OPS or left is None or right is None:
        return False
    bound = right if text(left).strip() == var else left if text(right).strip() == var else None
    return bound is not None and not _constant(bound, constants)


def _constant(node: Node, constants: set[str]) -> bool:
    """Whether every name in the expression is a compile-time constant (a literal bound is too)."""
    for n in walk(node):
        if n.type == "identifier":
            parent = n.parent
            callee = parent is not None and parent.type == "call_expression" and \
                parent.child_by_field_name("function") == n
            if not callee and text(n) not in constants:
                return False
    return True


def _constants(root: Node, cf: CudaFile) -> set[str]:
    """Names that are compile-time constants: macros, file constants, constexpr and enumerators,
    and non-type template parameters."""
    names = set(cf.defines) | {m.name for m in cf.macros} | set(file_constants(root))
    for n in walk(root):
        if n.type == "parameter_declaration" and n.parent is not None and n.parent.type == "template_parameter_list":
            names.update(text(c) for c in n.children if c.type == "identifier")
        elif n.type == "enumerator":
            names.add(text(n.child_by_field_name("name")))
        elif n.type == "declaration" and any(text(c) == "constexpr" for c in n.children):
            for d in n.children_by_field_name("declarator"):
                target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                if target is not None and target.type == "identifier":
                    names.add(text(target))
    return names


def _has_pragma(loop: Node) -> bool:
    prev = loop.prev_named_sibling
    while prev is not None and prev.type == "comment":
        prev = prev.prev_named_sibling
    return prev is not None and prev.type == "preproc_call" and text(prev).lstrip().startswith("#pragma") and \
        "unroll" in text(prev)


def _integer_knobs(source: str, block: str) -> list[list[tuple[str, str]]]:
    """Per tunable integer, (label, the source at that value) for each value worth timing; those
    sizing the block first."""
    knobs = []
    for name, value, blockish, edit in sorted(_integers(source, block), key=lambda k: not k[2]):
        values = [value // 2, value * 2, value * 4]
        if blockish:
            values = [v for v in dict.fromkeys([*THREADGROUP_SIZES, *values]) if v <= 1024]
        knobs.append([(f"{name}={v}", edit(v)) for v in values if v >= 1 and v != value])
    return knobs


def _integers(source: str, block: str) -> list[tuple[str, int, bool, Callable[[int], str]]]:
    """(name, value, whether it sizes the block, the source with another value) per tunable integer."""
    knobs = []
    for m in _DEFINE.finditer(source):
        name, value = m.group(1), int(m.group(2))
        if value > 0 and "WARP" not in name.upper():
            knobs.append((name, value, name == block, lambda v, m=m: _replace(source, [m.span(2)], v)))
    decls: dict[str, list[re.Match]] = {}
    for m in _CONSTEXPR.finditer(source):
        decls.setdefault(m.group(1), []).append(m)
    for name, ms in decls.items():
        value = int(ms[0].group(2))
        if value > 0 and "WARP" not in name.upper() and all(int(m.group(2)) == value for m in ms):
            knobs.append((name, value, name == block, lambda v, ms=ms: _replace(source, [m.span(2) for m in ms], v)))
    for m in _LAUNCH_PAIR.finditer(source):
        if m.group(1) == m.group(2) and int(m.group(1)) > 32:
            line = source.count("\n", 0, m.start()) + 1
            knobs.append((f"block@{line}", int(m.group(1)), True,
                          lambda v, m=m: _replace(source, [m.span(1), m.span(2)], v)))
    return knobs


def _replace(source: str, spans: list[tuple[int, int]], value: int) -> str:
    for start, end in sorted(spans, reverse=True):
        source = source[:start] + str(value) + source[end:]
    return source


def _interleave(knobs: list[list[Any]]) -> list[Any]:
    """One value of each knob in turn, so the cap keeps every knob in the search."""
    out, queues = [], [list(q) for q in knobs]
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out
