"""Warp operations in Metal terms: SIMD functions act on the lanes that call them (the lanes CUDA
requires a mask to name) with a width of 32; a shuffle within segments of fewer lanes is a
simd_shuffle from the lane CUDA reads, a vote over part of a warp tests each lane's bit of the
mask, and `for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(full, ...)` loops are recognised as
whole-SIMD-group reductions."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import callee, line, parse_expr, text, walk
from mlxport.translate.host.cexpr import CExprError, CToAst, Macros, const_value, simplify
from mlxport.translate.reading.calls import CALLS, Call
from mlxport.translate.render.base import FnCtx, RenderError

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


def full_mask(mask: Node, macros: Macros) -> bool:
    """The mask names every lane: a literal, a #define, or a local constant initialised to one
    (`unsigned mask = 0xffffffff;` never assigned again)."""
    t = text(mask).strip()
    if t in _FULL_MASKS:
        return True
    if re.fullmatch(r"\w+\s*\(\s*\)", t) and "activemask" in t:
        return True
    if mask.type == "identifier" and (init := _local_constant(mask)) is not None:
        return full_mask(init, macros)
    v = _value(mask, macros)
    return isinstance(v, int) and (v & 0xFFFFFFFF) == 0xFFFFFFFF


def check_mask(mask: Node, name: str, macros: Macros) -> None:
    if not full_mask(mask, macros):
        raise RenderError(
            f"{name} with mask {text(mask).strip()}",
            line(mask),
            "a barrier of part of a SIMD-group has no Metal form",
        )


def _local_constant(name: Node) -> Node | None:
    """The initializer of the local variable `name` refers to, where the function assigns it
    nowhere else."""
    fn = next((a for a in _ancestors(name) if a.type == "function_definition"), None)
    if fn is None:
        return None
    inits = []
    for n in walk(fn):
        if n.type == "init_declarator" and text(n.child_by_field_name("declarator")) == text(name):
            inits.append(n.child_by_field_name("value"))
        elif n.type in ("assignment_expression", "update_expression") and text(
            n.child_by_field_name("left") or n.child_by_field_name("argument")
        ) == text(name):
            return None
    return inits[0] if len(inits) == 1 else None


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


def shuffle_width(width: Node, name: str, macros: Macros) -> int | None:
    """The segment width of a shuffle: 32, a smaller power of two (lane arithmetic), or None
    where it is not a constant (the lane arithmetic reads it at run time)."""
    if width.type == "identifier" and (default := _template_default(width)) is not None:
        width = default
    if text(width).strip() in ("warpSize", "WARP_SIZE"):
        return 32
    w = _value(width, macros)
    if w is None:
        return None
    if not isinstance(w, int) or isinstance(w, bool) or w < 1 or w > 32 or w & (w - 1):
        raise RenderError(
            f"{name} with width {text(width)}",
            line(width),
            "CUDA shuffle widths are powers of two up to 32",
        )
    return w


def segment_shuffle(kind: str, value: str, arg: str, width: int | str, lane: str) -> str:
    """A shuffle within segments of `width` lanes (a number, or the C text of one) as simd_shuffle
    from the lane CUDA reads: a source outside the caller's segment leaves the caller's own
    value, as in CUDA."""
    if isinstance(width, int):
        low, high, w = f"{width - 1}u", f"{32 - width}u", f"{width}u"
    else:
        w = f"uint({width})"
        low, high = f"({w} - 1u)", f"(31u & ~({w} - 1u))"
    a = f"uint({arg})"
    source = {
        "idx": f"({lane} & {high}) | ({a} & {low})",
        "up": f"({lane} & {low}) >= {a} ? {lane} - {a} : {lane}",
        "down": f"({lane} & {low}) + {a} < {w} ? {lane} + {a} : {lane}",
        "xor": f"({lane} ^ {a}) < ({lane} & {high}) + {w} ? ({lane} ^ {a}) : {lane}",
    }[kind]
    return f"simd_shuffle({value}, ushort({source}))"


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


def warp_call(r, name: str, args: list[Node], ctx: FnCtx) -> str | None:
    """Shuffles and votes as simd_* functions."""
    entry = CALLS[name]
    if entry.form in ("shuffle", "old_shuffle"):
        if entry.form == "shuffle":
            if len(args) < 3:
                return None
            partial_mask_note(r, args[0], name)
            args = args[1:]
        width = shuffle_width(args[2], name, r.macros) if len(args) > 2 else 32
        value, lane = r.render(args[0], ctx), r.render(args[1], ctx)
        kind = entry.target.removeprefix("simd_shuffle").lstrip("_") or "idx"
        if width != 32:
            w = r.render(args[2], ctx) if width is None else width
            return segment_shuffle(kind, value, lane, w, lane_id(ctx))
        if kind == "idx":
            lane = f"ushort(({lane}) & 31)"
        return f"{entry.target}({value}, {lane})"
    if entry.form == "vote":
        return _vote(r, entry, name, args, ctx)
    return "((uint)(simd_vote::vote_t)simd_active_threads_mask())"


def _vote(r, entry: Call, name: str, args: list[Node], ctx: FnCtx) -> str:
    """A vote over the lanes of its mask: the full mask as the simd_ function, a partial one
    with each lane's own bit of the mask."""
    p = r.render(args[1], ctx)
    if name.startswith("__reduce"):  # a reduction over the lanes that call it
        partial_mask_note(r, args[0], name)
        return entry.target.format(None, p)
    if full_mask(args[0], r.macros):
        return entry.target.format(None, p)
    mask = f"uint({r.render(args[0], ctx)})"
    mine = f"((({mask}) >> {lane_id(ctx)}) & 1u)"
    if name == "__any_sync":
        return f"simd_any(({p}) && {mine})"
    if name == "__all_sync":
        return f"simd_all(!{mine} || ({p}))"
    return f"({entry.target.format(None, p)} & {mask})"


def partial_mask_note(r, mask: Node, name: str) -> None:
    if full_mask(mask, r.macros):
        return
    note = (
        f"{name} with mask `{text(mask).strip()}` (line {line(mask)}): Metal's SIMD functions "
        "act on the lanes that call them, which CUDA requires the mask to name"
    )
    if note not in r.notes:
        r.notes.append(note)


def lane_id(ctx: FnCtx) -> str:
    """The caller's lane in its SIMD-group: an attribute of the kernel; in a helper, from the
    thread's index in the threadgroup (its built-ins are passed in)."""
    if ctx.kind == "kernel":
        return "thread_index_in_simdgroup"
    return "((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u)"
