"""A .cu file as C++ for the CPU executor: its device code, rewritten for the simulator runtime.

The file is preprocessed first (its own macros, conditionals and local headers; CUDA's and the
C++ library's headers are left for compile time, unknown system headers dropped), so what is
rewritten is what nvcc would compile. Then, on the tree-sitter parse:

- host code is blanked: functions without ``__device__``/``__global__`` (``main``, launchers,
  torch bindings) and host globals. The host code never runs;
- every pointer type in device code becomes ``::cusim::ptr<T>``, a pointer checked against the
  buffer it points into; casts to pointer types become ``static_cast`` to it;
- ``__shared__ T a[N][M];`` becomes a handle on the block's storage, ``extern __shared__`` the
  launch's dynamic shared memory.

Every edit keeps the line count, and the preprocessor's line markers stay, so the compiler's
diagnostics name the original file and line.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Node

from mlxport.backends.sim.compiler import compiler_env
from mlxport.cuda_syntax import inner_declarator, parse
from mlxport.errors import UserError

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"
# Headers the executor provides (or that are safe to take from the compiler at compile time):
# during preprocessing they expand to nothing, so the user's text is all that is rewritten.
PROVIDED = (
    "cuda_runtime.h",
    "cuda_runtime_api.h",
    "cuda.h",
    "device_launch_parameters.h",
    "device_functions.h",
    "cuda_fp16.h",
    "cuda_bf16.h",
    "cuda_fp16.hpp",
    "cuda_bf16.hpp",
    "vector_types.h",
    "vector_functions.h",
    "math_constants.h",
    "cooperative_groups.h",
    "cooperative_groups/reduce.h",
    "cooperative_groups/scan.h",
    "cuda/std/cstdint",
    "stdint.h",
    "cstdint",
    "stddef.h",
    "cstddef",
    "stdio.h",
    "cstdio",
    "assert.h",
    "cassert",
    "math.h",
    "cmath",
    "float.h",
    "cfloat",
    "limits.h",
    "climits",
    "type_traits",
    "limits",
    "stdlib.h",
    "cstdlib",
    "string.h",
    "cstring",
    "utility",
    "algorithm",
)
# The C++ library headers device code may name types from (std::array in a struct, say): left out
# while the file is rewritten, included as themselves when it is compiled.
STANDARD = frozenset(
    {
        "array",
        "atomic",
        "bitset",
        "chrono",
        "complex",
        "deque",
        "functional",
        "initializer_list",
        "iomanip",
        "iostream",
        "iterator",
        "list",
        "map",
        "memory",
        "mutex",
        "new",
        "numeric",
        "optional",
        "random",
        "set",
        "sstream",
        "string",
        "string_view",
        "thread",
        "tuple",
        "unordered_map",
        "unordered_set",
        "variant",
        "vector",
        "fstream",
        "cinttypes",
        "cstdarg",
        "climits",
        "cfloat",
        "cstring",
        "ctime",
        "bit",
        "span",
        "queue",
        "stack",
    }
)
# What nvcc defines for device code; the executor runs as an Ampere-class device.
DEFINES = {
    "__CUDACC__": "1",
    "__NVCC__": "1",
    "__CUDA_ARCH__": "800",
    "CUDART_VERSION": "12040",
    "__CUDACC_VER_MAJOR__": "12",
    "__CUDACC_VER_MINOR__": "4",
}
DEVICE = ("__device__", "__global__")
SYNC = re.compile(
    r"__syncthreads|__syncwarp|__shfl|__ballot|__all|__any|__activemask|__match_|__reduce_\w+_sync|"
    r"cooperative_groups|thread_block|tiled_partition|\bvolatile\b"
)
_MISSING = re.compile(
    r"fatal error: (?:'([^']+)' file not found|([^\s:]+): No such file or directory)"
)  # clang's, GCC's


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
    template_params: tuple[
        tuple[str, str], ...
    ]  # (name, kind): kind "typename" or a type such as "int"
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
    spans: dict[str, list[tuple[int, int]]] = field(
        default_factory=dict
    )  # kernel -> its definitions in text
    preprocessed: str = ""  # the whole file after the preprocessor, host code included
    typedefs: dict[str, str] = field(
        default_factory=dict
    )  # typedef/using name -> the type it names

    def resolve(self, type_name: str) -> str:
        """A type name with typedefs followed (floatX -> __nv_bfloat16; an enum -> int)."""
        type_name = re.sub(r"^(?:const\s+)?enum\s+(?:class\s+)?", "", type_name.strip())
        for _ in range(8):
            if type_name not in self.typedefs:
                break
            type_name = self.typedefs[type_name]
        return type_name


# ---------------------------------------------------------------- preprocessing


def preprocess(
    path: Path, compiler: tuple[str, ...], stubs: Path, includes: list[Path] = ()
) -> tuple[str, list[str]]:
    """The file after the preprocessor, and the system headers dropped because nothing provides them
    (each stands in as an empty file of a folder of this call's own)."""
    dropped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mlxport-dropped-") as tmp:
        cmd = [
            *compiler,
            "-E",
            "-x",
            "c++",
            "-std=c++20",
            "-nostdinc",
            "-nostdinc++",
            "-I",
            str(stubs),
            "-I",
            str(path.parent),
            *[f"-I{p}" for p in includes],
            "-I",
            tmp,
            *[f"-D{k}={v}" for k, v in DEFINES.items()],
            str(path),
        ]
        for _ in range(64):
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=120, env=compiler_env()
            )
            if done.returncode == 0:
                return _without_system_headers(done.stdout), dropped
            missing = _MISSING.search(done.stderr)
            if not missing:
                raise SourceError(f"{path.name} does not preprocess: {_first_error(done.stderr)}")
            name = missing.group(1) or missing.group(
                2
            )  # a system header, or a local one of a library not here (ATen/ATen.h)
            stub = Path(tmp) / name
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text("")
            dropped.append(name)
    raise SourceError(f"{path.name} includes too many headers the executor does not know")


_LINE_MARK = re.compile(r'^# \d+ "[^"]*"((?: \d)*)$')


def _without_system_headers(text: str) -> str:
    """The preprocessed text with what system headers (flag 3) expanded to left blank, markers kept:
    the compiler's C library is the executor's own at compile time (some compilers search
    /usr/include even with -nostdinc, and its typedefs would then be defined twice)."""
    out, system = [], False
    for ln in text.split("\n"):
        m = _LINE_MARK.match(ln)
        if m:
            system = " 3" in m.group(1)
            out.append(ln)
        else:
            out.append("" if system else ln)
    return "\n".join(out)


def _first_error(stderr: str) -> str:
    line = next((ln for ln in stderr.splitlines() if "error:" in ln), stderr.strip()[:300])
    return line.strip()[:400]


def stub_dir(root: Path) -> Path:
    """Empty stand-ins for the provided headers, for the preprocessing pass only."""
    root.mkdir(parents=True, exist_ok=True)
    for name in PROVIDED:
        f = root / name
        if not f.exists():
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("")
    return root


# ---------------------------------------------------------------- rewriting


def device_source(
    path: Path, compiler: tuple[str, ...], stubs: Path, includes: list[Path] = ()
) -> DeviceSource:
    text, dropped = preprocess(path, compiler, stub_dir(stubs), includes)
    # the grammar does not know __align__(n); alignas(n) means the same
    text = re.sub(r"\b__align__\s*\(", "alignas(", text)
    data = text.encode()
    tree = parse(data)
    rw = _Rewriter(data)
    out, spans = _kernel_spans(rw.render(tree.root_node))
    return DeviceSource(
        path=str(path),
        text=out,
        kernels=rw.kernels,
        needs_fibers=bool(SYNC.search(out)),
        dropped_includes=dropped,
        spans=spans,
        preprocessed=text,
        typedefs=_typedefs(tree.root_node),
    )


_MARK = re.compile(
    r"\x00(~?[\w:()]*)\x00"
)  # a kernel's name, or ~ and a device function's or type's


def _typedefs(root: Node) -> dict[str, str]:
    """File-scope typedefs and aliases, and enums as their underlying type (an enum parameter is
    passed as that integer)."""
    out = {}
    for n in root.children:
        if n.type in ("namespace_definition", "linkage_specification"):
            body = n.child_by_field_name("body")
            out |= _typedefs(body) if body is not None else {}
        elif (
            n.type == "enum_specifier"
            or n.type == "declaration"
            and (n.child_by_field_name("type") or n).type == "enum_specifier"
        ):
            spec = n if n.type == "enum_specifier" else n.child_by_field_name("type")
            name, base = spec.child_by_field_name("name"), spec.child_by_field_name("base")
            if name is not None:
                out[name.text.decode()] = (
                    " ".join(base.text.decode().split()) if base is not None else "int"
                )
        elif n.type == "type_definition":
            t, d = n.child_by_field_name("type"), n.child_by_field_name("declarator")
            if t is not None and d is not None and d.type == "type_identifier":
                out[d.text.decode()] = " ".join(t.text.decode().split())
        elif n.type == "alias_declaration":
            name, t = n.child_by_field_name("name"), n.child_by_field_name("type")
            if name is not None and t is not None:
                out[name.text.decode()] = " ".join(t.text.decode().split())
    return out


def _kernel_spans(text: str) -> tuple[str, dict[str, list[tuple[int, int]]]]:
    """The text without the rewriter's kernel markers, and where each kernel's definition is."""
    spans: dict[str, list[tuple[int, int]]] = {}
    out, pos, opened = [], 0, []
    length = 0
    for m in _MARK.finditer(text):
        out.append(text[pos : m.start()])
        length += m.start() - pos
        pos = m.end()
        if m.group(1):
            opened.append((m.group(1), length))
        elif opened:
            name, start = opened.pop()
            spans.setdefault(name, []).append((start, length))
    out.append(text[pos:])
    return "".join(out), spans


_DECLARATORS = {
    "pointer_declarator",
    "init_declarator",
    "array_declarator",
    "function_declarator",
    "identifier",
    "reference_declarator",
    "field_identifier",
    "abstract_pointer_declarator",
    "parenthesized_declarator",
    "abstract_function_declarator",
    "abstract_array_declarator",
    "abstract_reference_declarator",
    "template_function",
    "qualified_identifier",
    "destructor_name",
    "operator_name",
}
_STORAGE = {"storage_class_specifier"}
_CASTS = {"reinterpret_cast", "static_cast", "const_cast"}


class _Rewriter:
    def __init__(self, data: bytes):
        self.data = data
        self.slot = 1  # slot 0 is the executor's own (cuda_exec.h)
        self.kernels: dict[str, KernelSig] = {}
        self.scope: list[str] = []

    def src(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def gap(self, a: int, b: int) -> str:
        return self.data[a:b].decode("utf-8", "replace")

    def blank(self, node: Node) -> str:
        return "\n" * self.src(node).count("\n")

    def children(
        self,
        node: Node,
        start: int | None = None,
        end: int | None = None,
        skip: tuple[Node, ...] = (),
    ) -> str:
        """The node's text with each child rendered (``skip``ped children vanish)."""
        pos = node.start_byte if start is None else start
        stop = node.end_byte if end is None else end
        parts = []
        for c in node.children:
            if c.end_byte <= pos or c.start_byte >= stop:
                continue
            parts.append(self.gap(pos, c.start_byte))
            parts.append(self.blank(c) if c in skip else self.render(c))
            pos = c.end_byte
        parts.append(self.gap(pos, stop))
        return "".join(parts)

    def render(self, node: Node) -> str:
        rule = getattr(self, f"_{node.type}", None)
        if rule is not None:
            return rule(node)
        if node.child_count == 0:
            return self.src(node)
        return self.children(node)

    # -- scopes: what is kept

    def _translation_unit(self, node: Node) -> str:
        return self.children(node)

    def _namespace_definition(self, node: Node) -> str:
        name = node.child_by_field_name("name")
        self.scope.append(self.src(name) if name is not None else "")
        try:
            return self.children(node)
        finally:
            self.scope.pop()

    def _function_definition(self, node: Node) -> str:
        defaulted = any(
            c.type in ("default_method_clause", "delete_method_clause") for c in node.children
        )
        if (
            not _is_device(node) and not _is_constexpr(node) and not defaulted
        ):  # `= default` is host and device
            return self.blank(node)
        templated = node.parent is not None and node.parent.type == "template_declaration"
        if any(c.type == "__global__" for c in node.children):
            name = self._kernel(node, None)
            if not templated:
                return f"\x00{name}\x00{self.children(node)}\x00\x00"
        elif not templated and (helper := _helper_name(node)):
            return f"\x00~{self.qualified(helper)}\x00{self.children(node)}\x00\x00"
        return self.children(node)

    def qualified(self, name: str) -> str:
        """`wt::loadFromGmem`; an anonymous namespace is `(anon)`: helpers of one name in several
        namespaces are told apart (kernels.cuh of a project includes them all)."""
        return "::".join([*(s or "(anon)" for s in self.scope), name])

    def _struct_specifier(self, node: Node) -> str:
        name = _type_name(node)
        return (
            f"\x00~{self.qualified(name)}\x00{self.children(node)}\x00\x00"
            if name
            else self.children(node)
        )

    _class_specifier = _struct_specifier

    def _template_declaration(self, node: Node) -> str:
        spec = next(
            (c for c in node.named_children if c.type in ("struct_specifier", "class_specifier")),
            None,
        )
        if spec is not None and (name := _type_name(spec, node)):
            return f"\x00~{self.qualified(name)}\x00{self.children(node)}\x00\x00"
        inner = next(
            (c for c in node.named_children if c.type in ("function_definition", "declaration")),
            None,
        )
        if inner is not None and inner.type == "function_definition":
            if not _is_device(inner) and not _is_constexpr(inner):
                return self.blank(node)
            if any(c.type == "__global__" for c in inner.children):
                name = self._kernel(inner, node)
                return f"\x00{name}\x00{self.children(node)}\x00\x00"
            if helper := _helper_name(inner):
                return f"\x00~{self.qualified(helper)}\x00{self.children(node)}\x00\x00"
        return self.children(node)

    def _template_instantiation(self, node: Node) -> str:
        return self.children(node) if _is_device(node) else self.blank(node)

    def _declaration(self, node: Node) -> str:
        if _qualified(node, "__shared__"):
            return self._shared(node)
        if (
            node.parent is not None
            and node.parent.type in ("translation_unit", "declaration_list")
            and not _keeps_global(node)
        ):
            return self.blank(node)
        return self._declaration_with_pointers(node)

    def _field_declaration(self, node: Node) -> str:
        return self.children(
            node
        )  # struct members keep plain pointers: structs are copied as bytes

    def _parameter_declaration(self, node: Node) -> str:
        return self._declaration_with_pointers(node)

    def _optional_parameter_declaration(self, node: Node) -> str:
        return self._declaration_with_pointers(node)

    def _operator_cast(self, node: Node) -> str:
        """``operator T *()``, the SharedMemory<T> idiom: a conversion to a checked pointer."""
        d = node.child_by_field_name("declarator")
        depth, _, inner = _unwrap(d)
        if depth == 0 or inner is None:
            return self.children(node)
        base = " ".join(self.render(c) for c in node.children if c.type != "operator" and c != d)
        return f"operator {_ptr_type(base, depth)}{self.render(inner)}"

    def _type_descriptor(self, node: Node) -> str:
        if node.parent is not None and node.parent.type == "sizeof_expression":
            return self.children(node)
        return self._declaration_with_pointers(node)

    def _call_expression(self, node: Node) -> str:
        fn = node.child_by_field_name("function")
        if fn is not None and fn.type == "template_function":
            name = fn.child_by_field_name("name")
            args = fn.child_by_field_name("arguments")
            if (
                name is not None
                and self.src(name) in _CASTS
                and args is not None
                and args.named_children
            ):
                target = args.named_children[0]
                rendered = self.render(target)
                rest = self.children(node, start=fn.end_byte)
                if _has_pointer(target):
                    return f"static_cast<{rendered}>{rest}"
                if self.src(name) == "reinterpret_cast":  # reinterpret_cast<uintptr_t>(p)
                    return f"({rendered}){rest}"
        return self.children(node)

    # -- pointer types

    def _declaration_with_pointers(self, node: Node) -> str:
        decls = node.children_by_field_name("declarator") or [
            c for c in node.children if c.type in _DECLARATORS
        ]
        if not any(_pointer_depth(d) for d in decls):
            return self.children(node)
        first = decls[0] if decls else None
        type_nodes = [c for c in node.children if first is None or c.end_byte <= first.start_byte]
        storage = [
            c
            for c in type_nodes
            if c.type in _STORAGE or c.type in ("__device__", "__constant__", "__managed__")
        ]
        base_nodes = [c for c in type_nodes if c not in storage]
        base = " ".join(self.render(c) for c in base_nodes)
        prefix = " ".join(self.src(c) for c in storage)
        tail_start = decls[-1].end_byte if decls else node.end_byte
        tail = self.gap(tail_start, node.end_byte)
        default = node.child_by_field_name("default_value")
        if default is not None and re.fullmatch(
            r"NULL|0L?|__null|\(\(void\s*\*\)\s*0\)", self.src(default).strip()
        ):
            tail = " = nullptr"  # NULL is 0L here, which converts to a checked pointer two ways
        pieces = [self._declarator(base, d) for d in decls] or [base]
        if len(pieces) == 1 or node.type in (
            "parameter_declaration",
            "optional_parameter_declaration",
            "type_descriptor",
        ):
            text = f"{prefix} {pieces[0]}".strip() + tail
        else:
            text = "; ".join(f"{prefix} {p}".strip() for p in pieces) + tail
        return text + "\n" * max(0, self.src(node).count("\n") - text.count("\n"))

    def _declarator(self, base: str, d: Node) -> str:
        """``BASE`` and one declarator, pointers rewritten: ``ptr<BASE> name = value``."""
        target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        depth, const_ptr, inner = _unwrap(target)
        if (
            depth == 0
            or inner is not None
            and inner.type
            in ("function_declarator", "parenthesized_declarator", "abstract_function_declarator")
        ):
            return f"{base} {self.render(d)}".strip()
        t = "auto" if base.strip() in ("auto", "const auto") else _ptr_type(base, depth)
        if const_ptr:
            t = f"const {t}"
        name = self.render(inner) if inner is not None else ""
        init = ""
        if value is not None:
            init = self.gap(target.end_byte, value.start_byte) + self.render(value)
        elif d.type == "init_declarator":  # brace or paren initialisers: keep as written
            init = self.gap(target.end_byte, d.end_byte)
        return f"{t} {name}{init}".rstrip()

    # -- shared memory

    def _shared(self, node: Node) -> str:
        decls = [c for c in node.children if c.type in _DECLARATORS]
        type_nodes = (
            [c for c in node.children if c.end_byte <= decls[0].start_byte] if decls else []
        )
        base = " ".join(
            self.render(c)
            for c in type_nodes
            if c.type not in _STORAGE
            and self.src(c) not in ("__shared__",)
            and not self.src(c).startswith("__align__")
            and c.type != "attribute_declaration"
        )
        extern = any(c.type in _STORAGE and self.src(c) == "extern" for c in type_nodes)
        out = []
        for d in decls:
            if d.type == "init_declarator":
                raise SourceError(
                    f"line {d.start_point[0] + 1}: a __shared__ variable cannot have an initializer"
                )
            name, dims, depth = _array_shape(self, d)
            if depth:
                raise SourceError(
                    f"line {d.start_point[0] + 1}: __shared__ pointers are not supported"
                )
            if extern:
                out.append(f"::cusim::ptr<{base}> {name} = ::cusim::dynamic_shared<{base}>()")
            elif dims:
                out.append(
                    f'auto {name} = ::cusim::shared_array<{base}, {", ".join(dims)}>({self.slot}, "{name}")'
                )
                self.slot += 1
            else:
                out.append(
                    f'{base}& {name} = ::cusim::shared_scalar<{base}>({self.slot}, "{name}")'
                )
                self.slot += 1
        text = "; ".join(out) + ";"
        return text + "\n" * self.src(node).count("\n")

    # -- kernels

    def _kernel(self, fn: Node, template: Node | None) -> str:
        decl = _function_declarator(fn)
        if decl is None:
            return ""
        name_node = decl.child_by_field_name("declarator")
        name = self.src(name_node).split("<")[0].strip()
        qualified = "::".join([s for s in self.scope if s] + [name])
        params = []
        plist = decl.child_by_field_name("parameters")
        for p in plist.named_children if plist is not None else []:
            if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
                continue
            params.append(_param(self, p))
        tparams: list[tuple[str, str]] = []
        if template is not None:
            tlist = template.child_by_field_name("parameters")
            for t in tlist.named_children if tlist is not None else []:
                pname = t.child_by_field_name("name") or next(
                    (c for c in t.named_children if c.type in ("type_identifier", "identifier")),
                    None,
                )
                kind = (
                    "typename"
                    if t.type
                    in ("type_parameter_declaration", "optional_type_parameter_declaration")
                    else self.src(t.child_by_field_name("type"))
                    if t.child_by_field_name("type")
                    else "int"
                )
                tparams.append((self.src(pname) if pname is not None else "", kind))
        self.kernels.setdefault(
            name, KernelSig(qualified, tuple(tparams), tuple(params), fn.start_point[0] + 1)
        )
        return name


def _type_name(spec: Node, template: Node | None = None) -> str | None:
    """A struct or class defined at file or namespace scope (a host context struct, say), by name:
    kept only where the kernel's code names it."""
    outer = (template or spec).parent
    if (
        outer is None
        or spec.child_by_field_name("body") is None
        or (name := spec.child_by_field_name("name")) is None
    ):
        return None
    if outer.type == "declaration_list" and (
        outer.parent is None or outer.parent.type != "namespace_definition"
    ):
        return None
    if outer.type not in ("translation_unit", "declaration_list") or name.type != "type_identifier":
        return None  # a specialization (SharedMemory<double>) goes with its primary template's name
    return name.text.decode()


def _helper_name(fn: Node) -> str | None:
    """A device function at file or namespace scope, by its plain name (None for operators, members
    and others the kernel may call without naming them)."""
    outer = (
        fn.parent.parent
        if fn.parent is not None and fn.parent.type == "template_declaration"
        else fn.parent
    )
    if outer is None or outer.type not in ("translation_unit", "declaration_list"):
        return None
    if outer.type == "declaration_list" and (
        outer.parent is None or outer.parent.type != "namespace_definition"
    ):
        return None
    decl = _function_declarator(fn)
    name = decl.child_by_field_name("declarator") if decl is not None else None
    if name is None or name.type != "identifier":
        return None
    return name.text.decode()


def _is_device(fn: Node) -> bool:
    return any(c.type in DEVICE for c in fn.children)


def _is_constexpr(fn: Node) -> bool:
    return any(c.type == "type_qualifier" and c.text == b"constexpr" for c in fn.children) or any(
        c.type == "storage_class_specifier" and c.text == b"constexpr" for c in fn.children
    )


def _qualified(node: Node, word: str) -> bool:
    return any(c.text == word.encode() for c in node.children if c.type in ("type_qualifier", word))


def _keeps_global(node: Node) -> bool:
    """File-scope declarations device code may use: device variables, constants, prototypes, types."""
    words = {
        c.text.decode()
        for c in node.children
        if c.type
        in (
            "type_qualifier",
            "storage_class_specifier",
            "__device__",
            "__constant__",
            "__managed__",
        )
    }
    prototype = any(
        c.type == "function_declarator"
        or (c.type == "pointer_declarator" and _function_declarator(c) is not None)
        for c in node.children
    )
    if prototype:  # a device function's prototype; a host function's is host code
        return bool(words & {"__device__", "__global__"}) or any(
            c.type in DEVICE for c in node.children
        )
    return bool(words & {"__device__", "__constant__", "__managed__", "const", "constexpr"})


def _function_declarator(node: Node) -> Node | None:
    decl = node.child_by_field_name("declarator") if node.type != "function_declarator" else node
    for _ in range(16):
        if decl is None or decl.type == "function_declarator":
            return decl
        decl = inner_declarator(decl)
    return None


def _pointer_depth(d: Node) -> int:
    target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
    return _unwrap(target)[0]


def _unwrap(d: Node | None) -> tuple[int, bool, Node | None]:
    """(pointer levels, whether the outermost pointer itself is const, the declarator under them)."""
    depth, const_ptr = 0, False
    while d is not None and d.type in ("pointer_declarator", "abstract_pointer_declarator"):
        depth += 1
        if depth == 1:
            const_ptr = any(c.type == "type_qualifier" and c.text == b"const" for c in d.children)
        d = d.child_by_field_name("declarator")
    return depth, const_ptr, d


def _has_pointer(node: Node) -> bool:
    return any(c.type == "abstract_pointer_declarator" for c in node.children)


def _ptr_type(base: str, depth: int) -> str:
    t = base.strip()
    for _ in range(depth):
        t = f"::cusim::ptr<{t}>"
    return t


def _array_shape(rw: _Rewriter, d: Node) -> tuple[str, list[str], int]:
    dims: list[str] = []
    depth, _, inner = _unwrap(d)
    while inner is not None and inner.type == "array_declarator":
        size = inner.child_by_field_name("size")
        dims.insert(0, rw.src(size) if size is not None else "")
        inner = inner.child_by_field_name("declarator")
    return (rw.src(inner) if inner is not None else "", [x for x in dims if x], depth)


def _param(rw: _Rewriter, p: Node) -> KernelParam:
    decl = p.child_by_field_name("declarator")
    depth, _, inner = _unwrap(decl)
    type_nodes = [c for c in p.children if decl is None or c.end_byte <= decl.start_byte]
    base = " ".join(
        rw.src(c)
        for c in type_nodes
        if c.type not in ("type_qualifier",)
        or rw.src(c) not in ("const", "volatile", "__restrict__")
    )
    const = any(rw.src(c) == "const" for c in type_nodes)
    name = rw.src(inner) if inner is not None else ""
    if inner is not None and inner.type == "reference_declarator":
        name = rw.src(inner).lstrip("&").strip()
    return KernelParam(
        name=name,
        type=rw.src(p).rsplit(name, 1)[0].strip() if name else rw.src(p),
        pointer=depth > 0,
        const=const and depth > 0,
        base=base.strip(),
    )
