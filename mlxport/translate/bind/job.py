"""One kernel being translated: its source and tree, what the reader found, the task it is bound
to, and what the translation steps record on the way (notes, bindings)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from tree_sitter import Node

from mlxport.spec import KernelTask
from mlxport.translate.host.binding import Binder
from mlxport.translate.host.cexpr import Macros
from mlxport.translate.reading.cudafile import CudaFile, KernelInfo

Target = Literal["msl", "cuda"]


@dataclass
class KernelJob:
    src_text: str
    src: bytes
    root: Node
    cf: CudaFile
    info: KernelInfo
    node: Node  # the kernel's function_definition
    target: Target
    task: KernelTask | None
    binder: Binder
    macros: Macros
    helpers: set[str] = field(default_factory=set)  # device functions the kernel reaches
    notes: list[str] = field(default_factory=list)
    bindings: dict[str, str] = field(default_factory=dict)
    # template bools that follow a param, as (template name, param): body constants
    param_consts: list[tuple[str, str]] = field(default_factory=list)
    # __constant__ arrays the host fills at run time, taken as buffers (constant_inputs)
    constants: list[str] = field(default_factory=list)

    def fresh_name(self, name: str, taken: set[str] | None = None) -> str:
        """`name`, or `name_1`, `name_2`...: the first not used in the source nor in `taken`."""
        used = set(re.findall(r"\w+", self.src_text)) | (taken or set())
        out, i = name, 1
        while out in used:
            out = f"{name}_{i}"
            i += 1
        return out
