"""The MSL candidate: the kernel body for ``mx.fast.metal_kernel`` (a prologue defining the CUDA
built-ins, aliases and constants, then the rewritten body) and the header with the helpers in
every address-space variant the body calls, file-scope types and constants, and macros."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import callee, declared_name, line, text, walk
from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.kernel_facts import KernelFacts
from mlxport.translate.bind.kernel_scope import helper_nodes
from mlxport.translate.bind.ports import Ports, alias_lines
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.bind.scalars import Scalars, prologue_consts
from mlxport.translate.reading.calls import BUILTIN_NAMES, rule
from mlxport.translate.reading.names import TYPE_MAP
from mlxport.translate.render.base import (
    FnCtx,
    float_limit_guards,
    namespace_lines,
)
from mlxport.translate.render.msl_declarators import declarator_kind
from mlxport.translate.render.msl_helpers import (
    namespace_of,
    render_declaration,
    render_helper,
    variant_for,
)
from mlxport.translate.render.msl_hoisted import hoisted_decl
from mlxport.translate.render.msl_render import MslRender, leaf_name

Rendered = dict[tuple[str, int, tuple | None], str]  # (helper, definition id, variant) -> MSL

_PTR_CAST = """\
// Pointer casts that keep the operand's address space (CUDA casts name none).
template <typename U, typename P> inline device U* mlxport_ptr_cast(device P* p) { \
return (device U*)(p); }
template <typename U, typename P> inline const device U* mlxport_ptr_cast(const device P* p) {
  return (const device U*)(p);
}
template <typename U, typename P> inline const constant U* mlxport_ptr_cast(const constant P* p) {
  return (const constant U*)(p);
}
template <typename U, typename P> inline threadgroup U* mlxport_ptr_cast(threadgroup P* p) {
  return (threadgroup U*)(p);
}
template <typename U, typename P> \
inline const threadgroup U* mlxport_ptr_cast(const threadgroup P* p) {
  return (const threadgroup U*)(p);
}
template <typename U, typename P> inline thread U* mlxport_ptr_cast(thread P* p) { \
return (thread U*)(p); }
template <typename U, typename P> inline const thread U* mlxport_ptr_cast(const thread P* p) {
  return (const thread U*)(p);
}
"""
# After _PTR_CAST, which it uses.
_MEMCPY = """\
// memcpy, byte by byte (Metal has none; its compiler merges a copy of a constant size).
template <typename D, typename S> inline D mlxport_memcpy(D to, S from, size_t n) {
  auto t = mlxport_ptr_cast<uchar>(to);
  auto f = mlxport_ptr_cast<uchar>(from);
  for (size_t i = 0; i < n; ++i) t[i] = f[i];
  return to;
}
"""


def dry_render(job: KernelJob, ports: Ports, facts: KernelFacts) -> None:
    """Render once before the launch analysis, so code constructs are named before launch math."""
    infos = [job.info] + [d for d in job.cf.device_functions if d.name in job.helpers]
    facts.dynamic = {s.name: "1" for k in infos for s in k.shared if s.dynamic}
    notes, job.notes = job.notes, []
    try:
        render_msl(job, facts, Scalars(), [1, 1, 1], ports)
    finally:
        job.notes = notes


def render_msl(
    job: KernelJob, facts: KernelFacts, scalars: Scalars, block: list, ports: Ports
) -> tuple[str, str]:
    """(header, body)."""
    nodes = _called_definitions(job.node, helper_nodes(job.root, job.helpers))
    r = MslRender(job.src, job.macros, nodes, facts, job.notes)
    ctx = FnCtx("kernel", name=job.info.name)
    for p in job.info.params:
        if p.is_pointer:
            ctx.spaces[p.name] = (
                frozenset({"device", "constant"})
                if p.name in facts.inputs and p.name not in facts.rw
                else frozenset({"device"})
            )
    for out in facts.rw.values():
        ctx.spaces[out] = frozenset({"device"})
    mark = len(r.emitted)
    body = r.render(job.node.child_by_field_name("body"), ctx)
    kernel_defs = r.definitions_since(mark)
    views = _vector_views(job, facts)
    if views:  # the kernel's own block shadows each buffer with its vector view
        r.ptr_casts = True
        body = body.replace(
            "{", "{ " + " ".join(f"auto {p} = mlxport_view_{p};" for p, _ in views), 1
        )
    rendered = _render_helpers(r, nodes)
    if "blockDim" not in r.used_builtins:
        # the renderer writes to this list
        job.notes[:] = [n for n in job.notes if not n.startswith("blockDim.")]
    header = _tidy(_header(job, r, nodes, rendered) + kernel_defs)
    if r.reads_back:
        header = r.READ_BACK["msl"] + header
    prologue, inner = _prologue(job, r, block, scalars, ports)
    if inner:  # a constant named as an input it reads is declared inside the body's block
        body = body.replace("{", "{ " + " ".join(inner), 1)
    prologue += [f"auto mlxport_view_{p} = mlxport_ptr_cast<{t}>({p});" for p, t in views]
    return header, _tidy("\n".join(prologue) + "\n" + body + "\n")


def _called_definitions(kernel: Node, nodes: dict[str, list[Node]]) -> dict[str, list[Node]]:
    """The definitions the calls reach: where every call names a function as `ns::f`, the
    definitions of `f` outside namespace `ns` are another function of that name (one in an
    anonymous namespace of another included file, say) that nothing calls."""
    qualifiers: dict[str, set[str]] = {}
    for fn in [kernel, *(d for defs in nodes.values() for d in defs)]:
        for n in walk(fn):
            if n.type == "call_expression":
                qual, _, name = callee(n).split("<")[0].rpartition("::")
                qualifiers.setdefault(name, set()).add(qual)
    out = {}
    for name, defs in nodes.items():
        quals = qualifiers.get(name, set())
        kept = [d for d in defs if namespace_of(d) in quals] if "" not in quals else defs
        out[name] = kept or defs
    return out


def _vector_views(job: KernelJob, facts: KernelFacts) -> list[tuple[str, str]]:
    """Buffers the kernel takes as vectors (``const float2* x``, ``half2* y``) while MLX passes
    their scalars: (parameter, MSL vector type) for each, read and written through a cast
    pointer."""
    out = []
    for p in job.info.params:
        t = TYPE_MAP.get(p.base_type.strip(), p.base_type.strip())
        if (
            p.is_pointer
            and re.fullmatch(r"(?:float|half|bfloat|u?int|u?short|u?char)[234]", t)
            and not facts.atomic
        ):
            out.append((p.name, t))
            if p.name in facts.rw:  # the input, and the output written and read back
                out.append((facts.rw[p.name], t))
    return out


def _render_helpers(r: MslRender, nodes: dict[str, list[Node]]) -> Rendered:
    # helpers may add variants of helpers they call: render until no new variant appears
    rendered: Rendered = {}
    for _ in range(16):
        before = {k: set(v) for k, v in r.helpers.variants.items()}
        rendered = {}
        for name, defs in nodes.items():
            variants = sorted(r.helpers.variants.get(name, set()) or {None}, key=str)
            for d in defs:
                for v in sorted({variant_for(d, v) for v in variants}, key=str):
                    rendered[(name, d.id, v)] = render_helper(r, d, v)
        if {k: set(v) for k, v in r.helpers.variants.items()} == before:
            break
    return _without_collapsed(rendered, nodes)


def _without_collapsed(rendered: Rendered, nodes: dict[str, list[Node]]) -> Rendered:
    """With double computed in float, a definition the file wrote with double whose signature
    becomes another's (`double to(float)` and `float to(double)` are `float to(float)`) is
    dropped: one definition of each, the one written without double."""
    by_id = {d.id: d for defs in nodes.values() for d in defs}
    wide = {i for i, d in by_id.items() if re.search(r"\bdouble\b", text(d))}
    seen: set[tuple[str, str]] = set()
    out: Rendered = {}
    for key in sorted(rendered, key=lambda k: k[1] in wide):  # those without double first
        m = re.search(rf"^[^\n{{}};]*\b{re.escape(key[0])}\s*\([^{{;]*\{{", rendered[key], re.M)
        sig = (namespace_of(by_id[key[1]]), re.sub(r"\s+", " ", m.group()) if m else str(key))
        if key[1] in wide and sig in seen:
            continue
        seen.add(sig)
        out[key] = rendered[key]
    return {k: v for k, v in rendered.items() if k in out}


def _prologue(
    job: KernelJob, r: MslRender, block: list, scalars: Scalars, ports: Ports
) -> tuple[list[str], list[str]]:
    """(lines before the body, lines at the top of its block)."""
    lines = []
    b = r.used_builtins
    if "threadIdx" in b:
        lines.append("const uint3 threadIdx = thread_position_in_threadgroup;")
    if "blockIdx" in b:
        lines.append("const uint3 blockIdx = threadgroup_position_in_grid;")
    if "blockDim" in b:
        lines.append(f"const uint3 blockDim = uint3({', '.join(str(x) for x in block)});")
    if "gridDim" in b:
        lines.append("const uint3 gridDim = threadgroups_per_grid;")
    lines += alias_lines(ports)
    lines += namespace_lines(job.node)
    outer, inner = prologue_consts(job, scalars, cuda=False)
    lines += outer
    for owner, call in r.helpers.hoisted_calls.items():
        for o, var, decl in r.helpers.shared.get(owner, []):
            if o != owner:
                continue
            lines.append(hoisted_decl(job, r, owner, var, decl, call))
    return lines, inner


_TYPE_ITEMS = (
    "struct_specifier",
    "class_specifier",
    "union_specifier",
    "type_definition",
    "alias_declaration",
    "using_declaration",
    "enum_specifier",
)
_CONTAINERS = (
    "preproc_if",
    "preproc_ifdef",
    "preproc_else",
    "preproc_elif",
    "namespace_definition",
    "declaration_list",
)


class _FileItems:
    """What each item of the file becomes in the header: a helper as rendered, types, constants
    and macros in Metal, containers (namespaces, #if blocks) item by item, and nothing of what the
    kernel does not need."""

    def __init__(
        self, job: KernelJob, r: MslRender, nodes: dict[str, list[Node]], rendered: Rendered
    ) -> None:
        self.r, self.rendered = r, rendered
        self.ids = {d.id: name for name, defs in nodes.items() for d in defs}
        self.helper_names = set(nodes)
        self.ctx = FnCtx("helper")
        self.unused = _unused_declarations(
            job, "".join(text(d) for defs in nodes.values() for d in defs)
        )
        self.namespaces = {
            text(x.child_by_field_name("name"))
            for x in walk(job.root)
            if x.type == "namespace_definition"
        }

    def render(self, n: Node) -> str | None:
        t = n.type
        if n.id in self.ids:
            return "\n".join(v for (name, did, _), v in self.rendered.items() if did == n.id)
        if n.id in self.unused:
            return ""
        if t in ("preproc_include", "template_instantiation", "comment"):
            return ""
        if t in ("preproc_def", "preproc_function_def"):
            return _macro(n)
        if t in ("function_definition", "template_declaration"):
            return self.definition(n)
        if t == "declaration":
            return _top_declaration(n, self.r, self.ctx, self.helper_names)
        if t == "linkage_specification":
            return self.linkage(n)
        if t in _CONTAINERS:
            return self.r.copy(n, self.ctx, self.render)
        if t == "using_declaration" and not self.own_namespace(n):
            return ""  # using namespace cooperative_groups: a library Metal does not have
        if t in _TYPE_ITEMS:
            return self.r.render(n, self.ctx)
        return self.stray(n)

    def own_namespace(self, n: Node) -> bool:
        """`using` names the file's own namespace (or Metal's), or a name, not a namespace."""
        if not re.match(r"using\s+namespace\b", text(n)):
            return True
        name = re.sub(r"\s+", "", text(n))[len("usingnamespace") :].rstrip(";").split("::")[0]
        return name == "metal" or name in self.namespaces

    def definition(self, n: Node) -> str:
        """A struct template rendered (its methods are its own, not helpers); a function that is
        no helper dropped; a template declaring no function, as a declaration."""
        if n.type == "template_declaration" and any(
            c.type in ("struct_specifier", "class_specifier") for c in n.named_children
        ):
            return self.r.render(n, self.ctx)
        fn = (
            n
            if n.type == "function_definition"
            else next((c for c in walk(n) if c.type == "function_definition"), None)
        )
        if fn is None:
            return _top_declaration(n, self.r, self.ctx, self.helper_names)
        return ""

    def linkage(self, n: Node) -> str:
        """extern "C" { ... }: its items (Metal has no linkages, and templates need C++'s)."""
        body = n.child_by_field_name("body")
        if body is None:
            return ""
        if body.type != "declaration_list":  # extern "C" __global__ void k(...) {...}: one item
            got = self.render(body)
            return got if got is not None else self.r.render(body, self.ctx)
        return self.r.copy(body, self.ctx, self.render).strip()[1:-1]

    def stray(self, n: Node) -> str:
        """Names and tokens the items above do not hold, and what the grammar could not place."""
        parent = n.parent
        if (
            parent is not None
            and parent.type == "namespace_definition"
            and n == parent.child_by_field_name("name")
        ):
            return leaf_name(text(n))
        if (
            parent is not None
            and parent.type.startswith("preproc_")
            and n.start_point[0] == parent.start_point[0]
        ):
            return text(n)  # the directive's own line: #ifndef TILE, #if defined(X) && ...
        if n.type == "ERROR" and parent is not None and parent.type == "translation_unit":
            # what the grammar could not nest: its items are the file's items
            return self.r.copy(n, self.ctx, self.render)
        if parent is not None and parent.type in ("translation_unit", "ERROR"):
            # tokens the grammar could not place (`#ifdef __cplusplus` / `extern "C" {` / `#endif`
            # split across directives) and stray directives: C++ linkage and #pragma mean nothing
            return "" if n.type not in (";",) else text(n)
        # the rest is host code, checks or what the grammar misread (GGML_API prototypes, tables
        # declared through macros): nothing the kernel names, so Metal need not see it
        return "" if n.is_named else text(n)


def _header(job: KernelJob, r: MslRender, nodes: dict[str, list[Node]], rendered: Rendered) -> str:
    items = _FileItems(job, r, nodes, rendered)
    out = r.copy(job.root, items.ctx, items.render)
    out = re.sub(r"\n{3,}", "\n\n", out).strip()
    code = out + "".join(rendered.values())
    helper_src = _PTR_CAST if "mlxport_ptr_cast" in code or r.ptr_casts else ""
    if r.copies_bytes:
        helper_src = _PTR_CAST + _MEMCPY
    shims = _macro_builtins(out, {d.name for d in job.cf.device_functions})
    return (
        helper_src + float_limit_guards(out + job.src_text) + shims + "\n" + out + "\n"
    ).lstrip()


def _macro_builtins(header: str, defined: set[str]) -> str:
    """CUDA builtins that the header's macros still call (`#define IMUL(a, b) __mul24(a, b)`),
    defined as the same Metal forms the translator gives a direct call."""
    out = []
    for name in sorted(set(re.findall(r"\b(__\w+)\s*\(", header)) - defined):
        entry = rule(name)
        form = entry.form if entry is not None else ""
        if form == "operator":
            out.append(f"#define {name}(a, b) ((a) {entry.target} (b))")
        elif form == "unary":
            out.append(f"#define {name}(x) {entry.target.format('(x)')}")
        elif form == "cast":
            out.append(f"#define {name}(x) {entry.target}(x)")
        elif form == "call":
            out.append(f"#define {name}(...) {entry.target}(__VA_ARGS__)")
    return "".join(f"{line}\n" for line in out)


_TYPES = ("struct_specifier", "class_specifier", "enum_specifier", "union_specifier")


def _unused_declarations(job: KernelJob, helpers: str) -> set[int]:
    """File-scope types (structs, typedefs, enums, their templates), constants and macros that
    neither the kernel nor its helpers name, directly or through another one: headers bring many,
    and Metal need not compile them. Names in #if conditions stay, so no branch changes."""
    found: dict[int, tuple[set[str], str]] = {}  # node id -> (the names it declares, its text)
    seeds = [text(job.node), helpers]

    def visit(n: Node) -> None:
        for c in n.named_children:
            if c.type in (
                "namespace_definition",
                "declaration_list",
                "linkage_specification",
                "preproc_if",
                "preproc_ifdef",
                "preproc_else",
                "preproc_elif",
            ):
                cond = c.child_by_field_name("condition") or (
                    c.child_by_field_name("name") if c.type == "preproc_ifdef" else None
                )
                if cond is not None:
                    seeds.append(text(cond))
                visit(c)
                continue
            names = _declared_names(c)
            if names:
                found[c.id] = (names, text(c))
            elif c.type in (
                "type_definition",
                "alias_declaration",
                "using_declaration",
                "template_declaration",
            ) and not any(x.type == "function_definition" for x in c.named_children):
                seeds.append(text(c))  # kept whatever it declares: what it names is needed too

    visit(job.root)
    words = set(re.findall(r"[A-Za-z_]\w*", "\n".join(seeds)))
    used: set[int] = set()
    grew = True
    while grew:
        grew = False
        for nid, (names, body) in found.items():
            if nid not in used and names & words:
                used.add(nid)
                words |= set(re.findall(r"[A-Za-z_]\w*", body))
                grew = True
    return set(found) - used


def _declared_names(c: Node) -> set[str]:
    """What a file-scope item declares, where dropping it unused is safe (functions are kept or
    dropped by reachability elsewhere)."""
    inner = c.named_children[-1] if c.type == "template_declaration" and c.named_children else c
    if inner.type in ("preproc_def", "preproc_function_def"):
        return {text(inner.child_by_field_name("name"))}
    if inner.type == "type_definition":  # typedef void (*fn_t)(int); typedef struct X * x_t;
        return {
            next((text(x) for x in walk(d) if x.type == "type_identifier"), "")
            for d in inner.children_by_field_name("declarator")
        } - {""}
    if inner.type == "alias_declaration":
        return {text(inner.child_by_field_name("name"))}
    if inner.type == "using_declaration":  # using std::generate; (using namespace: kept)
        name = next((x for x in inner.named_children if x.type == "qualified_identifier"), None)
        return {text(name).rpartition("::")[2]} if name is not None else set()
    spec = (
        inner
        if inner.type in _TYPES
        else inner.child_by_field_name("type")
        if inner.type == "declaration"
        else None
    )
    if inner.type == "declaration" and inner.child_by_field_name("declarator") is not None:
        if any(x.type == "function_declarator" for x in walk(inner)):
            return set()
        return {declared_name(d) for d in inner.children_by_field_name("declarator")} - {""}
    if spec is None or spec.type not in _TYPES:
        return set()  # definitions and forward declarations alike
    name = spec.child_by_field_name("name")
    names = {text(name).split("<")[0]} if name is not None else set()
    if spec.type == "enum_specifier":
        names |= {text(e.child_by_field_name("name")) for e in walk(spec) if e.type == "enumerator"}
    return names


def _top_declaration(n: Node, r: MslRender, ctx: FnCtx, helpers: set[str]) -> str:
    fdecl = next((c for c in walk(n) if c.type == "function_declarator"), None)
    if fdecl is not None:
        name = text(fdecl.child_by_field_name("declarator")).split("<")[0].strip()
        if name not in helpers:
            return ""
        return render_declaration(r, n, name)
    quals = {text(c) for c in walk(n) if c.type in ("type_qualifier", "storage_class_specifier")}
    if "__constant__" in quals and n.child_by_field_name("declarator").type == "init_declarator":
        # __constant__ float taps[5] = {...}: a program-scope constant array in Metal
        return "constant " + re.sub(r"\b(__constant__|const)\b\s*", "", r.render(n, ctx))
    if quals & {"__constant__", "__device__", "__managed__", "__shared__"}:
        return ""
    own = {text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")}
    pointer = any(declarator_kind(d) == "pointer" for d in n.children_by_field_name("declarator"))
    if (
        n.type == "declaration"
        and n.child_by_field_name("declarator") is not None
        and (not own & {"const", "constexpr"} or pointer and "constexpr" not in own)
    ):
        # a host global (a handle, a workspace pointer, a name string): kernels cannot read it
        return ""
    body = r.render(n, ctx)
    if quals & {"const", "constexpr"}:
        body = "constant " + re.sub(r"\bconstexpr\b\s*", "", body).replace("const ", "", 1)
    return body


def _macro(n: Node) -> str:
    body = text(n)
    name = n.child_by_field_name("name")
    if name is not None and text(name) in BUILTIN_NAMES:
        # a portability shim redefining a CUDA builtin (for HIP, say): the builtin has its Metal
        # form
        return ""
    for bad in ("__shfl", "atomic", "asm", "__ballot"):
        if bad in body and n.type == "preproc_function_def":
            raise Untranslatable(
                f"macro `{_first_line(body)}`",
                line(n),
                f"it uses {bad}, which macros "
                "cannot carry through the translation (expand the macro)",
            )
    for k, v in {
        "__syncthreads()": "threadgroup_barrier(mem_flags::mem_threadgroup)",
        "__forceinline__": "inline",
        "__device__": "",
        "__restrict__": "",
    }.items():
        body = body.replace(k, v)
    body = re.sub(r"\b([A-Za-z_]\w*)(\s*\()", lambda m: _math_name(m.group(1)) + m.group(2), body)
    return re.sub(
        r"\b(__half|__nv_bfloat16|__half2)\b",
        lambda m: {"__half": "half", "__half2": "half2", "__nv_bfloat16": "bfloat"}[m.group()],
        body,
    )


def _math_name(name: str) -> str:
    """A math function's Metal name (``expf``: ``metal::exp``); any other name as it is."""
    entry = rule(name)
    return entry.target if entry is not None and entry.form == "call" else name


def _first_line(s: str) -> str:
    return s.strip().splitlines()[0][:60]


def _tidy(code: str) -> str:
    # a `#pragma unroll` whose loop became a single SIMD-group call would not compile
    return re.sub(r"#pragma unroll[^\n]*\n(\s*)(?=[\w.]+ = simd_\w+\()", r"\1", code)
