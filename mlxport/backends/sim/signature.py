"""The kernel signature MLX generates for ``mx.fast.metal_kernel``, and the simulator's C++ twin.

``mlx_source`` reproduces, byte for byte, the text MLX v0.32 hands to the Metal compiler (minus
its utils preamble); see docs reference/mlx-custom-kernels.md section 2.1. ``sim_source`` walks
the same plan but emits C++ for the simulator: checked pointer types instead of address spaces,
``#line`` markers so compiler messages name candidate ``source``/``header`` lines, and a launcher
the runtime calls once per thread.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from mlxport.backends.base import ArgInfo
from mlxport.backends.sim.rewrite import Rewritten, rewrite_msl
from mlxport.expr import ArrayInfo, Dtype
from mlxport.spec import KernelCandidate, Launch

MAX_CONSTANT_ARRAY_SIZE = 8

# Metal type names, as MLX's get_type_string prints them.
TYPE_STRING = {
    "float32": "float",
    "float16": "float16_t",
    "bfloat16": "bfloat16_t",
    "float64": "double",
    "complex64": "complex64_t",
    "bool": "bool",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
}

# The 20 attributes MLX looks for, in MLX's own (alphabetical) order, with their parameter types.
ATTRIBUTES = (
    ("dispatch_quadgroups_per_threadgroup", "uint"),
    ("dispatch_simdgroups_per_threadgroup", "uint"),
    ("dispatch_threads_per_threadgroup", "uint3"),
    ("grid_origin", "uint3"),
    ("grid_size", "uint3"),
    ("quadgroup_index_in_threadgroup", "uint"),
    ("quadgroups_per_threadgroup", "uint"),
    ("simdgroup_index_in_threadgroup", "uint"),
    ("simdgroups_per_threadgroup", "uint"),
    ("thread_execution_width", "uint"),
    ("thread_index_in_quadgroup", "uint"),
    ("thread_index_in_simdgroup", "uint"),
    ("thread_index_in_threadgroup", "uint"),
    ("thread_position_in_grid", "uint3"),
    ("thread_position_in_threadgroup", "uint3"),
    ("threadgroup_position_in_grid", "uint3"),
    ("threadgroups_per_grid", "uint3"),
    ("threads_per_grid", "uint3"),
    ("threads_per_simdgroup", "uint"),
    ("threads_per_threadgroup", "uint3"),
)
ATTRIBUTE_NAMES = tuple(a for a, _ in ATTRIBUTES)

TemplateValue = int | bool | str  # str: a dtype name


class SignatureError(ValueError):
    """The inputs cannot be passed to this kernel (unknown dtype, bad template value...)."""


@dataclass(frozen=True)
class InputParam:
    name: str
    dtype: str
    ndim: int
    size: int
    shape: bool  # whether name_shape / name_strides / name_ndim appear in the body
    strides: bool
    ndim_param: bool

    @property
    def space(self) -> str:
        return "constant" if self.size < MAX_CONSTANT_ARRAY_SIZE else "device"

    @property
    def scalar(self) -> bool:
        return self.ndim == 0


@dataclass(frozen=True)
class Signature:
    """Everything the generated source depends on, resolved for one call."""

    kernel_name: str
    inputs: tuple[InputParam, ...]
    outputs: tuple[tuple[str, str], ...]  # (name, dtype)
    template: tuple[tuple[str, TemplateValue], ...]
    attributes: tuple[str, ...]
    atomic_outputs: bool
    header: str
    source: str

    def buffer_slots(self) -> list[tuple[str, str, str]]:
        """(role, name, dtype) per ``[[buffer(k)]]``, in MLX's order; role is input, shape,
        strides, ndim or output."""
        slots = []
        for p in self.inputs:
            slots.append(("input", p.name, p.dtype))
            if not p.scalar:
                slots += [
                    (role, f"{p.name}_{role}", dt)
                    for role, dt, used in (
                        ("shape", "int32", p.shape),
                        ("strides", "int64", p.strides),
                        ("ndim", "int32", p.ndim_param),
                    )
                    if used
                ]
        slots += [("output", n, d) for n, d in self.outputs]
        return slots


def type_string(dtype: str) -> str:
    if dtype not in TYPE_STRING:
        raise SignatureError(f"dtype {dtype} cannot be passed to a Metal kernel")
    return TYPE_STRING[dtype]


def scalar_info(value: int | float | bool) -> ArrayInfo:
    """MLX's rule for Python scalars: bool -> bool, int -> int32 (int64 if too big), float ->
    float32."""
    if isinstance(value, bool):
        return ArrayInfo((), Dtype("bool"))
    if isinstance(value, int):
        return ArrayInfo((), Dtype("int32" if -(2**31) <= value < 2**31 else "int64"))
    if isinstance(value, float):
        return ArrayInfo((), Dtype("float32"))
    raise SignatureError(
        f"cannot pass a {type(value).__name__} to a kernel; use an array, int, float or bool"
    )


def as_info(value: ArgInfo) -> ArrayInfo:
    return value if isinstance(value, ArrayInfo) else scalar_info(value)


def template_text(template: tuple[tuple[str, TemplateValue], ...]) -> str:
    """``<float, 8, 1>``: ints in decimal, bools as 1/0 (no boolalpha), dtypes by type string."""
    parts = []
    for _, v in template:
        if isinstance(v, bool):
            parts.append("1" if v else "0")
        elif isinstance(v, int):
            parts.append(str(v))
        else:
            parts.append(type_string(v))
    return "<" + ", ".join(parts) + ">"


def template_hash(text: str) -> str:
    return text.replace(", ", "_").replace("<", "_").replace(">", "_")[:-1]


def kernel_name(
    name: str,
    inputs: tuple[InputParam, ...],
    output_dtypes: list[str],
    template: tuple[tuple[str, TemplateValue], ...],
) -> str:
    out = "custom_kernel_" + name
    if template:
        out += "_" + template_hash(template_text(template))
    for p in inputs:
        out += (
            "_"
            + type_string(p.dtype)
            + ("s" if p.scalar else "c" if p.size < MAX_CONSTANT_ARRAY_SIZE else "")
        )
    for d in output_dtypes:
        out += "_" + type_string(d)
    return out


def build_signature(
    candidate: KernelCandidate,
    args: dict[str, ArgInfo],
    launch: Launch | None = None,
    template_values: list[tuple[str, TemplateValue]] | None = None,
) -> Signature:
    """Resolve the signature for concrete inputs (arrays as ArrayInfo, or Python scalars)."""
    infos = {n: as_info(args[n]) for n in candidate.input_names if n in args}
    # scalars stay values in launch expressions
    launch = launch or candidate.launch({**infos, **args})
    template = tuple(template_values if template_values is not None else launch.template)
    src = candidate.source
    inputs = tuple(
        InputParam(
            n,
            infos[n].dtype.name,
            infos[n].ndim,
            infos[n].size,
            f"{n}_shape" in src,
            f"{n}_strides" in src,
            f"{n}_ndim" in src,
        )
        for n in candidate.input_names
    )
    for p in inputs:
        type_string(p.dtype)
    return Signature(
        kernel_name=kernel_name(candidate.name, inputs, launch.output_dtypes, template),
        inputs=inputs,
        outputs=tuple(zip(candidate.output_names, launch.output_dtypes, strict=True)),
        template=template,
        attributes=tuple(a for a in ATTRIBUTE_NAMES if a in src),
        atomic_outputs=candidate.atomic_outputs,
        header=candidate.header,
        source=src,
    )


# ---------------------------------------------------------------- MLX's text


def _template_decl(template: tuple[tuple[str, TemplateValue], ...]) -> str:
    kinds = [
        "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "typename"
        for _, v in template
    ]
    return (
        "template <"
        + ", ".join(f"{k} {n}" for k, (n, _) in zip(kinds, template, strict=True))
        + ">\n"
    )


def _params(sig: Signature, fmt) -> list[str]:
    """Parameter texts with MLX's separators, including its early ``) {`` when shape parameters,
    several outputs and no attribute meet (the output loop compares against a slot count)."""
    out: list[str] = []
    index = 0
    for p in sig.inputs:
        out.append(fmt("input", p, index) + ",\n")
        index += 1
        if not p.scalar:
            for role, used in (("shape", p.shape), ("strides", p.strides), ("ndim", p.ndim_param)):
                if used:
                    out.append(fmt(role, p, index) + ",\n")
                    index += 1
    n_slots_mlx_thinks = len(sig.inputs) + len(sig.outputs) - 1
    for name, dtype in sig.outputs:
        sep = ",\n" if index < n_slots_mlx_thinks or sig.attributes else ") {\n"
        out.append(fmt("output", (name, dtype), index) + sep)
        index += 1
    for i, attr in enumerate(sig.attributes):
        sep = ",\n" if i < len(sig.attributes) - 1 else ") {\n"
        out.append(fmt("attribute", attr, i) + sep)
    return out


def _mlx_param(sig: Signature, role: str, p, index: int) -> str:
    if role == "input":
        ref = "&" if p.scalar else "*"
        return f"  const {p.space} {type_string(p.dtype)}{ref} {p.name} [[buffer({index})]]"
    if role == "shape":
        return f"  const constant int* {p.name}_shape [[buffer({index})]]"
    if role == "strides":
        return f"  const constant int64_t* {p.name}_strides [[buffer({index})]]"
    if role == "ndim":
        return f"  const constant int& {p.name}_ndim [[buffer({index})]]"
    if role == "output":
        name, dtype = p
        t = f"atomic<{type_string(dtype)}>" if sig.atomic_outputs else type_string(dtype)
        return f"  device {t}* {name} [[buffer({index})]]"
    return f"  {dict(ATTRIBUTES)[p]} {p} [[{p}]]"


def mlx_text(sig: Signature) -> str:
    text = sig.header
    if sig.template:
        text += _template_decl(sig.template)
    text += f"[[kernel]] void {sig.kernel_name}(\n"
    text += "".join(_params(sig, lambda role, p, index: _mlx_param(sig, role, p, index)))
    text += sig.source + "\n}\n"
    if sig.template:
        inst = sig.kernel_name + template_text(sig.template)
        text += (
            f'\ntemplate [[host_name("{sig.kernel_name}")]] [[kernel]] decltype({inst}) {inst};\n'
        )
    return text


def mlx_source(
    candidate: KernelCandidate,
    args: dict[str, ArgInfo],
    template_values: list[tuple[str, TemplateValue]] | None = None,
) -> str:
    """What MLX would compile for ``candidate`` called on ``args`` (minus its utils preamble):
    the text ``verbose=True`` prints."""
    return mlx_text(build_signature(candidate, args, template_values=template_values))


# ---------------------------------------------------------------- the simulator's C++


@dataclass(frozen=True)
class SimSource:
    """C++ for the simulator, plus what is needed to map diagnostics back."""

    text: str
    header: Rewritten
    body: Rewritten
    signature: Signature
    needs_fibers: bool


_SPACE = {"device": "AS_DEVICE", "constant": "AS_CONSTANT"}


def _sim_type(sig: Signature, role: str, p) -> str:
    """The C++ parameter type standing in for an MSL buffer or attribute parameter."""
    if role == "input":
        t = type_string(p.dtype)
        return (
            f"const {t}&" if p.scalar else f"::mlxsim::Ptr<const {t}, ::mlxsim::{_SPACE[p.space]}>"
        )
    if role == "shape":
        return "::mlxsim::Ptr<const int, ::mlxsim::AS_CONSTANT>"
    if role == "strides":
        return "::mlxsim::Ptr<const int64_t, ::mlxsim::AS_CONSTANT>"
    if role == "ndim":
        return "const int&"
    if role == "output":
        t = type_string(p[1])
        t = f"::metal::atomic<{t}>" if sig.atomic_outputs else t
        return f"::mlxsim::Ptr<{t}, ::mlxsim::AS_DEVICE>"
    return dict(ATTRIBUTES)[p]


def _param_name(role: str, p) -> str:
    if role == "output":
        return p[0]
    if role == "attribute":
        return p
    return p.name if role == "input" else f"{p.name}_{role}"


def _sim_param(sig: Signature, role: str, p, index: int) -> str:
    return f"  {_sim_type(sig, role, p)} {_param_name(role, p)}"


def _sim_template_args(template: tuple[tuple[str, TemplateValue], ...]) -> str:
    parts = []
    for _, v in template:
        if isinstance(v, bool):
            parts.append("true" if v else "false")
        elif isinstance(v, int):
            parts.append(str(v))
        else:
            parts.append(type_string(v))
    return "<" + ", ".join(parts) + ">"


def _launcher(sig: Signature, constant_arrays: tuple[str, ...] = ()) -> str:
    args = []
    k = 0
    for p in sig.inputs:
        roles = ["input"] + (
            []
            if p.scalar
            else [
                r
                for r, used in (("shape", p.shape), ("strides", p.strides), ("ndim", p.ndim_param))
                if used
            ]
        )
        for role in roles:
            args.append(_bind(_sim_type(sig, role, p), k))
            k += 1
    for out in sig.outputs:
        args.append(_bind(_sim_type(sig, "output", out), k))
        k += 1
    args += [f"::mlxsim::attr_{attr}(*a)" for attr in sig.attributes]
    call = sig.kernel_name + (_sim_template_args(sig.template) if sig.template else "")
    joined = ",\n      ".join(args)
    known = "".join(
        f"  ::mlxsim::constant_array(::{name}, sizeof(::{name}), "
        f'sizeof(std::remove_all_extents_t<decltype(::{name})>), "{name}");\n'
        for name in constant_arrays
    )
    return (
        'extern "C" __attribute__((visibility("default"))) void mlxsim_lane('
        "const ::mlxsim::Buffer* b, const ::mlxsim::ThreadAttrs* a) {\n"
        f"  (void)b; (void)a;\n  {call}(\n      {joined});\n}}\n"
        'extern "C" __attribute__((visibility("default"))) int mlxsim_run('
        "const ::mlxsim::LaunchParams* p, char* err, int errlen) {\n"
        f"{known}"
        "  return ::mlxsim::launch(p, &mlxsim_lane, err, errlen);\n}\n"
    )


def _bind(cpp_type: str, k: int) -> str:
    if cpp_type.endswith("&"):
        return f"*reinterpret_cast<{cpp_type[:-1]}*>(b[{k}].data)"
    return f"{cpp_type}(&b[{k}])"


def runtime_alias(header: str, source: str) -> str:
    """The name the rewritten candidate reaches the simulator's namespace by: a hash of the
    candidate's own text, which that text cannot hold, so a name of the runtime that the candidate
    wrote (or pasted together) is ``mlxsim`` still, and refused."""
    digest = hashlib.sha256(f"mlxsim-alias\0{header}\0{source}".encode()).hexdigest()
    return f"__sim_{digest[:24]}"


def sim_text(sig: Signature) -> SimSource:
    alias = runtime_alias(sig.header, sig.source)
    header = rewrite_msl(sig.header, slot_base=0, ns=alias, program_scope=True)
    buffers = frozenset(
        [p.name for p in sig.inputs if not p.scalar] + [name for name, _ in sig.outputs]
    )
    body = rewrite_msl(sig.source, slot_base=header.slots, pointers=buffers, ns=alias)
    parts = [
        '#include "msl_runtime.h"\n',
        f"namespace {alias} = ::mlxsim;\n",
        '#line 1 "header"\n',
        header.text,
    ]
    if sig.header and not sig.header.endswith("\n"):
        parts.append("\n")
    parts.append('#line 1 "generated"\n')
    gen = []
    if sig.template:
        gen.append(_template_decl(sig.template))
    gen.append(f"void {sig.kernel_name}(\n")
    gen += _params(sig, lambda role, p, index: _sim_param(sig, role, p, index))
    parts += gen
    parts.append('#line 1 "source"\n')
    parts.append(body.text)
    gen_lines = "".join(gen).count("\n") + 1
    parts.append(f'\n#line {gen_lines + 1} "generated"\n}}\n')
    parts.append(_launcher(sig, header.constant_arrays))
    return SimSource("".join(parts), header, body, sig, header.sync or body.sync)


def sim_source(
    candidate: KernelCandidate,
    args: dict[str, ArgInfo],
    template_values: list[tuple[str, TemplateValue]] | None = None,
) -> SimSource:
    return sim_text(build_signature(candidate, args, template_values=template_values))
