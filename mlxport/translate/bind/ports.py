"""Binding the kernel's pointer parameters to the task's input and output tensors: each read
pointer becomes an input, each written one an output, a read-write one both; and the outputs'
shapes and dtypes as expressions over the inputs."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.launch_fit import fitted_dim
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.host.cexpr import simplify, to_expr
from mlxport.translate.reading.cudafile import Param


@dataclass
class Ports:
    """(pointer parameter, tensor) pairs; a read-write pointer is in all three lists."""

    inputs: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    rw: list[tuple[str, str]] = field(default_factory=list)  # (param, the output its writes go to)


def bind_pointers(job: KernelJob) -> Ports:
    ports = Ports()
    taken: set[str] = set()
    for p in job.info.params:
        if not (p.is_pointer or p.is_reference):
            continue
        if p.is_reference:
            raise Untranslatable(
                f"reference parameter `{p.name}`",
                job.info.line,
                "kernels take buffers and scalars only",
            )
        if not p.read and not p.written:
            job.notes.append(f"pointer `{p.name}` is unused and dropped")
            continue
        name = _tensor_for(job, p, taken)
        taken.add(name)
        if (
            p.written
            and p.read
            and job.task is not None
            and name in {t.name for t in job.task.outputs}
        ):
            # read back after its writes: device memory is read-write
            ports.outputs.append((p.name, name))
            job.bindings[p.name] = name
        elif p.written and p.read:
            _bind_read_write(job, p, name, taken, ports)
        elif p.written:
            ports.outputs.append((p.name, name))
            job.bindings[p.name] = name
        else:
            ports.inputs.append((p.name, name))
            job.bindings[p.name] = name
    if job.task is not None:
        missing = [t.name for t in job.task.outputs if t.name not in taken]
        if missing:
            raise Untranslatable(
                f"task output {missing[0]}", job.info.line, "no kernel parameter writes it"
            )
    if not ports.outputs:
        raise Untranslatable(
            f"kernel {job.info.name}", job.info.line, "it writes no pointer parameter"
        )
    return ports


def _tensor_for(job: KernelJob, p: Param, taken: set[str]) -> str:
    if job.task is None:
        return p.name
    binder = job.binder
    name = binder.tensor(p.name, p.written and not p.read, taken)
    if name is None and p.written and p.read:
        # an output the kernel reads back after writing it
        name = binder.tensor(p.name, True, taken)
    if name is None:
        pool = [
            t.name for t in (binder.outputs if p.written else binder.inputs) if t.name not in taken
        ]
        if len(pool) == 1 or (pool and p.written is False):
            name = pool[0]
    if name is None:
        raise Untranslatable(
            f"pointer parameter `{p.name}`",
            job.info.line,
            "no task input or output matches it by name",
        )
    return name


def _bind_read_write(job: KernelJob, p: Param, name: str, taken: set[str], ports: Ports) -> None:
    out = job.binder.output_for_rw(name, taken) if job.task else f"{name}_out"
    if out is None:
        raise Untranslatable(
            f"read-write pointer `{p.name}`",
            job.info.line,
            "the task has no output for its written values",
        )
    taken.add(out)
    ports.inputs.append((p.name, name))
    ports.outputs.append((p.name, out))
    ports.rw.append((p.name, out))
    job.bindings[p.name] = f"{name} (read) / {out} (written)"
    job.notes.append(
        f"`{p.name}` is read and written: reads come from input {name}, writes go to "
        f"output {out} (assumes each element is read before it is overwritten)"
    )


def alias_lines(ports: Ports) -> list[str]:
    """`auto p = t;` for each pointer whose tensor has another name (read-write ones are
    rewritten)."""
    lines = []
    for p, t in ports.inputs:
        if p != t:
            lines.append(f"auto {p} = {t};")
    for p, t in ports.outputs:
        if p not in dict(ports.rw) and p != t:
            lines.append(f"auto {p} = {t};")
    return lines


def output_shape(job: KernelJob, ports: Ports, name: str) -> list[str | int] | str:
    spec = job.binder.spec(name)
    if spec is None:
        ins = [t for _, t in ports.inputs]
        src = job.binder.inputs[0].name if job.binder.inputs else (ins[0] if ins else None)
        if src is None:
            raise Untranslatable(
                f"output {name}", job.info.line, "its shape is unknown without a task"
            )
        job.notes.append(f"output {name} assumed to have the shape of the first input")
        return f"{src}.shape"
    out: list[str | int] = []
    for i, d in enumerate(spec.shape):
        if isinstance(d, int):
            out.append(d)
            continue
        tree = job.binder.solve(d) or job.binder.dim(d)  # `M*(1<<log2N)`, as an input has it
        if tree is None:
            try:
                tree = _over_inputs(job, ast.parse(d, mode="eval").body, name, d)
            except Untranslatable:
                tree = fitted_dim(job, name, i)
                if tree is None:
                    raise
                job.notes.append(
                    f"output {name} dimension {d} read off the task's cases as {to_expr(tree)}"
                )
        out.append(to_expr(simplify(tree)))
    return out


def _over_inputs(job: KernelJob, n: ast.expr, name: str, d: str) -> ast.expr:
    """The shape expression `d` of output `name` with each dimension name replaced by an input's."""
    if isinstance(n, ast.Name):
        got = job.binder.dim(n.id)
        if got is None:
            raise Untranslatable(
                f"output {name} dimension {d}",
                job.info.line,
                "the dimension is not a dimension of any input",
            )
        return got
    for f, v in ast.iter_fields(n):
        if isinstance(v, ast.expr):
            setattr(n, f, _over_inputs(job, v, name, d))
        elif isinstance(v, list):
            setattr(
                n, f, [_over_inputs(job, x, name, d) if isinstance(x, ast.expr) else x for x in v]
            )
    return n


def output_dtype(job: KernelJob, name: str) -> str:
    if job.task is None:
        return "float32"
    got = job.binder.dtype_expr(name)
    if got is None:
        raise Untranslatable(f"output {name}", job.info.line, "its dtype cannot be expressed")
    return got
