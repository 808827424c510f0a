"""Atomics on MLX's atomic outputs: the atomic_*_explicit functions, relaxed, and for the CUDA
atomics Metal lacks (atomicCAS, atomicInc, atomicDec) a compare-and-exchange loop each, defined
before the code that uses it."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import callee, line, text
from mlxport.translate.reading.calls import Call
from mlxport.translate.render.base import FnCtx, RenderError, root_name, short
from mlxport.translate.render.msl_declarators import is_pointer_type
from mlxport.translate.render.msl_spaces import spaces_of

_RELAXED = "memory_order_relaxed, memory_order_relaxed"
# The value each loop stores given the word's old value `o` (CUDA's unsigned arithmetic).
_NEXT = {
    "mlxport_atomic_inc": "(uint)o >= v ? 0u : (uint)o + 1u",
    "mlxport_atomic_dec": "((uint)o == 0u || (uint)o > v) ? v : (uint)o - 1u",
}
# Metal has only the weak exchange: a spurious failure leaves `o` equal to `compare`: try again.
_CAS = f"""\
#ifndef MLXPORT_ATOMIC_CAS
#define MLXPORT_ATOMIC_CAS
template <typename P, typename T, typename U>
inline auto mlxport_atomic_cas(P p, T compare, U v) {{
  auto o = atomic_load_explicit(p, memory_order_relaxed);  // of the word's own type
  const auto c = (decltype(o))(compare);
  o = c;
  while (!atomic_compare_exchange_weak_explicit(p, &o, (decltype(o))(v), {_RELAXED}) && o == c) {{}}
  return o;
}}
#endif
"""
_LOOP = """\
#ifndef {guard}
#define {guard}
template <typename P>
inline auto {name}(P p, uint v) {{
  auto o = atomic_load_explicit(p, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(p, &o, (decltype(o))({next}), {relaxed})) {{}}
  return o;
}}
#endif
"""


def atomic_call(r, node: Node, entry: Call, args: list[Node], ctx: FnCtx) -> str:
    name = callee(node)
    ln = line(node)
    if len(args) != (3 if name == "atomicCAS" else 2):
        raise RenderError(name, ln, "unexpected argument count")
    target = _unsigned_view(args[0]) if name in ("atomicInc", "atomicDec") else args[0]
    spaces = spaces_of(target, ctx)
    root = root_name(target)
    if (
        spaces != frozenset({"device"})
        or ctx.kind != "kernel"
        or not r.atomic_root(root)
        and root not in r.facts.outputs
    ):
        raise RenderError(f"{name} on `{short(text(target))}`", ln, _unported_why(spaces, ctx))
    pointer = r.raw(target, ctx)
    values = ", ".join(r.render(a, ctx) for a in args[1:])
    if entry.target.startswith("mlxport_"):
        _define(r, entry.target)
        return f"{entry.target}({pointer}, {values})"
    return f"{entry.target}({pointer}, {values}, memory_order_relaxed)"


def _unsigned_view(arg: Node) -> Node:
    """`&x[i]` of `(unsigned int *)&x[i]`: the loop does CUDA's unsigned arithmetic on the word
    whatever its declared 32-bit type, so the cast that says so is no pointer of its own."""
    t = arg.child_by_field_name("type") if arg.type == "cast_expression" else None
    if t is not None and is_pointer_type(t) and re.search(r"\b(unsigned|uint|uint32_t)\b", text(t)):
        return arg.child_by_field_name("value")
    return arg


def _define(r, name: str) -> None:
    if name == "mlxport_atomic_cas":
        r.generated[name] = _CAS
    else:
        r.generated[name] = _LOOP.format(
            guard=name.upper(), name=name, next=_NEXT[name], relaxed=_RELAXED
        )
    r.emitted.append(name)


def _unported_why(spaces: frozenset[str] | None, ctx: FnCtx) -> str:
    """Why an atomic is not ported, and what the user can change."""
    if spaces == frozenset({"threadgroup"}):
        return (
            "atomics on threadgroup (__shared__) memory are not ported (Metal needs the array "
            "declared atomic): accumulate per thread or per warp and combine after "
            "__syncthreads(), or add atomically into a kernel output"
        )
    if ctx.kind != "kernel":
        return (
            f"atomics in a helper ({ctx.name}()) are not ported: make the atomic call in the "
            "kernel's own body on one of its output pointers"
        )
    return "only atomics on the kernel's output pointers map to MLX atomic outputs"
