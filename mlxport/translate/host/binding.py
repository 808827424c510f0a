"""Binding CUDA names (pointer params, scalar params, host variables) to a task's tensors and
params."""

from __future__ import annotations

import ast
import re

from mlxport.spec import KernelTask, TensorSpec
from mlxport.translate.host.cexpr import num

__all__ = ["Binder"]

# Names that mean the same dimension or tensor in CUDA code and task files.
_DIM_GROUPS = [
    {"b", "batch", "batchsize", "bs", "nbatch", "numbatch", "batches", "nb"},
    {"h", "heads", "numheads", "nheads", "nhead", "head", "nh"},
    {
        "t",
        "l",
        "s",
        "seq",
        "seqlen",
        "seqlength",
        "sequencelength",
        "len",
        "length",
        "nctx",
        "tokens",
        "ntokens",
        "ntok",
        "tq",
        "tk",
    },
    {
        "d",
        "headdim",
        "hd",
        "dh",
        "dhead",
        "headsize",
        "dim",
        "hidden",
        "hiddensize",
        "dmodel",
        "cols",
        "ncols",
        "numcols",
        "c",
        "width",
        "features",
        "nfeatures",
        "channels",
        "innerdim",
    },
    {"r", "m", "rows", "nrows", "numrows", "row", "outer", "height", "ntokens"},
    {
        "n",
        "size",
        "numel",
        "nelements",
        "numelements",
        "count",
        "total",
        "nelem",
        "nel",
        "len",
        "length",
    },
    {"n", "dstate", "nstate", "state", "knstate", "statedim"},
    {"eps", "epsilon", "eps_"},
    {"scale", "softmaxscale", "smscale", "alpha", "qkscale"},
]
_ROWS = {"rows", "nrows", "numrows", "m", "outer", "r"}
_COLS = {"cols", "ncols", "numcols", "dim", "d", "hidden", "hiddensize", "width", "n", "c", "inner"}
_SIZE = {
    "n",
    "size",
    "numel",
    "nelements",
    "numelements",
    "count",
    "total",
    "nelem",
    "len",
    "length",
}
_TENSOR_GROUPS = [
    {"x", "input", "inp", "in", "src", "a", "inptr", "inputptr", "data", "xin", "xptr", "input0"},
    {
        "out",
        "output",
        "dst",
        "y",
        "result",
        "res",
        "o",
        "outptr",
        "outputptr",
        "yout",
        "optr",
        "dest",
    },
    {"weight", "w", "gamma", "g", "wptr", "weights"},
    {"bias", "beta", "bptr"},
]


def _monomial(expr: str) -> dict[str, int] | None:
    """``B * T * C`` as {B: 1, T: 1, C: 1}; None for anything but a product of names."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    out: dict[str, int] = {}

    def walk(n: ast.expr) -> bool:
        if isinstance(n, ast.Name):
            out[n.id] = out.get(n.id, 0) + 1
            return True
        return (
            isinstance(n, ast.BinOp)
            and isinstance(n.op, ast.Mult)
            and walk(n.left)
            and walk(n.right)
        )

    return out if walk(node) else None


def _factors(n: ast.expr) -> list[ast.expr]:
    """The operands of a product, nested products flattened."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
        return _factors(n.left) + _factors(n.right)
    return [n]


def norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def atom(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


class Binder:
    """What a name in CUDA code stands for in a task (None where it cannot tell)."""

    def __init__(self, task: KernelTask | None):
        self.task = task
        self.inputs: list[TensorSpec] = list(task.inputs) if task else []
        self.outputs: list[TensorSpec] = list(task.outputs) if task else []
        self.params = {p.name: p for p in task.params} if task else {}

    def tensor(self, name: str, written: bool, taken: set[str]) -> str | None:
        pools = [self.outputs, self.inputs] if written else [self.inputs]
        for pool in pools:
            for t in pool:
                if t.name == name and t.name not in taken:
                    return t.name
        for pool in pools:
            for t in pool:
                if t.name not in taken and norm(t.name) == norm(name):
                    return t.name
        key = norm(name)
        for pool in pools:
            for group in _TENSOR_GROUPS:
                if key in group:
                    hits = [t.name for t in pool if norm(t.name) in group and t.name not in taken]
                    if len(hits) == 1:
                        return hits[0]
        return None

    def output_for_rw(self, name: str, taken: set[str]) -> str | None:
        names = [t.name for t in self.outputs if t.name not in taken]
        for cand in (f"{name}_out", f"{name}out", f"out_{name}"):
            if cand in names:
                return cand
        return names[0] if len(names) == 1 else None

    def spec(self, name: str) -> TensorSpec | None:
        return next((t for t in self.inputs + self.outputs if t.name == name), None)

    def dtype_source(self, tensor: str) -> str | None:
        """An input whose dtype equals `tensor`'s (outputs have no dtype in expressions)."""
        spec = self.spec(tensor)
        if spec is None:
            return None
        if spec in self.inputs:
            return spec.name
        same = [t.name for t in self.inputs if t.dtype == spec.dtype]
        return same[0] if same else None

    def dtype_expr(self, tensor: str) -> str | None:
        spec = self.spec(tensor)
        if spec is None:
            return None
        src = self.dtype_source(tensor)
        if src is not None:
            return f"{src}.dtype"
        return spec.dtype if spec.dtype != "T" else None

    def dim(self, dim: str) -> ast.expr | None:
        for t in self.inputs:
            for i, d in enumerate(t.shape):
                if d == dim:
                    return atom(f"{t.name}.shape[{i}]")
        if dim in self.params:
            return ast.Name(dim)
        return None

    def solve(self, dim: str) -> ast.expr | None:
        """A product of dimension names, such as ``B * T``, as an input's dimension times or divided
        by params and named dimensions (``inp.shape[0] // C`` where inp has ``B * T * C``)."""
        want = _monomial(dim)
        if want is None:
            return None
        known = [
            (m, atom(f"{t.name}.shape[{i}]"))
            for t in self.inputs
            for i, d in enumerate(t.shape)
            if isinstance(d, str) and (m := _monomial(d)) is not None
        ]
        for base, expr in [*known, ({}, ast.Constant(1))]:
            rest = {k: want.get(k, 0) - base.get(k, 0) for k in set(want) | set(base)}
            factors = {k: e for k, e in rest.items() if e}
            if any(abs(e) != 1 or self.dim(k) is None for k, e in factors.items()):
                continue
            out: ast.expr = expr
            for k, e in sorted(factors.items(), key=lambda kv: -kv[1]):
                out = ast.BinOp(out, ast.Mult() if e > 0 else ast.FloorDiv(), self.dim(k))
            return out
        return None

    def dims(self) -> list[str]:
        seen: list[str] = []
        for t in self.inputs + self.outputs:
            for d in t.shape:
                if isinstance(d, str) and d.isidentifier() and d not in seen:
                    seen.append(d)
        return seen

    def scalar(self, name: str) -> ast.expr | None:
        if self.task is None:
            return None
        if name in self.params:
            return ast.Name(name)
        dims = self.dims()
        if name in dims:
            return self.dim(name)
        key = norm(name)
        for d in dims:
            if norm(d) == key:
                got = self.dim(d)
                if got is not None:
                    return got
        for p in self.params:
            if any(key in g and norm(p) in g for g in _DIM_GROUPS):
                return ast.Name(p)
        for group in _DIM_GROUPS:
            if key not in group:
                continue
            for d in dims:
                if norm(d) in group:
                    got = self.dim(d)
                    if got is not None:
                        return got
        return self._role(key) or self.constant(name)

    def binds(self, name: str) -> bool:
        """The task's cases give ``name`` a value."""
        return self.task is not None and any(name in c for c in self.task.all_cases())

    def bound(self, name: str) -> ast.expr | None:
        """What the case binds ``name`` to, by its own name only: a param, a dimension of an input,
        or one number at every case (a device query the case fixes, `cuda_num_SMs=8`)."""
        if not self.binds(name):
            return None
        if name in self.params:
            return ast.Name(name)
        got = self.dim(name)
        if got is not None:
            return got
        got = self.solve(name)
        if got is None:
            got = self.factor_of(name)
        return got if got is not None else self.constant(name)

    def factor_of(self, name: str) -> ast.expr | None:
        """`name` where an input's dimension is `name` times an expression of params
        (`M*(1<<log2N)`): that dimension divided by the rest."""
        for t in self.inputs:
            for i, d in enumerate(t.shape):
                if not isinstance(d, str):
                    continue
                try:
                    factors = _factors(ast.parse(d, mode="eval").body)
                except SyntaxError:
                    continue
                mine = [f for f in factors if isinstance(f, ast.Name) and f.id == name]
                rest = [f for f in factors if f not in mine]
                used = {n.id for f in rest for n in ast.walk(f) if isinstance(n, ast.Name)}
                if len(mine) != 1 or name in used or not used <= set(self.params):
                    continue
                out: ast.expr = atom(f"{t.name}.shape[{i}]")
                for f in rest:
                    out = ast.BinOp(out, ast.FloorDiv(), f)
                return out
        return None

    def constant(self, name: str) -> ast.expr | None:
        """A name every case of the task binds to one number (a user's kernel's block size, say)."""
        values = {c.get(name) for c in self.task.all_cases() + self.task.cases.bench}
        if (
            len(values) == 1
            and isinstance(next(iter(values)), int)
            and not isinstance(next(iter(values)), bool)
        ):
            return num(next(iter(values)))
        return None

    def _role(self, key: str) -> ast.expr | None:
        if not self.inputs:
            return None
        first = self.inputs[0]
        nd = len(first.shape)
        if key in _SIZE and nd == 1:
            return atom(f"{first.name}.shape[0]")
        if key in _ROWS and nd >= 2:
            out: ast.expr = atom(f"{first.name}.shape[0]")
            for i in range(1, nd - 1):
                out = ast.BinOp(out, ast.Mult(), atom(f"{first.name}.shape[{i}]"))
            return out
        if key in _COLS and nd >= 2:
            return atom(f"{first.name}.shape[{nd - 1}]")
        if key in _SIZE:
            return atom(f"{first.name}.size")
        return None

    def ndim(self, tensor: str) -> int | None:
        spec = self.spec(tensor)
        return len(spec.shape) if spec else None
