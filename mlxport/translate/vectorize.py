"""Vector loads and stores for a kernel's block- and grid-stride loops: the tuning search's
``vector=V`` knob (CUDA).

A stride loop moves one element a thread per iteration (a 2-byte load in bfloat16, where the
memory system serves 16 bytes for the same instruction). The rewrite gives each thread V consecutive
elements a step: chunk j covers elements [jV, jV + V), a thread takes chunks INIT, INIT + STEP, ...
Each buffer's V elements are read as one aligned load before the step's V iterations and each
output's V elements written as one store after them; the last elements (fewer than V), and every
element when OK fails, run the loop as written::

    for (int mlxport_c0 = OK ? (int)(threadIdx.x) * 8 : (int)(n); mlxport_c0 + 8 <= (n);
         mlxport_c0 += (BLOCK) * 8) {
        const mlxport_chunk<T, 8> mlxport_r0 = *reinterpret_cast<const mlxport_chunk<T, 8>*>(xr + mlxport_c0);
        mlxport_chunk<T, 8> mlxport_w0;
    #pragma unroll
        for (int mlxport_k = 0; mlxport_k < 8; ++mlxport_k) {
            int c = mlxport_c0 + mlxport_k;
            { float v = mlxport_elem_load_f(mlxport_r0.v[mlxport_k]); mlxport_w0.v[mlxport_k] = ...; }
        }
        *reinterpret_cast<mlxport_chunk<T, 8>*>(out + mlxport_c0) = mlxport_w0;
    }
    for (int c = (OK ? (int)((n) / 8 * 8) : (int)0) + (threadIdx.x); c < n; c += BLOCK) { as written }

where OK tests at run time that every chunk's pointer is aligned to the chunk, that an output's
offsets lie a chunk apart, and that every thread gets a whole chunk (n >= BLOCK * 8: with fewer
elements a thread, chunks would leave threads idle, as in rope's 64-element rows over 64 threads).

Every element gets the body's operations on the same values; what changes is which thread takes
which elements, so what a thread carries across iterations (a running sum, a max) combines the same
terms in another grouping: an elementwise loop matches the translation bit for bit, a reduction
within rounding. The rewrite covers every element once when INIT runs over 0..STEP-1 across the
threads, as a block- or grid-stride loop's does.

What keeps the meaning, checked on the syntax tree (a loop that fails any check is left as it is):
- the loop is ``for (TYPE c = INIT; c < BOUND; c += STEP)``, a statement of a block of the kernel;
  INIT is a thread's index built of threadIdx, blockIdx and blockDim only (or a local declared so);
  INIT, BOUND and STEP have no calls and no names the body assigns;
- the body has no break, continue, return, goto, nested loop, switch, barrier, warp collective or
  asm, and neither assigns c nor takes its address;
- every use in the body of a kernel buffer (a pointer parameter, a one-dimensional __shared__
  array, or a local pointer declared once from one and never assigned) is an element at c plus an
  offset: ``p[c + off]``, or ``f(p + c +
  off)`` / ``f(&p[c + off])`` where every definition of ``f`` in the file touches its pointer only
  as ``*p``, ``p[0]`` or ``__ldg(p)`` (and the like), all reading it or all writing it;
- reads happen on every iteration (not under ``if``, ``?:``, ``&&`` or ``||``), so the chunk load
  reads only what the V iterations read; writes are statements of the body itself, so each output
  chunk is written whole;
- no buffer is both read and written in the loop, nor written through two names (MLX's outputs are
  fresh buffers, its inputs never written; all extern __shared__ arrays are one buffer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from tree_sitter import Node

from mlxport.cuda_syntax import function_declarator, parse, text, walk
from mlxport.translate.cudafile import CudaFile
from mlxport.translate.kernel_scope import kernel_node, pick_kernel
from mlxport.translate.macros import normalize

VECTOR = (8, 4)  # elements a thread moves a step: 16 and 8 bytes in bfloat16

HELPERS = """template <typename T, int N> struct alignas(N * sizeof(T)) mlxport_chunk { T v[N]; };
template <int N> __device__ __forceinline__ bool mlxport_apart(long long a, long long b) {
    return a - b >= N || b - a >= N;
}
"""

_LOADS = frozenset({"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"})
_STOPS = frozenset({"break_statement", "continue_statement", "return_statement", "goto_statement", "for_statement",
                    "for_range_loop", "while_statement", "do_statement", "switch_statement", "labeled_statement",
                    "gnu_asm_expression", "asm_statement", "lambda_expression"})
_COLLECTIVE = re.compile(r"^(__syncthreads\w*|__syncwarp|__shfl\w*|__ballot\w*|__any\w*|__all\w*|__activemask|"
                         r"__match\w*|__reduce\w*|__barrier\w*|sync)$")
_INDEX_TYPES = re.compile(r"(const\s+)?((unsigned|signed)\s+)?(int|long|long\s+long|short|unsigned|size_t|ptrdiff_t|"
                          r"u?int(32|64)_t|long\s+int)")


@dataclass
class _Chunk:
    name: str
    root: str
    offset: str  # "" when the element is at c itself
    write: bool
    elem: str  # the buffer's element type as declared (an output chunk's type)

    def pointer(self, at: str = "") -> str:
        return " + ".join([self.root] + [f"({self.offset})"] * bool(self.offset) + [at] * bool(at))


@dataclass
class _Loop:
    start: int
    end: int
    var: str
    type: str
    init: str
    bound: str
    step: str
    body: str  # as written
    vector_body: str  # element accesses through the chunks
    chunks: list[_Chunk]

    def rewrite(self, v: int) -> str:
        t, c0 = self.type, "mlxport_c0"
        tests = [f"reinterpret_cast<size_t>({ch.pointer()}) % ({v} * sizeof({ch.elem})) == 0"
                 for ch in self.chunks]
        by_root: dict[str, list[str]] = {}
        for ch in self.chunks:
            if ch.write:
                by_root.setdefault(ch.root, []).append(ch.offset or "0")
        tests += [f"mlxport_apart<{v}>({a}, {b})" for offs in by_root.values()
                  for i, a in enumerate(offs) for b in offs[i + 1:]]
        tests.append(f"(long long)({self.bound}) >= (long long)({self.step}) * {v}")
        ok = "(" + " && ".join(tests) + ")"
        loads = "".join(f"    const mlxport_chunk<{ch.elem}, {v}> {ch.name} = "
                        f"*reinterpret_cast<const mlxport_chunk<{ch.elem}, {v}>*>({ch.pointer(c0)});\n"
                        for ch in self.chunks if not ch.write)
        slots = "".join(f"    mlxport_chunk<{ch.elem}, {v}> {ch.name};\n" for ch in self.chunks if ch.write)
        stores = "".join(f"    *reinterpret_cast<mlxport_chunk<{ch.elem}, {v}>*>({ch.pointer(c0)}) = {ch.name};\n"
                         for ch in self.chunks if ch.write)
        return (f"for ({t} {c0} = {ok} ? ({t})({self.init}) * {v} : ({t})({self.bound}); {c0} + {v} <= ({self.bound}); "
                f"{c0} += ({self.step}) * {v}) {{\n{loads}{slots}"
                f"#pragma unroll\n    for (int mlxport_k = 0; mlxport_k < {v}; ++mlxport_k) {{\n"
                f"        {t} {self.var} = {c0} + mlxport_k;\n        {self.vector_body}\n    }}\n{stores}}}\n"
                f"for ({t} {self.var} = ({ok} ? ({t})(({self.bound}) / {v} * {v}) : ({t})0) + ({self.init}); "
                f"{self.var} < {self.bound}; {self.var} += {self.step}) {self.body}")


@dataclass
class VectorPlan:
    """The kernel's loops that take vector loads, and what they need before the kernel."""

    loops: list[_Loop]
    insert_at: int  # the kernel's definition (its template line) starts here
    preamble: str  # the chunk helpers and the element accessors' copies
    lines: list[int]  # the loops' lines in the source

    def edits(self, v: int) -> list[tuple[int, int, bytes]]:
        out = [(self.insert_at, self.insert_at, self.preamble.encode())]
        return out + [(lp.start, lp.end, lp.rewrite(v).encode()) for lp in self.loops]


def vector_plan(source: str, cf: CudaFile, kernel: str) -> VectorPlan | None:
    """The kernel's stride loops that can move V elements a thread a step, or None if none can."""
    raw = source.encode("utf-8", "replace")
    root = parse(normalize(raw)).root_node
    kn = kernel_node(root, pick_kernel(cf, kernel))
    body = kn.child_by_field_name("body")
    if body is None:
        return None
    roots = _buffers(kn, body)
    accessors = _accessors(root)
    loops, used, lines = [], set(), []
    for node in walk(body):
        if node.type == "for_statement" and node.parent is not None and node.parent.type == "compound_statement":
            found = _loop(raw, node, roots, accessors, used)
            if found is not None:
                loops.append(found)
                lines.append(node.start_point[0] + 1)
    if not loops:
        return None
    holder = kn.parent if kn.parent is not None and kn.parent.type == "template_declaration" else kn
    copies = "".join(_elem_copy(raw, d, name, accessors[name][1]) for name in sorted(used)
                     for d in accessors[name][0])
    return VectorPlan(loops, holder.start_byte, HELPERS + copies + "\n", lines)


class _Buffer(NamedTuple):
    elem: str  # the element type as declared
    base: str  # the memory it points into: a parameter, a shared array, or all extern shared arrays


def _buffers(kn: Node, body: Node) -> dict[str, _Buffer]:
    """The kernel's buffers by name: its pointer parameters, its one-dimensional __shared__ arrays,
    and local pointers declared once from one of them (``const T* xr = x + row * n``) and never
    assigned. Each names the memory it points into, so two names of one buffer are known as one."""
    out: dict[str, _Buffer] = {}
    params = kn.child_by_field_name("declarator")
    plist = params.child_by_field_name("parameters") if params is not None else None
    for p in plist.named_children if plist is not None else []:
        decl = p.child_by_field_name("declarator")
        if p.type == "parameter_declaration" and decl is not None and decl.type == "pointer_declarator":
            name = decl.child_by_field_name("declarator")
            if name is not None and name.type == "identifier":
                out[text(name)] = _Buffer(text(p.child_by_field_name("type")), text(name))
    declared: dict[str, int] = {}
    for d in walk(body):
        if d.type == "declaration" and any(text(c) == "__shared__" for c in d.children):
            for a in d.children_by_field_name("declarator"):
                name = a.child_by_field_name("declarator") if a.type == "array_declarator" else None
                if name is not None and name.type == "identifier":  # one dimension
                    extern = any(text(c) == "extern" for c in d.children)
                    out[text(name)] = _Buffer(text(d.child_by_field_name("type")),
                                              "extern __shared__" if extern else text(name))
        if d.type != "init_declarator":
            continue
        target = d.child_by_field_name("declarator")
        name = target.child_by_field_name("declarator") if target is not None and target.type == "pointer_declarator" \
            else target
        if name is None or name.type != "identifier":
            continue
        declared[text(name)] = declared.get(text(name), 0) + 1
        base = _base(d.child_by_field_name("value"))
        if target.type == "pointer_declarator" and base in out and d.parent is not None:
            out.setdefault(text(name), _Buffer(text(d.parent.child_by_field_name("type")), out[base].base))
    assigned = _assigned(body)
    return {n: b for n, b in out.items() if declared.get(n, 0) <= 1 and n not in assigned}


def _base(value: Node | None) -> str | None:
    """The pointer a declaration's value offsets (``x + off``, ``off + x``, ``&x[i]``, ``x``)."""
    while value is not None and value.type == "parenthesized_expression" and value.named_children:
        value = value.named_children[0]
    if value is None:
        return None
    if value.type == "identifier":
        return text(value)
    if value.type == "binary_expression" and text(value.child_by_field_name("operator")) == "+":
        left, right = value.child_by_field_name("left"), value.child_by_field_name("right")
        return _base(left) if left is not None and left.type != "number_literal" and _base(left) else _base(right)
    if value.type == "pointer_expression" and text(value.child_by_field_name("operator")) == "&":
        arg = value.child_by_field_name("argument")
        if arg is not None and arg.type == "subscript_expression":
            return _base(arg.child_by_field_name("argument"))
    return None


def _assigned(node: Node) -> set[str]:
    """Names assigned, incremented or address-taken in the subtree."""
    out = set()
    for n in walk(node):
        target = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression" or n.type == "pointer_expression" and text(n.child_by_field_name("operator")) == "&":
            target = n.child_by_field_name("argument")
        if target is not None and target.type == "identifier":
            out.add(text(target))
    return out


# ------------------------------------------------------------------ element accessors


def _accessors(root: Node) -> dict[str, tuple[list[Node], dict[int, str]]]:
    """Device functions by name: (their definitions as they stand at file scope, {pointer argument:
    "read" or "write"} for each argument that every definition touches only as one element)."""
    defs: dict[str, list[Node]] = {}
    for n in walk(root):
        if n.type == "function_definition" and any(c.type == "__device__" for c in n.children) \
                and not any(c.type == "__global__" for c in n.children):
            name, _ = function_declarator(n)
            holder = n.parent if n.parent is not None and n.parent.type == "template_declaration" else n
            if name is not None and holder.parent is not None and holder.parent.type == "translation_unit":
                defs.setdefault(text(name), []).append(n)
    out = {}
    for name, fns in defs.items():
        kinds: dict[int, set[str]] = {}
        for fn in fns:
            for i, p in _pointer_params(fn):
                kinds.setdefault(i, set()).add(_element_use(fn, p))
        counts = {len(_params(fn)) for fn in fns}
        roles = {i: k.pop() for i, k in kinds.items() if len(k) == 1 and k <= {"read", "write"}}
        # every definition must agree on which arguments are single elements
        if len(counts) == 1 and all(all(i in dict(_pointer_params(fn)) for i in roles) for fn in fns):
            out[name] = ([fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else fn
                          for fn in fns], roles)
    return out


def _params(fn: Node) -> list[Node]:
    _, decl = function_declarator(fn)
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    return [p for p in plist.named_children if p.type == "parameter_declaration"] if plist is not None else []


def _pointer_params(fn: Node) -> list[tuple[int, str]]:
    out = []
    for i, p in enumerate(_params(fn)):
        decl = p.child_by_field_name("declarator")
        name = decl.child_by_field_name("declarator") if decl is not None and decl.type == "pointer_declarator" else None
        if name is not None and name.type == "identifier":
            out.append((i, text(name)))
    return out


def _element_use(fn: Node, p: str) -> str:
    """"read" or "write" when the function touches pointer ``p`` only as its one element, else ""."""
    body = fn.child_by_field_name("body")
    uses = set()
    for n in walk(body) if body is not None else []:
        if n.type != "identifier" or text(n) != p:
            continue
        top = n.parent
        if top is not None and top.type == "subscript_expression" and text(_index(top)) == "0" or top is not None and top.type == "pointer_expression" and text(top.child_by_field_name("operator")) == "*":
            pass
        elif top is not None and top.type == "argument_list" and len(top.named_children) == 1 and \
                top.parent is not None and text(top.parent.child_by_field_name("function")) in _LOADS:
            uses.add("read")
            continue
        else:
            return ""
        parent = top.parent
        if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == top:
            if text(parent.child_by_field_name("operator")) != "=":
                return ""
            uses.add("write")
        elif parent is not None and (parent.type == "update_expression" or
                                     (parent.type == "pointer_expression" and
                                      text(parent.child_by_field_name("operator")) == "&")):
            return ""
        else:
            uses.add("read")
    return uses.pop() if len(uses) == 1 else ""


def _elem_copy(raw: bytes, holder: Node, name: str, roles: dict[int, str]) -> str:
    """The definition renamed ``mlxport_elem_<name>``, its element pointers turned into references
    (``const T* p`` to ``const T& p``; ``*p``, ``p[0]`` and ``__ldg(p)`` to ``p``): the call passes the
    element in a chunk, which lives in registers, where the read-only path does not reach."""
    fn = holder if holder.type == "function_definition" else next(c for c in holder.named_children
                                                                  if c.type == "function_definition")
    ident, _ = function_declarator(fn)
    edits = [(ident.start_byte, ident.end_byte, f"mlxport_elem_{name}")]
    params = dict(_pointer_params(fn))
    elements = {params[i] for i in roles}
    for i, p in enumerate(_params(fn)):
        if i in roles:
            decl = p.child_by_field_name("declarator")
            edits.append((decl.start_byte, decl.end_byte, f"& {params[i]}"))
    body = fn.child_by_field_name("body")
    for n in walk(body):
        if n.type != "identifier" or text(n) not in elements:
            continue
        top = n.parent
        if top.type == "argument_list":  # __ldg(p)
            top = top.parent
        edits.append((top.start_byte, top.end_byte, text(n)))
    out, at = [], holder.start_byte
    for s, e, new in sorted(edits):
        out += [raw[at:s].decode("utf-8", "replace"), new]
        at = e
    return "".join(out) + raw[at:holder.end_byte].decode("utf-8", "replace") + "\n"


# ------------------------------------------------------------------ loops


def _loop(raw: bytes, node: Node, roots: dict[str, _Buffer], accessors: dict, used: set[str]) -> _Loop | None:
    init_decl, cond, update = (node.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = node.child_by_field_name("body")
    if init_decl is None or init_decl.type != "declaration" or cond is None or update is None or body is None:
        return None
    decls = init_decl.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    var_node, init = decls[0].child_by_field_name("declarator"), decls[0].child_by_field_name("value")
    ctype = _slice(raw, init_decl.child_by_field_name("type"))
    if var_node is None or var_node.type != "identifier" or init is None or not _INDEX_TYPES.fullmatch(ctype):
        return None
    var = text(var_node)
    if cond.type != "binary_expression" or text(cond.child_by_field_name("operator")) != "<" or \
            text(cond.child_by_field_name("left")) != var:
        return None
    if update.type != "assignment_expression" or text(update.child_by_field_name("operator")) != "+=" or \
            text(update.child_by_field_name("left")) != var:
        return None
    bound, step = cond.child_by_field_name("right"), update.child_by_field_name("right")
    if any(n.type in _STOPS or (n.type == "call_expression" and _COLLECTIVE.match(_callee(n))) for n in walk(body)):
        return None
    assigned = _assigned(body)
    invariant = [init, bound, step]
    if var in assigned or not _thread_index(init, node):
        return None
    if any(n.type == "call_expression" for e in invariant for n in walk(e)) or \
            any(_names(e) & assigned for e in invariant):
        return None
    accesses = _accesses(body, var, roots, accessors, assigned)
    if not accesses:
        return None
    chunks: dict[tuple[str, str, bool], _Chunk] = {}
    edits = []
    for node_, root_name, offset, write, accessor in accesses:
        key = (root_name, offset, write)
        if key not in chunks:
            chunks[key] = _Chunk(f"mlxport_{'w' if write else 'r'}{len(chunks)}", root_name, offset, write,
                                 roots[root_name].elem)
        slot = f"{chunks[key].name}.v[mlxport_k]"
        if accessor is None:
            edits.append((node_.start_byte, node_.end_byte, slot))
        else:
            call, arg = accessor
            used.add(_callee(call))
            fn = call.child_by_field_name("function")
            edits.append((fn.start_byte, fn.end_byte, f"mlxport_elem_{_callee(call)}"))
            edits.append((arg.start_byte, arg.end_byte, slot))
    written = {roots[r].base: r for r, _, w in chunks if w}
    if set(written) & {roots[r].base for r, _, w in chunks if not w} or \
            len({(roots[r].base, r) for r, _, w in chunks if w}) != len(written):
        return None  # a buffer read and written, or written through two names, could overlap itself
    out, at = [], body.start_byte
    for s, e, new in sorted(edits):
        out += [raw[at:s].decode("utf-8", "replace"), new]
        at = e
    vector_body = "".join(out) + raw[at:body.end_byte].decode("utf-8", "replace")
    return _Loop(node.start_byte, node.end_byte, var, ctype.removeprefix("const").strip(), _slice(raw, init),
                 _slice(raw, bound), _slice(raw, step), _slice(raw, body), vector_body, list(chunks.values()))


def _accesses(body: Node, var: str, roots: dict[str, _Buffer], accessors: dict, assigned: set[str]):
    """(node to replace, buffer, offset, write, (accessor call, its argument) or None) for every use of
    a buffer in the body; None when any use is not an element access the rewrite keeps."""
    out = []
    for n in walk(body):
        if n.type != "identifier" or text(n) not in roots:
            continue
        if text(n) in assigned:
            return None
        parent = n.parent
        if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == n:
            offset = _offset(_index(parent), var, assigned)
            if offset is None:
                return None
            holder = parent.parent
            if holder is not None and holder.type == "pointer_expression" and \
                    text(holder.child_by_field_name("operator")) == "&":
                found = _through_accessor(holder, accessors)
                if found is None:
                    return None
                (call, arg), write = found
                out.append((None, text(n), offset, write, (call, arg)))
                continue
            write = holder is not None and holder.type == "assignment_expression" and \
                holder.child_by_field_name("left") == parent
            if write and (text(holder.child_by_field_name("operator")) != "=" or not _own_statement(holder, body)):
                return None
            if not write and (_conditional(parent, body) or (holder is not None and holder.type in (
                    "update_expression", "assignment_expression") and holder.child_by_field_name("left") == parent)):
                return None
            out.append((parent, text(n), offset, write, None))
            continue
        chain = _plus_chain(n)
        terms = _plus_terms(chain)
        if terms.count(text(n)) != 1 or terms.count(var) != 1:
            return None
        rest = [t for t in terms if t not in (text(n), var)]
        if any(var in _names_of(t) for t in rest):
            return None
        found = _through_accessor(chain, accessors)
        if found is None:
            return None
        (call, arg), write = found
        out.append((None, text(n), " + ".join(rest), write, (call, arg)))
    for _, _, offset, write, via in out:
        if via is not None:
            call = via[0]
            if write and not _own_statement(call, body) or not write and _conditional(call, body):
                return None
        if offset and _names_of(offset) & assigned:
            return None
    return out


def _through_accessor(arg: Node, accessors: dict):
    """((call, argument node), write) when ``arg`` is an argument of a call to an element accessor."""
    args = arg.parent
    call = args.parent if args is not None and args.type == "argument_list" else None
    if call is None or call.type != "call_expression":
        return None
    name = _callee(call)
    if name not in accessors:
        return None
    index = next(i for i, c in enumerate(args.named_children) if c == arg)
    role = accessors[name][1].get(index)
    return ((call, arg), role == "write") if role else None


def _plus_chain(n: Node) -> Node:
    top = n
    while top.parent is not None and top.parent.type in ("binary_expression", "parenthesized_expression") and \
            (top.parent.type == "parenthesized_expression" or text(top.parent.child_by_field_name("operator")) == "+"):
        top = top.parent
    return top


def _plus_terms(node: Node) -> list[str]:
    if node.type == "parenthesized_expression" and node.named_children:
        return _plus_terms(node.named_children[0])
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) == "+":
        return _plus_terms(node.child_by_field_name("left")) + _plus_terms(node.child_by_field_name("right"))
    return [text(node)]


def _offset(index: Node | None, var: str, assigned: set[str]) -> str | None:
    """The offset of ``var + off`` (or ``var``: ""), None for any other index."""
    if index is None:
        return None
    terms = _plus_terms(index)
    if terms.count(var) != 1:
        return None
    rest = [t for t in terms if t != var]
    if any(var in _names_of(t) for t in rest) or any(_names_of(t) & assigned for t in rest):
        return None
    return " + ".join(rest)


def _index(sub: Node) -> Node | None:
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    if idx is not None and idx.type == "subscript_argument_list":
        return idx.named_children[0] if len(idx.named_children) == 1 else None
    return idx


def _own_statement(expr: Node, body: Node) -> bool:
    """Whether the expression is a statement of the loop body itself (so it runs every iteration)."""
    stmt = expr.parent
    return stmt is not None and stmt.type == "expression_statement" and (
        stmt.parent == body or stmt == body)


def _conditional(n: Node, body: Node) -> bool:
    """Whether the node runs only on some iterations: under an if, ?:, && or ||, up to the body."""
    cur = n
    while cur is not None and cur != body:
        parent = cur.parent
        if parent is None:
            return True
        if parent.type == "if_statement" and parent.child_by_field_name("condition") != cur:
            return True
        if parent.type == "conditional_expression" and parent.child_by_field_name("condition") != cur:
            return True
        if parent.type == "binary_expression" and text(parent.child_by_field_name("operator")) in ("&&", "||") and \
                parent.child_by_field_name("right") == cur:
            return True
        cur = parent
    return False


_GRID = frozenset({"threadIdx", "blockIdx", "blockDim"})


def _thread_index(init: Node, loop: Node) -> bool:
    """Whether the loop starts at a thread's index in the stride: built of threadIdx, blockIdx and
    blockDim only (``blockIdx.x * blockDim.x + threadIdx.x``), or a local declared so (``tid``).
    A start with any other term (``n4 * 4 + tid``) does not run over 0..STEP-1."""
    names = _names(init)
    if "threadIdx" in names and names <= _GRID:
        return True
    if init.type != "identifier":
        return False
    fn = loop
    while fn.parent is not None and fn.type != "function_definition":
        fn = fn.parent
    values = [d.child_by_field_name("value") for d in walk(fn) if d.type == "init_declarator"
              and text(d.child_by_field_name("declarator")) == text(init)]
    return len(values) == 1 and values[0] is not None and text(init) not in _assigned(fn) and \
        "threadIdx" in _names(values[0]) and _names(values[0]) <= _GRID


def _names(node: Node | None) -> set[str]:
    return {text(n) for n in walk(node) if n.type == "identifier"} if node is not None else set()


def _names_of(expr: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", expr))


def _callee(call: Node) -> str:
    """The called name without its object or scope (``block.sync()``: ``sync``) or template arguments."""
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return re.split(r"\.|->|::", text(fn))[-1].strip()


def _slice(raw: bytes, node: Node | None) -> str:
    return raw[node.start_byte:node.end_byte].decode("utf-8", "replace") if node is not None else ""
