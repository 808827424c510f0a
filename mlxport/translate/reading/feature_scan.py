"""Finding CUDA features in function bodies and signatures (builtins, intrinsics, warp and
cooperative-groups calls, atomics, PTX, library code, features hidden in macros) with the
name tables of features.py."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import (
    bare_callee,
    collapse_spaces,
    declared_name,
    enclosing,
    line,
    source_text,
)
from mlxport.translate.reading import features as F
from mlxport.translate.reading.cudafile import Feature, GlobalVar, KernelInfo, MacroDef
from mlxport.translate.reading.parsing import timed_walk


class FeatureContext:
    """What feature detection needs to know about the file."""

    def __init__(self, macros: dict[str, MacroDef], globals_: list[GlobalVar], root: Node):
        self.macros = macros
        # constants declared with their values are a constant array in Metal too
        self.constants = {g.name for g in globals_ if g.space == "constant" and not g.initialized}
        self.device_globals = {g.name for g in globals_ if g.space in ("device", "managed")}
        self.cg_names = {"cooperative_groups", "cg"}
        self.wmma_names = {"wmma", "nvcuda::wmma"}
        for node in timed_walk(root, frozenset({"function_definition"})):
            if node.type == "namespace_alias_definition":
                target = (
                    collapse_spaces(source_text(node.named_children[-1]))
                    if node.named_children
                    else ""
                )
                alias = source_text(node.child_by_field_name("name"))
                if "cooperative_groups" in target:
                    self.cg_names.add(alias)
                if "wmma" in target:
                    self.wmma_names.add(alias)


_WMMA_NAMES = frozenset(
    {"fragment", "load_matrix_sync", "store_matrix_sync", "mma_sync", "fill_fragment"}
)


def _feature_from_name(
    name: str, ctx: FeatureContext, qualifier: str = ""
) -> tuple[str, F.Rule] | None:
    q = qualifier.rstrip(":")
    head = q.split("::")[0] if q else ""
    if q in ctx.cg_names or head in ctx.cg_names:
        rule = F.COOP.get(name)
        return (name, rule) if rule else None
    if q in ctx.wmma_names or q.endswith("wmma") or head == "wmma":
        return (f"wmma::{name}", F.WMMA) if name in _WMMA_NAMES else None
    if head == "cub":
        return f"cub::{name}", F.rule_for(f"cub::{name}")
    if head == "thrust":
        return f"thrust::{name}", F.THRUST
    if head == "cuda" and name in F.LIBCUDACXX_ASYNC_NAMES:
        return f"cuda::{name}", F.LIBCUDACXX_ASYNC
    for table in (F.BUILTINS, F.CALLS, F.TYPES):
        if name in table:
            return name, table[name]
    if name in ctx.constants:
        return "constant_memory", F.SYNTAX["constant_memory"]
    if name in ctx.device_globals:
        return "device_global", F.SYNTAX["device_global"]
    return None


_NAME_NODES = frozenset(
    {"identifier", "type_identifier", "primitive_type", "namespace_identifier", "field_identifier"}
)


def _qualifier_of(node: Node) -> str:
    parent = node.parent
    if parent is not None and parent.type == "template_type":
        node, parent = parent, parent.parent
    if parent is not None and parent.type == "template_function":
        node, parent = parent, parent.parent
    if (
        parent is None
        or parent.type != "qualified_identifier"
        or parent.child_by_field_name("scope") == node
    ):
        return ""
    parts = []
    cur = parent
    while cur is not None and cur.type == "qualified_identifier":
        scope = cur.child_by_field_name("scope")
        if scope is not None:
            parts.append(collapse_spaces(source_text(scope)))
        cur = cur.parent
    return "::".join(reversed(parts))


def function_features(
    fn_node: Node, body: Node, ctx: FeatureContext, info: KernelInfo
) -> list[Feature]:
    """The features of one function: its body, signature, launch bounds, shared arrays and
    restrict."""
    found = _body_features(body, ctx) + _signature_features(fn_node)
    for sh in info.shared:
        fname = "dynamic_shared" if sh.dynamic else "static_shared"
        detail = f"{sh.name}" + (f" bytes={sh.bytes}" if sh.bytes is not None else "")
        found.append(Feature(name=fname, category="shared", line=sh.line, detail=detail))
    if any(p.is_restrict for p in info.params):
        found.append(Feature(name="restrict", category="memory", line=info.line))
    return dedupe(found)


def _body_features(body: Node, ctx: FeatureContext) -> list[Feature]:
    found: list[Feature] = []
    grid_vars: set[str] = set()
    for node in timed_walk(body):
        t = node.type
        if t in _NAME_NODES:
            _name_feature(node, ctx, found)
        elif t == "call_expression":
            _call_feature(node, ctx, found)
        elif t == "gnu_asm_expression":
            found.append(_asm_feature(node))
        elif t == "kernel_call_syntax":
            call = node.parent.child_by_field_name("function") if node.parent else None
            found.append(
                Feature(
                    name="dynamic_parallelism",
                    category="dynamic_parallelism",
                    line=line(node),
                    detail=source_text(call).split("<")[0].strip(),  # the kernel it launches
                )
            )
        elif t == "init_declarator" and "gridDim" in source_text(node.child_by_field_name("value")):
            grid_vars.add(declared_name(node.child_by_field_name("declarator")))
        elif (
            t == "assignment_expression"
            and source_text(node.child_by_field_name("operator")) == "+="
        ):
            rhs = source_text(node.child_by_field_name("right"))
            if "gridDim" in rhs or any(
                re.search(rf"\b{re.escape(v)}\b", rhs) for v in grid_vars if v
            ):
                found.append(Feature(name="grid_stride_loop", category="pattern", line=line(node)))
        elif t == "declaration":
            _decl_feature(node, found)
    return found


def _asm_feature(node: Node) -> Feature:
    name = (
        "mma_ptx"
        if re.search(r"\bmma\.sync|\bwgmma|\bldmatrix", source_text(node))
        else "inline_ptx"
    )
    return Feature(
        name=name,
        category=F.SYNTAX[name].category,
        line=line(node),
        detail=collapse_spaces(source_text(node.child_by_field_name("assembly_code")))[:60],
    )


def _signature_features(fn_node: Node) -> list[Feature]:
    found = []
    signature = fn_node.child_by_field_name("declarator")
    for node in timed_walk(signature) if signature is not None else []:
        if node.type in ("type_identifier", "primitive_type") and source_text(node) in F.TYPES:
            rule = F.TYPES[source_text(node)]
            found.append(
                Feature(
                    name=source_text(node),
                    category=rule.category,
                    line=line(node),
                    detail="parameter",
                )
            )
    for lb in (c for c in fn_node.children if c.type == "launch_bounds"):
        found.append(
            Feature(
                name="launch_bounds",
                category="attribute",
                line=line(lb),
                detail=collapse_spaces(source_text(lb))[len("__launch_bounds__") :],
            )
        )
    return found


def _name_feature(node: Node, ctx: FeatureContext, found: list[Feature]) -> None:
    name = source_text(node)
    parent = node.parent
    if _is_callee(node):
        return  # handled as a call
    if node.type == "field_identifier":
        return
    hit = _feature_from_name(name, ctx, _qualifier_of(node))
    if (
        hit is None
        and name in ctx.macros
        and parent is not None
        and parent.type != "call_expression"
    ):
        _macro_features(name, ctx, line(node), found)
        return
    if hit is not None and hit[1] is not None:
        found.append(Feature(name=hit[0], category=hit[1].category, line=line(node)))


def _is_callee(node: Node) -> bool:
    cur = node
    for _ in range(16):
        parent = cur.parent
        if parent is None:
            return False
        if parent.type == "call_expression":
            return parent.child_by_field_name("function") == cur
        if parent.type not in ("template_function", "qualified_identifier") or cur not in (
            parent.child_by_field_name("name"),
            parent.child_by_field_name("function"),
        ):
            return False
        cur = parent
    return False


def _call_feature(call: Node, ctx: FeatureContext, found: list[Feature]) -> None:
    fn = call.child_by_field_name("function")
    if fn is None:
        return
    if fn.type == "field_expression":
        _member_call_feature(fn, line(call), found)
        return
    name = bare_callee(call)
    hit = _feature_from_name(name, ctx, _call_qualifier(fn))
    if hit is None:
        if name in ctx.macros:
            _macro_features(name, ctx, line(call), found)
        return
    feat, rule = hit
    if rule is not None:
        found.append(
            Feature(
                name=feat, category=rule.category, line=line(call), detail=_call_detail(feat, call)
            )
        )


def _member_call_feature(fn: Node, ln: int, found: list[Feature]) -> None:
    """`g.sync()` on a grid, or a cooperative-groups tile's `.shfl_down()`, `.ballot()`,
    `.sync()`..."""
    field = source_text(fn.child_by_field_name("field"))
    obj = source_text(fn.child_by_field_name("argument"))
    if field == "sync" and ("grid" in obj.lower() or "this_grid" in obj):
        found.append(Feature(name="grid.sync", category="grid_sync", line=ln, detail=obj))
    elif field == "sync":
        found.append(
            Feature(name="__syncthreads", category="barrier", line=ln, detail=f"{obj}.sync()")
        )
    elif field in ("shfl_down", "shfl_xor", "shfl_up", "shfl", "ballot", "any", "all"):
        found.append(
            Feature(name=f"__{field}_sync", category="warp", line=ln, detail=f"{obj}.{field}()")
        )


def _call_qualifier(fn: Node) -> str:
    inner = fn.child_by_field_name("name") if fn.type == "template_function" else fn
    qual = ""
    if inner is not None and inner.type == "qualified_identifier":
        qual = collapse_spaces(source_text(inner)).rsplit("::", 1)[0]
    return qual + "::" if qual else ""


def _call_detail(feat: str, call: Node) -> str:
    """The element type of an atomic, the mask and width of a shuffle or vote, a tile's size."""
    args = call.child_by_field_name("arguments")
    arg_nodes = args.named_children if args is not None else []
    if feat.split("_block")[0].split("_system")[0] in F.ATOMICS and arg_nodes:
        return _atomic_type(arg_nodes[0], call)
    if feat.startswith("__shfl") and feat.endswith("_sync") and arg_nodes:
        detail = f"mask={collapse_spaces(source_text(arg_nodes[0]))}"
        if len(arg_nodes) >= 4:
            detail += f" width={collapse_spaces(source_text(arg_nodes[3]))}"
        return detail
    if feat.startswith("__shfl") and len(arg_nodes) >= 3:
        return f"width={collapse_spaces(source_text(arg_nodes[2]))}"
    if feat in ("__ballot_sync", "__any_sync", "__all_sync") and arg_nodes:
        return f"mask={collapse_spaces(source_text(arg_nodes[0]))}"
    if feat == "tiled_partition":
        tf = next(
            (
                n
                for n in timed_walk(call.child_by_field_name("function"))
                if n.type == "template_function"
            ),
            None,
        )
        targs = tf.child_by_field_name("arguments") if tf is not None else None
        return f"size={collapse_spaces(source_text(targs))[1:-1]}" if targs is not None else ""
    return ""


def _atomic_type(arg: Node, call: Node) -> str:
    text = collapse_spaces(source_text(arg))
    cast = re.search(r"\(\s*([\w\s]+?)\s*\*\s*\)", text) or re.search(
        r"_cast<\s*([\w\s]+?)\s*\*\s*>", text
    )
    if cast:
        return cast.group(1)
    root = next((n for n in timed_walk(arg) if n.type == "identifier"), None)
    if root is None:
        return ""
    name = source_text(root)
    fn = enclosing(call, ("function_definition",))
    if fn is None:
        return ""
    for node in timed_walk(fn):
        if node.type in ("parameter_declaration", "declaration") and _declares(node, name):
            return collapse_spaces(source_text(node.child_by_field_name("type")))
    return ""


def _declares(decl: Node, name: str) -> bool:
    return any(declared_name(d) == name for d in decl.children_by_field_name("declarator"))


def _decl_feature(node: Node, found: list[Feature]) -> None:
    quals = {source_text(c) for c in node.children if c.type == "type_qualifier"}
    if "__shared__" in quals and "volatile" in quals:
        found.append(Feature(name="volatile_shared", category="shared", line=line(node)))


def _macro_features(name: str, ctx: FeatureContext, ln: int, found: list[Feature]) -> None:
    """Features hidden in a macro used inside a function body (bounded, iterative)."""
    stack, seen = [name], set()
    while stack and len(seen) < 64:
        cur = stack.pop()
        if cur in seen or cur not in ctx.macros:
            continue
        seen.add(cur)
        body = ctx.macros[cur].body
        for tok in re.finditer(r"(?:(\w+)\s*::\s*)?\b([A-Za-z_]\w*)\b", body):
            hit = _feature_from_name(
                tok.group(2), ctx, (tok.group(1) or "") + "::" if tok.group(1) else ""
            )
            if hit is not None and hit[1] is not None:
                found.append(
                    Feature(
                        name=hit[0], category=hit[1].category, line=ln, detail=f"via macro {name}"
                    )
                )
            elif tok.group(2) in ctx.macros:
                stack.append(tok.group(2))
        if re.search(r"\+=\s*[^;]*gridDim", body):
            found.append(
                Feature(
                    name="grid_stride_loop", category="pattern", line=ln, detail=f"via macro {name}"
                )
            )
        if "asm" in re.findall(r"\b\w+\b", body):
            found.append(
                Feature(name="inline_ptx", category="ptx", line=ln, detail=f"via macro {name}")
            )


def dedupe(found: list[Feature]) -> list[Feature]:
    """One feature per (name, line, detail), sorted by line."""
    seen, out = set(), []
    for f in found:
        key = (f.name, f.line, f.detail)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return sorted(out, key=lambda f: (f.line, f.name))
