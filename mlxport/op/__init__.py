"""The op a port ships, and the check that it works as a user calls it.

A port's folder holds kernel.py, a static module (this package's ``kernel.py``, copied as it is)
that reads what is written beside it: candidate.toml (the kernel), op.toml (the contract: the
inputs and the sizes their shapes give, params, outputs, the dtypes verified, the golden cases
test_kernel.py replays), mlxport_expr.py (mlxport's expression evaluator, standalone) and the
task's reference.py where it has one. ``write_op`` writes them; ``op.check.check_op`` imports the
written kernel.py and calls it at fresh sizes against the golden, as the final verification does.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.expr import names_used
from mlxport.redaction import write_text
from mlxport.spec import KernelCandidate, KernelTask, TensorSpec
from mlxport.spec.toml import dumps
from mlxport.tasks.sizes import TUNING
from mlxport.verify.correctness import output_order

HERE = Path(__file__).parent
EXPR = HERE.parent / "expr.py"
STATIC = ("kernel.py", "test_kernel.py")
GOLDEN = "golden.npz"
EXPORT_GOLDEN_BYTES = 2 << 20  # the golden arrays an exported package carries at most


def write_op(
    folder: Path,
    task: KernelTask,
    candidate: KernelCandidate,
    *,
    label: str,
    model: str,
    golden: list[dict[str, Any]] | None = None,
) -> Path:
    """The op's files in ``folder``; ``golden`` (cases with their inputs and golden outputs, as
    ``op.check`` returns them) is what test_kernel.py replays."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in STATIC:
        shutil.copyfile(HERE / name, folder / name)
    write_text(folder / "mlxport_expr.py", standalone_expr())
    write_text(folder / "candidate.toml", candidate.to_toml())
    reference = _copy_reference(task, folder)
    contract = op_contract(task, candidate, label=label, model=model, reference=reference)
    contract["golden"] = [_golden_entry(g) for g in golden or []]
    write_text(folder / "op.toml", dumps(contract))
    if golden:
        np.savez_compressed(folder / GOLDEN, **_golden_arrays(golden))
    return folder


def keep_small_golden(folder: Path, budget: int = EXPORT_GOLDEN_BYTES) -> None:
    """golden.npz and op.toml's golden cases in ``folder`` cut to those whose arrays fit in
    ``budget`` bytes together, smallest first (at least one): what an exported parity test replays
    without mlxport, in a package small enough to ship."""
    path, toml = folder / GOLDEN, folder / "op.toml"
    if not path.is_file():
        return
    op = tomllib.loads(toml.read_text())
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    of = [
        {k: a for k, a in arrays.items() if k.split(".")[0] == str(i)}
        for i in range(len(op["golden"]))
    ]
    sizes = [sum(a.nbytes for a in case.values()) for case in of]
    keep: list[int] = []
    for i in sorted(range(len(sizes)), key=sizes.__getitem__):
        if not keep or sum(sizes[j] for j in keep) + sizes[i] <= budget:
            keep.append(i)
    keep.sort()
    op["golden"] = [op["golden"][i] for i in keep]
    write_text(toml, dumps(op))
    kept = {f"{j}.{k.split('.', 1)[1]}": a for j, i in enumerate(keep) for k, a in of[i].items()}
    np.savez_compressed(path, **kept)


def standalone_expr() -> str:
    """mlxport/expr.py with its one import of mlxport (the base of its error) made standalone."""
    text = EXPR.read_text()
    line = "from mlxport.errors import UserError\n"
    assert line in text, "mlxport/expr.py no longer imports UserError as expected"
    return text.replace(line, "UserError = ValueError  # standalone: copied beside kernel.py\n")


def _shape_names(task: KernelTask) -> tuple[set[str], set[str]]:
    """(the sizes some input's shape gives as a bare name, every name the shapes use)."""
    bare = {d for t in task.inputs for d in t.shape if isinstance(d, str) and d.isidentifier()}
    used: set[str] = set()
    for t in task.inputs + task.outputs:
        for d in t.shape:
            used |= names_used(d)
    return bare, used - {"itemsize"}


def op_contract_sizes(task: KernelTask) -> list[str]:
    """Sizes the shapes use that are neither params nor given by an input's shape: the op takes
    them as required keywords."""
    bare, used = _shape_names(task)
    return sorted(used - bare - {p.name for p in task.params})


def _bound_sizes(task: KernelTask) -> set[str]:
    """The params of a task made from a .cu file that the caller must give: an integer the user
    bound (a size: a default frozen at the case's value is wrong at every other size) and one the
    host code computes by no expression found. A float the user bound (eps) and a block size keep
    their defaults."""
    if task.reference is not None or task.original is None:
        return set()
    bound = set(task.original.bound)
    return {
        p.name
        for p in task.params
        if not p.expr and (p.name not in bound or (p.type == "int" and not TUNING.search(p.name)))
    }


def op_contract(
    task: KernelTask, candidate: KernelCandidate, *, label: str, model: str, reference: str | None
) -> dict[str, Any]:
    """op.toml: what kernel.py checks its arguments against and how it returns its outputs."""
    bare, used = _shape_names(task)
    sizes = _bound_sizes(task)
    params = []
    for p in task.params:
        size = "shape" if p.name in bare else "given" if p.name in used | sizes else None
        size = "derived" if p.expr and size != "shape" else size
        entry = {"name": p.name, "type": p.type, "size": size, "expr": p.expr}
        if size is None and p.default is not None:
            entry["default"] = p.default
        params.append(entry)
    for name in op_contract_sizes(task):
        params.append({"name": name, "type": "int", "size": "given", "param": False})
    return {
        "name": task.name,
        "description": _one_line(task.description),
        "kernel": task.kernel,
        "verified": label,
        "model": model,
        "dtypes": list(task.dtypes),
        "reference": reference,
        "inputs": [_input(t) for t in task.inputs],
        "params": params,
        "outputs": [
            {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "whole": _whole(task, t)}
            for t in task.outputs
        ],
        "order": output_order(task, candidate),
        "requires": _takes(task, task.cases.requires)
        + [f"{n} % {m} == 0" for n, m in task.cases.multiples.items()],
        "tolerance": {d: {"atol": t.atol, "rtol": t.rtol} for d, t in task.tolerance.items()},
    }


def _takes(task: KernelTask, rules: list[str]) -> list[str]:
    """The rules over what the op takes: a host value that picks the arm (`switch
    (transform_kernel)` in main) is no argument of the op, which is that arm alone."""
    takes = {p.name for p in task.params} | task.dims()
    return [r for r in rules if names_used(r) <= takes]


def _whole(task: KernelTask, t: TensorSpec) -> bool:
    """Whether the original writes every element of output ``t`` (a task made from a .cu file
    says so: an output it writes in part starts as a fill). The op takes an in-out output's NaN
    for an element its kernel left, the input's, only where the original leaves some: elsewhere
    a NaN is what the kernel wrote (an AdamW step on a negative second moment)."""
    return task.original is not None and task.reference is None and t.init.kind != "full"


def _input(t) -> dict[str, Any]:
    """An input the host fills with one value before the launch (an accumulator of zeros, a
    running max of -inf) is the op's own: it makes it, the caller does not pass it."""
    entry = {"name": t.name, "dtype": t.dtype, "shape": list(t.shape)}
    if t.init.kind == "full":
        entry["fill"] = t.init.value
    return entry


def _copy_reference(task: KernelTask, folder: Path) -> str | None:
    """reference.py beside kernel.py, for the fallback where the kernel cannot run; the name of
    the reference function in it."""
    if task.reference is None or task.folder is None:
        return None
    module, fn = task.reference.split(":")
    path = task.folder / f"{module.replace('.', '/')}.py"
    if not path.is_file():
        return None
    shutil.copyfile(path, folder / "reference.py")
    return fn


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _golden_entry(g: dict[str, Any]) -> dict[str, Any]:
    return {"case": g["case"], "dtype": g["dtype"], "params": g["params"]}


def _golden_arrays(golden: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    out = {}
    for i, g in enumerate(golden):
        for name, a in g["inputs"].items():
            out[f"{i}.in.{name}"] = a
        for k, a in enumerate(g["outputs"]):
            out[f"{i}.out.{k}"] = a
    return out
