"""The code of the ``coarsen=F`` rewrite (coarsen.py): the kernel's statements from its first use
of ``blockIdx`` on, written once for each of the F blocks a block now does ("copies"), statement by
statement, so the copies' loads are in flight together and a sincos they share is computed once.

A copy J runs block ``blockIdx.x + J * gridDim.x`` of the launch as written, with a flag saying it
is one (``mlxport_liveJ``: the block exists and has not returned). Each name declared in these
statements gets a name of its own in copies past the first (``mlxport_j1_row``); then, per
statement:

- ``if (COND) return;`` clears the copy's flag: ``mlxport_liveJ = mlxport_liveJ && !(COND)``;
- a declaration with a value evaluates it only where the copy runs:
  ``const float pos = mlxport_live0 ? (const float)(VALUE) : (const float)0;`` (a scalar or
  pointer type, converted as the declaration converts it);
- a ``for`` whose start, bound and step name nothing a copy changes (``for (int i = threadIdx.x;
  i < half; i += blockDim.x)``) runs once, with each statement of its body written for every copy
  in turn, by these same rules;
- ``sincosf(A, &s, &c);`` in such a loop keeps the last argument and results: a copy whose
  argument has the same bits takes them instead of calling again (a pure function: the same
  results bit for bit);
- any other statement runs per copy: ``if (mlxport_liveJ) { STATEMENT }``.

Statements of different copies interleave where the launch as written ran them in different
blocks, which coarsen.py allows only where no copy can see another's work."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from mlxport.cuda_syntax import bare_callee, text, walk

if TYPE_CHECKING:
    from mlxport.translate.tuning.coarsen_lanes import Lanes

_LOOPS = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
_NAME_WRAPPERS = frozenset({"init_declarator", "pointer_declarator", "array_declarator"})
# a pointer or a scalar type: what a copy that does not run may hold as 0
_SCALAR = re.compile(
    r"(const\s+)?(((unsigned|signed)\s+)?(char|short|int|long|long\s+long|float|double)|"
    r"unsigned|signed|bool|size_t|ptrdiff_t|u?int(8|16|32|64)_t)(\s+const)?"
)
# CUDA's vector and 16-bit float types: no constructor that does anything
_VECTOR = re.compile(
    r"(u?(char|short|int|long|longlong)|float|double)[1-4]|__half2?|half2?|__nv_bfloat162?|"
    r"nv_bfloat162?"
)
SINCOS = frozenset({"sincosf", "__sincosf", "sincospif"})
_MEMO_CALLS = re.compile(
    r"^(__\w+f|__f\w+_r[nzud]|[a-z]+\d*f|min|max|static_cast|int|float|unsigned)$"
)


class Refused(Exception):
    """The statements hold something the rewrite does not write per copy."""


class Scopes:
    """Which declaration each name in the statements refers to, by C++'s block scopes: the
    declaring identifier node's id for a name the statements declare, nothing for one declared
    before them (a parameter, a local before them, something of the file)."""

    def __init__(self, statements: list[Node]) -> None:
        self.uses: dict[int, int] = {}  # identifier node id -> its declaring identifier's id
        self.names: dict[int, Node] = {}  # declaring identifier's id -> that node
        self.arrays: set[int] = set()  # declared as arrays
        self.pointers: set[int] = set()  # declared as pointers
        scopes: list[dict[str, int]] = [{}]
        for st in statements:
            self._resolve(st, scopes)

    def binding(self, ident: Node) -> int | None:
        return self.uses.get(ident.id)

    def _resolve(self, n: Node, scopes: list[dict[str, int]]) -> None:
        if n.type in ("compound_statement", "for_statement"):
            scopes.append({})
            for c in n.children:
                self._resolve(c, scopes)
            scopes.pop()
        elif n.type == "declaration":
            declarators = {d.id for d in n.children_by_field_name("declarator")}
            for c in n.children:
                if c.id in declarators:
                    self._declare(c, scopes)
                else:
                    self._resolve(c, scopes)
        elif n.type == "identifier":
            for scope in reversed(scopes):
                if text(n) in scope:
                    self.uses[n.id] = scope[text(n)]
                    return
        else:
            for c in n.children:
                self._resolve(c, scopes)

    def _declare(self, d: Node, scopes: list[dict[str, int]]) -> None:
        """A declarator: its value and array sizes refer to what is declared before it; then its
        name is declared."""
        cur, kinds = d, set()
        while cur is not None and cur.type in _NAME_WRAPPERS:
            kinds.add(cur.type)
            inner = cur.child_by_field_name("declarator")
            for c in cur.children:
                if inner is None or c.id != inner.id:
                    self._resolve(c, scopes)
            cur = inner
        if cur is None or cur.type != "identifier":
            raise Refused("a declaration of something other than a name")
        self.names[cur.id] = cur
        self.uses[cur.id] = cur.id
        if "array_declarator" in kinds:
            self.arrays.add(cur.id)
        if "pointer_declarator" in kinds:
            self.pointers.add(cur.id)
        scopes[-1][text(cur)] = cur.id


class Jam:
    """Writes the statements once per copy (``factor`` copies), as the module says."""

    def __init__(
        self,
        raw: bytes,
        statements: list[Node],
        factor: int,
        functions: set[str],
        types: set[str],
        lanes: Lanes | None = None,
    ) -> None:
        """``functions``: the file's own, which a call names instead of CUDA's math; ``types``:
        the kernel's template type parameters (MLX's dtypes); ``lanes``: the copies are threads of
        a block (``threadIdx.x``), not blocks."""
        self.raw, self.factor, self.functions, self.types = raw, factor, functions, types
        self.lanes = lanes
        self.scopes = Scopes(statements)
        self.shared: set[int] = set()  # jammed loops' indices: one for every copy
        self.memos = self.pairs = 0
        self.statements = statements

    def code(self) -> str:
        if self.lanes is not None:
            starts = "".join(
                f"bool mlxport_live{j} = {self.factor}LL * threadIdx.x + {j} "
                f"< (long long)(mlxport_bdx);\n"
                for j in range(self.factor)
            )
        else:
            starts = "bool mlxport_live0 = true;\n" + "".join(
                f"bool mlxport_live{j} = (long long)blockIdx.x + {j}LL * (long long)gridDim.x "
                f"< (long long)(mlxport_nblk);\n"
                for j in range(1, self.factor)
            )
        return starts + self._items(self.statements, top=True)

    def _items(self, statements: list[Node], top: bool) -> str:
        out, pragma = [], ""
        for st in statements:
            if st.type == "comment":
                out.append(text(st) + "\n")
            elif st.type == "preproc_call" and re.match(r"#\s*pragma\s+unroll\b", text(st)):
                pragma = text(st).strip() + "\n"
                continue
            elif st.type.startswith("preproc"):
                raise Refused("a preprocessor line")
            elif top and _guard(st) is not None:
                cond = _guard(st)
                out += [
                    f"mlxport_live{j} = mlxport_live{j} && !({self.copy(cond, j)});\n"
                    for j in range(self.factor)
                ]
            elif st.type == "declaration":
                out.append(self._declaration(st))
            elif st.type == "for_statement" and self._invariant(st):
                out.append(self._loop(st, pragma))
            elif (memo := _sincos(st)) is not None and memo[0] not in self.functions:
                out.append(self._memo(st, *memo))
            elif self.lanes is not None and _barrier(st):
                out.append(text(st) + "\n")  # every copy reaches it: the thread waits once
            elif self.lanes is not None and (pair := self.lanes.pair(self, st)) is not None:
                self.pairs += 1
                out.append(pair)
            else:
                self._per_copy_ok(st)
                out += [
                    f"if (mlxport_live{j}) {{\n{pragma}{self.copy(st, j)}\n}}\n"
                    for j in range(self.factor)
                ]
            pragma = ""
        return "".join(out)

    def copy(self, node: Node, j: int, end: int | None = None) -> str:
        """The node's text (up to ``end``) in copy j: its names and its block's or thread's index
        those of copy j (and in lanes, ``blockDim.x`` the block's as launched)."""
        end = node.end_byte if end is None else end
        edits = []
        for n in walk(node):
            if n.start_byte >= end:
                continue
            if n.type == "identifier":
                b = self.scopes.binding(n)
                if b is not None and b not in self.shared and j > 0:
                    edits.append((n.start_byte, n.end_byte, f"mlxport_j{j}_{text(n)}"))
            elif n.type == "field_expression" and text(n.child_by_field_name("field")) == "x":
                new = self._index(text(n.child_by_field_name("argument")), j)
                if new is not None:
                    edits.append((n.start_byte, n.end_byte, new))
        edits.sort()
        out, at = [], node.start_byte
        for s, e, new in edits:
            if s < at:  # nested in an edit before it
                continue
            out += [self.raw[at:s].decode("utf-8", "replace"), new]
            at = e
        return "".join(out) + self.raw[at:end].decode("utf-8", "replace")

    def _index(self, name: str, j: int) -> str | None:
        """What ``name.x`` is in copy j (None: as written)."""
        if self.lanes is None:
            return f"(blockIdx.x + {j}u * gridDim.x)" if name == "blockIdx" and j > 0 else None
        if name == "threadIdx":
            return f"({self.factor}u * threadIdx.x + {j}u)"
        return "((unsigned)mlxport_bdx)" if name == "blockDim" else None

    def _declaration(self, st: Node) -> str:
        if "auto" in text(st.child_by_field_name("type")):
            raise Refused("a declaration of a type it does not name")
        decls = st.children_by_field_name("declarator")
        valued = [d for d in decls if d.type == "init_declarator"]
        if not valued:  # float s, c; float items[4]; constructed by every copy, run or not
            plain = re.sub(r"\b(const|volatile)\b", "", text(st.child_by_field_name("type")))
            plain = plain.strip()
            if not (_SCALAR.fullmatch(plain) or _VECTOR.fullmatch(plain) or plain in self.types):
                raise Refused(f"a {plain} constructed where its copy may not run")
            return "".join(self.copy(st, j) + "\n" for j in range(self.factor))
        if len(decls) != 1 or (
            decls[0].child_by_field_name("value") is None
            or decls[0].child_by_field_name("value").type == "initializer_list"
        ):
            raise Refused("a declaration of several names or of a list")
        d = decls[0]
        target = d.child_by_field_name("declarator")
        name = target
        while name is not None and name.type == "pointer_declarator":
            name = name.child_by_field_name("declarator")
        if name is None or name.type != "identifier":
            raise Refused("a declaration of an array or a reference with a value")
        type_id = self.raw[st.start_byte : name.start_byte].decode("utf-8", "replace").strip()
        if target.type != "pointer_declarator" and not _SCALAR.fullmatch(type_id):
            raise Refused(f"a value of type {type_id} in a copy that may not run")
        value = d.child_by_field_name("value")
        out = []
        for j in range(self.factor):
            declared, v = self.copy(name, j), self.copy(value, j)
            # a pointer's conditional has the value's type; a scalar is converted first
            pick = (
                f"({v}) : nullptr"
                if target.type == "pointer_declarator"
                else (f"({type_id})({v}) : ({type_id})0")
            )
            out.append(f"{type_id} {declared} = mlxport_live{j} ? {pick};\n")
        return "".join(out)

    def _invariant(self, loop: Node) -> bool:
        """A ``for`` every copy runs alike: one index declared in its start, and a start, bound
        and step naming nothing the statements declare but that index (or an enclosing such
        loop's) nor the block; the body does not change the index."""
        init = loop.child_by_field_name("initializer")
        header = [init, loop.child_by_field_name("condition"), loop.child_by_field_name("update")]
        if any(h is None for h in header) or init.type != "declaration":
            return False
        decls = init.children_by_field_name("declarator")
        if len(decls) != 1 or decls[0].type != "init_declarator":
            return False
        index = decls[0].child_by_field_name("declarator")
        if index is None or index.type != "identifier":
            return False
        own = {index.id} | self.shared
        for h in header:
            for n in walk(h):
                if n.type == "identifier" and n != index:
                    b = self.scopes.binding(n)
                    if b is not None and b not in own:
                        return False
                if (
                    n.type == "field_expression"
                    and text(n.child_by_field_name("field")) == "x"
                    and text(n.child_by_field_name("argument"))
                    == ("blockIdx" if self.lanes is None else "threadIdx")
                ):
                    return False
                if n.type in ("call_expression", "comma_expression"):
                    return False
        body = loop.child_by_field_name("body")
        for n in walk(body):
            if n.type in ("assignment_expression", "update_expression"):
                target = n.child_by_field_name(
                    "left" if n.type == "assignment_expression" else "argument"
                )
                if target is not None and self.scopes.binding(target) == index.id:
                    return False
            if (
                n.type == "pointer_expression"
                and text(n.child_by_field_name("operator")) == "&"
                and self.scopes.binding(n.child_by_field_name("argument")) == index.id
            ):
                return False
        self.shared.add(index.id)
        return True

    def _loop(self, loop: Node, pragma: str) -> str:
        body = loop.child_by_field_name("body")
        statements = list(body.named_children) if body.type == "compound_statement" else [body]
        head = self.copy(loop, 0, body.start_byte).rstrip()
        # its start, bound and step evaluated only where a copy would have evaluated them
        live = " || ".join(f"mlxport_live{j}" for j in range(self.factor))
        return f"if ({live}) {{\n{pragma}{head} {{\n{self._items(statements, top=False)}}}\n}}\n"

    def _memo(self, st: Node, fn: str, arg: Node, s: Node, c: Node) -> str:
        k, self.memos = self.memos, self.memos + 1
        m = f"mlxport_m{k}"
        out = [f"float {m}_a = 0.0f, {m}_s = 0.0f, {m}_c = 0.0f; bool {m} = false;\n"]
        for j in range(self.factor):
            sj, cj = self.copy(s, j), self.copy(c, j)
            out.append(
                f"if (mlxport_live{j}) {{ const float {m}_x = ({self.copy(arg, j)}); "
                f"if ({m} && __float_as_uint({m}_x) == __float_as_uint({m}_a)) "
                f"{{ {sj} = {m}_s; {cj} = {m}_c; }} else {{ {fn}({m}_x, &{sj}, &{cj}); "
                f"{m} = true; {m}_a = {m}_x; {m}_s = {sj}; {m}_c = {cj}; }} }}\n"
            )
        return "".join(out)

    def _per_copy_ok(self, st: Node) -> None:
        """A statement run per copy must not leave what encloses it: no return (the thread would
        leave every copy), and no break or continue of a loop around it; nor, for threads, wait
        for the block."""
        if self.lanes is not None:
            self.lanes.refuse_per_copy(st)
        for n in walk(st):
            if n.type in ("return_statement", "goto_statement", "labeled_statement"):
                raise Refused("a return or jump")
            if n.type in ("break_statement", "continue_statement"):
                inside = False
                cur = n.parent
                while cur is not None and cur != st.parent:
                    if cur.type in _LOOPS or (
                        cur.type == "switch_statement" and n.type == "break_statement"
                    ):
                        inside = True
                        break
                    cur = cur.parent
                if not inside:
                    raise Refused("a break or continue of a loop every copy runs")


def _barrier(st: Node) -> bool:
    """``__syncthreads();`` as a statement of its own."""
    return (
        st.type == "expression_statement"
        and len(st.named_children) == 1
        and st.named_children[0].type == "call_expression"
        and bare_callee(st.named_children[0]) == "__syncthreads"
        and not st.named_children[0].child_by_field_name("arguments").named_children
    )


def name_node(declarator: Node | None) -> Node | None:
    """The identifier a declarator declares, through values, pointers and arrays; None for
    anything else (a reference, a function)."""
    cur = declarator
    while cur is not None and cur.type in _NAME_WRAPPERS:
        cur = cur.child_by_field_name("declarator")
    return cur if cur is not None and cur.type == "identifier" else None


def _guard(st: Node) -> Node | None:
    """COND of ``if (COND) return;`` (or ``{ return; }``), without an else."""
    if st.type != "if_statement" or st.child_by_field_name("alternative") is not None:
        return None
    then = st.child_by_field_name("consequence")
    if then is not None and then.type == "compound_statement" and len(then.named_children) == 1:
        then = then.named_children[0]
    cond = st.child_by_field_name("condition")
    if (
        then is None
        or then.type != "return_statement"
        or then.named_children
        or cond is None
        or any(c.type == "declaration" for c in cond.named_children)
    ):
        return None
    return cond.named_children[0] if cond.type == "condition_clause" else cond


def _sincos(st: Node) -> tuple[str, Node, Node, Node] | None:
    """(the function, A, s, c) of ``sincosf(A, &s, &c);`` with s and c two names, A arithmetic on
    names and CUDA's math."""
    if st.type != "expression_statement" or len(st.named_children) != 1:
        return None
    call = st.named_children[0]
    if call.type != "call_expression" or bare_callee(call) not in SINCOS:
        return None
    if call.child_by_field_name("function").type != "identifier":
        return None
    args = [a for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
    if len(args) != 3:
        return None
    outs = []
    for a in args[1:]:
        arg = a.child_by_field_name("argument") if a.type == "pointer_expression" else None
        if (
            text(a.child_by_field_name("operator")) != "&"
            or arg is None
            or arg.type != ("identifier")
        ):
            return None
        outs.append(arg)
    if text(outs[0]) == text(outs[1]) or not pure(args[0]):
        return None
    return bare_callee(call), args[0], outs[0], outs[1]


def pure(expr: Node) -> bool:
    for n in walk(expr):
        if n.type in ("assignment_expression", "update_expression", "comma_expression"):
            return False
        if n.type == "call_expression" and not _MEMO_CALLS.match(bare_callee(n)):
            return False
    return True
