"""A .cu file's device code as the CPU executor keeps it: the rewritten text, its kernels and
their signatures, and what preparing it dropped (rewrite.device_source makes one)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

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
    # struct name -> (its qualified name, its data members in order, its template parameters)
    structs: dict[str, tuple[str, tuple[KernelParam, ...], tuple[str, ...]]] = field(
        default_factory=dict
    )

    def members(
        self, sig: KernelSig, template: dict[str, str] | None = None
    ) -> dict[str, tuple[str, KernelParam]]:
        """The members of the kernel's structs of buffers (of a struct type the signature names,
        or a template type ``template`` binds: ``L=Load<float>``) as parameters of their own, in
        order: the name a task gives each (the member's, or ``p_x`` where another parameter has
        it) -> (its launch buffer ``p.x``, the member)."""
        template = template or {}
        taken = {p.name for p in sig.params}
        out = {}
        for p in sig.params:
            typename = p.base in dict(sig.template_params)
            found = self.buffers_in(p, template) if p.base in template or not typename else None
            for m in found[1] if found else ():
                name = m.name if m.name not in taken else f"{p.name}_{m.name}"
                taken.add(name)
                out[name] = (f"{p.name}.{m.name}", m)
        return out

    def flat(self, sig: KernelSig, template: dict[str, str] | None = None) -> KernelSig:
        """The signature with each struct of buffers replaced by its members, under the names
        ``members`` gives them."""
        members = self.members(sig, template)
        params = []
        for p in sig.params:
            own = [(n, m) for n, (slot, m) in members.items() if slot.startswith(p.name + ".")]
            params += [replace(m, name=n) for n, m in own] or [p]
        return replace(sig, params=tuple(params))

    def buffers_in(self, param: KernelParam, template: dict[str, str]) -> tuple[str, tuple] | None:
        """A parameter passed by value whose type is a struct holding pointers (``Params p``, a
        ``Load<float>`` functor through a template type): its qualified type and data members,
        each bound to a buffer or value of its own. None for anything else."""
        if param.pointer:
            return None
        written = re.sub(r"\b(?:const|volatile|struct)\b", "", param.base).strip()
        written = template.get(written, written)
        found = None
        for name in (written, self.resolve(written)):  # typedef struct {...} P; or a P2 = P alias
            found = found or self.structs.get(name.split("<")[0].strip().rpartition("::")[2])
        if found is None or not any(f.pointer for f in found[1]):
            return None
        args = written[written.index("<") :] if "<" in written else ""
        values = dict(zip(found[2], top_level(args[1:-1]) if args else [], strict=False))
        members = tuple(  # Load<float>'s src is a const float*, not a const T*
            replace(m, base=values.get(m.base, m.base)) for m in found[1]
        )
        return "::" + found[0] + args, members

    def resolve(self, type_name: str) -> str:
        """A type name with typedefs followed (floatX -> __nv_bfloat16; an enum -> int)."""
        type_name = re.sub(r"^(?:const\s+)?enum\s+(?:class\s+)?", "", type_name.strip())
        for _ in range(8):
            if type_name not in self.typedefs:
                break
            type_name = self.typedefs[type_name]
        return type_name


def top_level(text: str) -> list[str]:
    """``Ktraits=traits<64, 4, float>,kIsCircular=false`` split at the commas outside <> and ()."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [*parts, text[start:].strip()]
