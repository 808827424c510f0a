"""Warp operations in Metal terms: SIMD functions act on all active lanes with a width of 32, so
masks must be full and shuffle widths 32; `for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(...)`
loops are recognised as whole-SIMD-group reductions."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import callee, line, parse_expr, text, walk
from mlxport.translate.host.cexpr import CExprError, CToAst, Macros, const_value, simplify
from mlxport.translate.render.base import RenderError

_FULL_MASKS = (
    "__activemask()",
    "0xffffffff",
    "0xffffffffu",
    "0xFFFFFFFF",
    "0xFFFFFFFFu",
    "-1",
    "~0",
    "~0u",
)
_SHUFFLE = r"__shfl_(?:xor|down)_sync\(([^,()]+),(\w+),(\w+)\)"
_REDUCTIONS = [
    (rf"(\w+)\+={_SHUFFLE};", "simd_sum"),
    (rf"(\w+)=(\w+)\+{_SHUFFLE};", "simd_sum"),
    (rf"(\w+)=(?:fmaxf|max|metal::max)\((\w+),{_SHUFFLE}\);", "simd_max"),
    (rf"(\w+)=(?:fminf|min|metal::min)\((\w+),{_SHUFFLE}\);", "simd_min"),
]


def _value(node: Node | None, macros: Macros) -> int | bool | None:
    """The constant value of an expression, #defines expanded (None when it has none)."""
    if node is None:
        return None
    try:
        return const_value(simplify(CToAst(lambda _n: None, macros, lambda _t: None).node(node)))
    except CExprError:
        return None


def check_mask(mask: Node, name: str, macros: Macros) -> None:
    t = text(mask).strip()
    if t in _FULL_MASKS:
        return
    v = _value(mask, macros)
    if v is None and re.fullmatch(r"\w+\s*\(\s*\)", t) and "activemask" in t:
        return
    if not isinstance(v, int) or (v & 0xFFFFFFFF) != 0xFFFFFFFF:
        raise RenderError(
            f"{name} with mask {t}",
            line(mask),
            "partial-mask warp operations have no Metal form (SIMD functions act on all "
            "active lanes)",
        )


def _template_default(node: Node) -> Node | None:
    """``template <int width = WARP_SIZE> __device__ float reduce(...)``: the default of the
    template parameter `node` names, where no call in the file gives that function template
    arguments."""
    decl = next((a for a in _ancestors(node) if a.type == "template_declaration"), None)
    params = decl.child_by_field_name("parameters") if decl is not None else None
    fn = (
        next((c for c in decl.named_children if c.type == "function_definition"), None)
        if decl
        else None
    )
    declarator = fn.child_by_field_name("declarator") if fn is not None else None
    fname = (
        text(declarator.child_by_field_name("declarator"))
        if declarator is not None and declarator.type == "function_declarator"
        else None
    )
    if params is None or not fname:
        return None
    root = decl
    while root.parent is not None:
        root = root.parent
    if re.search(rf"\b{re.escape(fname)}\s*<", text(root)):
        return None
    for p in params.named_children:
        if p.type == "optional_parameter_declaration" and text(
            p.child_by_field_name("declarator")
        ) == text(node):
            return p.child_by_field_name("default_value")
    return None


def _ancestors(node: Node):
    while node.parent is not None:
        node = node.parent
        yield node


def check_width(width: Node, name: str, macros: Macros) -> None:
    if width.type == "identifier" and (default := _template_default(width)) is not None:
        width = default
    if _value(width, macros) != 32 and text(width).strip() not in ("warpSize", "WARP_SIZE"):
        raise RenderError(
            f"{name} with width {text(width)}",
            line(width),
            "sub-warp shuffle widths have no direct Metal form",
        )


def warp_reduction(loop: Node, macros: Macros) -> tuple[str, str, Node] | None:
    """(the reduced variable, the simd_* function, the shuffle call) of a butterfly reduction
    loop."""
    var = _halving_loop_var(loop, macros)
    body = loop.child_by_field_name("body")
    if var is None or body is None:
        return None
    stmt = (
        body.named_children[0]
        if body.type == "compound_statement" and len(body.named_children) == 1
        else body
    )
    s = re.sub(r"\s", "", text(stmt))
    for pat, fn in _REDUCTIONS:
        mm = re.fullmatch(pat, s)
        if not mm:
            continue
        g = mm.groups()
        v, vals, offset = g[0], [x for x in g[1:-3]] + [g[-2]], g[-1]
        if offset != var or any(x != v for x in vals):
            return None
        call = next(
            c for c in walk(stmt) if c.type == "call_expression" and callee(c).startswith("__shfl")
        )
        return v, fn, call
    return None


def _halving_loop_var(loop: Node, macros: Macros) -> str | None:
    """The variable of `for (v = 16; v > 0; v >>= 1)` and its spellings."""
    init, cond, upd = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if init is None or cond is None or upd is None:
        return None
    m = re.fullmatch(
        r"(?:int|unsigned|uint|unsigned int)?\s*(\w+)\s*=\s*(.+?);?", text(init).strip()
    )
    if not m:
        return None
    var = m.group(1)
    start = parse_expr(m.group(2))
    if start is None or _value(start, macros) != 16:
        return None
    if re.sub(r"\s", "", text(cond)) not in (f"{var}>0", f"{var}>=1", f"0<{var}"):
        return None
    if re.sub(r"\s", "", text(upd)) not in (
        f"{var}>>=1",
        f"{var}/=2",
        f"{var}={var}/2",
        f"{var}={var}>>1",
    ):
        return None
    return var
