"""The structure of a read .cu file as pydantic data, and the error raised for unreadable input."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mlxport.errors import UserError


class CudaReadError(UserError):
    """The input cannot be read as CUDA; the message names the problem and the fix."""


class TemplateParam(BaseModel):
    name: str
    kind: str  # "typename", or the type of a non-type parameter ("int", "bool", ...)
    default: str | None = None
    variadic: bool = False  # a parameter pack (`typename... Ts`, `int... Ns`)


class Param(BaseModel):
    name: str
    type: str
    base_type: str
    is_pointer: bool = False
    is_reference: bool = False
    is_const: bool = False
    is_restrict: bool = False
    default: str | None = None  # a default argument, as written
    read: bool = False
    written: bool = False
    unknown_calls: list[str] = Field(default_factory=list)


class SharedDecl(BaseModel):
    name: str
    type: str
    dims: list[str] = Field(default_factory=list)
    dynamic: bool = False
    line: int
    bytes: int | None = None  # when every dim is a literal or an object-like #define of one


class Feature(BaseModel):
    name: str
    category: str
    line: int
    detail: str = ""


class KernelInfo(BaseModel):
    name: str
    kind: str  # "global" | "device"
    line: int
    template_params: list[TemplateParam] = Field(default_factory=list)
    params: list[Param] = Field(default_factory=list)
    shared: list[SharedDecl] = Field(default_factory=list)
    features: list[Feature] = Field(default_factory=list)
    body: str = ""
    body_line: int = 0
    calls: list[str] = Field(default_factory=list)
    qualifiers: list[str] = Field(default_factory=list)
    launch_bounds: list[str] = Field(default_factory=list)
    instantiations: list[str] = Field(default_factory=list)
    specialization: str | None = None  # template args of an explicit specialization `k<float>`
    namespace: str = ""
    macro: str | None = None  # the macro whose expansion defined this function
    warnings: list[str] = Field(default_factory=list)


class LaunchSite(BaseModel):
    kernel: str
    template_args: list[str] = Field(default_factory=list)
    grid: str
    block: str
    shared_mem: str | None = None
    stream: str | None = None
    args: list[str] = Field(default_factory=list)
    line: int
    enclosing_function: str | None = None
    api: str = "<<<>>>"  # or cudaLaunchKernel / cudaLaunchCooperativeKernel


class MacroDef(BaseModel):
    name: str
    params: list[str] | None = None  # None for object-like macros
    body: str
    line: int


class GlobalVar(BaseModel):
    name: str
    type: str
    space: str  # "constant" | "device" | "shared" | "managed"
    dims: list[str] = Field(default_factory=list)
    line: int
    initialized: bool = False  # declared with its values: `__constant__ float c[2] = {1, 2};`


class CudaFile(BaseModel):
    path: str
    kernels: list[KernelInfo] = Field(default_factory=list)
    device_functions: list[KernelInfo] = Field(default_factory=list)
    launches: list[LaunchSite] = Field(default_factory=list)
    defines: dict[str, str] = Field(default_factory=dict)
    macros: list[MacroDef] = Field(default_factory=list)
    includes: list[str] = Field(default_factory=list)
    globals: list[GlobalVar] = Field(default_factory=list)
    features: list[Feature] = Field(default_factory=list)  # host code and file scope
    warnings: list[str] = Field(default_factory=list)

    def kernel(self, name: str) -> KernelInfo:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(
            f"no __global__ kernel named {name!r}; kernels: {[k.name for k in self.kernels]}"
        )
