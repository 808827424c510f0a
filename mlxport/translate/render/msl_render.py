"""CUDA -> MSL rewriting of kernel and helper code (types, built-ins, intrinsics, warp functions,
atomics, casts, declarations): pointers get Metal address spaces from where they point (an input
may be `device` or, under 8 elements, `constant`; locals of uncertain space become `auto`), and
CUDA built-ins stay as names, which the kernel defines once from Metal attributes."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import callee, declared_name, line, text, walk
from mlxport.translate.bind.kernel_facts import KernelFacts
from mlxport.translate.host.cexpr import Macros
from mlxport.translate.reading.calls import CALLS, rule
from mlxport.translate.reading.names import BUILTINS, RESERVED, TYPE_MAP
from mlxport.translate.render.base import (
    FnCtx,
    RenderError,
    TreeRender,
    assigned,
    call_args,
    dereferences,
    root_name,
    short,
)
from mlxport.translate.render.msl_atomics import atomic_call
from mlxport.translate.render.msl_cub import cub_call, cub_item
from mlxport.translate.render.msl_declarators import (
    declarator_kind,
    is_pointer_type,
    is_reference_type,
)
from mlxport.translate.render.msl_groups import group_call, group_declaration
from mlxport.translate.render.msl_helpers import HelperSet, helper_call, reached
from mlxport.translate.render.msl_lanes import one_lane_store
from mlxport.translate.render.msl_ptx import asm_msl
from mlxport.translate.render.msl_spaces import spaces_of
from mlxport.translate.render.msl_warp import (
    check_mask,
    full_mask,
    warp_call,
    warp_reduction,
)

_DROPPED = (
    "__device__",
    "__host__",
    "__global__",
    "__noinline__",
    "__restrict__",
    "__restrict",
    "__launch_bounds__",
)
_LIBRARIES = ("cub::", "wmma::", "nvcuda::", "thrust::")
_CUB_ITEMS = ("alias_declaration", "type_definition", "dependent_type", "qualified_identifier")
_MEMCPY_NAMES = ("memcpy", "std::memcpy", "::memcpy", "__builtin_memcpy")
_BUFFER_SPACES = frozenset({"device", "constant", "threadgroup"})  # not a thread-local value
_MSL_TYPE = re.compile(
    r"(packed_)?(half|float|int|uint|short|ushort|char|uchar|bool|long|ulong|bfloat)"
    r"([234](x[234])?)?|vec|array|atomic|simd_vote"
)
# Metal library functions a file's struct may be named like (`struct divide` of a functor set):
# under MLX's `using namespace metal` the name would be ambiguous
_MSL_FUNCTIONS = frozenset(
    re.findall(
        r"\w+",
        "abs all any clamp cross distance divide dot fma length max min mix normalize rotate "
        "saturate select sign step",
    )
)


class MslRender(TreeRender):
    def __init__(
        self,
        src: bytes,
        macros: Macros,
        helpers: dict[str, list[Node]],
        facts: KernelFacts,
        notes: list[str],
    ):
        super().__init__(src, facts, notes)
        self.macros = macros
        self.helpers = HelperSet(helpers)
        self.used_builtins: set[str] = set()
        self.ptr_casts = False
        self.copies_bytes = False  # a memcpy, rendered as mlxport_memcpy
        self.renames = _user_type_renames(src)
        self.atomic_ptrs: set[str] = set()  # pointers into atomic outputs: device atomic<T>* too
        # definitions the rendering made (name -> MSL), and the names each use asked for, in order
        self.generated: dict[str, str] = {}
        self.emitted: list[str] = []
        self.cub_aliases: dict | None = None  # msl_cub's, read from the file when first asked

    def definitions_since(self, mark: int) -> str:
        """The generated definitions the code rendered since `mark` (len(emitted)) uses, each
        under its own include guard, to go before that code."""
        return "".join(self.generated[n] for n in dict.fromkeys(self.emitted[mark:]))

    def atomic_root(self, name: str) -> bool:
        """An output MLX made atomic (every output is, once one is), or a pointer into one."""
        return self.facts.atomic and (name in self.facts.outputs or name in self.atomic_ptrs)

    def leaf(self, node: Node) -> str:
        t = text(node)
        if node.type in _DROPPED:
            return ""
        if node.type == "__forceinline__":
            return "inline"
        if node.type == "__shared__":
            return "threadgroup"
        if node.type in ("field_identifier", "namespace_identifier"):
            # a member named like an MSL keyword: `static Packed128 constant(...)`
            return leaf_name(t)
        if node.type == "identifier":
            if (
                t in self.renames
                and node.parent is not None
                and node.parent.type == "template_function"
            ):
                return self.renames[t]  # `divide<half, 8>()`: the file's struct template
            if t == "warpSize":
                return "32"
            if t in BUILTINS:
                self.used_builtins.add(t)
            if (t in RESERVED or t in TYPE_MAP) and (_cast_type(node) or _head_type(node)):
                return self.type_name(t, node)  # `(half)(x + y)`, read by the grammar as a call
            if t == "double":  # a keyword the grammar misread (`MACRO double f(...)`): a type
                return self.type_name(t, node)
            return leaf_name(t)
        if node.type in ("type_identifier", "primitive_type"):
            if t in self.renames:
                return self.renames[t]
            return self.type_name(t, node)
        if node.type == "number_literal":
            return re.sub(r"(?i)ull$", "ul", re.sub(r"(?i)(?<!u)ll$", "l", t))
        return t

    def type_name(self, t: str, node: Node) -> str:
        if t in ("double", "double2", "double4"):
            note = (
                "double computed in float: Metal has no double precision "
                "(verification shows the difference)"
            )
            if note not in self.notes:
                self.notes.append(note)
            t = t.replace("double", "float")
        g = self.facts.generic_float
        if g is not None:
            if t == "float":
                return g
            m = re.fullmatch(r"float([234])", t)
            if m:
                return f"vec<{g}, {m.group(1)}>"
        if t in ("cudaTextureObject_t", "cudaSurfaceObject_t"):
            raise RenderError(t, line(node), "textures: pass the data as a device buffer")
        return TYPE_MAP.get(t, t)

    def rule(self, node: Node, ctx: FnCtx) -> str | None:
        t = node.type
        if t in _CUB_ITEMS and (got := cub_item(self, node, ctx)) is not None:
            return got
        if t == "sized_type_specifier":
            key = re.sub(r"\s+", " ", text(node)).strip()
            return TYPE_MAP.get(key, key)
        if t == "qualified_identifier" and re.sub(r"\s+", "", text(node)) in TYPE_MAP:
            return TYPE_MAP[re.sub(r"\s+", "", text(node))]  # at::Half
        if t == "call_expression":
            return self.call(node, ctx)
        if t == "cast_expression":
            return self.cast(node, ctx)
        if t == "declaration":
            return self.declaration(node, ctx)
        if t == "namespace_alias_definition" and "cooperative_groups" in text(node):
            return ""  # group objects vanish in Metal (msl_groups)
        if t == "for_statement":
            return self.warp_reduction(node)
        if t == "expression_statement":
            return self.statement(node, ctx)
        if t == "assignment_expression" or t == "update_expression":
            return self.assignment(node, ctx)
        if t == "subscript_expression" and (got := self.read_back(node, ctx)) is not None:
            return got
        if (
            t in ("subscript_expression", "pointer_expression")
            and (got := self.atomic_load(node, ctx)) is not None
        ):
            return got
        if t == "pointer_expression" and (got := self.row_address(node, ctx)) is not None:
            return got
        if t in ("gnu_asm_expression", "asm_statement"):
            return asm_msl(self, node, ctx)
        if t in ("new_expression", "delete_expression", "throw_statement", "try_statement"):
            raise RenderError(t.replace("_", " "), line(node), "not available in Metal kernels")
        if t == "identifier" and ctx.kind == "kernel" and self.atomic_root(text(node)):
            raise RenderError(
                f"non-atomic use of output `{text(node)}`",
                line(node),
                "MLX makes every output atomic when one is, so it can only be used by atomics and "
                "plain stores: write it in a kernel of its own, apart from the atomic outputs",
            )
        if t == "qualified_identifier" and text(node).startswith(_LIBRARIES):
            raise RenderError(
                text(node).split("<")[0], line(node), "library code has no Metal form"
            )
        return None

    def call(self, node: Node, ctx: FnCtx) -> str | None:
        if (got := cub_call(self, node, ctx)) is not None:
            return got
        name = callee(node)
        args = call_args(node)
        ln = line(node)
        entry = CALLS.get(name)
        if not name.startswith("__") and name in self.helpers.nodes:
            entry = None  # the file's own WARP_SHFL, say: what it defines is what it calls
        if entry is not None and entry.needs_rewrite:
            raise RenderError(name, ln, entry.refusal())
        grouped = group_call(self, node, name, args, ctx)
        if grouped is not None:
            return grouped
        if name.startswith((*_LIBRARIES, "cooperative_groups::", "cg::")):
            raise RenderError(name.split("<")[0], ln, "library code has no Metal form")
        if name in _MEMCPY_NAMES and len(args) == 3:
            self.copies_bytes = True
            return f"mlxport_memcpy({self.joined(args, ctx)})"
        if name in ("__syncthreads", "__barrier_sync"):
            return f"threadgroup_barrier({self.facts.barrier_flags})"
        if name == "__syncwarp":
            if args:
                check_mask(args[0], name, self.macros)
            return "simdgroup_barrier(mem_flags::mem_threadgroup)"
        form = entry.form if entry is not None else ""
        if (
            form == "shuffle"
            or name == "__activemask"
            or form in ("old_shuffle", "vote")
            and len(args) >= 2
        ):
            return warp_call(self, name, args, ctx)
        if form == "atomic":
            return atomic_call(self, node, entry, args, ctx)
        if name == "sincosf" or name == "sincos":
            raise RenderError(
                name, ln, "sincos is translated only as a statement `sincosf(x, &s, &c);`"
            )
        got = self.intrinsic(node, name, args, ctx)
        if got is not None:
            return got
        if name in ("reinterpret_cast", "static_cast", "const_cast") and len(args) == 1:
            fn = node.child_by_field_name("function")
            targs = fn.child_by_field_name("arguments") if fn.type == "template_function" else None
            target = targs.named_children[0] if targs is not None and targs.named_children else None
            if target is not None and is_pointer_type(target):
                return self.pointer_cast(target, args[0], ctx)
            if target is not None and is_reference_type(target) and name != "const_cast":
                return self.reference_cast(target, args[0], ctx)
            if target is not None and name == "reinterpret_cast":
                # reinterpret_cast<uintptr_t>(p): a pointer's integer form (what an alignment
                # test reads), which Metal and the simulator give through a C cast
                return f"(({self.render(target, ctx)})({self.render(args[0], ctx)}))"
            return None
        own = reached(self.helpers.nodes, name)
        if own is not None:
            return helper_call(self, node, own, args, ctx)
        if name in _FUNCTIONAL_CASTS or name in TYPE_MAP:  # `half(x)`: a cast, not a call
            return f"{self.type_name(name, node)}({self.joined(args, ctx)})"
        return None

    def intrinsic(self, node: Node, name: str, args: list[Node], ctx: FnCtx) -> str | None:
        """Math, conversion and half-arithmetic intrinsics and make_<vector> constructors."""
        entry = rule(name)
        form = entry.form if entry is not None else ""
        if form in ("call", "cast"):
            return f"{entry.target}({self.joined(args, ctx)})"
        if form == "operator" and len(args) == 2:
            left, right = self.render(args[0], ctx), self.render(args[1], ctx)
            return f"(({left}) {entry.target} ({right}))"
        if form == "unary" and len(args) == 1:
            return entry.target.format(self.render(args[0], ctx))
        if form == "store" and len(args) == 2:
            return entry.target.format(*(self.render(a, ctx) for a in args))
        m = re.fullmatch(
            r"make_(float|int|uint|short|ushort|char|uchar|half|long|ulong)([234])", name
        )
        if m:
            base = self.type_name(m.group(1), node) if m.group(1) == "float" else m.group(1)
            ty = base + m.group(2) if not base.startswith("vec<") else base[:-2] + m.group(2) + ">"
            if base != m.group(1) and not base.startswith("vec<"):
                ty = f"vec<{base}, {m.group(2)}>"
            return f"{ty}({self.joined(args, ctx)})"
        return None

    def joined(self, args: list[Node], ctx: FnCtx) -> str:
        return ", ".join(self.render(a, ctx) for a in args)

    def warp_reduction(self, node: Node) -> str | None:
        """`for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(full, v, o);` ->
        `v = simd_sum(v);`."""
        got = warp_reduction(node, self.macros)
        if got is None:
            return None
        v, fn, call = got
        if not full_mask(call_args(call)[0], self.macros):
            return None  # a butterfly over part of a SIMD-group: each shuffle as it is
        self.notes.append(f"warp reduction loop at line {line(node)} -> {fn}")
        return f"{leaf_name(v)} = {fn}({leaf_name(v)});"

    def pointer_cast(self, type_desc: Node, arg: Node, ctx: FnCtx) -> str:
        pointee = self.pointee(type_desc, ctx)
        if spaces_of(arg, ctx) is None:
            raise RenderError(
                f"pointer cast `{short(text(type_desc))}`",
                line(type_desc),
                "the address space of its operand cannot be inferred",
            )
        self.ptr_casts = True
        return f"mlxport_ptr_cast<{pointee}>({self.render(arg, ctx)})"

    def pointee(self, type_desc: Node, ctx: FnCtx) -> str:
        parts = []
        for c in type_desc.children:
            if c.type == "abstract_reference_declarator":
                continue
            if c.type == "abstract_pointer_declarator":
                if any(x.type == "abstract_pointer_declarator" for x in c.children):
                    raise RenderError(
                        "pointer to pointer", line(c), "Metal buffers cannot hold pointers"
                    )
                continue
            if c.type == "type_qualifier" and text(c) == "const":
                continue
            parts.append(self.render(c, ctx))
        return " ".join(p for p in parts if p).strip()

    def cast(self, node: Node, ctx: FnCtx) -> str | None:
        td = node.child_by_field_name("type")
        if td is not None and is_pointer_type(td):
            return self.pointer_cast(td, node.child_by_field_name("value"), ctx)
        if td is not None and is_reference_type(td):
            return self.reference_cast(td, node.child_by_field_name("value"), ctx)
        return None

    def reference_cast(self, type_desc: Node, arg: Node, ctx: FnCtx) -> str:
        """`(float4&)x`: x's storage as a float4, through a cast of its address (which keeps
        its address space; Metal has no casts to reference types)."""
        pointee = self.pointee(type_desc, ctx)
        self.ptr_casts = True
        return f"(*mlxport_ptr_cast<{pointee}>(&({self.render(arg, ctx)})))"

    def declaration(self, node: Node, ctx: FnCtx) -> str | None:
        quals = {text(c) for c in node.children if c.type == "type_qualifier"}
        storage = {text(c) for c in node.children if c.type == "storage_class_specifier"}
        declarators = node.children_by_field_name("declarator")
        if "__shared__" in quals:
            return self.shared(node, ctx, "extern" in storage, declarators)
        grouped = group_declaration(node, ctx)
        if grouped is not None:
            return grouped
        for d in declarators:
            self.register(d, ctx)
        if not any(declarator_kind(d) in ("pointer", "reference") for d in declarators):
            return None
        return " ".join(self.one_declaration(node, d, ctx) for d in declarators)

    def one_declaration(self, node: Node, d: Node, ctx: FnCtx) -> str:
        """`[quals] type declarator;` for one declarator, with an address space for pointers."""
        kind = declarator_kind(d)
        prefix = []
        for c in node.children:
            if c == node.child_by_field_name("type") or c.type in (
                "type_qualifier",
                "storage_class_specifier",
            ):
                prefix.append(self.render(c, ctx))
        type_text = " ".join(p for p in prefix if p)
        if kind not in ("pointer", "reference"):
            return f"{type_text} {self.render(d, ctx)};"
        name = declared_name(d)
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        spaces = ctx.spaces.get(name)
        if spaces is None:
            raise RenderError(
                f"pointer `{name}`",
                line(d),
                "its address space cannot be inferred "
                "(declare it with an initializer that points into a buffer or array)",
            )
        if len(spaces) > 1:
            if value is None:
                raise RenderError(f"pointer `{name}`", line(d), "declared without an initializer")
            amp = "&" if kind == "reference" else ""
            return f"auto{amp} {name} = {self.render(value, ctx)};"
        space = next(iter(spaces))
        root = root_name(value) if value is not None else None
        if (
            ctx.kind == "kernel"
            and kind == "pointer"
            and root in self.facts.rw
            and name not in self.facts.rw
        ):
            # float* d_bt = d + b * C into a read-write d: a pointer into its input and one into its
            # output
            out = f"{name}_out"
            element = re.sub(r"\bconst\b", "", type_text).strip()
            self.facts.rw[name] = out
            if root in self.facts.read_through:
                self.facts.read_through.add(name)
            # the input side is `constant` where MLX gets fewer than 8 elements: auto takes either
            return (
                f"auto {name} = {self.render(value, ctx)}; "
                f"{space} {element}* {out} = "
                f"{self.rename_root(value, root, self.facts.rw[root], ctx)};"
            )
        if (
            ctx.kind == "kernel"
            and value is not None
            and kind == "pointer"
            and self.atomic_root(root_name(value))
        ):
            self.atomic_ptrs.add(name)  # float* dw = dwte + ix * C: points at atomics
            element = re.sub(r"\bconst\b", "", type_text).strip()
            return f"{space} atomic<{element}>* {name} = {self.raw(value, ctx)};"
        return f"{space} {type_text} {self.render(d, ctx)};"

    def register(self, d: Node, ctx: FnCtx) -> None:
        """Record the address spaces a declared name points into."""
        kind = declarator_kind(d)
        name = declared_name(d)
        if not name:
            return
        if kind == "array" or kind == "value":
            ctx.spaces[name] = frozenset({"thread"})
            return
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        got = spaces_of(value, ctx) if value is not None else None
        if got is not None:
            ctx.spaces[name] = got
        elif name in ctx.spaces:
            del ctx.spaces[name]

    def shared(self, node: Node, ctx: FnCtx, extern: bool, declarators: list[Node]) -> str:
        out = []
        ty = self.render(node.child_by_field_name("type"), ctx)
        if any(text(c) == "volatile" for c in node.children if c.type == "type_qualifier"):
            raise RenderError(
                "volatile __shared__",
                line(node),
                "warp-synchronous code on volatile shared "
                "memory has no safe Metal form: use simd_* reductions and barriers",
            )
        for d in declarators:
            name = declared_name(d)
            ctx.spaces[name] = frozenset({"threadgroup"})
            if ctx.kind == "helper":
                continue  # hoisted into the kernel, passed as a parameter
            if extern:
                size = self.facts.dynamic.get(name)
                if size is None:
                    raise RenderError(
                        f"extern __shared__ {name}[]",
                        line(node),
                        "dynamic shared memory needs a size from the launch's shared-memory "
                        "argument",
                    )
                out.append(f"threadgroup {ty} {name}[{size}];")
            else:
                out.append(f"threadgroup {ty} {self.render(d, ctx)};")
        return " ".join(out)

    def statement(self, node: Node, ctx: FnCtx) -> str | None:
        grouped = group_declaration(node, ctx)
        if grouped is not None:
            return grouped
        e = node.named_children[0] if node.named_children else None
        if (
            e is not None
            and e.type == "call_expression"
            and callee(e) in ("sincosf", "sincos", "__sincosf")
        ):
            args = call_args(e)
            if len(args) == 3 and all(
                a.type == "pointer_expression" and text(a).startswith("&") for a in args[1:]
            ):
                s = self.render(args[1].child_by_field_name("argument"), ctx)
                c = self.render(args[2].child_by_field_name("argument"), ctx)
                fn = "metal::fast::sincos" if callee(e) == "__sincosf" else "metal::sincos"
                return f"{s} = {fn}({self.render(args[0], ctx)}, {c});"
        if (got := one_lane_store(self, node, ctx)) is not None:
            return got
        if e is not None and e.type == "call_expression" and callee(e) in _DROPPED_CALLS:
            if any(n.type in ("assignment_expression", "update_expression") for n in walk(e)):
                raise RenderError(f"{callee(e)} with side effects", line(e), "move them out")
            what = "assert" if callee(e) == "__assert_fail" else callee(e)
            self.notes.append(f"{what} at line {line(e)} dropped: Metal kernels have no {what}")
            return ";"
        return None

    def assignment(self, node: Node, ctx: FnCtx) -> str | None:
        """Read-write pointers split (see TreeRender); a plain store to an atomic output is
        atomic."""
        got = super().assignment(node, ctx)
        if got is not None or ctx.kind != "kernel":
            return got
        left = assigned(node)
        if not (self.atomic_root(root_name(left)) and dereferences(left)):
            return None
        address = self.address(left, ctx)
        if node.type == "update_expression":  # out[i]++: as unsynchronised as the original's
            op, value = ("+" if "++" in text(node) else "-"), "1"
        else:
            op, value = (
                text(node.child_by_field_name("operator"))[:-1],
                self.render(node.child_by_field_name("right"), ctx),
            )
        if op:  # out[i] += v, not an atomic add: a relaxed load and store, as racy as the original
            value = f"atomic_load_explicit({address}, memory_order_relaxed) {op} ({value})"
        return f"atomic_store_explicit({address}, {value}, memory_order_relaxed)"

    def row_address(self, node: Node, ctx: FnCtx) -> str | None:
        """``&tile[y][x]`` as ``(tile[y] + x)``, ``&y[i]`` of a buffer as ``(y + (i))``: the same
        address, typed as a pointer into the array's address space, so overloads on threadgroup
        and device pointers tell it apart (``reinterpret_cast<float4*>(&y[i])`` stays a device
        pointer)."""
        inner = node.child_by_field_name("argument")
        while inner is not None and inner.type == "parenthesized_expression":
            inner = inner.named_children[-1] if inner.named_children else None
        base = inner.child_by_field_name("argument") if inner is not None else None
        if (
            text(node.child_by_field_name("operator")) != "&"
            or inner is None
            or inner.type != "subscript_expression"
            or base is None
            or not (
                base.type == "subscript_expression"
                or base.type == "identifier"
                and ctx.spaces.get(text(base), frozenset({"thread"})) <= _BUFFER_SPACES
            )
        ):
            return None
        index = inner.child_by_field_name("indices") or inner.named_children[-1]
        if index.type == "subscript_argument_list":
            if len(index.named_children) != 1:
                return None
            index = index.named_children[0]
        return (
            f"({self.render(inner.child_by_field_name('argument'), ctx)} + "
            f"({self.render(index, ctx)}))"
        )

    def atomic_load(self, node: Node, ctx: FnCtx) -> str | None:
        """A read of an atomic output's element (``out[i]``, ``*p``): a relaxed atomic load."""
        if (
            ctx.kind != "kernel"
            or not self.atomic_root(root_name(node))
            or node.type == "pointer_expression"
            and text(node.child_by_field_name("operator")) != "*"
        ):
            return None
        parent = node.parent
        if parent is not None and (
            parent.type == "update_expression"
            or parent.type == "assignment_expression"
            and parent.child_by_field_name("left") == node
            or parent.type == "pointer_expression"
            and text(parent.child_by_field_name("operator")) == "&"
        ):
            return None
        return f"atomic_load_explicit({self.address(node, ctx)}, memory_order_relaxed)"

    def address(self, lvalue: Node, ctx: FnCtx) -> str:
        """`&x[i]` for an element lvalue, without touching the atomic-output guard."""
        if (
            lvalue.type == "pointer_expression"
            and text(lvalue.child_by_field_name("operator")) == "*"
        ):
            return self.raw(lvalue.child_by_field_name("argument"), ctx)
        return f"&{self.raw(lvalue, ctx)}"

    def raw(self, node: Node, ctx: FnCtx) -> str:
        """Render allowing the atomic outputs' names."""
        saved = self.facts.atomic
        self.facts.atomic = False
        try:
            return self.render(node, ctx)
        finally:
            self.facts.atomic = saved


_DROPPED_CALLS = ("assert", "__assert_fail", "printf")  # statements with no result


def _cast_type(node: Node) -> bool:
    """``half`` in ``(half)(x)``: the parenthesized name a call is made of, which C reads as a
    cast when the name is a type."""
    paren = node.parent
    call = paren.parent if paren is not None else None
    return (
        paren is not None
        and paren.type == "parenthesized_expression"
        and call is not None
        and call.type == "call_expression"
        and call.child_by_field_name("function") == paren
    )


# the types among Metal's reserved words, which CUDA code calls as functional casts: `half(x)`
_FUNCTIONAL_CASTS = frozenset({"half", "bfloat", "uint", "ushort", "uchar", "ulong"})


def _head_type(node: Node) -> bool:
    """``__half`` in ``DS_D_INLINE __half to(float)``: with a qualifier macro read as the return
    type, the grammar leaves the type itself an identifier of an ERROR in the function's head."""
    err = node.parent
    return (
        err is not None
        and err.type == "ERROR"
        and err.parent is not None
        and err.parent.type == "function_definition"
    )


def leaf_name(v: str) -> str:
    """A CUDA name that MSL reserves gets a trailing `_`."""
    return v + "_" if v in RESERVED else v


def _user_type_renames(src: bytes) -> dict[str, str]:
    """User structs/typedefs named like MSL built-in types (a `struct half4`) or functions (a
    `struct divide`) get a trailing `_`."""
    out = {}
    for m in re.finditer(
        rb"\b(?:struct|class|union)\s+(?:alignas\s*\(\s*\w+\s*\)\s*)?(\w+)\s*\{", src
    ):
        name = m.group(1).decode()
        if _MSL_TYPE.fullmatch(name) or name in _MSL_FUNCTIONS:
            out[name] = name + "_"
    for m in re.finditer(rb"\btypedef\b[^;{}]*?\b(\w+)\s*;", src):
        name = m.group(1).decode()
        if _MSL_TYPE.fullmatch(name) and not re.search(
            rb"\b" + m.group(1) + rb"\b", m.group(0)[: -len(m.group(1)) - 1]
        ):
            out[name] = name + "_"
    return out
