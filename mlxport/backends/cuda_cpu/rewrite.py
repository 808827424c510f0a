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

import bisect
import re
from dataclasses import replace
from pathlib import Path

from tree_sitter import Node

from mlxport.backends.cuda_cpu.declarators import (
    function_declarator,
    has_pointer,
    has_qualifier,
    helper_name,
    is_constexpr,
    is_device,
    keeps_global,
    pointer_depth,
    ptr_type,
    struct_name,
    unwrap,
)
from mlxport.backends.cuda_cpu.preprocess import preprocess, stub_dir
from mlxport.backends.cuda_cpu.ptx import asm_cxx
from mlxport.backends.cuda_cpu.source import DeviceSource, KernelParam, KernelSig, SourceError
from mlxport.cuda_syntax import parse

SYNC = re.compile(
    r"__syncthreads|__syncwarp|__shfl|__ballot|__all|__any|__activemask|__match_|__reduce_\w+_sync|"
    r"cooperative_groups|thread_block|thread_group|tiled_partition|\bvolatile\b|\bcub::|arrive_and_wait"
)


def device_source(
    path: Path, compiler: tuple[str, ...], stubs: Path, includes: list[Path] = ()
) -> DeviceSource:
    text, dropped = preprocess(path, compiler, stub_dir(stubs), includes)
    # the grammar does not know __align__(n); alignas(n) means the same
    text = re.sub(r"\b__align__\s*\(", "alignas(", text)
    data = text.encode()
    tree = parse(data)
    rw = Rewriter(data)
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
        structs=rw.structs,
    )


# a kernel's name, or ~ and a device function's or type's
_MARK = re.compile(r"\x00(~?[\w:()]*)\x00")


def _typedefs(root: Node) -> dict[str, str]:
    """File-scope typedefs and aliases, and enums as their underlying type (an enum parameter is
    passed as that integer)."""
    return _typedefs_of(root.children)


def _typedefs_of(nodes: list[Node]) -> dict[str, str]:
    out = {}
    for n in nodes:
        if n.type in ("namespace_definition", "linkage_specification"):
            body = n.child_by_field_name("body")
            out |= _typedefs_of(body.children) if body is not None else {}
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
NEWLINE = b"\n"
_CASTS = {"reinterpret_cast", "static_cast", "const_cast"}


class Rewriter:
    def __init__(self, data: bytes):
        self.data = data
        self.slot = 1  # slot 0 is the executor's own (cuda_exec.h)
        self.kernels: dict[str, KernelSig] = {}
        self.structs: dict[str, tuple[str, tuple[KernelParam, ...], tuple[str, ...]]] = {}
        self.scope: list[str] = []
        # the preprocessor's line markers: (where the next line starts, its line, its file)
        self.markers = [
            (m.end() + 1, int(m.group(1)), Path(m.group(2).decode()).name)
            for m in re.finditer(rb'^# (\d+) "([^"]*)"[^\n]*$', data, re.M)
        ]

    def origin(self, offset: int) -> str:
        """``line N of F``: where ``offset`` of the preprocessed text is in the user's files."""
        i = bisect.bisect_right([m[0] for m in self.markers], offset) - 1
        if i < 0:
            return f"line {self.data.count(NEWLINE, 0, offset) + 1}"
        start, line, name = self.markers[i]
        return f"line {line + self.data.count(NEWLINE, start, offset)} of {name}"

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

    def _pointer_expression(self, node: Node) -> str:
        """`&a[i]` is `a + (i)`: taking an address reads nothing, where the subscript is an access
        the shadow of shared memory counts (`float* Kj = &sram[Br * d];` in every thread before
        thread 0 writes sram[Br * d] was named a race)."""
        arg = node.child_by_field_name("argument")
        if arg.type == "parenthesized_expression" and arg.named_child_count == 1:
            arg = arg.named_children[0]
        if (
            self.src(node.child_by_field_name("operator")) == "&"
            and arg.type == "subscript_expression"
            and arg.child_by_field_name("argument").type == "identifier"
            and len(index := arg.child_by_field_name("indices").named_children) == 1
            and node.start_point[0] == node.end_point[0]
        ):
            base = self.render(arg.child_by_field_name("argument"))
            return f"({base} + ({self.render(index[0])}))"
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
        # `= default` is host and device
        if not is_device(node) and not is_constexpr(node) and not defaulted:
            return self.blank(node)
        templated = node.parent is not None and node.parent.type == "template_declaration"
        if any(c.type == "__global__" for c in node.children):
            name = self._kernel(node, None)
            if not templated:
                return f"\x00{name}\x00{self.children(node)}\x00\x00"
        elif not templated and (helper := helper_name(node)):
            return f"\x00~{self.qualified(helper)}\x00{self.children(node)}\x00\x00"
        return self.children(node)

    def qualified(self, name: str) -> str:
        """`wt::loadFromGmem`; an anonymous namespace is `(anon)`: helpers of one name in several
        namespaces are told apart (kernels.cuh of a project includes them all)."""
        return "::".join([*(s or "(anon)" for s in self.scope), name])

    def _struct_specifier(self, node: Node) -> str:
        name = struct_name(node)
        if name:
            self._record_fields(name, node)
        return (
            f"\x00~{self.qualified(name)}\x00{self.children(node)}\x00\x00"
            if name
            else self.children(node)
        )

    def _record_fields(self, name: str, spec: Node, template: Node | None = None) -> None:
        """The data members of a struct a kernel may take by value, in order (its buffers are bound
        one by one), and the struct's template parameters."""
        body = spec.child_by_field_name("body")
        members = body.named_children if body is not None else []
        local = _typedefs_of(members)  # `using index_t = uint32_t;` inside the struct
        fields = []
        for f in members:
            if f.type != "field_declaration" or any(
                c.type in ("storage_class_specifier", "function_declarator") for c in f.children
            ):
                continue
            for d in f.children_by_field_name("declarator"):
                if d.type != "function_declarator":
                    m = _member(self, f, d)
                    fields.append(replace(m, base=local.get(m.base, m.base)))
        tparams = tuple(n for n, _ in self._template_params(template))
        self.structs.setdefault(name, (self.qualified(name), tuple(fields), tparams))

    _class_specifier = _struct_specifier

    def _template_declaration(self, node: Node) -> str:
        spec = next(
            (c for c in node.named_children if c.type in ("struct_specifier", "class_specifier")),
            None,
        )
        if spec is not None and (name := struct_name(spec, node)):
            self._record_fields(name, spec, node)
            return f"\x00~{self.qualified(name)}\x00{self.children(node)}\x00\x00"
        inner = next(
            (c for c in node.named_children if c.type in ("function_definition", "declaration")),
            None,
        )
        if inner is not None and inner.type == "function_definition":
            if not is_device(inner) and not is_constexpr(inner):
                return self.blank(node)
            if any(c.type == "__global__" for c in inner.children):
                name = self._kernel(inner, node)
                return f"\x00{name}\x00{self.children(node)}\x00\x00"
            if helper := helper_name(inner):
                return f"\x00~{self.qualified(helper)}\x00{self.children(node)}\x00\x00"
        if inner is not None and inner.type == "declaration" and not keeps_global(inner):
            return self.blank(node)  # a host function template's prototype (caffe's math)
        return self.children(node)

    def _using_declaration(self, node: Node) -> str:
        """``using std::generate;`` names something for the code after it, host code as much as
        device code: kept only where the kernel's code names it, like a helper (the header it
        comes from may have been dropped). ``using namespace ...;`` is kept as written."""
        name = next((c for c in node.named_children if c.type == "qualified_identifier"), None)
        return self._where_named(node, name.text.decode().rpartition("::")[2] if name else None)

    def _type_definition(self, node: Node) -> str:
        """A typedef, kept only where the kernel's code (or its template arguments) names it: a
        host-only one (``typedef std::chrono::steady_clock Clock;``) never blocks."""
        names = node.children_by_field_name("declarator")
        name = (
            names[0].text.decode()
            if len(names) == 1 and names[0].type == "type_identifier"
            else None
        )
        spec = node.child_by_field_name("type")
        if name and spec is not None and spec.type == "struct_specifier" and not struct_name(spec):
            self._record_fields(name, spec)  # typedef struct { ... } Params;
        return self._where_named(node, name)

    def _alias_declaration(self, node: Node) -> str:
        name = node.child_by_field_name("name")
        return self._where_named(node, name.text.decode() if name is not None else None)

    def _namespace_alias_definition(self, node: Node) -> str:
        # `namespace gflags = google;` (caffe): the aliased namespace may be a dropped header's
        name = node.child_by_field_name("name")
        return self._where_named(node, name.text.decode() if name is not None else None)

    def _where_named(self, node: Node, name: str | None) -> str:
        """A file- or namespace-scope declaration of ``name``, marked so that only a kernel that
        names it keeps it."""
        outer = node.parent
        at_scope = outer is not None and (
            outer.type == "translation_unit"
            or outer.type == "declaration_list"
            and outer.parent is not None
            and outer.parent.type == "namespace_definition"
        )
        if not name or not at_scope:
            return self.children(node)
        return f"\x00~{self.qualified(name)}\x00{self.children(node)}\x00\x00"

    def _template_instantiation(self, node: Node) -> str:
        return self.children(node) if is_device(node) else self.blank(node)

    def _declaration(self, node: Node) -> str:
        if has_qualifier(node, "__shared__"):
            return self._shared(node)
        if (
            node.parent is not None
            and node.parent.type in ("translation_unit", "declaration_list")
            and not keeps_global(node)
        ):
            return self.blank(node)
        return self._declaration_with_pointers(node)

    def _expression_statement(self, node: Node) -> str:
        # after preprocessing, a statement at file or namespace scope is a macro of a dropped
        # header (caffe's INSTANTIATE_LAYER_GPU_FUNCS(SoftmaxLayer);): host code
        if node.parent is not None and node.parent.type in ("translation_unit", "declaration_list"):
            return self.blank(node)
        return self.children(node)

    def _field_declaration(self, node: Node) -> str:
        # a struct passed by value carries its buffers as checked pointers, each bound to its own
        # buffer; a union's members stay plain (a checked pointer is not trivially constructible)
        holder = node.parent.parent if node.parent is not None else None
        if holder is not None and holder.type == "union_specifier":
            return self.children(node)
        return self._declaration_with_pointers(node)

    def _parameter_declaration(self, node: Node) -> str:
        return self._declaration_with_pointers(node)

    def _optional_parameter_declaration(self, node: Node) -> str:
        return self._declaration_with_pointers(node)

    def _operator_cast(self, node: Node) -> str:
        """``operator T *()``, the SharedMemory<T> idiom: a conversion to a checked pointer."""
        d = node.child_by_field_name("declarator")
        depth, _, inner = unwrap(d)
        if depth == 0 or inner is None:
            return self.children(node)
        base = " ".join(self.render(c) for c in node.children if c.type != "operator" and c != d)
        return f"operator {ptr_type(base, depth)}{self.render(inner)}"

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
                if has_pointer(target):
                    return f"static_cast<{rendered}>{rest}"
                if self.src(name) == "reinterpret_cast":  # reinterpret_cast<uintptr_t>(p)
                    return f"({rendered}){rest}"
        return self.children(node)

    def _gnu_asm_expression(self, node: Node) -> str:
        """Inline PTX in a function: what the executor's subset makes of it (ptx.py). Elsewhere
        it stays asm, which the build refuses."""
        outer = node.parent
        while outer is not None and outer.type != "compound_statement":
            outer = outer.parent
        if outer is None:
            return self.children(node)
        code = asm_cxx(node, self.render, self.origin(node.start_byte))
        return code + "\n" * self.src(node).count("\n")

    # -- pointer types

    def _declaration_with_pointers(self, node: Node) -> str:
        decls = node.children_by_field_name("declarator") or [
            c for c in node.children if c.type in _DECLARATORS
        ]
        if not any(pointer_depth(d) for d in decls):
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
        depth, const_ptr, inner = unwrap(target)
        if (
            depth == 0
            or inner is not None
            and inner.type
            in ("function_declarator", "parenthesized_declarator", "abstract_function_declarator")
        ):
            return f"{base} {self.render(d)}".strip()
        t = "auto" if base.strip() in ("auto", "const auto") else ptr_type(base, depth)
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
        # the declarator fields: a qualified type (cuda::barrier<...>) is no declarator
        decls = node.children_by_field_name("declarator") or [
            c for c in node.children if c.type in _DECLARATORS
        ]
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
                shape = ", ".join(dims)
                out.append(
                    f'auto {name} = ::cusim::shared_array<{base}, {shape}>({self.slot}, "{name}")'
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

    def _template_params(self, template: Node | None) -> list[tuple[str, str]]:
        """(name, kind) of each template parameter: kind "typename" or the parameter's type."""
        out: list[tuple[str, str]] = []
        tlist = template.child_by_field_name("parameters") if template is not None else None
        for t in tlist.named_children if tlist is not None else []:
            pname = t.child_by_field_name("name") or next(
                (c for c in t.named_children if c.type in ("type_identifier", "identifier")),
                None,
            )
            kind = (
                "typename"
                if t.type in ("type_parameter_declaration", "optional_type_parameter_declaration")
                else self.src(t.child_by_field_name("type"))
                if t.child_by_field_name("type")
                else "int"
            )
            out.append((self.src(pname) if pname is not None else "", kind))
        return out

    def _kernel(self, fn: Node, template: Node | None) -> str:
        decl = function_declarator(fn)
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
        tparams = self._template_params(template)
        self.kernels.setdefault(
            name, KernelSig(qualified, tuple(tparams), tuple(params), fn.start_point[0] + 1)
        )
        return name


def _array_shape(rw: Rewriter, d: Node) -> tuple[str, list[str], int]:
    dims: list[str] = []
    depth, _, inner = unwrap(d)
    while inner is not None and inner.type == "array_declarator":
        size = inner.child_by_field_name("size")
        dims.insert(0, rw.src(size) if size is not None else "")
        inner = inner.child_by_field_name("declarator")
    return (rw.src(inner) if inner is not None else "", [x for x in dims if x], depth)


def _member(rw: Rewriter, f: Node, decl: Node) -> KernelParam:
    """One declarator of a struct's field declaration (``float *y, *z;`` has two)."""
    depth, _, inner = unwrap(decl)
    while inner is not None and inner.type == "array_declarator":
        inner = inner.child_by_field_name("declarator")
    type_nodes = [
        c for c in f.children if c.end_byte <= f.children_by_field_name("declarator")[0].start_byte
    ]
    base = " ".join(rw.src(c) for c in type_nodes if rw.src(c) not in ("const", "volatile"))
    const = any(rw.src(c) == "const" for c in type_nodes)
    name = rw.src(inner) if inner is not None else ""
    written = ("const " if const else "") + base + "*" * depth
    return KernelParam(name, written, depth > 0, const and depth > 0, base)


def _param(rw: Rewriter, p: Node) -> KernelParam:
    decl = p.child_by_field_name("declarator")
    depth, _, inner = unwrap(decl)
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
