"""What a kernel's code says that the ``vector=V`` rewrite (vectorize.py) must know to keep its
meaning: the kernel's buffers and its element accessors (vector_buffers.py), its locals, what each
name may hold at each statement, which expressions depend on a thread's identity, and where the
block's barriers are. Read inside ``reading_source`` of the parsed bytes (names come from
``source_text``)."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import (
    bare_callee,
    declared_name,
    function_declarator,
    identifiers,
    text,
    walk,
)
from mlxport.translate.reading.cudafile import CudaFile
from mlxport.translate.tuning.kernel_tree import (
    conditional,
    conditions,
    params_of,
    root_name,
)
from mlxport.translate.tuning.vector_buffers import element_accessors, kernel_buffers

# Calls that exchange data between threads, or wait for them (cooperative groups' members too).
COLLECTIVE = re.compile(
    r"^(__syncthreads\w*|__syncwarp|__shfl\w*|__ballot\w*|__any\w*|__all\w*|__activemask|"
    r"__match\w*|__reduce\w*|__barrier\w*|sync|shfl\w*|any|all|ballot|match_\w+|reduce|"
    r"inclusive_scan|exclusive_scan|thread_rank|meta_group_rank|__threadfence_block)$"
)
BARRIER = re.compile(r"^(__syncthreads\w*|sync|__barrier_sync)$")
_IDENTITY = frozenset({"threadIdx", "blockIdx"})
_SIMPLE_MACRO = re.compile(r"[\w\s.+\-*/()%<>&|^~]*")
# 0x1Fu, 1.5f
_NUMBER = re.compile(
    r"(?<![\w.])(0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)[uUlLfF]*(?![\w.])"
)
_INDIRECT = ("pointer_declarator", "reference_declarator")
_DECLARATORS = frozenset(
    {"init_declarator", "array_declarator", "pointer_declarator", "reference_declarator"}
)


class KernelFacts:
    """Facts about one kernel (``kn``, its function_definition) and the file it is in."""

    def __init__(self, root: Node, kn: Node, cf: CudaFile) -> None:
        self.root, self.kn, self.body = root, kn, kn.child_by_field_name("body")
        self.functions = _device_functions(root)
        self.macros = {m.name: m for m in cf.macros}
        self._expansions: dict[str, set[str]] = {}
        self._uniform: dict[str, bool] = {}
        # locals: name -> value, for names declared once in the kernel; pointers: names that may
        # hold an address (pointers, references, auto)
        counts, self.locals, self.pointers = _kernel_locals(kn, self.body)
        self.buffers = kernel_buffers(self.kn, self.body, counts)
        self.accessors = element_accessors(self.functions)
        self.shared, self.globals = _file_variables(root)
        self._tops = {c.id: i for i, c in enumerate(self.body.named_children)}
        self._declared = {
            declared_name(x)
            for d in walk(self.body)
            if d.type == "declaration"
            for x in d.children_by_field_name("declarator")
        }
        self._reference_types = _reference_types(root)
        self._assigns = self._values()

    def _values(self) -> list[tuple[dict[str, list[Node | None]], set[str]]]:
        """For each statement of the kernel's body, in order: (what each name assigned in it may
        take its value from, the names it defines outright). Values are initializers, what is
        assigned, and the conditions under which a name is assigned or incremented
        (``if (threadIdx.x < 4) t = 1;`` makes t depend on the thread); the call a name's address
        or reference is handed to;
        None where the value cannot be followed: an element or field assigned (``a[0] = ...``), a
        name that escapes (its address kept, a reference bound to it, or handed to something not a
        function of this file). A function of this file whose result after its last barrier is read
        from shared memory alone (a block reduction's) leaves its reference arguments the same in
        every thread. Defined outright: declared with a value, or assigned with ``=``, or handed to
        such a function, by a statement of the kernel itself, for a name that does not escape."""
        out: list[tuple[dict[str, list[Node | None]], set[str]]] = [
            ({}, set()) for _ in self.body.named_children
        ]
        self._escaped: set[str] = set()
        for n in walk(self.body):
            at = self._top(n)
            if at is None:
                continue
            values, defined = out[at]
            statement = self.body.named_children[at]
            if n.type == "init_declarator" and n.child_by_field_name("value") is not None:
                self._declared_value(n, values, defined, statement)
            elif n.type in ("assignment_expression", "update_expression"):
                self._assigned_value(n, values, defined, statement)
            elif n.type == "pointer_expression" and text(n.child_by_field_name("operator")) == "&":
                self._address_taken(n, values)
            elif (
                n.type == "identifier" and n.parent is not None and n.parent.type == "argument_list"
            ):
                self._argument_value(n, values, defined, statement)
        for a in walk(self.body):
            if a.type in ("gnu_asm_expression", "asm_statement"):
                self._escaped |= identifiers(a)
        if any(n.type == "lambda_expression" for n in walk(self.body)):
            self._escaped |= identifiers(self.body)
        return out

    def _declared_value(self, n: Node, values: _Values, defined: set[str], statement: Node) -> None:
        decl, value = n.child_by_field_name("declarator"), n.child_by_field_name("value")
        values.setdefault(declared_name(n), []).append(value)
        if n.parent == statement:
            defined.add(declared_name(n))
        if decl is not None and decl.type == "reference_declarator":
            self._escaped |= identifiers(value)

    def _assigned_value(self, n: Node, values: _Values, defined: set[str], statement: Node) -> None:
        target = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
        root = root_name(target)
        if root is None:  # (n > 0 ? t : u) = ...
            self._escaped |= identifiers(target)
            return
        plain = _unparenthesized(target).type == "identifier"
        if not plain and text(root) in self.pointers | self.shared:
            return  # an element of memory: the name's value, an address, stays
        values.setdefault(text(root), []).extend(
            (
                [n.child_by_field_name("right")]
                if n.type == "assignment_expression" and plain
                else []
            )
            + ([] if plain else [None])
            + conditions(n, self.body)
        )
        if (
            plain
            and n.type == "assignment_expression"
            and text(n.child_by_field_name("operator")) == "="
            and n.parent is not None
            and n.parent.type == "expression_statement"
            and n.parent == statement
        ):
            defined.add(text(root))

    def _address_taken(self, n: Node, values: _Values) -> None:
        arg, call = root_name(n.child_by_field_name("argument")), _call_of(n)
        if arg is None:
            return
        if (
            call is not None
            and bare_callee(call) not in self.functions
            and call.child_by_field_name("function").type == "identifier"
        ):
            # sincosf(x, &s, &c)
            values.setdefault(text(arg), []).extend([call] + conditions(n, self.body))
        else:
            self._escaped.add(text(arg))

    def _argument_value(self, n: Node, values: _Values, defined: set[str], statement: Node) -> None:
        call = n.parent.parent
        if call is None or call.type != "call_expression":
            return
        index = [c for c in n.parent.named_children if c.type != "comment"].index(n)
        fn = call.child_by_field_name("function")
        if (
            fn.type not in ("identifier", "template_function", "qualified_identifier")
            or text(fn) in self._declared
        ):
            self._escaped.add(text(n))  # a functor's or a method's argument
        elif self.modifies_argument(call, index):
            if not self.uniform_result(call):
                values.setdefault(text(n), []).extend([call] + conditions(n, self.body))
            elif not conditions(n, self.body) and call.parent == statement:
                values.setdefault(text(n), [])
                defined.add(text(n))

    def uniform_result(self, call: Node) -> bool:
        """Whether a call's result, and what it leaves in its reference arguments, is the same in
        every thread: every definition of the function waits for the whole block and, after its
        last statement that does, computes only from shared memory, constants and locals that do
        too (``return total;``, ``m = warp_m[0];``: a block reduction); a block scan's per-thread
        prefix is not."""
        name = bare_callee(call)
        if name not in self._uniform:  # asked for every call, in every loop's check
            fns = self.functions.get(name, [])
            self._uniform[name] = bool(fns) and all(self._uniform_after_barrier(fn) for fn in fns)
        return self._uniform[name]

    def _uniform_after_barrier(self, fn: Node) -> bool:
        body = fn.child_by_field_name("body")
        stmts = list(body.named_children) if body is not None else []
        last = max((i for i, st in enumerate(stmts) if self.barrier(st)), default=None)
        if last is None:
            return False
        params = {n for p in params_of(fn) for n in identifiers(p)}
        outputs = {
            n
            for p in params_of(fn)
            if p.child_by_field_name("declarator") is not None
            and p.child_by_field_name("declarator").type == "reference_declarator"
            for n in identifiers(p.child_by_field_name("declarator"))
        }
        shared = self.shared | {
            declared_name(d)
            for st in stmts
            for d in walk(st)
            if d.type in _DECLARATORS
            and any(text(c) == "__shared__" for c in (d.parent.children if d.parent else []))
        }
        local = {}
        for st in stmts:
            for d in walk(st):
                if d.type == "init_declarator" and d.child_by_field_name("value") is not None:
                    local.setdefault(declared_name(d), []).append(d.child_by_field_name("value"))

        def fixed(node: Node, seen: frozenset[str]) -> bool:
            for i in walk(node):
                if (
                    i.type == "field_expression"
                    and text(i.child_by_field_name("argument")) in _IDENTITY
                    or i.type == "call_expression"
                    and bare_callee(i) in self.functions
                ):
                    return False
                if (
                    i.type != "identifier"
                    or text(i) in shared
                    or text(i) in seen
                    or i.parent is not None
                    and i.parent.type == "field_expression"
                    and i.parent.child_by_field_name("field") == i
                ):
                    continue
                name = text(i)
                if name in self.macros:
                    if not self.constant_macro(name):
                        return False
                elif name in outputs and _assigned_target(i):
                    continue
                elif name in local and name not in params:
                    if not all(fixed(v, seen | {name}) for v in local[name]):
                        return False
                elif (
                    name in params
                    or name in _IDENTITY
                    or name not in local
                    and not (i.parent is not None and i.parent.type == "call_expression")
                ):
                    return False
            return True

        return all(fixed(st, frozenset()) for st in stmts[last + 1 :])

    def _top(self, node: Node) -> int | None:
        """Which statement of the kernel's body ``node`` is in."""
        while node.parent is not None and node.parent != self.body:
            node = node.parent
        return self._tops.get(node.id)

    def _reaching(self, name: str, node: Node) -> list[Node | None]:
        """What ``name`` may hold in ``node`` (a part of the kernel's body): the values assigned to
        it in node's statement of the kernel, and before it back to the last that defines it
        outright."""
        if name in self._escaped:
            return [None]
        index = self._top(node)
        if index is None:  # the body itself: everything
            return [v for values, _ in self._assigns for v in values.get(name, [])]
        out = list(self._assigns[index][0].get(name, []))
        for values, defined in reversed(self._assigns[:index]):
            out += values.get(name, [])
            if name in defined:
                break
        return out

    def modifies_argument(self, call: Node, index: int) -> bool:
        """Whether a function of this file may change its ``index``-th argument: a definition takes
        it by a reference that is not const (functions from elsewhere, CUDA's math among them, take
        values and pointers)."""
        for fn in self.functions.get(bare_callee(call), []):
            params = params_of(fn)
            if index >= len(params) or params[index].type == "variadic_parameter":
                return True
            decl = params[index].child_by_field_name("declarator")
            if (
                decl is not None
                and decl.type == "reference_declarator"
                and not any(text(c) == "const" for c in params[index].children)
                or text(params[index].child_by_field_name("type")) in self._reference_types
            ):
                return True
        return False

    # -------------------------------------------------------------- threads

    def identity(
        self, node: Node, skip: frozenset[str] = frozenset(), seen: set | None = None
    ) -> set[str]:
        """The thread and block indices (``threadIdx.x``) an expression depends on, through every
        value the names in it may take (but not ``skip``); ``*`` where that cannot be followed,
        where it names them whole or through a macro, or where it calls a function that may read
        them (of this file, or from elsewhere but CUDA's math), unless the call's result is the
        same in every thread (``uniform_result``: a block reduction's)."""
        seen = set() if seen is None else seen
        out = set()
        for n in walk(node):
            if (
                n.type == "field_expression"
                and text(n.child_by_field_name("argument")) in _IDENTITY
            ):
                out.add(text(n).replace(" ", ""))
            elif n.type == "identifier" and (
                self.expands_to(text(n)) & _IDENTITY
                or text(n) in _IDENTITY
                and not (n.parent is not None and n.parent.type == "field_expression")
            ):
                out.add("*")  # dim3 t = threadIdx; #define TID threadIdx.x
            elif (
                n.type == "identifier"
                and text(n) not in skip
                and (text(n), self._top(n)) not in seen
            ):
                # a name's values differ from one statement to the next
                seen.add((text(n), self._top(n)))
                for value in self._reaching(text(n), n):
                    out |= {"*"} if value is None else self.identity(value, skip, seen)
            elif (
                n.type == "call_expression"
                and (
                    self.reaches(n, _reads_identity)
                    or bare_callee(n) not in self.functions
                    and not _PURE.match(bare_callee(n))
                )
                and not self.uniform_result(n)
            ):
                out.add("*")
        return out

    def reaches(self, call: Node, found, seen: set[str] | None = None) -> bool:
        """Whether a call's function of this file, or one it calls, holds a node ``found``
        accepts."""
        seen = set() if seen is None else seen
        name = bare_callee(call)
        if name in seen or name not in self.functions:
            return False
        seen.add(name)
        for fn in self.functions[name]:
            for n in walk(fn):
                if found(n) or n.type == "call_expression" and self.reaches(n, found, seen):
                    return True
        return False

    def collective(self, node: Node) -> bool:
        """Whether the code exchanges data with or waits for other threads, itself or in a function
        it calls, or hides statements in a macro."""

        def is_collective(n: Node) -> bool:
            return n.type == "call_expression" and COLLECTIVE.match(bare_callee(n)) is not None

        for n in walk(node):
            if is_collective(n) or n.type == "call_expression" and self.reaches(n, is_collective):
                return True
            if (
                n.type in ("identifier", "type_identifier")
                and text(n) in self.macros
                and not self.constant_macro(text(n))
            ):
                return True
        return False

    def constant_macro(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether an object-like macro stands for a constant: numbers and operators, and other such
        macros (a name in it could be a variable it hides, ``k++`` a statement), one operand as it
        stands (``4 + 4`` in ``k * BLOCK`` would bind to k's side: it must be parenthesized)."""
        m = self.macros.get(name)
        if (
            m is None
            or m.params is not None
            or name in seen
            or not _SIMPLE_MACRO.fullmatch(m.body)
            or "++" in m.body
            or "--" in m.body
            or not _one_operand(m.body)
        ):
            return False
        names = re.findall(r"[A-Za-z_]\w*", _NUMBER.sub(" ", m.body))
        return all(self.constant_macro(n, seen | {name}) for n in names)

    def expands_to(self, name: str) -> set[str]:
        """The names a macro's expansion may name, through the macros it names."""
        if name not in self.macros:
            return set()
        if name not in self._expansions:
            found, todo = set(), [name]
            while todo:
                m = self.macros.get(todo.pop())
                for n in (
                    set(re.findall(r"(?<![.\w])(?<!->)[A-Za-z_]\w*", m.body)) - found if m else ()
                ):
                    found.add(n)  # not the fields (threadIdx.x)
                    todo.append(n)
            self._expansions[name] = found
        return self._expansions[name]

    def barrier(self, statement: Node) -> bool:
        """Whether a statement waits for the whole block on every path (a ``__syncthreads()`` of its
        own, or in a function it calls, outside any condition)."""
        return any(
            n.type == "call_expression"
            and (_is_barrier(n) or self.reaches(n, _is_barrier))
            and not conditional(n, statement)
            for n in walk(statement)
        )


# What each name assigned in a statement may take its value from (None: it cannot be followed).
_Values = dict[str, list[Node | None]]


def _device_functions(root: Node) -> dict[str, list[Node]]:
    """The file's functions that are not kernels, by name (overloads together)."""
    out: dict[str, list[Node]] = {}
    for n in walk(root):
        if n.type == "function_definition" and not any(c.type == "__global__" for c in n.children):
            name, _ = function_declarator(n)
            if name is not None:
                out.setdefault(text(name), []).append(n)
    return out


def _kernel_locals(kn: Node, body: Node) -> tuple[dict[str, int], dict[str, Node], set[str]]:
    """(how many times each name is declared in the kernel, the value of each declared once, the
    names that may hold an address: pointer and reference parameters and locals, auto locals)."""
    counts: dict[str, int] = {}
    values: dict[str, Node] = {}
    pointers: set[str] = set()
    for p in params_of(kn):
        decl = p.child_by_field_name("declarator")
        if decl is not None and decl.type in _INDIRECT:
            pointers.add(declared_name(decl))
    for d in walk(body):
        if d.type in _DECLARATORS and (d.parent is None or d.parent.type not in _DECLARATORS):
            name = declared_name(d)
            counts[name] = counts.get(name, 0) + 1
            kind = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            holder = d.parent
            auto = holder is not None and "auto" in text(holder.child_by_field_name("type"))
            if kind is not None and kind.type in _INDIRECT or auto:
                pointers.add(name)
            if d.type == "init_declarator" and d.child_by_field_name("value") is not None:
                values[name] = d.child_by_field_name("value")
    return counts, {n: v for n, v in values.items() if counts.get(n) == 1}, pointers


def _file_variables(root: Node) -> tuple[set[str], set[str]]:
    """(every __shared__ array's name, the file's and the kernel's; the file-scope variables
    device code may change)."""
    shared: set[str] = set()
    changing: set[str] = set()
    for d in walk(root):
        if d.type != "declaration":
            continue
        words = {text(c) for c in d.children}
        names = {
            declared_name(x)
            for x in d.children_by_field_name("declarator")
            if x.type != "function_declarator"
        }
        if "__shared__" in words:
            shared |= names
        if (
            d.parent is not None
            and d.parent.type in ("translation_unit", "declaration_list")
            and not words & {"const", "constexpr", "__constant__"}
        ):
            changing |= names
    return shared, changing


def _reference_types(root: Node) -> set[str]:
    """The names of reference types: ``typedef int& IR;``, ``using IR = int&;``."""
    return {
        text(i)
        for d in walk(root)
        if d.type in ("type_definition", "alias_declaration") and "&" in text(d)
        for t in d.children_by_field_name("declarator" if d.type == "type_definition" else "name")
        for i in walk(t)
        if i.type == "type_identifier"
    }


# Functions from outside the file that compute from their arguments alone (CUDA's math, conversions,
# loads); any other such call may read the thread's identity (cooperative groups' thread_rank(), the
# lane masks).
_PURE = re.compile(
    r"^((?!__lanemask|__activemask)__\w+|[a-z]+\d*f?|static_cast|reinterpret_cast|const_cast|"
    r"make_\w+|min|max|fminf|fmaxf|sincosf?|sqrtf?|rsqrtf?|expf?|exp2f?|logf?|log2f?|powf?|tanhf?|erff?|fabsf?)$"
)


def _unparenthesized(n: Node) -> Node:
    while n.type == "parenthesized_expression" and len(n.named_children) == 1:
        n = n.named_children[0]
    return n


def _assigned_target(n: Node) -> bool:
    parent = n.parent
    return (
        parent is not None
        and parent.type == "assignment_expression"
        and parent.child_by_field_name("left") == n
    )


def _call_of(n: Node) -> Node | None:
    """The call ``n`` is an argument of, or None."""
    while n.parent is not None and n.parent.type in ("parenthesized_expression", "cast_expression"):
        n = n.parent
    args = n.parent
    return (
        args.parent
        if args is not None
        and args.type == "argument_list"
        and args.parent is not None
        and args.parent.type == "call_expression"
        else None
    )


def _one_operand(body: str) -> bool:
    """Whether a macro's body is one operand: a number or name (signed or not), or parenthesized
    whole."""
    body = body.strip()
    if re.fullmatch(r"[-+~]?\s*[\w.]+", body):
        return True
    if not body.startswith("(") or not body.endswith(")"):
        return False
    depth = 0
    for i, ch in enumerate(body):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(body) - 1:
            return False  # (a) + (b)
    return True


def _is_barrier(n: Node) -> bool:
    return n.type == "call_expression" and BARRIER.match(bare_callee(n)) is not None


def _reads_identity(n: Node) -> bool:
    return n.type == "field_expression" and text(n.child_by_field_name("argument")) in _IDENTITY
