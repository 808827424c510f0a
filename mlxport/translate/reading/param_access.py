"""Which pointer, reference and array parameters a function reads and which it writes, and the
unknown functions it passes them to (the rule is `analyze_rw`'s)."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import bare_callee, declared_name, source_text
from mlxport.translate.reading.calls import ATOMICS
from mlxport.translate.reading.calls import CALLS as CUDA_CALLS
from mlxport.translate.reading.cudafile import KernelInfo, Param
from mlxport.translate.reading.parsing import timed_walk

_CASTS = frozenset({"reinterpret_cast", "static_cast", "const_cast", "dynamic_cast"})
# The argument a call writes through: CUDA's cache-hinted stores (calls.py), and library calls.
_STORE_CALLS = {
    **{name: 0 for name, c in CUDA_CALLS.items() if c.form == "store"},
    "memcpy": 0,
    "memset": 0,
    "store_matrix_sync": 0,
    "Store": 0,
    "store_vector": 0,
    "cudaMemcpyAsync": 0,
    "memcpy_async": 0,
}
# Calls that only read their arguments, besides every CUDA function of calls.py.
_LOAD_CALLS = frozenset(
    {
        "load_matrix_sync",
        "Load",
        "load_vector",
        "sizeof",
    }
)


def _climb(node: Node) -> tuple[Node, bool]:
    """Climb the lvalue path above an identifier; returns the top node and whether it
    dereferences."""
    cur, deref = node, False
    for _ in range(64):
        parent = cur.parent
        if parent is None:
            break
        t = parent.type
        if t == "subscript_expression" and parent.child_by_field_name("argument") == cur:
            deref = True
        elif t == "field_expression" and parent.child_by_field_name("argument") == cur:
            deref = deref or source_text(parent.child_by_field_name("operator")) == "->"
        elif t == "pointer_expression":
            op = source_text(parent.child_by_field_name("operator"))
            if op == "*":
                deref = True
            elif op == "&":
                deref = False
        elif t in ("parenthesized_expression", "cast_expression"):
            pass
        elif t == "conditional_expression" and parent.child_by_field_name("condition") != cur:
            pass  # `live ? p + off : q`: either pointer
        elif t == "binary_expression" and source_text(parent.child_by_field_name("operator")) in (
            "+",
            "-",
        ):
            if deref:
                break
        elif (
            t == "argument_list"
            and parent.parent is not None
            and parent.parent.type == "call_expression"
            and bare_callee(parent.parent) in _CASTS
            and parent.named_child_count == 1
        ):
            cur = parent.parent
            continue
        else:
            break
        cur = parent
    return cur, deref


class _RW:
    """What the uses of one tracked name (a parameter or a local derived from it) do."""

    def __init__(self, is_ref: bool = False) -> None:
        self.is_ref = is_ref
        self.read = False
        self.written = False
        self.aliases: set[str] = set()
        self.unknown: list[str] = []


def analyze_rw(fn: KernelInfo, body: Node, known: dict[str, KernelInfo]) -> None:
    """Set `read`, `written` and `unknown_calls` of fn's params; `known`: device functions by name.

    Conservative: a false "written" only adds an output, a missed one loses data.
    - written: the parameter, or a local pointer/reference derived from it (`T* q = p + off`,
      `T& r = p[i]`, `q = p`), is the base of a dereferencing assignment target (`p[i] = `, `*p = `,
      `p->x = `, `p[i].x += `, `reinterpret_cast<float4*>(p)[i] = `, `*(p + i) = `, `p[i]++`), is
      passed to an atomic* function, to a known storing call (memcpy/memset destination,
      wmma::store_matrix_sync, cub `.Store`), or to a device function of this file whose matching
      parameter is written, or is an input operand of an asm statement that stores (``st.``);
    - read: every other use (compound assignments `p[i] += ` are both). A pointer passed to an
      unknown function counts as read only; the parameter records the call in `unknown_calls`.
    By-value scalars are never "written" (the kernel only changes its own copy).
    """
    tracked = {
        p.name: _RW(p.is_reference and not p.is_pointer)
        for p in fn.params
        if p.is_pointer or p.is_reference
    }
    scalars = {p.name for p in fn.params if not (p.is_pointer or p.is_reference)}
    idents = [n for n in timed_walk(body) if n.type == "identifier"]
    used = {source_text(n) for n in idents}
    for p in fn.params:
        if p.name in scalars:
            p.read = p.name in used
    _classify_all(idents, tracked, known)
    for p in fn.params:
        if p.name in tracked:
            _merge_aliases(p, tracked)


def _classify_all(
    idents: list[Node], tracked: dict[str, _RW], known: dict[str, KernelInfo]
) -> None:
    # a use can add an alias, whose own uses are classified in the next round
    done: set[int] = set()
    for _ in range(8):
        before = len(tracked)
        for n in idents:
            name = source_text(n)
            if name in tracked and n.id not in done:
                done.add(n.id)
                _classify(n, tracked[name], tracked, known)
        if len(tracked) == before:
            break


def _merge_aliases(p: Param, tracked: dict[str, _RW]) -> None:
    seen, stack = set(), [p.name]
    while stack:
        cur = stack.pop()
        if cur in seen or len(seen) > 256:
            continue
        seen.add(cur)
        rw = tracked[cur]
        p.read |= rw.read
        p.written |= rw.written
        p.unknown_calls.extend(c for c in rw.unknown if c not in p.unknown_calls)
        stack.extend(a for a, r in tracked.items() if cur in r.aliases)


_DECLARATORS = frozenset(
    {
        "pointer_declarator",
        "reference_declarator",
        "array_declarator",
        "declaration",
        "parameter_declaration",
        "function_declarator",
        "init_declarator",
    }
)


def _declared_here(ident: Node) -> bool:
    parent = ident.parent
    if parent is None or parent.type not in _DECLARATORS:
        return False
    return ident not in (parent.child_by_field_name("value"), parent.child_by_field_name("size"))


def _classify(ident: Node, rw: _RW, tracked: dict[str, _RW], known: dict[str, KernelInfo]) -> None:
    if _declared_here(ident):
        return
    top, deref = _climb(ident)
    parent = top.parent
    if not deref and _to_integer(top):
        return  # an address turned into a number (an alignment test) reads nothing
    if parent is None:
        rw.read = True
        return
    t = parent.type
    if t == "assignment_expression" and parent.child_by_field_name("left") == top:
        if deref or (rw.is_ref and top == ident):
            rw.written = True
            rw.read |= source_text(parent.child_by_field_name("operator")) != "="
        return
    if t == "assignment_expression" and not deref:
        left = parent.child_by_field_name("left")
        if left is not None and left.type == "identifier":
            _alias(source_text(left), source_text(ident), tracked)
            return
    if t == "update_expression":
        if deref or rw.is_ref:
            rw.written = rw.read = True
        return
    if t == "init_declarator" and parent.child_by_field_name("value") == top:
        decl = parent.child_by_field_name("declarator")
        if decl is not None and (not deref or decl.type == "reference_declarator"):
            _alias(
                declared_name(decl),
                source_text(ident),
                tracked,
                decl.type == "reference_declarator",
            )
            return
    if t == "gnu_asm_input_operand":
        rw.read = True
        rw.written |= _asm_stores(parent)
        return
    if (
        t == "argument_list"
        and parent.parent is not None
        and parent.parent.type == "call_expression"
    ):
        _call_use(parent.parent, parent, top, deref, rw, known)
        return
    rw.read = True


def _asm_stores(operand: Node) -> bool:
    """The asm statement an input operand belongs to stores (``st.``): through that operand,
    perhaps, which is what a conservative "written" takes."""
    asm = operand.parent.parent if operand.parent is not None else None
    code = asm.child_by_field_name("assembly_code") if asm is not None else None
    return code is not None and re.search(r"\bst\.", source_text(code)) is not None


def _to_integer(node: Node) -> bool:
    """Whether the node is ``reinterpret_cast<an integer type>(...)``."""
    if node.type != "call_expression" or bare_callee(node) != "reinterpret_cast":
        return False
    fn = node.child_by_field_name("function")
    targs = (
        fn.child_by_field_name("arguments")
        if fn is not None and fn.type == "template_function"
        else None
    )
    return (
        targs is not None
        and "*" not in source_text(targs)
        and re.search(
            r"\b(u?intptr_t|size_t|(unsigned\s+)?long(\s+long)?|u?int64_t)\b", source_text(targs)
        )
        is not None
    )


def _alias(local: str, source: str, tracked: dict[str, _RW], is_ref: bool = False) -> None:
    if local and local != source:
        tracked.setdefault(local, _RW(is_ref)).aliases.add(source)


def _call_use(
    call: Node, args: Node, top: Node, deref: bool, rw: _RW, known: dict[str, KernelInfo]
) -> None:
    callee = bare_callee(call)
    index = next((i for i, c in enumerate(args.named_children) if c == top), -1)
    if deref:
        rw.read = True
        return
    base = callee.split("_block")[0].split("_system")[0]
    if (base in ATOMICS and index == 0) or _STORE_CALLS.get(callee) == index:
        rw.written = True
    elif callee in _LOAD_CALLS or callee in CUDA_CALLS:
        rw.read = True
    elif (fn := known.get(f"{callee}/{len(args.named_children)}", known.get(callee))) and (
        0 <= index < len(fn.params)
    ):
        target = fn.params[index]
        rw.read |= target.read or not (target.is_pointer or target.is_reference)
        rw.written |= target.written
    else:
        rw.read = True
        if callee and callee not in rw.unknown:
            rw.unknown.append(callee)
