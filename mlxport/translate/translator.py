"""The rule-based CUDA -> MLX translator: a CUDA kernel becomes an MSL candidate for
``mx.fast.metal_kernel`` or a CUDA-body candidate for ``mx.fast.cuda_kernel``, or raises
`Untranslatable` naming the construct and its line, never wrong code. `translate` runs the steps:
read the file, bind pointers and scalars to the task, evaluate the host launch, render the code."""

from __future__ import annotations

import math
import re
from pathlib import Path

from mlxport.cuda_syntax import parse
from mlxport.errors import UserError
from mlxport.expr import names_used
from mlxport.spec import KernelCandidate, KernelTask
from mlxport.translate.bind import launch_config
from mlxport.translate.bind.job import KernelJob, Target
from mlxport.translate.bind.kernel_facts import kernel_facts, port_facts
from mlxport.translate.bind.kernel_scope import (
    check_features,
    check_grid_sync,
    constant_inputs,
    kernel_node,
    pick_kernel,
    reachable,
)
from mlxport.translate.bind.ports import Ports, bind_pointers, output_dtype, output_shape
from mlxport.translate.bind.result import Translation, Untranslatable
from mlxport.translate.bind.scalars import Scalars, bind_scalars
from mlxport.translate.host.binding import Binder
from mlxport.translate.host.cexpr import CExprError
from mlxport.translate.host.constants import with_host_constants
from mlxport.translate.host.launch import file_constants
from mlxport.translate.reading.cudafile import CudaFile, CudaReadError
from mlxport.translate.reading.macros import expand_casts, normalize
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.render.base import RenderError
from mlxport.translate.render.cuda_kernel import STAGE, STAGE_SLOTS, render_cuda
from mlxport.translate.render.msl_kernel import dry_render, render_msl

__all__ = [
    "CudaReadError",
    "Translation",
    "arm_requires",
    "Untranslatable",
    "case_bound_names",
    "translate",
    "translate_task",
]


def translate_task(task: KernelTask, target: Target = "msl") -> Translation:
    """Translate a suite task's own kernel.cu for its entry kernel."""
    src = task.source_text()
    if not src:
        raise UserError(f"task {task.name} has no source folder: load it with mlxport.tasks")
    return translate(src, kernel=task.kernel, target=target, task=task)


def translate(
    source_or_cudafile: str | Path | CudaFile,
    *,
    kernel: str | None = None,
    target: Target = "msl",
    task: KernelTask | None = None,
) -> Translation:
    if target not in ("msl", "cuda"):
        raise UserError(
            f"unknown translation target {target!r}: use msl (Metal) or cuda (MLX's CUDA backend)"
        )
    given = _source_text(source_or_cudafile)
    src, filled = with_host_constants(given)  # the values the host copies into __constant__
    cf = (
        source_or_cudafile
        if isinstance(source_or_cudafile, CudaFile) and src == given
        else read_cuda(src)
    )
    try:
        job = _open(src, cf, kernel or (task.kernel if task else None), target, task)
        job.notes.extend(filled)
        return _run(job)
    except RenderError as e:
        raise Untranslatable(e.construct, e.line, e.reason) from None
    except CExprError as e:
        raise Untranslatable(
            e.what,
            e.line or 0,
            "the launch math cannot be expressed over the task's inputs and params",
        ) from None
    except RecursionError:
        raise Untranslatable(
            "deeply nested code", 0, "nesting exceeds the translator's limits"
        ) from None


def case_bound_names(source: str, task: KernelTask) -> list[str]:
    """The names the kernel's launch in ``source`` needs that only ``task``'s cases bind (no param
    or input gives them): the params a task made from the file must have for a port to launch
    it at sizes of no case."""
    src, _ = with_host_constants(source)
    try:
        return launch_config.case_bound(_open(src, read_cuda(src), task.kernel, "msl", task))
    except (CExprError, Untranslatable, CudaReadError):
        return []


def arm_requires(source: str, task: KernelTask) -> list[str]:
    """The comparisons over the sizes ``task``'s cases bind that keep it to the arm of the host
    code its visible cases take (`launch_config.case_rules`)."""
    src, _ = with_host_constants(source)
    try:
        return launch_config.case_rules(_open(src, read_cuda(src), task.kernel, "msl", task))
    except (CExprError, Untranslatable, CudaReadError):
        return []


def _source_text(s: str | Path | CudaFile) -> str:
    if isinstance(s, CudaFile):
        path = Path(s.path)
        if not path.is_file():
            raise UserError(
                f"CudaFile {s.path!r} has no readable source file: pass the source text instead"
            )
        return path.read_text(errors="replace")
    if isinstance(s, Path) or (
        isinstance(s, str)
        and "\n" not in s
        and s.strip().endswith((".cu", ".cuh"))
        and len(s) < 4096
    ):
        path = Path(s)
        if not path.is_file():
            raise CudaReadError(
                f"{path} does not exist or is not a file: pass the path of a .cu file"
            )
        return path.read_text(errors="replace")
    if not isinstance(s, str):
        raise CudaReadError(f"cannot read a {type(s).__name__}: pass CUDA source text or a Path")
    return s


def _open(
    src: str, cf: CudaFile, kernel: str | None, target: Target, task: KernelTask | None
) -> KernelJob:
    data = normalize(expand_casts(src.encode("utf-8", "replace")))
    src = data.decode("utf-8", "replace")
    root = parse(data).root_node
    info = pick_kernel(cf, kernel)
    return KernelJob(
        src_text=src,
        src=data,
        root=root,
        cf=cf,
        info=info,
        node=kernel_node(root, info),
        target=target,
        task=task,
        binder=Binder(task),
        macros=file_constants(root) | {m.name: (m.params, m.body) for m in cf.macros},
    )


def _run(job: KernelJob) -> Translation:
    job.helpers = reachable(job.cf, job.info)
    check_grid_sync(job)
    check_features(job)
    constant_inputs(job)
    ports = bind_pointers(job)
    if job.target == "msl":
        dry_render(job, ports, port_facts(job, ports))
    sizes = launch_config.TypeSizes(job)
    plan = launch_config.plan(job, sizes)
    template, block = launch_config.templates(job, plan)
    scalars = bind_scalars(job, plan)
    grid, tg = launch_config.grid(job, plan, block)
    facts, generic = kernel_facts(job, ports)
    if generic:
        template[generic[0]] = generic[1]
    dynamic, shared_memory = launch_config.dynamic_shared(job, plan, template, facts, sizes)
    outputs = [t for _, t in ports.outputs]
    shapes, dtypes = (
        [output_shape(job, ports, o) for o in outputs],
        [output_dtype(job, o) for o in outputs],
    )
    if job.target == "msl":
        header, body = render_msl(job, facts, scalars, block, ports)
    else:
        staged = _tiny_atomic_outputs(facts, outputs, shapes, dtypes)
        header, body = render_cuda(job, facts, scalars, ports, staged)
        if staged:
            outputs, shapes, dtypes = (
                [*outputs, STAGE],
                [*shapes, [STAGE_SLOTS + sum(n for _, n in staged)]],
                [*dtypes, "float32"],
            )
    inputs = _inputs(job, ports, scalars, [*grid, *tg, *template.values(), shared_memory])
    # not pointers into them
    read_back = [p for p in sorted(facts.read_through) if p in dict(ports.inputs)]
    cand = KernelCandidate(
        language=job.target,
        name=re.sub(r"\W", "_", job.info.name),
        source=body,
        header=header,
        input_names=inputs,
        output_names=outputs,
        output_shapes=shapes,
        output_dtypes=dtypes,
        grid=grid,
        threadgroup=tg,
        template=template,
        atomic_outputs=facts.atomic and job.target == "msl",
        init_value=0.0
        if facts.atomic
        else float("nan")
        if facts.read_through or _partial(job)
        else None,
        inout={facts.rw[p]: dict(ports.inputs)[p] for p in read_back},
        shared_memory=shared_memory if job.target == "cuda" else 0,
    )
    for p in read_back:
        job.notes.append(
            f"`{p}` is read back after the kernel writes it: reads of {p}[i] come from "
            f"{facts.rw[p]}[i] once written (the output starts as NaN), else from the input; "
            f"elements never written keep the input's values"
        )
    if dynamic:
        job.notes.append(dynamic)
    return Translation(candidate=cand, notes=job.notes, bindings=job.bindings)


def _tiny_atomic_outputs(
    facts, outputs: list[str], shapes: list, dtypes: list[str]
) -> list[tuple[str, int]]:
    """(name, elements) of the float32 outputs of an atomic kernel small enough for MLX to keep them
    in host-visible memory (a literal shape of at most 64 elements)."""
    if not facts.atomic:
        return []
    out = []
    for name, shape, dtype in zip(outputs, shapes, dtypes, strict=True):
        if (
            dtype == "float32"
            and isinstance(shape, list)
            and all(isinstance(d, int) for d in shape)
            and math.prod(shape) <= 64
        ):
            out.append((name, math.prod(shape)))
    return out


def _inputs(job: KernelJob, ports: Ports, scalars: Scalars, launch: list) -> list[str]:
    """The bound input tensors, then the params the kernel or its launch values use."""
    inputs = [t for _, t in ports.inputs] + [
        n for n in scalars.inputs if n not in [t for _, t in ports.inputs]
    ]
    for e in launch:
        for n in sorted(names_used(e) if isinstance(e, str) else set()):
            if n in job.binder.params and n not in inputs:
                inputs.append(n)
                job.notes.append(
                    f"param {n} is passed as an input because the launch depends on it"
                )
    return inputs


def _partial(job: KernelJob) -> bool:
    """The task says an output is written only in part: it starts as NaN, as in the golden."""
    return job.task is not None and any(
        o.init.kind == "full" and math.isnan(o.init.value) for o in job.task.outputs
    )
