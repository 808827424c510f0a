"""A .cu file's device code as the CPU executor keeps it: the rewritten text, its kernels and
their signatures, and what preparing it dropped (rewrite.device_source makes one)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mlxport.errors import UserError


class SourceError(UserError):
    """The file cannot be prepared for the executor; the message names the construct and line."""


@dataclass(frozen=True)
class KernelParam:
    name: str
    type: str  # as written, e.g. "const float* __restrict__"
    pointer: bool
    const: bool  # a pointer to const: never written
    base: str  # the type pointed to, or the scalar type ("float", "T", "int64_t")


@dataclass(frozen=True)
class KernelSig:
    name: str  # as called from the launcher, namespace included
    template_params: tuple[tuple[str, str], ...]  # (name, kind): kind "typename" or a type
    params: tuple[KernelParam, ...]
    line: int


@dataclass
class DeviceSource:
    """The rewritten device code of a file, its kernels and what preparing it dropped."""

    path: str
    text: str
    kernels: dict[str, KernelSig]
    needs_fibers: bool
    dropped_includes: list[str] = field(default_factory=list)
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # kernel -> in text
    preprocessed: str = ""  # the whole file after the preprocessor, host code included
    typedefs: dict[str, str] = field(default_factory=dict)  # typedef/using name -> its type

    def resolve(self, type_name: str) -> str:
        """A type name with typedefs followed (floatX -> __nv_bfloat16; an enum -> int)."""
        type_name = re.sub(r"^(?:const\s+)?enum\s+(?:class\s+)?", "", type_name.strip())
        for _ in range(8):
            if type_name not in self.typedefs:
                break
            type_name = self.typedefs[type_name]
        return type_name
