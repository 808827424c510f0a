"""The first stages of a task from a .cu file: the file read with its local headers, the kernel
picked, and what each parameter is (an input, output or in-out buffer; a scalar; a struct the
host fills at run time) and holds (its storage and dtype)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxport.backends.cuda_cpu import CudaExecutor
from mlxport.backends.cuda_cpu.source import DeviceSource, KernelSig, top_level
from mlxport.errors import UserError, read_text
from mlxport.tasks.request import TaskRequest
from mlxport.translate.host.constants import RuntimeConstant
from mlxport.translate.reading.cudafile import CudaFile, KernelInfo, Param
from mlxport.translate.reading.includes import amalgamate, check_header
from mlxport.translate.reading.reader import read_cuda
from mlxport.verify.golden import STORAGE

DTYPE_OF = {"float64": "float32"}  # the executor's storage -> the task's dtype, where they differ
_IDENT = re.compile(r"[A-Za-z_]\w*")
_MARKER = re.compile(r'^# \d+ "([^"<][^"]*)"', re.M)


class CudaTaskError(UserError):
    """The file, kernel or case cannot make a task; the message names the flag that fixes it."""


@dataclass
class KernelFile:
    """The .cu file as the reader and the executor see it, and the kernel to port in it."""

    path: Path
    text: str  # the file with its local headers inlined (the task's kernel.cu)
    inlined: list[str]
    missing: list[str]
    cf: CudaFile
    info: KernelInfo
    source: DeviceSource  # the executor's view: preprocessed device code
    sig: KernelSig
    headers: dict[str, Path]  # headers read from -I folders: path under include/ -> the file
    # members of structs of buffers passed by value, each a parameter of the task: name -> p.x
    members: dict[str, str] = field(default_factory=dict)
    # __constant__ arrays the host fills at run time that the kernel reads: inputs of the task
    constants: list[RuntimeConstant] = field(default_factory=list)


@dataclass
class Signature:
    """What the kernel's parameters are."""

    typenames: set[str]  # template typenames (instantiated at float for the golden)
    template_flags: dict[str, str]  # --template NAME=VALUE
    zeroed: dict[str, int]  # structs passed by value, run as zero bytes -> their size
    roles: dict[str, str]  # pointer -> input, output or inout
    dtypes: list[str]

    @property
    def types(self) -> dict[str, str]:
        """Template names as the kernel is built: typenames at float, flags as given."""
        return {t: "float" for t in self.typenames} | self.template_flags


def read_kernel(request: TaskRequest, executor: CudaExecutor) -> KernelFile:
    path, includes = request.source, list(request.includes)
    if not path.is_file():
        raise CudaTaskError(f"no such file {path}: pass the path of a .cu file")
    read_text(path, "CUDA source")
    text, inlined, missing = amalgamate(path, includes)
    cf = read_cuda(text, name=path.name)
    info = _kernel(cf, request.kernel, path)
    if launch := next((f for f in info.features if f.category == "dynamic_parallelism"), None):
        raise CudaTaskError(
            f"{info.name} launches {launch.detail or 'a kernel'} from device code at line "
            f"{launch.line} (dynamic parallelism), which neither the CPU executor nor Metal runs: "
            f"port each kernel on its own, launched by the host"
        )
    source = executor.source(path, tuple(includes))
    sig = source.kernels.get(info.name)
    if sig is None:
        raise CudaTaskError(f"the executor finds no __global__ {info.name} in {path.name}")
    flags = dict(_pair(p) for p in top_level(request.template)) if request.template else {}
    members = source.members(sig, flags)  # a functor's type bound by --template L=Load<float>
    if members:
        info = info.model_copy(update={"params": _flat(info.params, members)})
    for p in info.params:
        p.base_type = source.resolve(p.base_type)  # typedef floatX: what the buffer really holds
        bound = flags.get(p.base_type, "").strip()
        if bound.endswith("*") and not p.is_pointer:  # `scale_type scale`, scale_type=at::Half *
            raise CudaTaskError(
                f"parameter {p.name} of {info.name} is a pointer through its template type "
                f"{p.base_type} (--template {p.base_type}={bound}), which is read as a scalar: "
                f"declare it `{bound} {p.name}` in a copy of the kernel to port it"
            )
    headers = _headers(source.preprocessed, includes)
    slots = {name: slot for name, (slot, _) in members.items()}
    return KernelFile(path, text, inlined, missing, cf, info, source, sig, headers, slots)


def _flat(params: list[Param], members: dict) -> list[Param]:
    """The parameters with each struct of buffers replaced by its members (a pointer member is
    taken as read and written: running the original tells which)."""
    out = []
    for p in params:
        own = [(n, m) for n, (slot, m) in members.items() if slot.split(".")[0] == p.name]
        out += [
            Param(
                name=n,
                type=m.type,
                base_type=m.base,
                is_pointer=m.pointer,
                is_const=m.const,
                read=True,
                written=m.pointer and not m.const,
            )
            for n, m in own
        ] or [p]
    return out


def check_bound(kf: KernelFile, request: TaskRequest) -> None:
    """Every name ``--case`` binds is one the file or a flag uses: a misspelt size (``nn=4096``)
    would otherwise be dropped and the kernel run at sizes the host code picks itself."""
    flags = [request.grid, request.block, request.shared_bytes, request.template, request.inputs]
    used = set(_IDENT.findall(kf.text)) | set(_IDENT.findall(kf.source.preprocessed))
    used |= set(_IDENT.findall(" ".join([*filter(None, flags), *request.shapes.values()])))
    # a field of a struct the host passes (``dimsA.x`` of a ``const dim3 &dimsA``): both its names
    unknown = sorted(
        k for k in {k for c in request.cases for k in c} if not set(k.split(".")) <= used
    )
    if unknown:
        names = ", ".join(unknown)
        raise CudaTaskError(
            f"--case binds {names}, which nothing in {kf.path.name} uses: bind names the kernel "
            f"or its host code uses, such as {', '.join(_bindable(kf)) or 'its parameters'}"
        )
    bound = {k for c in request.cases for k in c}
    # the preprocessor replaces a #define before any case applies: binding it would change nothing
    if macro := next((m for m in kf.cf.macros if m.params is None and m.name in bound), None):
        raise CudaTaskError(
            f"--case binds {macro.name}, a #define of {kf.path.name} (line {macro.line}), which "
            f"the preprocessor replaces before any case applies: change its value in the file, "
            f"or bind a name the kernel or its host code computes, such as "
            f"{', '.join(_bindable(kf)) or 'its parameters'}"
        )


def _bindable(kf: KernelFile) -> list[str]:
    """The kernel's scalar parameters and those of the host function that launches it."""
    names = [p.name for p in kf.info.params if not p.is_pointer]
    for site in kf.cf.launches:
        if site.kernel != kf.info.name or not site.enclosing_function:
            continue
        m = re.search(rf"\b{re.escape(site.enclosing_function)}\s*\(([^)]*)\)\s*\{{", kf.text)
        for part in m.group(1).split(",") if m else []:
            found = _IDENT.findall(part.split("=")[0])
            if found and "*" not in part and "Tensor" not in part:
                names.append(found[-1])
    return list(dict.fromkeys(names))


def classify(kf: KernelFile, request: TaskRequest, executor: CudaExecutor) -> Signature:
    info = kf.info
    typenames = {t.name for t in info.template_params if t.kind in ("typename", "class")}
    flags = dict(_pair(p) for p in top_level(request.template)) if request.template else {}
    zeroed = _zeroed_structs(info, typenames, flags, executor, kf.source)
    for p in info.params:
        if p.name not in zeroed:
            storage(p, typenames)  # a pointer to a struct is named here
    if zeroed and not any(p.is_pointer for p in info.params):
        raise CudaTaskError(
            f"every buffer of {info.name} arrives inside the struct {next(iter(zeroed))} passed by "
            f"value, which the executor can pass only as zero bytes: port a kernel that takes its "
            f"buffers as pointer parameters"
        )
    dtypes = _dtypes(info, typenames, request.dtypes)
    return Signature(typenames, flags, zeroed, _roles(info), dtypes)


def _dtypes(info: KernelInfo, typenames: set[str], asked: list[str] | None) -> list[str]:
    """The dtypes the task checks: those asked for a kernel templated on its element type, else
    the tolerance of its least precise float buffer."""
    if any(p.is_pointer and p.base_type in typenames for p in info.params):
        return asked or ["float32"]
    own = {dtype(p, typenames) for p in info.params if p.is_pointer}
    if asked and not set(asked) <= own:
        raise CudaTaskError(
            f"{info.name} is not templated on its element type (its buffers are "
            f"{', '.join(sorted(own))}): drop --dtypes, or port a templated kernel"
        )
    return [d for d in ("bfloat16", "float16", "float32") if d in own][:1] or ["float32"]


def _kernel(cf: CudaFile, kernel: str | None, path: Path) -> KernelInfo:
    names = [k.name for k in cf.kernels]
    if not names:
        raise CudaTaskError(
            f"{path.name} defines no __global__ kernel: pass a file with the kernel to port"
        )
    if kernel is None:
        if len(names) > 1:
            raise CudaTaskError(
                f"{path.name} has {len(names)} kernels ({', '.join(names)}): pick one with --kernel"
            )
        kernel = names[0]
    if kernel not in names:
        raise CudaTaskError(
            f"{path.name} has no kernel {kernel!r}; its kernels are {', '.join(names)}: "
            f"pass one of them with --kernel"
        )
    return cf.kernel(kernel)


def _headers(preprocessed: str, includes: list[Path]) -> dict[str, Path]:
    """The files the preprocessor read from the -I folders (its line markers name them), by their
    path under the folder they were found in: a task carries copies, so it reads nothing outside."""
    roots = [Path(p).resolve() for p in includes]
    found: dict[str, Path] = {}
    for name in dict.fromkeys(_MARKER.findall(preprocessed)):
        file = Path(name).resolve()
        for root in roots:
            if file.is_relative_to(root) and file.is_file():
                check_header(file, file.relative_to(root).as_posix(), "the file", roots)
                found.setdefault(file.relative_to(root).as_posix(), file)
                break
    return found


def _roles(info: KernelInfo) -> dict[str, str]:
    roles = {}
    for p in info.params:
        if not p.is_pointer:
            continue
        if p.is_const or not p.written:
            roles[p.name] = "input"
        else:
            roles[p.name] = "inout" if p.read else "output"
    return roles


def _zeroed_structs(
    info: KernelInfo,
    typenames: set[str],
    flags: dict[str, str],
    executor: CudaExecutor,
    source: DeviceSource,
) -> dict[str, int]:
    """Parameters of a struct type passed by value, with their sizes as the compiler gives them."""
    out = {}
    for p in info.params:
        if p.is_pointer or p.base_type in typenames or STORAGE.get(p.base_type) is not None:
            continue
        t = re.sub(r"^(?:const\s+)?(?:struct\s+)?", "", p.base_type)
        for name, value in flags.items():  # std::bool_constant<Atomic> at --template Atomic=false
            t = re.sub(rf"\b{re.escape(name)}\b", value, t)
        n = executor.constant(source, info.name, f"sizeof({t})")
        if n is None:
            hint = " (bind its template arguments with --template)" if "<" in t else ""
            raise CudaTaskError(
                f"parameter {p.name} of type {p.type} cannot be passed by the executor: port a "
                f"kernel whose parameters are pointers, plain scalars and structs of known size"
                f"{hint}"
            )
        out[p.name] = n
    return out


def storage(p: Param, typenames: set[str]) -> str:
    """What the executor holds the parameter's elements as (a numpy dtype name, or bfloat16)."""
    if p.base_type in typenames:
        return "float32"
    held = STORAGE.get(p.base_type)
    if held is None:
        raise CudaTaskError(
            f"parameter {p.name} of type {p.type} cannot be passed by the executor: port a kernel "
            f"whose parameters are pointers to numbers and plain scalars"
        )
    return "uint16" if held == "bfloat16" and not p.is_pointer else held


def dtype(p: Param, typenames: set[str]) -> str:
    """The task's dtype of a buffer: ``T`` for the element type under test."""
    if p.base_type in typenames:
        return "T"
    held = STORAGE.get(p.base_type, "float32")
    return DTYPE_OF.get(held, held)


def integral(p: Param, typenames: set[str]) -> bool:
    held = storage(p, typenames)
    return held != "bfloat16" and np.dtype(held).kind in "iu"


def itemsize(held: str) -> int:
    return 2 if held == "bfloat16" else np.dtype(held).itemsize


def param_type(p: Param, types: dict[str, str]) -> str:
    """A scalar's kind in task.toml; a template type (acc_t scale) as the kernel is built."""
    t = types.get(p.base_type, p.base_type).lower()
    if t == "bool":
        return "bool"
    if any(w in t for w in ("float", "double", "half", "bfloat16")):
        return "float"
    return "int"


def scalar(p: Param, v: Any, types: dict[str, str]) -> Any:
    kind = param_type(p, types)
    return bool(v) if kind == "bool" else float(v) if kind == "float" else int(v)


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise CudaTaskError(
            f"--template {text!r} is not NAME=VALUE: write it like T=float,BLOCK=256"
        )
    return name.strip(), value.strip()


_DOMAIN = re.compile(r"^\s*(\w+)\s*(?::\s*\w+)?\s*(?:\[[^\])]*\])?\s*\[([^,\])]+),([^\])]+)\)\s*$")


def given_domains(text: str | None) -> dict[str, tuple[str, str]]:
    """``--inputs 'idx:int32[0,V)'`` (entries separated by ``;``) as name -> (low, high)."""
    out = {}
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        m = _DOMAIN.match(part)
        if not m:
            raise CudaTaskError(
                f"--inputs entry {part!r} must give an integer input's values as "
                f"name:dtype[low,high), e.g. 'idx:int32[0,V)'"
            )
        out[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    return out
