"""Running the original at a case: the host code evaluated to the launch and the scalars it
computes, every buffer's extent (stated by the host code, by ``--shape``, or measured by how far
the original reaches), and a check that the original runs there and writes its outputs."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from mlxport.backends.cuda_cpu import CudaExecutor, Launch, packed, unpacked
from mlxport.errors import UserError
from mlxport.expr import evaluate, names_used
from mlxport.tasks.make.kernel import (
    CudaTaskError,
    KernelFile,
    Signature,
    given_domains,
    integral,
    itemsize,
    scalar,
    storage,
)
from mlxport.tasks.request import TaskRequest
from mlxport.tasks.sizes import TUNING, apart, odd, odd_sizes
from mlxport.translate.host.evaluate import evaluate_launch, file_constants
from mlxport.translate.host.values import (
    Buffer,
    HostArg,
    HostLaunch,
    NullPointer,
    Tensor,
    Unknown,
    number,
)
from mlxport.translate.reading.cudafile import Param
from mlxport.verify.golden import zero_struct

MEASURE_ELEMENTS = 1 << 22  # the room a buffer of unknown extent gets in the measuring run


class CaseRunner:
    """The original kernel at the cases of one task; what it learns at one case (buffer shapes,
    fills, outputs written whole or in part) holds at the next."""

    def __init__(
        self,
        kf: KernelFile,
        sig: Signature,
        request: TaskRequest,
        executor: CudaExecutor,
        bound: set[str] = frozenset(),
    ):
        self.kf, self.info, self.sig, self.executor = kf, kf.info, sig, executor
        self.roles = dict(sig.roles)  # an in-out buffer whose first contents change nothing: output
        # a file constant a case binds (`const int N = 100000000;`, N=4096) is the case's, never
        # its number in the file: a shape `(N)` took the file's 10^8
        bound = set(bound) | {k for c in request.cases for k in c}
        consts = numeric_macros(kf.cf) | file_constants(kf.source.preprocessed)
        self.macros = {k: v for k, v in consts.items() if k not in bound}
        self.shapes = {k: c_expr(v, self.macros) for k, v in request.shapes.items()}
        self.flags = (request.grid, request.block, request.shared_bytes)
        self.atomic = any(f.category == "atomic" for f in kf.info.features)
        self.fills: dict[str, float] = {}
        self.nulls: set[str] = set()  # pointers the host passes as nullptr
        self.buffer_shapes: dict[str, list[str]] = {}  # from the first case that gives one
        self.partial: dict[str, str] = {}  # outputs written only in part -> the note saying so
        self.whole: set[str] = set()  # outputs written whole at the visible cases
        self.aliases: dict[str, str] = {}  # scalar parameter -> the host's name it is passed
        self.domains = given_domains(request.inputs)  # an integer input's values (--inputs)
        self.selectors: set[str] = set()  # names a switch picks the visible launch's arm by
        rng = np.random.default_rng(1)  # what the host fills __constant__ arrays with
        self.constants = {c.name: rng.standard_normal(c.elements) for c in kf.constants}

    def case(self, bound: dict[str, Any], heldout: bool = False) -> tuple[dict, HostLaunch]:
        """The full case (the names bound, every scalar parameter, every buffer's extent) and its
        launch. A held-out case must be one the original supports as it does the visible ones."""
        launch = self.launch_at(bound)
        if not heldout:
            self.selectors |= {rule.split(" == ")[0] for rule in launch.rules}
        self.aliases = {
            p.name: a.text.strip()
            for p, a in zip(self.info.params, launch.args, strict=True)
            if not p.is_pointer and a.text.strip().isidentifier()
        }
        case = {k: v for k, v in bound.items() if isinstance(v, int | float | bool)}
        unknown: list[str] = []
        for p, arg in zip(self.info.params, launch.args, strict=True):
            if p.name in self.sig.zeroed:
                continue
            if p.is_pointer and isinstance(arg.value, NullPointer) and p.name not in self.shapes:
                # an optional input the case leaves out: the op makes it, one zero, and takes none
                self.nulls.add(p.name)
                self.fills[p.name] = 0.0
                self.buffer_shapes.setdefault(p.name, ["1"])
                continue
            if p.is_pointer:
                shape = self.shape_of(p, arg, bound)
                if shape is None:
                    unknown.append(p.name)
                elif shape == [f"n_{p.name}"]:
                    case[f"n_{p.name}"] = self._extent(p, arg, bound)
                self.buffer_shapes.setdefault(p.name, shape or [f"n_{p.name}"])
                if isinstance(arg.value, Buffer) and arg.value.fill is not None:
                    self.fills[p.name] = arg.value.fill
            elif isinstance(arg.value, int | float | bool):
                case[p.name] = scalar(p, arg.value, self.sig.types)
            else:
                raise self._no_value(p, arg, launch)
        if unknown:
            case.update(self._measure(case, launch, unknown))
        self._check(case, launch, heldout)
        return case, launch

    def launch_at(self, bound: dict[str, Any]) -> HostLaunch:
        """The host code's launch at these bound names (evaluated, nothing run)."""
        grid, block, shared = (self._flag(f, bound) for f in self.flags)
        launch = evaluate_launch(
            self.kf.source.preprocessed,
            self.info.name,
            bound,
            {},
            grid,
            block,
            shared,
            self.sig.types,
            lambda expr: self.executor.constant(self.kf.source, self.info.name, expr),
        )
        if self.kf.members and launch.args:
            launch.args = self._members_of(launch.args, bound)
        if launch.line == 0 and not launch.args:
            # no launch names the kernel: --grid/--block and --case say all
            why = Unknown("no launch in the host code names the kernel")
            launch.args = [
                HostArg(p.name, Buffer(p.name) if p.is_pointer else bound.get(p.name, why))
                for p in self.info.params
            ]
        for p in self.info.params[len(launch.args) :]:  # default arguments the launch leaves out
            if p.default is None or p.is_pointer:
                break
            try:
                v = number(p.default.strip())
            except ValueError:
                v = Unknown(f"{p.name} defaults to {p.default}, which is not a number")
            launch.args.append(HostArg(p.name, v))
        if len(launch.args) != len(self.info.params):
            raise CudaTaskError(
                f"the launch at line {launch.line} passes {len(launch.args)} arguments to "
                f"{self.info.name}, which takes {len(self.info.params)}"
            )
        return launch

    def _members_of(self, args: list[HostArg], bound: dict[str, Any]) -> list[HostArg]:
        """The launch's arguments with a struct of buffers' argument as its members: a buffer
        each (sized by --shape or measured), values the case binds."""
        out = []
        for i, arg in enumerate(args):
            name = self.kf.sig.params[i].name if i < len(self.kf.sig.params) else ""
            members = [(n, s) for n, s in self.kf.members.items() if s.split(".")[0] == name]
            for n, slot in members:
                pointer = next(p.is_pointer for p in self.info.params if p.name == n)
                why = Unknown(f"the host code fills {slot} at run time")
                out.append(HostArg(slot, Buffer(n) if pointer else bound.get(n, why)))
            out += [] if members else [arg]
        return out

    def _no_value(self, p: Param, arg: HostArg, launch: HostLaunch) -> CudaTaskError:
        if launch.line == 0:
            return CudaTaskError(
                f"no launch in the host code names {self.info.name}, so nothing gives "
                f"{p.name} a value: bind {p.name} with --case"
            )
        why = getattr(arg.value, "why", "")
        return CudaTaskError(
            f"the host code gives {p.name} (argument {arg.text!r} of the launch at line "
            f"{launch.line}) no value at this case: {why}; bind {p.name} with --case"
        )

    def _flag(self, expr: str | None, bound: dict[str, Any]) -> Any:
        if expr is None:
            return None
        try:
            values = [
                evaluate(c_expr(e.strip(), self.macros), dict(bound)) for e in expr.split(",")
            ]
        except UserError as e:
            raise CudaTaskError(f"cannot evaluate {expr!r} at {label(bound)}: {e}") from e
        return values if len(values) > 1 else values[0]

    def shape_of(self, p: Param, arg: HostArg, bound: dict[str, Any]) -> list[str] | None:
        """A buffer's shape as expressions over the case's names where the host states it in them
        (or --shape does), ``[n_<name>]`` where it states only a number, None where it states
        nothing."""
        if p.name in self.shapes:
            return dims(self.shapes[p.name], self.strides(p.name))
        v = arg.value
        size = itemsize(storage(p, self.sig.typenames))
        if isinstance(v, Tensor) and v.shape() is not None:
            named = len(v.names) == len(v.dims)
            return [v.names[i] for i in range(len(v.dims))] if named else [f"n_{p.name}"]
        if not isinstance(v, Buffer):
            return None
        if v.dims:
            return list(v.dims)
        n = v.elements(size)
        if n is None:
            return None
        if v.size_text:
            sized = _unwrapped(v.size_text.strip())
            bare = re.fullmatch(rf"(.+?)\s*\*\s*{size}", sized)
            bare = bare or re.fullmatch(rf"{size}\s*\*\s*(.+)", sized)  # sizeof(int) * N * MN
            if bare is None and size == 1:  # bytes: cudaMalloc(&img, w * h)
                bare = re.fullmatch(r"(.+)", sized)
            expr = c_expr(bare.group(1) if bare else f"({v.size_text}) / {size}", self.macros)
            try:
                # a number alone (`N * N` of the file's #define) is the extent as it is
                if int(evaluate(expr, dict(bound))) == n and names_used(expr):
                    return dims(expr, self.strides(p.name))
            except UserError:
                pass
        return [f"n_{p.name}"]

    def strides(self, buffer: str) -> set[str]:
        """The row strides the kernel's body indexes its parameter ``buffer`` with, and the host's
        names for those it is passed (``width`` passed ``size_x``: size_x)."""
        found = row_strides(self.info.body or self.kf.text, buffer)
        return found | {self.aliases[n] for n in found if n in self.aliases}

    def _extent(self, p: Param, arg: HostArg, bound: dict[str, Any]) -> int:
        if p.name in self.shapes:
            try:
                return int(evaluate(self.shapes[p.name], dict(bound)))
            except UserError as e:
                raise CudaTaskError(
                    f"--shape {p.name}={self.shapes[p.name]} does not evaluate at "
                    f"{label(bound)}: {e}"
                ) from e
        v = arg.value
        if isinstance(v, Tensor):
            return int(math.prod(v.shape()))
        return int(v.elements(itemsize(storage(p, self.sig.typenames))))

    def args(
        self, case: dict[str, Any], sizes: dict[str, int], fill: float | None = None
    ) -> list[np.ndarray]:
        """The kernel's arguments at a case: random buffers (integers zero), or all ``fill``."""
        rng = np.random.default_rng(0)
        out = []
        for p in self.info.params:
            if p.name in self.sig.zeroed:
                out.append(zero_struct(self.sig.zeroed[p.name]))
                continue
            held = storage(p, self.sig.typenames)
            if p.is_pointer:
                n = sizes.get(p.name) or self.elements(p.name, case)
                if fill is None and p.name in self.domains:  # src:int32[0,5): values it filters
                    low, high = (self._at(v, case) for v in self.domains[p.name])
                    out.append(rng.integers(low, max(high, low + 1), n).astype(held))
                    continue
                data = np.full(n, fill) if fill is not None else rng.standard_normal(n)
                out.append(to_storage(data, held))
            else:
                out.append(np.array(case[p.name]).astype("uint16" if held == "bfloat16" else held))
        return out

    def _at(self, value: str, case: dict[str, Any]) -> int:
        try:
            return int(evaluate(c_expr(value, self.macros), dict(case)))
        except UserError as e:
            raise CudaTaskError(
                f"--inputs bound {value!r} does not evaluate at {label(case)}: {e}"
            ) from e

    def elements(self, name: str, case: dict[str, Any]) -> int:
        return int(math.prod(int(evaluate(d, dict(case))) for d in self.buffer_shapes[name]))

    def template(self, launch: HostLaunch) -> list[str]:
        """The template arguments the original is built with at a launch (typenames at float)."""
        typenames = self.sig.typenames
        element = {p.base_type for p in self.info.params if p.is_pointer} & typenames
        names = [t.name for t in self.info.template_params]
        args = list(launch.template_args)
        flags = self.sig.template_flags
        if flags:
            unknown = set(flags) - set(names)
            if unknown:
                raise CudaTaskError(
                    f"--template names {', '.join(sorted(unknown))}, not template parameters of "
                    f"{self.info.name} ({', '.join(names) or 'none'})"
                )
            args = [flags.get(n, args[i] if i < len(args) else None) for i, n in enumerate(names)]
            args = args[: next((i for i, a in enumerate(args) if a is None), len(args))]
        for t in self.info.template_params[len(args) :]:
            if t.name in element or t.kind in ("typename", "class"):
                args.append("float")
            elif t.default is not None:
                args.append(t.default)
            else:
                raise CudaTaskError(
                    f"{self.info.name} needs template argument {t.name}, which the launch does "
                    f"not give: bind it with --template {t.name}=..."
                )
        return ["float" if n in element else a for n, a in zip(names, args, strict=False)]

    def run(self, launch: HostLaunch, args: list[np.ndarray], *, measure: bool = False):
        compiled = self.executor.compile(
            self.kf.source, self.info.name, self.template(launch), tuple(self.constants)
        )
        geometry = Launch(launch.grid, launch.block, launch.shared_bytes)
        given = {"measure": measure, "constants": self.constants}
        if not self.kf.members:
            return self.executor.run(compiled, geometry, args, **given)
        names = [p.name for p in self.info.params]
        result = self.executor.run(
            compiled,
            geometry,
            packed(self.kf.sig, self.kf.members, dict(zip(names, args, strict=True))),
            **given,
        )
        return unpacked(result, self.kf.members)

    def _measure(self, case: dict, launch: HostLaunch, unknown: list[str]) -> dict[str, int]:
        """How far the original reaches into the buffers whose extent nothing states."""
        sizes = {n: MEASURE_ELEMENTS for n in unknown}
        result = self.run(launch, self.args(case, sizes, fill=0.0), measure=True)
        if not result.ok:
            given = next(
                (n for n in self.shapes if re.search(rf"\b{n}\[", result.error or "")), None
            )
            if given is not None:
                raise CudaTaskError(
                    f"the original kernel fails at {label(case)}: {result.error}; "
                    f"--shape {given}={self.shapes[given]} is too small"
                )
            raise CudaTaskError(
                f"the original kernel fails at {label(case)} while its buffer sizes are measured: "
                f"{result.error}"
            )
        return {f"n_{n}": max(1, result.touched.get(n, 0)) for n in unknown}

    def _check(self, case: dict[str, Any], launch: HostLaunch, heldout: bool) -> None:
        """The original runs at the case on random inputs, and writes finite outputs."""
        args = self.args(case, {})
        result = self.run(launch, args)
        if not result.ok:
            raise CudaTaskError(
                f"the original kernel fails at {label(case)}: {result.error}{self._sized(result)}"
            )
        self._outputs_only(launch, args, result)
        for p in self.info.params:
            written = result.written.get(p.name) if p.is_pointer else None
            if self.roles.get(p.name) == "output" and written is not None:
                self._check_written(p, written, case, heldout)

    def _sized(self, result) -> str:
        """What to do where the original overruns a buffer the host code sizes: the kernel relies
        on its inputs (at most MN neighbours an atom) where the random ones do not hold."""
        name = next(
            (
                n
                for n, sh in self.buffer_shapes.items()
                if re.search(rf"\b{n}\[", result.error or "")
            ),
            None,
        )
        if name is None or name in self.shapes or self.buffer_shapes[name] == [f"n_{name}"]:
            return ""
        extent = " * ".join(self.buffer_shapes[name])
        return (
            f"; the host code sizes {name} as {extent} elements, which the original overruns on "
            f"random inputs: if the kernel relies on its inputs to stay inside it, pass "
            f"--shape {name}=EXPR with the extent it reaches"
        )

    def _check_written(self, p: Param, written: np.ndarray, case: dict, heldout: bool) -> None:
        at = f"{p.name} at {label(case)}"
        part = f"the original writes {int(written.sum())} of the {written.size} elements of {at}"
        if not written.any():
            missing = "".join(
                f'; #include "{h}" was not found: pass its folder with -I' for h in self.kf.missing
            )
            raise CudaTaskError(
                f"the original writes none of the {written.size} elements of {at}: is its size "
                f"right? (--shape {p.name}=EXPR){missing}"
            )
        if written.all():
            if not heldout:
                self.whole.add(p.name)
            return
        if p.name in self.whole:
            raise CudaTaskError(f"{part}, though all at the visible case")
        if integral(p, self.sig.typenames) and not self.atomic:  # atomics start from zeros
            raise CudaTaskError(
                f"{part}, which holds integers (no NaN marks what it leaves): give its real size "
                f"with --shape {p.name}=EXPR"
            )
        if p.name in self.partial:
            return
        if self.atomic:
            self.partial[p.name] = (
                f"{part}: the rest keep the zeros it starts as (atomics accumulate into outputs "
                f"the host zeroes, and MLX starts every output of an atomic kernel at zero)"
            )
        else:
            self.partial[p.name] = (
                f"{part}: the rest are unspecified (NaN in the golden, and the port's output "
                f"starts as NaN); if that is not so, give its real size with --shape {p.name}=EXPR"
            )

    def _outputs_only(self, launch: HostLaunch, args: list, first) -> None:
        """A buffer the kernel reads and writes whose first contents change nothing (it writes each
        element before reading it back) is an output, not an in-out buffer."""
        for i, p in enumerate(self.info.params):
            written = first.written.get(p.name) if p.is_pointer else None
            if self.roles.get(p.name) != "inout" or written is None or not written.all():
                continue
            other = list(args)
            rng = np.random.default_rng(7)
            if integral(p, self.sig.typenames):  # integers start as zeros: any others will do
                other[i] = rng.integers(1, 64, args[i].size).astype(args[i].dtype)
            else:
                other[i] = to_storage(
                    rng.standard_normal(args[i].size), storage(p, self.sig.typenames)
                )
            again = self.run(launch, other)
            if again.ok and all(
                np.array_equal(again.buffers[n], first.buffers[n], equal_nan=True)
                for n in first.buffers
            ):
                self.roles[p.name] = "output"

    def heldout_candidates(self, cases: list[dict[str, Any]]) -> list[tuple[dict, str]]:
        """Sizes near the visible cases: every size at twice its largest visible value, every size
        odd (`odd_sizes`), then each size made odd alone (block sizes, tile sizes and template
        arguments stay)."""
        base = cases[0]
        free = self.free_sizes(base)
        if not free:
            return []
        largest = {k: max(c.get(k, base[k]) for c in cases) for k in free}
        twice = apart({k: 2 * largest[k] for k in free}, largest)
        out = [
            ({**base, **twice}, "every size at least twice its largest visible"),
            ({**base, **odd_sizes(base, free)}, "every size odd and in other ratios"),
        ]
        out += [({**base, k: odd(base[k])}, f"{k}={odd(base[k])}") for k in free]
        return out

    def free_sizes(self, case: dict[str, Any]) -> list[str]:
        """The sizes of a case a held-out case may change (block sizes, tile sizes, template
        arguments and the selector of the `switch` arm the launch is in stay)."""
        fixed = {t.name for t in self.info.template_params} | self.selectors
        return [
            k
            for k, v in case.items()
            if isinstance(v, int)
            and not isinstance(v, bool)
            and v >= 2
            and k not in fixed
            and not TUNING.search(k)
        ]

    def same_extents(self, a: tuple[dict, HostLaunch], b: tuple[dict, HostLaunch]) -> bool:
        """Whether two runs have the same buffer extents and launch: one re-tests the other."""
        (ca, la), (cb, lb) = a, b
        if (la.grid, la.block) != (lb.grid, lb.block):
            return False
        buffers = [
            p.name for p in self.info.params if p.is_pointer and p.name in self.buffer_shapes
        ]
        return all(self.elements(n, ca) == self.elements(n, cb) for n in buffers)


def _unwrapped(expr: str) -> str:
    """``(N * 4)`` as ``N * 4``: one pair of parentheses around the whole dropped."""
    if expr.startswith("(") and expr.endswith(")"):
        depth = 0
        for i, ch in enumerate(expr):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and i < len(expr) - 1:
                return expr
        return expr[1:-1].strip()
    return expr


def dims(expr: str, strides: set[str] = frozenset()) -> list[str]:
    """A buffer the host sizes ``rows * cols`` is a ``[rows, cols]`` array: the op takes it so and
    its sizes come from its shape. Of two factors, the one the kernel indexes the buffer with as a
    row's stride (``y * w + x``: ``strides``) is the last, whatever order the host wrote them in
    (``w * h`` is ``[h, w]``). A product with a number in it (``2 * n``) stays one extent."""
    if re.fullmatch(r"[\w\s*()]+", expr):  # (nx*ny) from a local: a product all the same
        expr = expr.replace("(", "").replace(")", "")
    factors = [f.strip() for f in expr.split("*")]
    if len(factors) < 2 or not all(f.isidentifier() for f in factors):
        return [expr]
    if len(factors) == 2 and factors[0] in strides and factors[1] not in strides:
        return factors[::-1]
    return factors


def row_strides(source: str, buffer: str) -> set[str]:
    """Names the kernel multiplies an index by inside ``buffer[...]`` (``in[yy * w + xx]``: w) or
    in an offset added to it (``inp + bt * C``: C), or in what a local index held
    (``in[idx]`` after ``idx = iy * nx + ix;``: nx)."""
    found: set[str] = set()
    name = re.escape(buffer)
    for m in re.finditer(rf"\b{name}\s*(?:\[([^\]]*)\]|\+\s*([^;,)\]]*))", source):
        index = m.group(1) if m.group(1) is not None else m.group(2)
        held = [index]
        if re.fullmatch(r"\s*[A-Za-z_]\w*\s*", index):
            held += re.findall(rf"\b{index.strip()}\s*=(?!=)([^;]*);", source)
        for text in held:
            found |= set(re.findall(r"\*\s*([A-Za-z_]\w*)\b", text))
            found |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\*", text))
    return found


def c_expr(expr: str, constants: dict[str, int | float]) -> str:
    """A --shape, --grid or --block written in C, with the file's own constants, as a task
    expression (integer `/` truncates; the sizes are positive, so it is floor division)."""
    expr = re.sub(r"(?<!/)/(?!/)", "//", expr)
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(constants.get(m.group(), m.group())), expr)


def numeric_macros(cf) -> dict[str, int | float]:
    out: dict[str, int | float] = {}
    for m in cf.macros:
        body = m.body.strip().strip("()").rstrip("uUlLfF")
        if m.params is None and re.fullmatch(r"-?\d+(\.\d*)?([eE]-?\d+)?", body):
            out[m.name] = float(body) if re.search(r"[.eE]", body) else int(body)
    return out


def to_storage(data: np.ndarray, held: str) -> np.ndarray:
    if held == "bfloat16":
        bits = data.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    if np.dtype(held).kind in "iu":
        return np.zeros(data.shape, held)  # indices and counts: zeros stay in bounds
    return data.astype(held)


def label(case: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in case.items()) or "the sizes the file sets"
