"""What a translation covers: the kernel asked for, its definition in the tree, the device
functions it reaches, and the features among them that no rule translates."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import function_name, line, text, walk
from mlxport.errors import UserError
from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.host.constants import RuntimeConstant, runtime_constants
from mlxport.translate.reading.cudafile import CudaFile, GlobalVar, KernelInfo, Param
from mlxport.translate.reading.features import assess

# Reader feature categories with no translation rule.
_BLOCKING = {
    "grid_sync": "cooperative grid sync",
    "tensor_core": "wmma / mma",
    "cub": "cub",
    "cluster": "thread-block clusters",
    "dynamic_parallelism": "dynamic parallelism (kernel launch)",
    "texture": "textures",
    "async_copy": "async copies",
    "thrust": "thrust",
}  # cooperative groups: translated by msl_groups.py, or refused there by construct; inline
# PTX by msl_ptx.py and cub's reductions by msl_cub.py, or refused there naming what they lack


def pick_kernel(cf: CudaFile, name: str | None) -> KernelInfo:
    kernels = [k for k in cf.kernels if k.specialization is None] or cf.kernels
    if name is None:
        if len({k.name for k in kernels}) != 1:
            raise UserError(
                f"the file has {len(kernels)} kernels ({', '.join(k.name for k in kernels)}): "
                "pass --kernel NAME"
            )
        return kernels[0]
    for k in kernels:
        if k.name == name:
            return k
    raise UserError(
        f"no __global__ kernel named {name!r}; kernels: {', '.join(k.name for k in kernels)}"
    )


def kernel_node(root: Node, info: KernelInfo) -> Node:
    """The kernel's function_definition (not an explicit specialization of it)."""
    if info.macro:
        raise Untranslatable(
            f"kernel {info.name} defined by macro {info.macro}",
            info.line,
            "expand the macro in the source",
        )
    for n in walk(root):
        if n.type != "function_definition" or not any(c.type == "__global__" for c in n.children):
            continue
        name, decl = function_name(n)
        target = decl.child_by_field_name("declarator") if decl is not None else None
        if name == info.name and (target is None or target.type != "template_function"):
            return n
    raise Untranslatable(
        f"kernel {info.name}", info.line, "its definition was not found in the source"
    )


def reachable(cf: CudaFile, info: KernelInfo) -> set[str]:
    by_name: dict[str, set[str]] = {}
    for d in cf.device_functions:
        by_name.setdefault(d.name, set()).update(d.calls)
    out, stack = set(), list(info.calls)
    while stack:
        cur = stack.pop()
        if cur in out:
            continue
        out.add(cur)
        stack.extend(by_name.get(cur, set()))
    return out


def helper_nodes(root: Node, helpers: set[str]) -> dict[str, list[Node]]:
    """The definitions of `helpers` by name (a template's template_declaration, else the
    definition)."""
    out: dict[str, list[Node]] = {}
    qualifiers = device_macros(root)
    for n in walk(root):
        if n.type != "function_definition" or any(c.type == "__global__" for c in n.children):
            continue
        if not device_qualified(n, qualifiers):
            continue
        name, _ = function_name(n)
        if name in helpers:
            holder = (
                n.parent if n.parent is not None and n.parent.type == "template_declaration" else n
            )
            out.setdefault(name, []).append(holder)
    return out


def device_macros(root: Node) -> set[str]:
    """Object-like macros whose expansion, through the macros it names, holds ``__device__``
    (``#define DS_D_INLINE __device__ __forceinline__``)."""
    bodies = {
        text(n.child_by_field_name("name")): text(n.child_by_field_name("value"))
        for n in walk(root)
        if n.type == "preproc_def"
    }
    out = {name for name, body in bodies.items() if re.search(r"\b__device__\b", body)}
    grew = True
    while grew:
        more = {
            name
            for name, body in bodies.items()
            if name not in out and out & set(re.findall(r"\w+", body))
        }
        out |= more
        grew = bool(more)
    return out


def device_qualified(fn: Node, macros: set[str]) -> bool:
    """`__device__` among the definition's qualifiers, or a macro before its declarator that
    expands to it (the grammar reads `DS_D_INLINE float f(...)` with the macro as the type)."""
    if any(c.type == "__device__" for c in fn.children):
        return True
    decl = fn.child_by_field_name("declarator")
    head = text(fn)[: decl.start_byte - fn.start_byte] if decl is not None else ""
    return bool(macros & set(re.findall(r"\w+", head)))


def check_grid_sync(job: KernelJob) -> None:
    """`g.sync()` on a grid group (the reader takes any `.sync()` for a block barrier)."""
    fns = [job.node] + [n for defs in helper_nodes(job.root, job.helpers).values() for n in defs]
    for fn in fns:
        grids = set()
        for n in walk(fn):
            if n.type == "init_declarator" and re.search(
                r"this_grid|this_multi_grid", text(n.child_by_field_name("value"))
            ):
                grids.add(text(n.child_by_field_name("declarator")))
            elif n.type == "declaration" and "grid_group" in text(n.child_by_field_name("type")):
                grids.update(
                    text(d).split("=")[0].strip() for d in n.children_by_field_name("declarator")
                )
            elif n.type == "call_expression" and _syncs_grid(n, grids):
                raise Untranslatable(
                    f"cooperative grid sync ({text(n)})",
                    line(n),
                    "Metal has no grid-wide barrier: split the kernel into several dispatches",
                )


def _syncs_grid(call: Node, grids: set[str]) -> bool:
    f = call.child_by_field_name("function")
    if f is None or f.type != "field_expression" or text(f.child_by_field_name("field")) != "sync":
        return False
    obj = text(f.child_by_field_name("argument"))
    return obj in grids or "grid" in obj


def check_features(job: KernelJob) -> None:
    """Raise for the first blocking feature of the kernel and its helpers, by category then line."""
    infos = [job.info] + [d for d in job.cf.device_functions if d.name in job.helpers]
    cats = {f.name: f.category for k in infos for f in k.features}
    order = list(_BLOCKING)

    def rank(feature: str) -> int:
        cat = cats.get(re.sub(r"\(.*", "", feature))
        return order.index(cat) if cat in order else len(order)

    rows = sorted((r for k in infos for r in assess(k)), key=lambda r: (rank(r.feature), r.line))
    for r in rows:
        feat = re.sub(r"\(.*", "", r.feature)
        cat = cats.get(feat, "")
        if cat in _BLOCKING:
            raise Untranslatable(
                f"{_BLOCKING[cat]} ({r.feature})", r.line, r.reason or "no Metal equivalent"
            )
        if feat == "device_global":
            raise Untranslatable(
                f"{feat.replace('_', ' ')} ({r.feature})",
                r.line,
                r.reason
                or "globals do not exist in metal_kernel bodies: pass the data as an input",
            )
        if feat.startswith("cub::") and job.target == "cuda":
            raise Untranslatable(
                f"cub ({r.feature})",
                r.line,
                "the CUDA body keeps only the includes NVRTC has without cub's (cuda_fp16, "
                "cooperative_groups, ...): reduce with __shfl_xor_sync and shared memory",
            )
        if r.needs_rewrite and cat == "atomic" and job.target == "msl":
            raise Untranslatable(r.feature, r.line, r.reason)


def constant_inputs(job: KernelJob) -> None:
    """Each ``__constant__`` array the kernel reads that the host fills at run time with values
    its code does not state becomes a buffer the kernel takes, as a convolution's filter is an
    argument of the op: a read-only pointer parameter of its name, bound to the task's input of
    that name. Where it cannot be, the refusal names the fix."""
    if not any(g.space == "constant" and not g.initialized for g in job.cf.globals):
        return
    helpers = [d for d in job.cf.device_functions if d.name in job.helpers]
    found = {c.name: c for c in runtime_constants(job.src_text)}
    inputs = {t.name for t in job.task.inputs} if job.task is not None else None
    params = list(job.info.params)
    for g in job.cf.globals:
        c = found.get(g.name)
        if c is None or g.space != "constant" or g.initialized:
            continue
        by = [d.name for d in helpers if g.name in re.findall(r"\w+", d.body)]
        if g.name not in re.findall(r"\w+", job.info.body) and not by:
            continue
        if problem := _not_an_input(g, c, by, inputs):
            raise Untranslatable(
                f"__constant__ {g.name} (declared at line {g.line})",
                g.line,
                f"the host fills it at run time with values its code does not state, so the op "
                f"takes it as an input, but {problem}",
            )
        params.append(_buffer_of(g.name, c.type))
        job.constants.append(g.name)
        job.notes.append(f"{g.name}, filled by the host at run time, is an input of the op")
    job.info = job.info.model_copy(update={"params": params})


def _not_an_input(
    g: GlobalVar, c: RuntimeConstant, readers: list[str], inputs: set[str] | None
) -> str:
    """Why the kernel cannot take the constant ``g`` as a buffer; "" where it can (``readers``:
    device functions that read it; ``inputs``: the task's, None without a task)."""
    if readers:
        return (
            f"device function {readers[0]} reads it, and a buffer reaches only the kernel: read "
            f"{g.name} in the kernel and pass what {readers[0]} needs as its arguments"
        )
    if len(g.dims) != 1:
        return c.problem
    if inputs is not None and g.name not in inputs:
        return c.problem or (
            f"the task has no input {g.name} to fill it from: add one of its {c.elements} "
            f"values (a task `mlxport port` makes from the file has it)"
        )
    return ""


def _buffer_of(name: str, element: str) -> Param:
    return Param(
        name=name,
        type=f"const {element}*",
        base_type=element,
        is_pointer=True,
        is_const=True,
        read=True,
    )
