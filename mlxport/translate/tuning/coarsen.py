"""Blocks that do the work of several: the tuning search's ``coarsen=F`` knob (CUDA).

A kernel whose blocks each do a little (rope: four rows of 64 pairs a block, a sincos per pair) is
launched with F times fewer blocks, and each block runs F of the launch's blocks as written: block b
runs blocks b, b + G, b + 2G, ... (G = the blocks it is launched with, ``gridDim.x``). What the
kernel does before its first use of ``blockIdx`` (rope's table of frequencies in shared memory, and
its barrier) is the same in every block, so it runs once; the rest is written once per block it
runs, statement by statement (coarsen_jam.py), so the copies' loads are in flight together, and a
loop over the same indices in every copy runs once for all of them. Rope's copies are rows
``n_rows / F`` apart: the same position in another head, where a sincos shared through the copies
is computed once. The launch passes the kernel its block count as written (``mlxport_nblk``), and
copies past it do nothing::

    rope_kernel<T><<<dim3((grid.x + 4 - 1) / 4, grid.y, grid.z), block, 0, stream>>>(
        x, out, ..., (int)(grid.x));

Every copy computes what its block computed, on the same values: the outputs are the same bit for
bit. That holds only where no copy can see another's work, which is checked on the syntax tree (a
kernel that fails any check is left as it is):

- ``blockIdx`` is named only as ``blockIdx.x``, by the kernel alone (no function it calls, no
  macro); ``gridDim`` and cooperative groups nowhere; no atomics, asm or file-scope variables a
  kernel may change; the kernel is declared once, launched only with ``<<<>>>``, with a block
  count the launch can divide (an expression, or a ``dim3`` built or declared in the launching
  function);
- from the first statement naming ``blockIdx`` on: no barrier, shuffle, vote or other exchange
  between threads (in a function called either), no macro but constants, no ``__shared__`` or
  ``static`` declaration, no write to shared memory, no return but ``if (COND) return;`` as a
  statement of the kernel itself, no break or continue of a loop every copy runs; the names it
  assigns, increments or hands on by reference or address are its own; memory it writes is an
  output's;
- an output (a pointer parameter to non-const, or a local pointer from one) is never read: every
  use is an element assigned with ``=``, a pointer into it declared from it, or an argument that a
  function of the file only assigns (``store_f(outr + c, v)``). Inputs are never written (MLX's
  inputs and outputs are distinct buffers).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from tree_sitter import Node

from mlxport.cuda_syntax import (
    bare_callee,
    declared_name,
    function_declarator,
    parse,
    reading_source,
    text,
    walk,
)
from mlxport.errors import UserError
from mlxport.translate.bind.kernel_scope import helper_nodes, kernel_node, pick_kernel, reachable
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.reading.cudafile import CudaFile
from mlxport.translate.reading.macros import normalize
from mlxport.translate.tuning.coarsen_jam import Jam, Refused, Scopes, name_node
from mlxport.translate.tuning.kernel_tree import holder_of, params_of, template_types
from mlxport.translate.tuning.vector_code import HELPERS
from mlxport.translate.tuning.vector_facts import KernelFacts

COARSEN = (4, 8)  # blocks of the launch as written that a block runs
_ATOMIC = re.compile(r"^(atomic\w*|__atomic\w*|__nv_atomic\w*)$")
_GROUPS = ("this_thread_block", "this_grid", "this_cluster", "coalesced_threads")
_CASTS = frozenset({"reinterpret_cast", "static_cast", "const_cast"})
_OWN_NAMES = re.compile(r"^(nblk|bdx|p|live\d+|j\d+_\w+|m\d+(_[asxc])?)$")  # mlxport_ + these


@dataclass
class Coarsened:
    """The rewritten source; its lines past ``end`` are the source's, ``delta`` further down."""

    source: str
    end: int
    delta: int

    def source_line(self, line: int) -> int:
        return line - self.delta if line > self.end else line


def coarsened(source: str, cf: CudaFile, kernel: str, factor: int) -> Coarsened | None:
    """The source with the kernel's blocks doing ``factor`` blocks' work each, or None where the
    kernel fails a check."""
    return rewritten(source, cf, kernel, factor, BLOCKS)


class Mode(NamedTuple):
    """What the copies are: blocks of the launch (``BLOCKS``), or threads of a block
    (coarsen_lanes.py)."""

    index: tuple[str, ...]  # the copies start at the first statement naming one's .x
    count: str  # the kernel parameter holding how many there are as launched
    check: Callable  # (root, kn, cf, facts, helpers) -> None, raising Refused
    check_tail: Callable  # (tail, scopes, facts) -> None
    launches: Callable  # (root, cf, kernel, factor) -> edits
    lanes: Callable | None = None  # facts -> Lanes, where the copies are threads


def rewritten(source: str, cf: CudaFile, kernel: str, factor: int, mode: Mode) -> Coarsened | None:
    raw = source.encode("utf-8", "replace")
    data = normalize(raw)  # what the translator parses, offsets kept
    with reading_source(data):
        try:
            return _rewrite(raw, parse(data).root_node, cf, kernel, factor, mode)
        except (Refused, UserError, Untranslatable, RecursionError):
            return None


def _rewrite(raw: bytes, root: Node, cf: CudaFile, kernel: str, factor: int, mode: Mode):
    info = pick_kernel(cf, kernel)
    kn = kernel_node(root, info)
    body = kn.child_by_field_name("body")
    if body is None:
        raise Refused("no body")
    facts = KernelFacts(root, kn, cf)
    helpers = [n for ns in helper_nodes(root, reachable(cf, info)).values() for n in ns]
    _check_file(root, kn, facts, helpers, kernel)
    mode.check(root, kn, cf, facts, helpers)
    statements = list(body.named_children)
    first = next(
        (i for i, st in enumerate(statements) if any(names_index(st, x) for x in mode.index)),
        None,
    )
    if first is None:
        raise Refused(f"no {mode.index[0]}")
    tail = statements[first:]
    lanes = mode.lanes(facts) if mode.lanes else None
    jam = Jam(raw, tail, factor, set(facts.functions), template_types(kn), lanes)
    mode.check_tail(tail, jam.scopes, facts)
    code = jam.code()
    if lanes is not None and not jam.pairs:
        raise Refused("no accesses to pair")
    start = raw.rfind(b"\n", 0, tail[0].start_byte) + 1
    end = body.end_byte - 1  # the closing brace
    old = raw[start:end]
    new = code.encode()
    edits = [(start, end, new), *_parameter(kn, mode.count)]
    if lanes is not None:
        at = holder_of(kn).start_byte
        edits.append((at, at, HELPERS.encode()))  # the pairs' mlxport_chunk
    edits += mode.launches(root, cf, kernel, factor)
    out = raw
    for s, e, text_ in sorted(edits, reverse=True):
        out = out[:s] + text_ + out[e:]
    delta = new.count(b"\n") - old.count(b"\n")
    end_line = raw.count(b"\n", 0, start) + 1 + new.count(b"\n")
    return Coarsened(out.decode("utf-8", "replace"), end_line, delta)


def _check_file(root: Node, kn: Node, facts: KernelFacts, helpers, kernel: str) -> None:
    """What either kind of copies needs of the file."""
    if any(n.type == "identifier" and text(n).startswith("mlxport_") for n in walk(root)):
        raise Refused("the rewrite's own names")
    if any(
        _OWN_NAMES.match(declared_name(p.child_by_field_name("declarator"))) for p in params_of(kn)
    ):
        raise Refused("a parameter the translation would name as the rewrite does")
    for scope in [kn, *helpers]:
        for n in walk(scope):
            if n.type in ("gnu_asm_expression", "asm_statement", "lambda_expression"):
                raise Refused("asm or a lambda")
            if n.type == "call_expression" and _ATOMIC.match(bare_callee(n)):
                raise Refused("an atomic")
            if n.type == "identifier" and text(n) in facts.globals:
                raise Refused("a file-scope variable")
    declared = 0
    for n in walk(root):
        if n.type in ("function_definition", "declaration", "field_declaration"):
            name, decl = function_declarator(n)
            if decl is not None and name is not None and text(name).replace(" ", "") == kernel:
                declared += 1
    if declared != 1:
        raise Refused("the kernel declared more than once")


def only_x(kn: Node, cf: CudaFile, helpers, names: tuple, whole: tuple, fields=("x",)) -> None:
    """``names`` only as fields (``.x``) in the kernel and nowhere in a function it calls or a
    macro; ``whole`` and cooperative groups (a thread's or block's index by another name) nowhere
    at all."""
    whole += _GROUPS
    for m in cf.macros:
        if re.search(r"\b(" + "|".join(names + whole) + r")\b", m.body):
            raise Refused("a macro naming the copies' index")
    for fn in helpers:
        if any(n.type == "identifier" and text(n) in names + whole for n in walk(fn)):
            raise Refused("a function naming the copies' index")
    for n in walk(kn):
        if n.type == "identifier" and text(n) in whole:
            raise Refused(text(n))
        if n.type == "identifier" and text(n) in names:
            parent = n.parent
            if (
                parent is None
                or parent.type != "field_expression"
                or text(parent.child_by_field_name("field")) not in fields
            ):
                raise Refused(f"{text(n)} other than {text(n)}.x")


def _check_blocks(root: Node, kn: Node, cf: CudaFile, facts: KernelFacts, helpers) -> None:
    only_x(kn, cf, helpers, ("blockIdx",), ("gridDim",))


def _check_block_tail(tail: list[Node], scopes: Scopes, facts: KernelFacts) -> None:
    _check_tail(tail, scopes, facts)
    _check_outputs(facts.kn, facts.body, facts)


def names_index(node: Node, index: str) -> bool:
    return any(
        n.type == "field_expression"
        and text(n.child_by_field_name("argument")) == index
        and text(n.child_by_field_name("field")) == "x"
        for n in walk(node)
    )


def _check_tail(tail: list[Node], scopes: Scopes, facts: KernelFacts) -> None:
    """What the statements run per copy may touch: see the module's list."""
    for st in tail:
        if facts.collective(st):
            raise Refused("an exchange between threads, or a macro")
        for n in walk(st):
            if n.type in (
                "goto_statement",
                "labeled_statement",
                "throw_statement",
                "try_statement",
            ):
                raise Refused("a jump")
            if n.type == "declaration" and any(
                text(c) in ("__shared__", "static", "extern", "register") for c in n.children
            ):
                raise Refused("shared or static memory declared per block")
            if n.type == "call_expression" and facts.reaches(n, _touches_shared(facts)):
                raise Refused("a function touching shared memory")
            if n.type == "return_statement" and not top_guard(n, tail):
                raise Refused("a return")
            if n.type in ("assignment_expression", "update_expression"):
                target = n.child_by_field_name(
                    "left" if n.type == "assignment_expression" else "argument"
                )
                _check_write(target, scopes, facts)
            elif n.type == "pointer_expression" and text(n.child_by_field_name("operator")) == "&":
                _check_address(n.child_by_field_name("argument"), scopes, facts)
            elif n.type == "identifier" and text(n) in facts.shared and scopes.binding(n) is None:
                _check_shared_read(n)
            elif n.type == "call_expression":
                args = [
                    a
                    for a in n.child_by_field_name("arguments").named_children
                    if a.type != "comment"
                ]
                for i, a in enumerate(args):
                    if facts.modifies_argument(n, i):
                        _check_write(a, scopes, facts)
                    check_handed(a, scopes, facts)
            if n.type in ("init_declarator", "assignment_expression"):
                value = n.child_by_field_name("value" if n.type == "init_declarator" else "right")
                if value is not None:
                    check_handed(value, scopes, facts)


def top_guard(ret: Node, tail: list[Node]) -> bool:
    cur = ret.parent
    if cur is not None and cur.type == "compound_statement" and len(cur.named_children) == 1:
        cur = cur.parent
    return (
        cur is not None
        and cur in tail
        and cur.type == "if_statement"
        and cur.child_by_field_name("alternative") is None
        and not ret.named_children
    )


def _check_write(target: Node | None, scopes: Scopes, facts: KernelFacts) -> None:
    """A name written must be the copy's own; memory written, an output's or an array of the
    copy's own."""
    target = unparenthesized(target)
    if target is None:
        raise Refused("a write to something unnamed")
    if target.type == "identifier":
        if scopes.binding(target) is None:
            raise Refused(f"a write to {text(target)}, which every copy shares")
        return
    root = memory_root(target)
    if root is None:
        raise Refused("a write through an expression")
    b = scopes.binding(root)
    if b is not None and b in scopes.arrays:
        return
    if text(root) not in outputs_of(facts):
        raise Refused(f"a write into {text(root)}, which is not an output")


def check_handed(arg: Node, scopes: Scopes, facts: KernelFacts) -> None:
    """Memory handed to a function or a name is a buffer's (an output's is checked as one) or the
    copy's own: a local array or pointer from before the copies would be one for all of them."""
    root = _address_root(arg)
    if (
        root is not None
        and scopes.binding(root) is None
        and text(root) in memory_locals(facts)
        and text(root) not in facts.buffers
    ):
        raise Refused(f"{text(root)} handed on, which every copy shares")


def _address_root(expr: Node | None) -> Node | None:
    """The name an address is taken from (``a``, ``a + i``, ``&a[i]``, casts of those); None for
    a value read from memory (``a[i]``)."""
    expr = unparenthesized(expr)
    if expr is None:
        return None
    if expr.type == "identifier":
        return expr
    if expr.type == "pointer_expression" and text(expr.child_by_field_name("operator")) == "&":
        return memory_root(expr.child_by_field_name("argument"))
    if expr.type == "cast_expression":
        return _address_root(expr.child_by_field_name("value"))
    if expr.type == "call_expression" and bare_callee(expr) in _CASTS:
        args = expr.child_by_field_name("arguments").named_children
        return _address_root(args[0]) if len(args) == 1 else None
    if expr.type == "binary_expression" and text(expr.child_by_field_name("operator")) in "+-":
        left = _address_root(expr.child_by_field_name("left"))
        return left or _address_root(expr.child_by_field_name("right"))
    return None


def memory_locals(facts: KernelFacts) -> set[str]:
    """The kernel's local arrays and pointers (and autos, which may be either)."""
    out = set()
    for d in walk(facts.body):
        if d.type != "declaration":
            continue
        auto = "auto" in text(d.child_by_field_name("type"))
        for x in d.children_by_field_name("declarator"):
            kinds = {n.type for n in walk(x) if n.type.endswith("_declarator")}
            if auto or kinds & {"array_declarator", "pointer_declarator", "reference_declarator"}:
                out.add(declared_name(x))
    return out


def _check_address(arg: Node | None, scopes: Scopes, facts: KernelFacts) -> None:
    arg = unparenthesized(arg)
    if arg is not None and arg.type == "identifier":
        if scopes.binding(arg) is None:
            raise Refused(f"the address of {text(arg)}, which every copy shares")
        return
    root = memory_root(arg) if arg is not None else None
    if root is None:
        raise Refused("an address of an expression")
    b = scopes.binding(root)
    if b is not None and b in scopes.arrays:
        return
    name = text(root)
    if name not in outputs_of(facts) and name not in facts.buffers or name in facts.shared:
        raise Refused(f"an address into {name}")


def _check_shared_read(n: Node) -> None:
    """Shared memory is read as elements only."""
    cur = n
    while (
        cur.parent is not None
        and cur.parent.type == "subscript_expression"
        and (cur.parent.child_by_field_name("argument") == cur)
    ):
        cur = cur.parent
    parent = cur.parent
    if cur == n or parent is None:
        raise Refused("shared memory used whole")
    if (
        parent.type == "assignment_expression"
        and parent.child_by_field_name("left") == cur
        or parent.type == "update_expression"
        or parent.type == "pointer_expression"
    ):
        raise Refused("shared memory written")


def _touches_shared(facts: KernelFacts):
    def found(n: Node) -> bool:
        return (
            n.type == "declaration"
            and any(text(c) in ("__shared__", "static") for c in n.children)
            or n.type == "identifier"
            and text(n) in facts.shared
        )

    return found


def outputs_of(facts: KernelFacts) -> set[str]:
    if not hasattr(facts, "_coarsen_outputs"):
        facts._coarsen_outputs = _outputs(facts.kn, facts.body)  # type: ignore[attr-defined]
    return facts._coarsen_outputs  # type: ignore[attr-defined]


def _outputs(kn: Node, body: Node) -> set[str]:
    """Pointer parameters to non-const memory, and local pointers declared from one."""
    out = set()
    for p in params_of(kn):
        decl = p.child_by_field_name("declarator")
        if (
            decl is not None
            and decl.type == "pointer_declarator"
            and not any(c.type == "type_qualifier" and text(c) == "const" for c in p.children)
        ):
            out.add(declared_name(decl))
    grew = True
    while grew:
        grew = False
        for d in walk(body):
            if d.type != "init_declarator" or declared_name(d) in out:
                continue
            value = d.child_by_field_name("value")
            root = memory_root(value) if value is not None else None
            if root is not None and text(root) in out:
                out.add(declared_name(d))
                grew = True
    return out


def _check_outputs(kn: Node, body: Node, facts: KernelFacts) -> None:
    """Every use of an output writes it: see the module's list."""
    outputs = outputs_of(facts)
    names = [
        name_node(d)
        for n in walk(kn)
        if n.type in ("declaration", "parameter_declaration")
        for d in n.children_by_field_name("declarator")
    ]
    declaring = {n.id for n in names if n is not None}
    if any([text(n) for n in names if n is not None].count(o) > 1 for o in outputs):
        raise Refused("an output's name declared twice")
    for n in walk(body):
        if n.type != "identifier" or text(n) not in outputs or n.id in declaring:
            continue
        cur = _pointer_around(n)
        parent = cur.parent
        if parent is None:
            raise Refused("an output used whole")
        if parent.type in ("subscript_expression", "pointer_expression") and _assigned(parent):
            continue
        if parent.type == "init_declarator" and parent.child_by_field_name("value") == cur:
            continue
        if parent.type == "argument_list" and _written_by(parent.parent, cur, facts):
            continue
        raise Refused(f"{text(n)} read")


def _pointer_around(n: Node) -> Node:
    """The pointer expression ``n`` is the base of: ``n + off``, ``&n[off]``, casts, parentheses."""
    cur = n
    while cur.parent is not None:
        p = cur.parent
        if p.type in ("parenthesized_expression", "cast_expression") or (
            p.type == "binary_expression" and text(p.child_by_field_name("operator")) in "+-"
        ):
            cur = p
        elif (
            p.type == "argument_list" and p.parent is not None and bare_callee(p.parent) in _CASTS
        ) or (
            p.type == "subscript_expression"
            and p.child_by_field_name("argument") == cur
            and p.parent is not None
            and p.parent.type == "pointer_expression"
            and text(p.parent.child_by_field_name("operator")) == "&"
        ):
            cur = p.parent
        else:
            return cur
    return cur


def _assigned(access: Node) -> bool:
    """Whether an element access (``p[i]``, ``*p``) is the target of a plain ``=``."""
    if access.type == "pointer_expression" and text(access.child_by_field_name("operator")) != "*":
        return False
    cur = access
    while cur.parent is not None and cur.parent.type == "parenthesized_expression":
        cur = cur.parent
    parent = cur.parent
    return (
        parent is not None
        and parent.type == "assignment_expression"
        and parent.child_by_field_name("left") == cur
        and text(parent.child_by_field_name("operator")) == "="
    )


def _written_by(call: Node | None, arg: Node, facts: KernelFacts) -> bool:
    if call is None or call.type != "call_expression":
        return False
    args = [a for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
    accessor = facts.accessors.get(bare_callee(call))
    return accessor is not None and accessor[1].get(args.index(arg)) == "write"


def memory_root(node: Node | None) -> Node | None:
    """The name an element access or pointer expression is based on: ``p`` of ``p[i]``, ``*p``,
    ``*(p + i)``, ``&p[i]``, ``reinterpret_cast<float4*>(p)[i]``, ``p + i``; None if there is no
    one such name."""
    cur = unparenthesized(node)
    for _ in range(64):
        if cur is None:
            return None
        if cur.type == "identifier":
            return cur
        if cur.type in ("subscript_expression", "pointer_expression", "field_expression"):
            cur = cur.child_by_field_name("argument")
        elif cur.type == "cast_expression":
            cur = cur.child_by_field_name("value")
        elif cur.type == "call_expression" and bare_callee(cur) in _CASTS:
            args = cur.child_by_field_name("arguments").named_children
            cur = args[0] if len(args) == 1 else None
        elif cur.type == "binary_expression" and text(cur.child_by_field_name("operator")) in "+-":
            left = memory_root(cur.child_by_field_name("left"))
            right = memory_root(cur.child_by_field_name("right"))
            return left if right is None else right if left is None else None
        else:
            return None
        cur = unparenthesized(cur)
    return None


def unparenthesized(n: Node | None) -> Node | None:
    while n is not None and n.type == "parenthesized_expression" and len(n.named_children) == 1:
        n = n.named_children[0]
    return n


def _parameter(kn: Node, name: str) -> list[tuple[int, int, bytes]]:
    """The copies' count as launched, a parameter of its own."""
    _, decl = function_declarator(kn)
    params = decl.child_by_field_name("parameters") if decl is not None else None
    if params is None or any(
        c.type == "variadic_parameter" or text(c) == "..." for c in params.children
    ):
        raise Refused("no parameter list to add to")
    at = params.end_byte - 1
    comma = ", " if params.named_children else ""
    return [(at, at, f"{comma}int {name}".encode())]


def _launches(root: Node, cf: CudaFile, kernel: str, factor: int) -> list[tuple[int, int, bytes]]:
    """Each launch of the kernel with 1/factor of its blocks, passing their count as written."""
    return launch_edits(root, cf, kernel, factor, 0)


def launch_edits(
    root: Node, cf: CudaFile, kernel: str, factor: int, which: int
) -> list[tuple[int, int, bytes]]:
    """Each launch of the kernel with 1/factor of the x extent of its grid (``which`` 0) or its
    block (1), passing that extent as launched."""
    if any(s.kernel == kernel and s.api != "<<<>>>" for s in cf.launches):
        raise Refused("a launch through the runtime API")
    edits = []
    for config in walk(root):
        if config.type != "kernel_call_syntax" or config.parent is None:
            continue
        call = config.parent
        fn = call.child_by_field_name("function")
        if fn is not None and fn.type == "template_function":
            fn = fn.child_by_field_name("name")
        if fn is None or text(fn).replace(" ", "").split("::")[-1] != kernel:
            continue
        dims = [c for c in config.named_children if c.type != "comment"]
        grid = dims[which] if len(dims) > which else None
        args = call.child_by_field_name("arguments")
        if grid is None or args is None:
            raise Refused("a launch without a grid")
        edits += _grid(grid, factor)
        count = _count(grid)
        at = args.end_byte - 1
        comma = ", " if args.named_children else ""
        edits.append((at, at, f"{comma}(int)({count})".encode()))
    if not edits:
        raise Refused("no launch")
    return edits


def _grid(grid: Node, factor: int) -> list[tuple[int, int, bytes]]:
    if any(n.type in ("assignment_expression", "update_expression") for n in walk(grid)):
        raise Refused("a block count with side effects")
    if grid.type == "identifier" and _is_dim3(grid):
        g = text(grid)
        new = f"dim3(({g}.x + {factor} - 1) / {factor}, {g}.y, {g}.z)"
        return [(grid.start_byte, grid.end_byte, new.encode())]
    if grid.type == "call_expression" and bare_callee(grid) == "dim3":
        first = next(
            (
                a
                for a in grid.child_by_field_name("arguments").named_children
                if a.type != "comment"
            ),
            None,
        )
        if first is None:
            raise Refused("dim3()")
        new = f"(({text(first)}) + {factor} - 1) / {factor}"
        return [(first.start_byte, first.end_byte, new.encode())]
    if grid.type in ("initializer_list", "compound_literal_expression"):
        raise Refused("a grid as a list")
    new = f"(({text(grid)}) + {factor} - 1) / {factor}"
    return [(grid.start_byte, grid.end_byte, new.encode())]


def _count(grid: Node) -> str:
    """The launch's block count along x, as written."""
    if grid.type == "identifier" and _is_dim3(grid):
        return f"{text(grid)}.x"
    if grid.type == "call_expression" and bare_callee(grid) == "dim3":
        first = next(
            a for a in grid.child_by_field_name("arguments").named_children if a.type != "comment"
        )
        return text(first)
    return text(grid)


def _is_dim3(name: Node) -> bool:
    """Whether the launching function declares the name as a dim3."""
    fn = name.parent
    while fn is not None and fn.type != "function_definition":
        fn = fn.parent
    if fn is None:
        return False
    for d in walk(fn):
        if (
            d.type in ("declaration", "parameter_declaration")
            and text(d.child_by_field_name("type")).strip() == "dim3"
        ):
            for x in d.children_by_field_name("declarator"):
                if declared_name(x) == text(name):
                    return True
    return False


BLOCKS = Mode(("blockIdx",), "mlxport_nblk", _check_blocks, _check_block_tail, _launches)
