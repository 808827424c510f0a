"""The structure of a parsed .cu file: its top-level definitions (in the #if branches active
without -D flags), the kernels and device functions with their read/write analysis and calls,
globals, includes, launches and host features, assembled into a CudaFile."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tree_sitter import Node, Tree

from mlxport.cuda_syntax import (
    ancestors,
    bare_callee,
    collapse_spaces,
    line,
    source_function_name,
    source_text,
)
from mlxport.translate.reading.cudafile import CudaFile, Feature, KernelInfo, MacroDef
from mlxport.translate.reading.declarations import (
    global_vars,
    params,
    shared_arrays,
    template_params,
)
from mlxport.translate.reading.feature_scan import FeatureContext, function_features
from mlxport.translate.reading.host_code import host_features, launch_sites
from mlxport.translate.reading.param_access import analyze_rw
from mlxport.translate.reading.parsing import timed_walk
from mlxport.translate.reading.syntax_checks import (
    check_function,
    check_stray_globals,
    no_kernel_error,
)

_DESCEND = frozenset(
    {
        "translation_unit",
        "namespace_definition",
        "declaration_list",
        "linkage_specification",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "template_declaration",
        "ERROR",
        "class_specifier",
        "struct_specifier",
        "field_declaration_list",
    }
)
_CUDA_QUALS = (
    "__global__",
    "__device__",
    "__host__",
    "__forceinline__",
    "__noinline__",
    "static",
    "inline",
)
_PREDEFINED = frozenset(
    {"__CUDACC__", "__NVCC__", "__CUDA_ARCH__", "__cplusplus", "__CUDA_RUNTIME_H__"}
)

# (function_definition, its qualifiers, whether it sits in an active #if branch)
_Definition = tuple[Node, list[str], bool]


def build_file(tree: Tree, file: str, macros: list[MacroDef], spans: list[tuple]) -> CudaFile:
    """The CudaFile of a tree parsed from `macros`' expansion (`spans`: where each expansion
    sits)."""
    root = tree.root_node
    defines = {
        m.name: (m.body if m.params is None else f"({', '.join(m.params)}) {m.body}")
        for m in macros
    }
    object_defines = {m.name: m.body for m in macros if m.params is None}
    cf = CudaFile(path=file, defines=defines, macros=macros, includes=_includes(root))
    definitions, instantiations = [], []
    for node, active in _top_level(root, macros):
        if node.type == "function_definition":
            quals = _qualifiers(node)
            if "__global__" in quals or "__device__" in quals:
                definitions.append((node, quals, active))
        elif node.type == "template_instantiation":
            instantiations.append(node)
        elif node.type == "declaration":
            cf.globals.extend(global_vars(node))
    check_stray_globals(root, file)
    ctx = FeatureContext({m.name: m for m in macros}, cf.globals, root)
    infos = _read_functions(definitions, file, object_defines, spans, ctx)
    _analyze_access(infos)
    _attach_calls(infos, macros)
    _attach_instantiations(infos, instantiations)
    _add_functions(cf, infos)
    if not cf.kernels:
        raise no_kernel_error(tree, file)
    cf.launches = launch_sites(root)
    ranges = [(n.start_byte, n.end_byte) for _, n in infos]
    cf.features = host_features(root, ranges) + [
        Feature(
            name="constant_memory" if g.space == "constant" else "device_global",
            category="memory",
            line=g.line,
            detail=g.name,
        )
        for g in cf.globals
        if g.space != "shared"
    ]
    return cf


def _top_level(root: Node, macros: list[MacroDef]) -> Iterator[tuple[Node, bool]]:
    """Definitions, declarations and instantiations outside function bodies, with whether they sit
    in the branch of an #ifdef/#ifndef/#if defined() that is active without -D flags."""
    stack = [(root, True)]
    while stack:
        node, active = stack.pop()
        if node.type in (
            "function_definition",
            "template_instantiation",
            "declaration",
            "field_declaration",
        ):
            yield node, active
            continue
        if node.type not in _DESCEND or _is_if0(node):
            continue
        taken = _branch_taken(node, macros)
        alternative = node.child_by_field_name("alternative")
        for child in reversed(node.children):
            branch = active if taken is None else active and (taken != (child == alternative))
            stack.append((child, branch))


def _is_if0(node: Node) -> bool:
    return (
        node.type == "preproc_if"
        and source_text(node.child_by_field_name("condition")).strip() == "0"
    )


def _branch_taken(node: Node, macros: list[MacroDef]) -> bool | None:
    """True/False when a conditional's first branch is (in)active; None when unknown or not one."""
    if node.type not in ("preproc_ifdef", "preproc_if"):
        return None
    if node.type == "preproc_ifdef":
        name = source_text(node.child_by_field_name("name"))
        negate = source_text(node.children[0]).strip() == "#ifndef"
    else:
        condition = source_text(node.child_by_field_name("condition"))
        m = re.fullmatch(r"\s*(!?)\s*defined\s*\(?\s*(\w+)\s*\)?\s*", condition)
        if m is None:
            return None
        name, negate = m.group(2), bool(m.group(1))
    ln = line(node)
    defined = name in _PREDEFINED or any(mac.name == name and mac.line < ln for mac in macros)
    return defined != negate


def _qualifiers(fn: Node) -> list[str]:
    return [c.type for c in fn.children if c.type in _CUDA_QUALS] + [
        source_text(c) for c in fn.children if c.type == "storage_class_specifier"
    ]


def _namespace(node: Node) -> str:
    parts = [
        source_text(a.child_by_field_name("name"))
        for a in ancestors(node)
        if a.type == "namespace_definition"
    ]
    return "::".join(reversed([p for p in parts if p]))


def _includes(root: Node) -> list[str]:
    return [
        source_text(n.child_by_field_name("path")).strip('"<>')
        for n in timed_walk(root, frozenset({"function_definition"}))
        if n.type == "preproc_include"
    ]


def _read_functions(
    definitions: list[_Definition],
    file: str,
    defines: dict[str, str],
    spans: list[tuple],
    ctx: FeatureContext,
) -> list[tuple[KernelInfo, Node]]:
    active_names = {source_function_name(n)[0] for n, _, active in definitions if active}
    infos = []
    for node, quals, active in definitions:
        if not active and source_function_name(node)[0] in active_names:
            continue  # the other branch of an #ifdef defines it
        info = _function(node, quals, file, defines, spans, ctx)
        if info is not None:
            infos.append((info, node))
    return infos


def _function(
    node: Node,
    quals: list[str],
    file: str,
    defines: dict[str, str],
    spans: list[tuple],
    ctx: FeatureContext,
) -> KernelInfo | None:
    name, decl = source_function_name(node)
    kind = "global" if "__global__" in quals else "device"
    top = node.child_by_field_name("declarator")
    if decl is None and kind == "device" and top is not None and top.type == "operator_cast":
        return None  # `operator T*()` of a struct: called by conversion, never by name
    warnings = check_function(node, name, kind, file)
    if decl is None or not name:
        return None
    body = node.child_by_field_name("body")
    info = KernelInfo(
        name=name,
        kind=kind,
        line=line(node),
        template_params=template_params(node),
        params=params(decl),
        body=source_text(body),
        body_line=line(body),
        qualifiers=quals,
        namespace=_namespace(node),
        warnings=warnings,
    )
    info.launch_bounds = [
        collapse_spaces(source_text(c))[len("__launch_bounds__") :]
        for c in node.children
        if c.type == "launch_bounds"
    ]
    target = decl.child_by_field_name("declarator")
    if target is not None and target.type == "template_function":
        info.specialization = collapse_spaces(source_text(target.child_by_field_name("arguments")))
    info.macro = next((m for s, e, m in spans if s <= node.start_byte < e), None)
    info.shared = shared_arrays(body, defines)
    info.features = function_features(node, body, ctx, info)
    return info


def _analyze_access(infos: list[tuple[KernelInfo, Node]]) -> None:
    known: dict[str, KernelInfo] = {}
    for info, _ in infos:
        if info.kind == "device":
            known.setdefault(info.name, info)
            known.setdefault(f"{info.name}/{len(info.params)}", info)  # overloads, by arity
    # device functions first, twice, so callers see their callees' read/write results
    order = [x for x in infos if x[0].kind == "device"] * 2 + [
        x for x in infos if x[0].kind == "global"
    ]
    for info, node in order:
        for p in info.params:
            p.read = p.written = False
            p.unknown_calls = []
        analyze_rw(info, node.child_by_field_name("body"), known)


def _attach_calls(infos: list[tuple[KernelInfo, Node]], macros: list[MacroDef]) -> None:
    names = {i.name for i, _ in infos if i.kind == "device"}
    through = _macro_names(macros)
    for info, node in infos:
        calls = set()
        for c in timed_walk(node.child_by_field_name("body")):
            if c.type == "call_expression":
                calls.add(bare_callee(c))
            if c.type == "identifier" and source_text(c) in through:
                calls |= through[source_text(c)]  # `#define ACT gelu_tanh` ... ACT(x)
        info.calls = sorted(calls & names - {info.name})


def _macro_names(macros: list[MacroDef]) -> dict[str, set[str]]:
    """Each macro's name -> the names its expansion holds, through the macros it uses in turn."""
    direct = {m.name: set(re.findall(r"[A-Za-z_]\w*", m.body)) for m in macros}
    out: dict[str, set[str]] = {}
    for name in direct:
        seen, stack = set(), [name]
        while stack:
            cur = stack.pop()
            for n in direct.get(cur, set()) - seen:
                seen.add(n)
                stack.append(n)
        out[name] = seen
    return out


def _attach_instantiations(infos: list[tuple[KernelInfo, Node]], nodes: list[Node]) -> None:
    by_name = {i.name: i for i, _ in infos}
    for node in nodes:
        decl = node.child_by_field_name("declarator")
        target = decl.child_by_field_name("declarator") if decl is not None else None
        if target is None or target.type != "template_function":
            continue
        info = by_name.get(collapse_spaces(source_text(target.child_by_field_name("name"))))
        if info is not None:
            info.instantiations.append(
                collapse_spaces(source_text(target.child_by_field_name("arguments")))
            )


def _add_functions(cf: CudaFile, infos: list[tuple[KernelInfo, Node]]) -> None:
    seen: set[tuple] = set()
    for info, _ in infos:
        key = (info.kind, info.name, tuple(p.type for p in info.params))
        if key in seen:
            continue  # the same function in both branches of an #if
        seen.add(key)
        (cf.kernels if info.kind == "global" else cf.device_functions).append(info)
        cf.warnings.extend(info.warnings)
