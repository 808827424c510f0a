"""The per-kernel decisions both renderers follow: which pointers are inputs, outputs or
read-write, whether outputs are atomic, the barrier's memory flags, and a generic element type
for a float-only kernel that the task runs on other dtypes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.ports import Ports
from mlxport.translate.bind.result import Untranslatable


@dataclass
class KernelFacts:
    """Per-kernel decisions the renderer needs (filled by the translator)."""

    inputs: set[str] = field(default_factory=set)  # pointer params read only
    outputs: set[str] = field(default_factory=set)  # pointer params written
    rw: dict[str, str] = field(default_factory=dict)  # read+written param -> its output name
    read_through: set[str] = field(default_factory=set)  # rw params read back through their output
    atomic: bool = False
    # extern shared name -> element-count constant
    dynamic: dict[str, str] = field(default_factory=dict)
    barrier_flags: str = "mem_flags::mem_threadgroup"
    # float -> this typename (a float-only kernel run on other dtypes)
    generic_float: str | None = None


def port_facts(job: KernelJob, ports: Ports) -> KernelFacts:
    """The facts that follow from the bound pointers and the features: ports and atomics."""
    facts = KernelFacts(
        inputs={p for p, _ in ports.inputs},
        outputs={p for p, _ in ports.outputs},
        rw={p: o for p, o in ports.rw},
    )
    infos = [job.info] + [d for d in job.cf.device_functions if d.name in job.helpers]
    facts.atomic = any(f.category == "atomic" for k in infos for f in k.features)
    return facts


def kernel_facts(job: KernelJob, ports: Ports) -> tuple[KernelFacts, tuple[str, str] | None]:
    """The facts, and (typename, dtype expression) of the generic type the template must define."""
    facts = port_facts(job, ports)
    if facts.atomic and job.target == "msl":
        _check_atomic_outputs(job, ports)
        job.notes.append(
            "atomics on outputs: atomic_outputs=true (MLX makes every output atomic), "
            "init_value=0 (the kernel accumulates into zeroed outputs)"
        )
    if facts.rw or facts.atomic:
        facts.barrier_flags = "mem_flags::mem_device | mem_flags::mem_threadgroup"
    if not facts.atomic:
        floating = {p.name for p in job.info.params if _floating(p.base_type, job)}
        facts.read_through = set(facts.rw) & floating
    generic = None
    if job.task is not None and not any(tp.kind == "typename" for tp in job.info.template_params):
        generic = _generic_float(job)
        facts.generic_float = generic[0] if generic else None
    return facts, (generic[0], f"{generic[1]}.dtype") if generic else None


def _floating(base: str, job: KernelJob) -> bool:
    """Whether a buffer of ``base`` holds floats (NaN marks what a kernel has not written)."""
    base = re.sub(r"\b(const|volatile|__restrict__)\b", "", base).strip()
    if base in {t.name for t in job.info.template_params if t.kind == "typename"}:
        return True  # the element type: the task runs it on float dtypes
    return any(w in base for w in ("float", "double", "half", "bfloat16"))


def _check_atomic_outputs(job: KernelJob, ports: Ports) -> None:
    for _, t in ports.outputs:
        spec = job.binder.spec(t)
        dtypes = (
            {spec.resolve_dtype(d) for d in (job.task.dtypes if job.task else ["float32"])}
            if spec
            else {"float32"}
        )
        bad = dtypes - {"float32", "int32", "uint32"}
        if bad:
            raise Untranslatable(
                f"atomic output {t}",
                job.info.line,
                f"Metal atomics need float32/int32/uint32 outputs, not {sorted(bad)[0]}: port "
                "it at --dtypes float32, or accumulate into a float32 output and convert after",
            )


def _generic_float(job: KernelJob) -> tuple[str, str] | None:
    """(typename, the input it follows) when a float-only kernel runs on other dtypes too (MSL)."""
    floats = [
        p
        for p in job.info.params
        if p.is_pointer and re.sub(r"\b(const|__restrict__)\b", "", p.base_type).strip() == "float"
    ]
    specs = [job.binder.spec(job.bindings.get(p.name, "").split(" ")[0]) for p in floats]
    float_only = (
        floats
        and all(s is not None and s.dtype == "T" for s in specs)
        and set(job.task.dtypes) - {"float32"}
    )
    vectors = [f for f in job.info.features if f.category == "vector"]
    if float_only and job.target == "cuda" and vectors:
        # MLX passes __half/__nv_bfloat16 pointers for 16-bit dtypes: a kept float4 view of them
        # reads the wrong bytes (seen on an H200), so the CUDA body views them in their own type.
        # The body never names the type, but a template value keeps one module per dtype where
        # MLX's CUDA cache keys on the name and template alone (before 0.32.1).
        return job.fresh_name("T"), specs[0].name
    if not (float_only and job.target == "msl"):
        return None
    name = job.fresh_name("T")
    job.notes.append(
        f"the kernel is written for float but the task runs {', '.join(job.task.dtypes)}: "
        f"float became the template type {name} = {specs[0].name}.dtype (arithmetic "
        "happens in that type)"
    )
    return name, specs[0].name
