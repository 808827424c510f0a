"""Device functions called from a kernel, rendered as MSL helpers: one overload per combination
of address spaces its call sites pass, the CUDA built-ins it uses passed as `uint3` parameters,
and its __shared__ arrays hoisted into the kernel (threadgroup memory is declared in kernel scope)
and passed in."""

from __future__ import annotations

import re
from itertools import product
from typing import TYPE_CHECKING

from tree_sitter import Node

from mlxport.cuda_syntax import (
    ancestors,
    callee,
    declared_name,
    function_name,
    line,
    reading_source,
    text,
    walk,
)
from mlxport.translate.reading.cudafile import TemplateParam
from mlxport.translate.reading.declarations import template_params
from mlxport.translate.reading.names import BUILTINS, TYPE_MAP
from mlxport.translate.render.base import FnCtx, RenderError, namespace_of, short
from mlxport.translate.render.msl_declarators import (
    array_size_nodes,
    declarator_kind,
    function_node,
    param_nodes,
)
from mlxport.translate.render.msl_groups import group_parameter
from mlxport.translate.render.msl_spaces import spaces_of

if TYPE_CHECKING:
    from mlxport.translate.render.msl_render import MslRender

_INDIRECT = ("pointer", "reference", "array")
_LANE_CALLS = ("__shfl", "WARP_SHFL", "__any_sync", "__all_sync", "__ballot_sync")
_GROUPS = re.compile(r"\b(?:thread_block|thread_block_tile|thread_group|this_thread_block)\b")
_CUB_REDUCE = re.compile(r"\)\.(?:Sum|Reduce)$")
_PTX_SPECIALS = {
    "laneid": {"threadIdx", "blockDim"},
    "lanemask": {"threadIdx", "blockDim"},
    "tid": {"threadIdx"},
    "ntid": {"blockDim"},
    "ctaid": {"blockIdx"},
    "nctaid": {"gridDim"},
}
# (the helper that declares it, its name, its declaration)
SharedVar = tuple[str, str, Node]


def reached(helpers: dict[str, list[Node]], called: str) -> str | None:
    """The file's function a call names (`wt::load<BM>` calls `load` in namespace wt; `std::max`
    is no `max` of the file's own), or None."""
    qual, _, name = called.split("<")[0].rpartition("::")
    if name not in helpers:
        return None
    if not qual or any(f"::{namespace_of(d)}".endswith(f"::{qual}") for d in helpers[name]):
        return name
    return None


class HelperSet:
    """The helpers (name -> definition nodes, a function_definition maybe in a
    template_declaration), what each needs passed, and the address-space variants the rendered
    calls ask for."""

    def __init__(self, nodes: dict[str, list[Node]]):
        self.nodes = nodes
        self.variants: dict[str, set[tuple]] = {}
        self.hoisted_calls: dict[str, Node] = {}  # owner -> first call node in the kernel
        self.builtins: dict[str, list[str]] = {}
        self.shared: dict[str, list[SharedVar]] = {}  # name -> [(owner, var, decl)]
        self._close_over_calls()

    def _close_over_calls(self) -> None:
        # what a helper uses, it also needs passed for the helpers it calls
        direct = {name: _direct_uses(name, defs, self.nodes) for name, defs in self.nodes.items()}
        for name in self.nodes:
            seen, stack, b, s = set(), [name], set(), []
            while stack:
                cur = stack.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                used, called, own = direct.get(cur, (set(), set(), []))
                b |= used
                s.extend(x for x in own if x not in s)
                stack.extend(called)
            self.builtins[name] = [x for x in BUILTINS if x in b]
            self.shared[name] = s

    def void_positions(self, name: str, arity: int) -> set[int]:
        """The positions of ``void*`` parameters in the definitions of ``name`` of that arity."""
        return {
            i
            for d in self.nodes.get(name, [])
            if len(params := param_nodes(d)) == arity
            for i, p in enumerate(params)
            if _points_to_void(p)
        }

    def pointer_positions(self, name: str, arity: int) -> dict[int, str]:
        out: dict[int, str] = {}
        for d in self.nodes.get(name, []):
            params = param_nodes(d)
            if len(params) != arity:
                continue
            for i, p in enumerate(params):
                k = declarator_kind(p.child_by_field_name("declarator"))
                if k in _INDIRECT:
                    out[i] = k
        return out


def _direct_uses(
    name: str, defs: list[Node], helpers: dict[str, list[Node]]
) -> tuple[set[str], set[str], list[SharedVar]]:
    """The built-ins, other helpers and own __shared__ arrays the definitions of `name` use."""
    used, called, own = set(), set(), []
    for d in defs:
        fn = function_node(d)
        body = fn.child_by_field_name("body") if fn is not None else None
        if body is None:
            continue
        if _GROUPS.search(text(fn)):
            used |= {"threadIdx", "blockDim", "blockIdx"}  # a group's members, in a helper
        for n in walk(body):
            if n.type == "identifier" and text(n) in BUILTINS:
                used.add(text(n))
            elif n.type == "call_expression" and reached(helpers, callee(n)) is not None:
                called.add(reached(helpers, callee(n)))
            elif n.type == "call_expression" and callee(n).startswith(_LANE_CALLS):
                used |= {"threadIdx", "blockDim"}  # the lane, for widths and partial masks
            elif n.type == "call_expression" and _CUB_REDUCE.search(callee(n)):
                used |= {"threadIdx", "blockDim"}  # the lane and SIMD-group of a cub reduction
            elif n.type == "gnu_asm_expression":
                used |= _ptx_builtins(text(n))
            elif n.type == "declaration" and any(
                text(c) == "__shared__" for c in n.children if c.type == "type_qualifier"
            ):
                for dd in n.children_by_field_name("declarator"):
                    if not any(o[1] == declared_name(dd) for o in own):
                        own.append((name, declared_name(dd), n))
    return used, called - {name}, own


def _ptx_builtins(asm: str) -> set[str]:
    """The CUDA built-ins the special registers an asm statement reads need in a helper."""
    out = set()
    for reg in re.findall(r"%%?(laneid|lanemask|tid|ntid|ctaid|nctaid)(?![a-z])", asm):
        out |= _PTX_SPECIALS[reg]
    return out


def variant_for(d: Node, variant: tuple | None) -> tuple | None:
    """The part of a call-site variant that matters to this definition's own pointer params."""
    params = param_nodes(d)
    if variant is None or len(variant) != len(params):
        return None
    kinds = [declarator_kind(p.child_by_field_name("declarator")) for p in params]
    out = tuple(
        v if k in _INDIRECT or _group_of(v) is not None else None
        for v, k in zip(variant, kinds, strict=True)
    )
    return out if any(out) else None


def _group_of(v: object) -> int | None:
    """The width a variant passes a group of (`group32`) at a position, or None."""
    return int(v[5:]) if isinstance(v, str) and v.startswith("group") else None


def helper_call(r: MslRender, node: Node, name: str, args: list[Node], ctx: FnCtx) -> str:
    """The call, recording the address-space variants it needs and passing built-ins and shared
    arrays."""
    helpers = r.helpers
    positions = helpers.pointer_positions(name, len(args))
    choices = []
    for i, a in enumerate(args):
        if a.type == "identifier" and text(a) in ctx.groups:  # a group to a `group_t` parameter
            choices.append([f"group{ctx.groups[text(a)]}"])
        elif i in positions:
            sp = spaces_of(a, ctx)
            if sp is None and text(a) in ("nullptr", "NULL"):
                sp = frozenset({"device"})  # a null pointer is one of any address space
            if sp is None:
                sp = frozenset({"thread"}) if positions[i] == "reference" else None
            if sp is None:
                raise RenderError(
                    f"argument `{short(text(a))}` of {name}()",
                    line(a),
                    "its address space cannot be inferred",
                )
            choices.append(sorted(sp))
        else:
            choices.append([None])
    for combo in product(*choices):
        helpers.variants.setdefault(name, set()).add(tuple(combo))
    rendered = _with_void_arguments(r, node, helpers.void_positions(name, len(args)), args, ctx)
    extra = list(helpers.builtins.get(name, []))
    r.used_builtins.update(extra)
    for owner, var, _decl in helpers.shared.get(name, []):
        extra.append(var if (ctx.kind == "helper" and ctx.name == owner) else f"{owner}_{var}")
        if ctx.kind == "kernel":
            helpers.hoisted_calls.setdefault(owner, node)
    if not extra:
        return rendered
    close = rendered.rstrip().rfind(")")
    inner = rendered[:close].rstrip()
    sep = "" if inner.endswith("(") else ", "
    return f"{inner}{sep}{', '.join(extra)}{rendered[close:]}"


def _with_void_arguments(
    r: MslRender, node: Node, voids: set[int], args: list[Node], ctx: FnCtx
) -> str:
    """The call, each argument to a ``void*`` parameter cast to a uchar pointer in its address
    space (a ``thread void*`` parameter is rendered as ``thread uchar*``)."""
    wrapped = {
        a.id: f"mlxport_ptr_cast<uchar>({r.render(a, ctx)})"
        for i, a in enumerate(args)
        if i in voids and text(a) not in ("nullptr", "NULL", "0")
    }
    if wrapped:
        r.ptr_casts = True
    for key, value in wrapped.items():
        r.override[key] = lambda _n, v=value: v
    try:
        return r.copy(node, ctx)
    finally:
        for key in wrapped:
            r.override.pop(key, None)


def render_helper(r: MslRender, d: Node, variant: tuple | None) -> str:
    """One helper definition (or template declaration) with address spaces from `variant`."""
    fn = function_node(d)
    name, decl = function_name(fn)
    ctx = FnCtx("helper", name=name)
    spaces: dict[int, str] = {}
    groups: dict[int, str] = {}
    for i, p in enumerate(param_nodes(d)):
        k = declarator_kind(p.child_by_field_name("declarator"))
        passed = _group_of(variant[i]) if variant is not None and i < len(variant) else None
        if (as_group := group_parameter(p, ctx, passed)) is not None:
            groups[p.id] = as_group
        elif k in _INDIRECT:
            space = (
                variant[i] if variant is not None and i < len(variant) and variant[i] else "thread"
            )
            spaces[p.id] = space
            ctx.spaces[declared_name(p.child_by_field_name("declarator"))] = frozenset({space})
    for owner, var, _decl in r.helpers.shared.get(name, []):
        ctx.spaces[var if owner == name else f"{owner}_{var}"] = frozenset({"threadgroup"})
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    if plist is None:
        return r.render(d, ctx)
    r.override[plist.id] = lambda n: _param_list(r, n, name, ctx, spaces, groups)
    mark = len(r.emitted)
    try:
        rendered = r.render(d, ctx)
    finally:
        r.override.pop(plist.id, None)
    return r.definitions_since(mark) + rendered


def render_declaration(r: MslRender, n: Node, name: str) -> str:
    """A helper's declaration without a body (the primary template its explicit specializations
    specialize, say) once for each address-space variant of its arity the definitions are
    rendered in, so that each specialization matches one."""
    fdecl = next(c for c in walk(n) if c.type == "function_declarator")
    plist = fdecl.child_by_field_name("parameters")
    params = [
        p
        for p in (plist.named_children if plist is not None else [])
        if p.type in ("parameter_declaration", "optional_parameter_declaration")
    ]
    if plist is None:
        return r.render(n, FnCtx("helper", name=name))
    # no call of this arity: rendered as the definitions are, every pointer a thread one
    variants = [v for v in r.helpers.variants.get(name, set()) if len(v) == len(params)] or [
        (None,) * len(params)
    ]
    out = []
    for variant in sorted(variants, key=str):
        ctx = FnCtx("helper", name=name)
        spaces = {
            p.id: variant[i] or "thread"
            for i, p in enumerate(params)
            if declarator_kind(p.child_by_field_name("declarator")) in _INDIRECT
        }
        r.override[plist.id] = lambda x, c=ctx, sp=spaces: _param_list(r, x, name, c, sp, {})
        try:
            out.append(r.render(n, ctx))
        finally:
            r.override.pop(plist.id, None)
    return "\n".join(dict.fromkeys(out))


def _param_list(
    r: MslRender,
    plist: Node,
    name: str,
    ctx: FnCtx,
    spaces: dict[int, str],
    groups: dict[int, str],
) -> str:
    body = r.copy(
        plist,
        ctx,
        lambda c: _spaced_param(r, c, spaces[c.id], ctx) if c.id in spaces else groups.get(c.id),
    )
    extra = [f"uint3 {b}" for b in r.helpers.builtins.get(name, [])]
    for owner, var, decl_node in r.helpers.shared.get(name, []):
        pname = var if owner == name else f"{owner}_{var}"
        ty = _shared_type(r, decl_node, plist, owner, ctx)
        extra.append(_shared_param(r, decl_node, var, pname, ty, owner == name, ctx))
    if not extra:
        return body
    inner = body.rstrip()[:-1].rstrip()
    if inner.endswith("(void"):
        inner = inner[:-4]
    sep = "" if inner.endswith("(") else ", "
    return f"{inner}{sep}{', '.join(extra)})"


def _spaced_param(r: MslRender, p: Node, space: str, ctx: FnCtx) -> str:
    """A pointer parameter in its address space; a ``thread void*`` one as ``thread uchar*``
    (its callers cast what they pass), as a thread pointer is cast only from one to plain
    values."""
    rendered = f"{space} {r.copy(p, ctx)}"
    if space == "thread" and _points_to_void(p):
        rendered = re.sub(r"\bvoid\b", "uchar", rendered, count=1)
    return rendered


def _points_to_void(p: Node) -> bool:
    t = p.child_by_field_name("type")
    return (
        t is not None
        and text(t) == "void"
        and declarator_kind(p.child_by_field_name("declarator")) == "pointer"
    )


def _shared_type(r: MslRender, decl_node: Node, plist: Node, owner: str, ctx: FnCtx) -> str:
    """The element type of ``owner``'s __shared__ array in the helper whose parameters ``plist``
    are: the owner's template typename as this helper's call instantiates it (`_block<float, ...>`
    in `block`), else as declared."""
    ty = r.render(decl_node.child_by_field_name("type"), ctx)
    fn = next((a for a in ancestors(plist) if a.type == "function_definition"), None)
    call = call_toward(r, fn, owner) if fn is not None and function_name(fn)[0] != owner else None
    if call is None:
        return ty
    subst, _ = bind_template(params_of(r.src, decl_node), args_toward(r, call, owner) or [])
    got = re.sub(r"^\((\w+)\)$", r"\1", subst.get(ty.strip(), ""))
    return TYPE_MAP.get(got, got) if got else ty


def _shared_param(
    r: MslRender, decl_node: Node, var: str, pname: str, ty: str, own: bool, ctx: FnCtx
) -> str:
    d = next(x for x in decl_node.children_by_field_name("declarator") if declared_name(x) == var)
    dims = array_size_nodes(d)
    if not dims and declarator_kind(d) != "array":  # `extern __shared__ U buf[]` is an array
        return f"threadgroup {ty}& {pname}"
    if not dims:
        return f"threadgroup {ty}* {pname}"
    if len(dims) == 1:
        return f"threadgroup {ty}* {pname}"
    if not own:
        raise RenderError(
            f"__shared__ {var}",
            line(decl_node),
            "a multi-dimensional shared array passed through several helper functions",
        )
    rest = "".join(f"[{r.render(x, ctx)}]" for x in dims)
    return f"threadgroup {ty} (&{pname}){rest}"


# Template arguments along chains of helper calls: a helper's __shared__ array hoisted into the
# kernel has the type and size the helper is instantiated with where the kernel's call reaches it.
_CHAIN = 8  # helpers a call may go through to the one declaring the array


def params_of(src: bytes, inside: Node) -> list[TemplateParam]:
    """The template parameters of the function definition ``inside`` is (or is in)."""
    fn = next((a for a in [inside, *ancestors(inside)] if a.type == "function_definition"), None)
    if fn is None:
        return []
    with reading_source(src):
        return template_params(fn)


def bind_template(
    params: list[TemplateParam], args: list[str]
) -> tuple[dict[str, str], dict[str, int]]:
    """(each template parameter's argument, a default where the call gives none; a parameter
    pack's size)."""
    subst: dict[str, str] = {}
    packs: dict[str, int] = {}
    for i, p in enumerate(params):
        if p.variadic:
            subst[p.name] = ", ".join(args[i:])
            packs[p.name] = len(args[i:])
            break
        if i < len(args):
            subst[p.name] = args[i]
        elif p.default is not None:
            subst[p.name] = substituted(p.default, subst)
    return subst, packs


def substituted(src: str, subst: dict[str, str]) -> str:
    return re.sub(
        r"\b\w+\b", lambda m: f"({subst[m.group()]})" if m.group() in subst else m.group(), src
    )


def _template_args(call: Node) -> list[str]:
    """The explicit template arguments of a call (`ns::f<A, B>(x)`: A and B)."""
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None or fn.type != "template_function":
        return []
    targs = fn.child_by_field_name("arguments")
    return [text(a) for a in targs.named_children] if targs is not None else []


def args_toward(r: MslRender, call: Node, owner: str) -> list[str] | None:
    """The template arguments ``owner`` is instantiated with where ``call`` reaches it, in terms of
    the caller's names: the call's own, or through each helper on the way, its call's arguments
    in terms of its own parameters (defaults included)."""
    name, args = reached(r.helpers.nodes, callee(call)), _template_args(call)
    for _ in range(_CHAIN):
        if name is None:
            return None
        if name == owner:
            return args
        step = _next_call(r, name, args, owner)
        if step is None:
            return None
        inner, subst = step
        name = reached(r.helpers.nodes, callee(inner))
        args = [substituted(a, subst) for a in _template_args(inner)]
    return None


def call_toward(r: MslRender, fn: Node, owner: str) -> Node | None:
    """The call in the definition ``fn`` on the way to ``owner`` (which declares a __shared__
    array ``fn`` passes on)."""
    for n in walk(fn):
        if n.type != "call_expression":
            continue
        called = reached(r.helpers.nodes, callee(n))
        if called == owner or any(o == owner for o, _, _ in r.helpers.shared.get(called, [])):
            return n
    return None


def _next_call(
    r: MslRender, name: str, args: list[str], owner: str
) -> tuple[Node, dict[str, str]] | None:
    """In the definition of ``name`` the call's ``args`` fit, the call on the way to ``owner``
    and the definition's template parameters bound to ``args``."""
    for d in r.helpers.nodes.get(name, []):
        fn = function_node(d)
        params = params_of(r.src, fn) if fn is not None else []
        required = [p for p in params if p.default is None and not p.variadic]
        if fn is None or len(args) < len(required):
            continue
        if len(args) > len(params) and not any(p.variadic for p in params):
            continue
        inner = call_toward(r, fn, owner)
        if inner is not None:
            return inner, bind_template(params, args)[0]
    return None
