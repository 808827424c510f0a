"""The rule-based translation's tuning search: the same kernel translated with other settings of
what its speed is tuned by. Each variant is a candidate like any other: it ships only after
passing every check. The knobs:

- ``__restrict__`` (CUDA): the buffers become ``__restrict__`` kernel parameters
  (``cuda_kernel.restrict_buffers``), so loads of inputs take the read-only path and may be issued
  ahead of earlier stores. It changes no result (MLX hands a kernel distinct, fresh outputs and
  never writes its inputs), so every CUDA variant carries it and the first is it alone.
- ``vector=V`` (CUDA): each thread of a block- or grid-stride loop moves V consecutive elements a
  step, each buffer's V as one aligned load or store, and a loop over a thread's own run of
  consecutive elements (``xr[first + k]``, k < ITEMS) moves them V at a time (``vectorize.py``:
  which loops keep their meaning, and the run-time test that falls back to the loop as written).
  Sums a thread carries across a stride loop's iterations combine the same terms in another
  grouping.
- ``keep=K`` (CUDA, with ``vector=V``): a stride loop reading the chunks an earlier one read or
  wrote (softmax's two passes over its row, layernorm's row staged in shared memory) takes them
  from registers, where every thread has at most K chunk steps; both load all they read for their
  K steps before the first (``Keep`` in ``vector_code.py``). The same results bit for bit as
  vector=V.
- ``selects=1`` (CUDA): a branch in a loop whose arms only update float scalars (softmax's online
  update) becomes selects: both arms computed, the taken one kept, a math call both make made once
  (``ifconvert.py``: which arms are safe to run on the other path). The same results bit for bit;
  the other knobs then apply to the converted source, whose lines are the source's.
- ``coarsen=F``: the kernel launched with F times fewer blocks, each running F of the launch's
  blocks as written, statement by statement, from the kernel's first use of ``blockIdx`` on; what
  comes before runs once, and a sincos the F copies share is computed once (``coarsen.py``: which
  kernels keep their meaning). The same results bit for bit; the other knobs then apply to the
  coarsened source, and a line it moved is named by where it was.
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
- integer literals in the ``dim3`` the timed launch passes as its block (``dim3 block(half < 64 ?
  half : 64, ROWS)``: every ``64`` of one dimension at once, a dimension with one such value only),
  labelled by axis and line (``block.x@54=16``); a block it makes larger than 1024 threads fails
  its check.

The search is greedy and driven by timings (``Search.next``; on the simulator, which never times,
by its labelled cost estimate of each variant at the bench case, verify/estimate.py, which the rules
policy passes in their place): ``__restrict__`` alone, vector=8 and vector=4, selects, coarsen=4
and 8, keep=4 and 8, unroll=4 and 8 (what the translation loses
against the expert ports is mostly bytes in flight per thread and work per element), each on top of
the fastest variant so far, then each integer's values in turn (those sizing the block first), then
the vector widths, keeps and unroll factors again on top of that (a smaller block gives a stride
loop the iterations a chunk, a keep or unrolling needs), then the integers sizing the block again,
the source's own value among them (more items a thread can want another block: a row scanned in one
tile rather than four), then the integers that only size an array. A variant that would time the
same code and launch as the translation or a variant already offered is skipped, as is one whose
knobs edit the same source (a tuned constant inside a rewritten loop). ``tuning_variants`` is the
search when no variant is timed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import NamedTuple

from tree_sitter import Node

from mlxport.cuda_syntax import parse, text, walk
from mlxport.errors import UserError
from mlxport.translate.bind.kernel_scope import helper_nodes, kernel_node, pick_kernel, reachable
from mlxport.translate.bind.result import Translation, Untranslatable
from mlxport.translate.host.launch import file_constants
from mlxport.translate.reading.cudafile import CudaFile
from mlxport.translate.reading.macros import normalize
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.render.cuda_kernel import restrict_buffers
from mlxport.translate.translator import translate
from mlxport.translate.tuning.coarsen import COARSEN, coarsened
from mlxport.translate.tuning.coarsen_lanes import LANES, laned
from mlxport.translate.tuning.ifconvert import if_converted
from mlxport.translate.tuning.vectorize import VECTOR, vector_plan
from mlxport.verify.benchmark import primary_dtype

THREADGROUP_SIZES = (64, 128, 256, 512, 1024)
UNROLL = (4, 8)
KEEP = (4, 8)  # chunk steps a thread holds in registers between two loops over the same elements
MAX_VARIANTS = 20
RESTRICT = "__restrict__"
_NO_EDITS = frozenset({"selects", "coarsen", "lanes", "keep"})  # knobs with no edits of their own
_REWRITES = ("selects", "coarsen", "lanes")  # knobs that rewrite the source the others edit
_DEFINE = re.compile(rb"^[ \t]*#define[ \t]+(\w+)[ \t]+(\d+)[ \t]*(?://.*)?$", re.M)
_CONSTEXPR = re.compile(
    rb"\bconstexpr\s+(?:unsigned\s+|signed\s+)?(?:int|long|size_t|short)\s+(\w+)\s*=\s*(\d+)\s*;"
)
# k<T, 512><<<g, 512
_LAUNCH_PAIR = re.compile(rb"<[^<>;]*?\b(\d+)\b[^<>;]*>\s*<<<\s*[^,;]+?,\s*(\d+)\b")
_BOUND_OPS = ("<", "<=", ">", ">=", "!=")

Edit = tuple[int, int, bytes]  # replace source bytes [start, end) with these


class Knob(NamedTuple):
    name: str
    value: int | None  # the source's own (None: unroll, which the source does not set)
    values: list[int]  # the others worth timing, most promising first
    edits: Callable[[int], list[Edit]]
    block: bool = False  # sizes the block: tried again after the second pass
    capacity: bool = False  # only ever an array's size: tried last of all
    takes: str = ""  # another knob whose value its edits take too (vector takes keep)


class Search:
    """The tuning search over one task's translation. It keeps no record of a run: ``next`` replays
    the search from the labels offered so far and their timings, so one object (or a new one, when
    a run resumes) serves any number of runs."""

    def __init__(self, task, target: str) -> None:
        self.task, self.target = task, target
        self.source = task.source_text().encode("utf-8", "replace")
        self.knobs: list[Knob] = []
        self.restrict = False
        # label: (settings, variant, timed key)
        self._built: dict[str, tuple[dict[str, int], Translation | None, str | None]] = {}
        cf = read_cuda(task.source_text(), name=task.source)
        launch = next((site for site in cf.launches if site.kernel == task.kernel), None)
        try:
            base = (
                translate(task.source_text(), kernel=task.kernel, target=target, task=task)
                if launch
                else None
            )
        except Untranslatable:
            base = None
        if base is None:
            return
        self.restrict = target == "cuda" and restrict_buffers(base) is not None
        self._base_key = _as_timed(task, base)
        self.knobs = _knobs(task, target, task.source_text(), cf)
        # the sources the other knobs edit, by (selects, coarsen, lanes); None where there is none
        self._sources: dict[tuple[int, int, int], tuple[bytes, dict[str, Knob]] | None] = {
            (0, 0, 0): (self.source, {k.name: k for k in self.knobs})
        }
        at = next((i + 1 for i, k in enumerate(self.knobs) if k.name == "vector"), 0)
        for name, key, values, cuda in (
            ("selects", (1, 0, 0), [1], True),
            ("coarsen", (0, COARSEN[0], 0), list(COARSEN), False),
            ("lanes", (0, 0, LANES[0]), list(LANES), True),
        ):
            if (target == "cuda" or not cuda) and self._source(key) is not None:
                self.knobs.insert(at, Knob(name, None, values, lambda _: []))
                at += 1

    def next(
        self, times: dict[str, float | None], base: float | None = None
    ) -> tuple[str, Translation] | None:
        """The next variant to check and time, or None when the search is over. ``times``: each
        label offered so far, in the order offered, with its time or, off a Mac, its estimate (None:
        it failed or was neither); ``base``: the translation's own, which a variant must beat to be
        built on."""
        if len(times) >= MAX_VARIANTS:
            return None
        walked: list[tuple[str, dict[str, int]]] = []  # the offered steps the replay has reached
        keys = {self._base_key} if self.knobs or self.restrict else set()
        for settings in self._plan(times, walked, base):
            label = self._label(settings)
            if label in times:
                walked.append((label, settings))
                keys.add(self._build(label, settings)[2])
                continue
            _, variant, key = self._build(label, settings)
            if variant is not None and key not in keys:
                return label, variant
        return None

    def variant(self, label: str) -> Translation | None:
        """The variant a label names (``unroll=8 + block@84=128 + __restrict__``), or None."""
        try:
            settings = {
                name: int(v)
                for name, v in (p.rsplit("=", 1) for p in label.split(" + ") if p != RESTRICT)
            }
        except ValueError:
            return None
        if not set(settings) <= {k.name for k in self.knobs} or self._label(settings) != label:
            return None
        return self._build(label, settings)[1]

    def _plan(
        self,
        times: dict[str, float | None],
        walked: list[tuple[str, dict[str, int]]],
        base: float | None,
    ):
        """Each step's settings on top of the fastest variant among those before it (and faster
        than the translation)."""

        def best() -> dict[str, int]:
            timed = [
                (times[label], k, settings)
                for k, (label, settings) in enumerate(walked)
                if times.get(label) is not None and (base is None or times[label] < base)
            ]
            return dict(min(timed, key=lambda t: t[:2])[2]) if timed else {}

        if self.restrict:
            yield {}
        first = [(k, k.values) for k in self.knobs if not k.capacity]
        again = [
            (k, k.values)
            for name in ("vector", "keep", "unroll")
            for k in self.knobs
            if k.name == name
        ]
        # the source's own value too
        blocks = [(k, [k.value, *k.values]) for k in self.knobs if k.block]
        capacities = [(k, k.values) for k in self.knobs if k.capacity]
        for knob, values in first + again + blocks + capacities:
            for v in values:
                step = {
                    n: x
                    for n, x in {**best(), knob.name: v}.items()
                    if n != knob.name or v != knob.value
                }
                yield self._stacked(step) if knob.name in _REWRITES else step

    def _stacked(self, step: dict[str, int]) -> dict[str, int]:
        """A rewrite's step without the settings its rewritten source has no knob for (vector=8
        where rope is coarsened): tried on what it stacks with, not skipped."""
        key = tuple(step.get(name, 0) for name in _REWRITES)
        got = self._source(key) if any(key) else None
        if got is None:
            return step
        return {n: x for n, x in step.items() if n in got[1] or n in _NO_EDITS}

    def _label(self, settings: dict[str, int]) -> str:
        order = [k.name for k in self.knobs]
        parts = [f"{name}={settings[name]}" for name in sorted(settings, key=order.index)]
        return " + ".join(parts + ([RESTRICT] if self.restrict else []))

    def _build(
        self, label: str, settings: dict[str, int]
    ) -> tuple[dict[str, int], Translation | None, str | None]:
        if label not in self._built:
            data, knobs = self.source, self.knobs
            key = tuple(settings.get(name, 0) for name in _REWRITES)
            got = self._source(key)
            if got is not None and any(key):
                data, by_name = got
                knobs = [
                    by_name.get(k.name, k if k.name in _NO_EDITS else None) for k in self.knobs
                ]
            missing = got is None or any(
                k is None and own.name in settings for k, own in zip(knobs, self.knobs, strict=True)
            )
            edits = sorted(
                e
                for k in knobs
                if k is not None and k.name in settings and settings[k.name] != k.value
                for e in (
                    k.edits(settings[k.name], settings.get(k.takes, 0))
                    if k.takes
                    else k.edits(settings[k.name])
                )
            )
            # a value in a rewritten loop
            clash = missing or any(b[0] < a[1] for a, b in zip(edits, edits[1:], strict=False))
            for start, end, new in reversed(edits):
                data = data[:start] + new + data[end:]
            try:
                variant = (
                    None
                    if clash
                    else translate(
                        data.decode("utf-8", "replace"),
                        kernel=self.task.kernel,
                        target=self.target,
                        task=self.task,
                    )
                )
            except Untranslatable:
                variant = None
            if variant is not None and self.restrict:
                variant = restrict_buffers(variant)
            self._built[label] = (
                settings,
                variant,
                _as_timed(self.task, variant) if variant else None,
            )
        return self._built[label]

    def _source(self, key: tuple[int, int, int]) -> tuple[bytes, dict[str, Knob]] | None:
        """The source with selects (key[0]), coarsened by key[1] or its threads running key[2]
        lanes, and the knobs that edit it, named as the source's own (a line the rewrite moved is
        named by where it was)."""
        if key not in self._sources:
            self._sources[key] = self._rewritten(*key)
        return self._sources[key]

    def _rewritten(
        self, selects: int, factor: int, lanes: int
    ) -> tuple[bytes, dict[str, Knob]] | None:
        source, line = self.task.source_text(), None
        if factor or lanes:
            below = self._source((selects, 0, 0))
            if below is None or (factor and lanes):
                return None
            text_ = below[0].decode("utf-8", "replace")
            rewrite = coarsened if factor else laned
            done = rewrite(
                text_, read_cuda(text_, name=self.task.source), self.task.kernel, factor or lanes
            )
            if done is None:
                return None
            source, line = done.source, done.source_line
        else:
            source = if_converted(
                source, read_cuda(source, name=self.task.source), self.task.kernel
            )
            if source is None:
                return None
        cf = read_cuda(source, name=self.task.source)
        knobs = _knobs(self.task, self.target, source, cf, line)
        return source.encode("utf-8", "replace"), {k.name: k for k in knobs}


def _knobs(task, target: str, source: str, cf: CudaFile, line=None) -> list[Knob]:
    """The vector, unroll and integer knobs of one source of the task (as written, if-converted or
    coarsened: ``line`` maps its lines to the source's, for the knobs named by a line)."""
    data = source.encode("utf-8", "replace")
    launch = next(site for site in cf.launches if site.kernel == task.kernel)
    knobs = []
    if target == "cuda" and (plan := vector_plan(source, cf, task.kernel)):
        knobs.append(Knob("vector", None, list(VECTOR), plan.edits, takes="keep"))
        if plan.keeps:
            knobs.append(Knob("keep", None, list(KEEP), lambda _: []))
    if loops := stride_loops(source, cf, task.kernel):
        knobs.append(
            Knob("unroll", None, list(UNROLL), lambda u, loops=loops: _unroll_edits(data, loops, u))
        )
    knobs += _integer_knobs(data, launch.block.strip())
    if line is not None:
        knobs = [
            k._replace(name=re.sub(r"@(\d+)$", lambda m: f"@{line(int(m.group(1)))}", k.name))
            for k in knobs
        ]
    return knobs


def tuning_variants(task, target: str) -> list[tuple[str, Translation]]:
    """(label such as ``LN_BLOCK=512 + __restrict__``, Translation) for each variant the search
    tries when none is timed, at most MAX_VARIANTS."""
    search, out = Search(task, target), []
    while (v := search.next({label: None for label, _ in out})) is not None:
        out.append(v)
    return out


def _as_timed(task, translation: Translation) -> str:
    """The code and its launch at the size and dtype a variant is timed at (the first bench case,
    the primary dtype): a variant that differs only in a branch not taken there times the same."""
    cand = translation.candidate
    from mlxport.tasks import case_infos

    try:
        launch = cand.launch(
            case_infos(task, task.bench_cases()[0], primary_dtype(task))
        ).model_dump_json()
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
    functions = [kernel_node(root, info)] + [
        n for ns in helper_nodes(root, reachable(cf, info)).values() for n in ns
    ]
    constants = _constants(root, cf)
    starts = set()
    for fn in functions:
        for loop in walk(fn):
            if (
                loop.type == "for_statement"
                and _is_stride_loop(loop, constants)
                and not _has_pragma(loop)
                and loop.parent is not None
                and loop.parent.type == "compound_statement"
            ):
                start = data.rfind(b"\n", 0, loop.start_byte) + 1
                if not data[start : loop.start_byte].strip():
                    starts.add(start)
    return sorted(starts)


def unrolled(source: str, loops: list[int], factor: int) -> str:
    """The source with ``#pragma unroll factor`` on its own line before each of ``loops``."""
    data = source.encode("utf-8", "replace")
    for start, end, new in reversed(_unroll_edits(data, loops, factor)):
        data = data[:start] + new + data[end:]
    return data.decode("utf-8", "replace")


def _unroll_edits(data: bytes, loops: list[int], factor: int) -> list[Edit]:
    edits = []
    for start in loops:
        indent = data[start : len(data) - len(data[start:].lstrip(b" \t"))]
        edits.append((start, start, indent + f"#pragma unroll {factor}\n".encode()))
    return edits


def _is_stride_loop(loop: Node, constants: set[str]) -> bool:
    update, condition = loop.child_by_field_name("update"), loop.child_by_field_name("condition")
    if (
        update is None
        or condition is None
        or update.type != "assignment_expression"
        or condition.type != "binary_expression"
    ):
        return False
    step = update.child_by_field_name("right")
    if (
        text(update.child_by_field_name("operator")) != "+="
        or step is None
        or text(step).strip() == "1"
    ):
        return False
    var = text(update.child_by_field_name("left")).strip()
    left, right = condition.child_by_field_name("left"), condition.child_by_field_name("right")
    if (
        text(condition.child_by_field_name("operator")) not in _BOUND_OPS
        or left is None
        or right is None
    ):
        return False
    bound = right if text(left).strip() == var else left if text(right).strip() == var else None
    return bound is not None and not _constant(bound, constants)


def _constant(node: Node, constants: set[str]) -> bool:
    """Whether every name in the expression is a compile-time constant (a literal bound is too)."""
    for n in walk(node):
        if n.type == "identifier":
            parent = n.parent
            callee = (
                parent is not None
                and parent.type == "call_expression"
                and parent.child_by_field_name("function") == n
            )
            if not callee and text(n) not in constants:
                return False
    return True


def _constants(root: Node, cf: CudaFile) -> set[str]:
    """Names that are compile-time constants: macros, file constants, constexpr and enumerators,
    and non-type template parameters."""
    names = set(cf.defines) | {m.name for m in cf.macros} | set(file_constants(root))
    for n in walk(root):
        if (
            n.type == "parameter_declaration"
            and n.parent is not None
            and n.parent.type == "template_parameter_list"
        ):
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
    return (
        prev is not None
        and prev.type == "preproc_call"
        and text(prev).lstrip().startswith("#pragma")
        and "unroll" in text(prev)
    )


def _integer_knobs(data: bytes, block: str) -> list[Knob]:
    """A knob per tunable integer, with the values worth timing, in the order of what they size: the
    block (the name or literal it is given as), then the rest of the block's declaration (``dim3
    block(64, ROWS)``), then the rest, then capacities (a value only ever an array's size, such as
    ``__shared__ float f[MAX_HALF]``: it changes nothing but the memory a block takes), which the
    search tries last of all."""
    knobs = []
    capacities = _capacities(data)
    in_block = {
        m.decode()
        for _, dims in _dim3_declarations(data, block)
        for a, b in dims
        for m in re.findall(rb"[A-Za-z_]\w*", data[a:b])
    }
    for name, value, blockish, spans in sorted(
        _integers(data, block),
        key=lambda k: 0 if k[2] else 1 if k[0] in in_block else 3 if k[0] in capacities else 2,
    ):
        values = [value // 2, value * 2, value * 4]
        if blockish == "total":
            values = [v for v in dict.fromkeys([*THREADGROUP_SIZES, *values]) if v <= 1024]
        elif blockish == "dim":  # one dimension of a dim3 block
            values = [value // 4, value // 8, value // 2, value * 2]
        values = [v for v in values if v >= 1 and v != value]
        sizes_block = bool(blockish) or name in in_block
        knobs.append(
            Knob(
                name,
                value,
                values,
                lambda v, spans=spans: [(a, b, str(v).encode()) for a, b in spans],
                sizes_block,
                name in capacities and not sizes_block,
            )
        )
    return knobs


def _integers(data: bytes, block: str) -> list[tuple[str, int, str, list[tuple[int, int]]]]:
    """(name, value, what of the block it sizes: "total", "dim" or "", its spans in the source) per
    tunable integer."""
    knobs = []
    for m in _DEFINE.finditer(data):
        name, value = m.group(1).decode(), int(m.group(2))
        if value > 0 and "WARP" not in name.upper():
            knobs.append((name, value, "total" if name == block else "", [m.span(2)]))
    decls: dict[str, list[re.Match]] = {}
    for m in _CONSTEXPR.finditer(data):
        decls.setdefault(m.group(1).decode(), []).append(m)
    for name, ms in decls.items():
        value = int(ms[0].group(2))
        if value > 0 and "WARP" not in name.upper() and all(int(m.group(2)) == value for m in ms):
            knobs.append((name, value, "total" if name == block else "", [m.span(2) for m in ms]))
    for m in _LAUNCH_PAIR.finditer(data):
        if m.group(1) == m.group(2) and int(m.group(1)) > 32:
            line = data.count(b"\n", 0, m.start()) + 1
            knobs.append((f"block@{line}", int(m.group(1)), "total", [m.span(1), m.span(2)]))
    knobs += _dim3_literals(data, block)
    return knobs


def _capacities(data: bytes) -> set[str]:
    """Names used, wherever the source names them (their definitions aside), only as the size of an
    array it declares: not in another macro's body, a template argument or any expression."""
    sizes, values = set(), set()
    for n in walk(parse(data).root_node):
        parent = n.parent
        if n.type == "preproc_arg":
            values.update(re.findall(r"[A-Za-z_]\w*", text(n)))
        elif n.type in ("identifier", "type_identifier") and not (
            parent is not None
            and parent.type in ("preproc_def", "init_declarator")
            and parent.child_by_field_name("name" if parent.type == "preproc_def" else "declarator")
            == n
        ):
            is_size = (
                parent is not None
                and parent.type == "array_declarator"
                and parent.child_by_field_name("size") == n
            )
            (sizes if is_size else values).add(text(n))
    return sizes - values


def _dim3_literals(data: bytes, block: str) -> list[tuple[str, int, str, list[tuple[int, int]]]]:
    """Integer literals in the ``dim3 <block>(x, y, z)`` declaration the launch passes as its block,
    per dimension (``half < 64 ? half : 64`` is one knob, both 64s at once); a dimension with more
    than one such value is left alone, as is anything under 8."""
    knobs = []
    for line, dims in _dim3_declarations(data, block):
        for axis, (a, b) in zip("xyz", dims, strict=False):
            by_value: dict[int, list[tuple[int, int]]] = {}
            for m in re.finditer(rb"(?<![\w.])(\d+)(?![\w.])", data[a:b]):
                if int(m.group(1)) >= 8:
                    by_value.setdefault(int(m.group(1)), []).append((a + m.start(1), a + m.end(1)))
            if len(by_value) == 1:
                ((value, spans),) = by_value.items()
                knobs.append((f"block.{axis}@{line}", value, "dim", spans))
    return knobs


def _dim3_declarations(data: bytes, block: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """(line, the spans of its arguments) for each ``dim3 <block>(x, y, z)`` declaration."""
    if not re.fullmatch(r"\w+", block):
        return []
    out = []
    for decl in re.finditer(rb"\bdim3\s+" + block.encode() + rb"\s*\(", data):
        dims, depth, start = [], 0, decl.end()
        for i in range(decl.end(), len(data)):
            c = data[i : i + 1]
            if c == b";":
                dims = []
                break
            if c in b")]}" and depth:
                depth -= 1
            elif c in b"([{":
                depth += 1
            elif c in b")," and not depth:
                dims.append((start, i))
                start = i + 1
                if c == b")":
                    break
        out.append((data.count(b"\n", 0, decl.start()) + 1, dims))
    return out
