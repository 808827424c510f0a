"""Statements of the host code run over an environment of names at a case: declarations (``dim3``
constructors among them), assignments, ``if`` branches the case decides, copies back from the
device (whose results stay unknown) and allocations (``cudaMalloc``), which make buffers.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from tree_sitter import Node

from mlxport.cuda_syntax import declared_name, identifiers, parse_expr, text, walk
from mlxport.translate.host.expressions import TEXT, HostExpressions, host_callee
from mlxport.translate.host.values import (
    Buffer,
    Dim3,
    NullPointer,
    Tensor,
    Unknown,
    binop,
    integral,
)

# cudaMemset(bins, 0, nbins * sizeof(int)): what the buffer starts as, and how big it is where
# nothing else says (a histogram's bins, passed in as a pointer)
_MEMSETS = {"cudaMemset", "cudaMemsetAsync", "memset"}
_ALLOCATORS = {
    "cudaMalloc",
    "cudaMallocManaged",
    "cudaMallocAsync",
    "cudaMallocHost",
    "cudaHostAlloc",
}


_COPIES = {"cudaMemcpy", "cudaMemcpyAsync", "memcpy"}
LOOP_STEPS = 4096  # iterations of a host loop run at most
_JUMPS = ("break_statement", "continue_statement", "return_statement", "goto_statement")
_EFFECTS = _COPIES | _MEMSETS | _ALLOCATORS


class HostStatements(HostExpressions):
    """What statements leave in the environment, and the line of the file each one is on."""

    data: bytes
    markers: list[tuple[int, int]]  # (offset, line) of each `# N "file"` of preprocessed text

    def line(self, node: Node) -> int:
        before = [m for m in self.markers if m[0] < node.start_byte]
        if not before:
            return node.start_point[0] + 1
        start, number = before[-1]
        return number + self.data.count(b"\n", start, node.start_byte) - 1

    def execute(self, stmt: Node, env: dict[str, Any]) -> None:
        if stmt.type == "declaration":
            self.declare(stmt, env)
            self.wrapped_calls(stmt, env)  # const cudaError_t err = cudaMalloc(&x, n);
        elif stmt.type == "expression_statement" and stmt.named_children:
            expr = stmt.named_children[0]
            self.effect(expr, env)
            if expr.type != "call_expression" or host_callee(expr) not in _EFFECTS:
                # CHECK(cudaMalloc(&x, n)) as a function, or as a macro that expands to
                # `(check(cudaMalloc(&x, n), __FILE__, __LINE__))`
                self.wrapped_calls(expr, env)
        elif stmt.type in ("assignment_expression", "comma_expression"):  # a for initializer
            self.effect(stmt, env)
        elif stmt.type == "compound_statement":  # { ... } of a macro such as CHECK(call)
            for s in stmt.named_children:
                self.execute(s, env)
        elif stmt.type == "do_statement" and _once(stmt):  # a macro's do { ... } while (0)
            self.execute(stmt.child_by_field_name("body"), env)
        elif stmt.type in ("for_statement", "while_statement", "do_statement"):
            init = stmt.child_by_field_name("initializer")
            if init is not None and init.type == "declaration":
                self.declare(init, env)
            if not _on_arguments(stmt) and not self.run_loop(stmt, env):
                self.forget_changed(stmt, "is changed in the loop", env)
        elif stmt.type == "if_statement":  # a branch the case decides: its statements count
            c = self.value(stmt.child_by_field_name("condition"), env)
            if not isinstance(c, int | float | bool):
                if not _on_arguments(stmt):
                    self.forget_changed(stmt, "is changed in the branch", env)
            else:
                branch = (
                    stmt.child_by_field_name("consequence")
                    if c
                    else stmt.child_by_field_name("alternative")
                )
                if branch is not None and branch.type == "else_clause":
                    branch = branch.named_children[-1] if branch.named_children else None
                for s in (
                    branch.named_children
                    if branch is not None and branch.type == "compound_statement"
                    else [branch]
                    if branch is not None
                    else []
                ):
                    self.execute(s, env)
        elif stmt.type == "switch_statement":  # the arms the case runs through, up to a break
            arms = self.switch_arms(stmt, env)
            if not isinstance(arms, list):
                self.forget_changed(stmt, "is changed in the switch", env)
            for arm in arms if isinstance(arms, list) else []:
                for s in arm_statements(arm):
                    if s.type in ("break_statement", "return_statement"):
                        return
                    self.execute(s, env)

    def wrapped_calls(self, node: Node, env: dict[str, Any]) -> None:
        """Allocations, copies and fills inside another call or an initialiser, as error-checking
        wrappers put them: their effects count as where they stand alone."""
        for n in walk(node):
            if n is not node and n.type == "call_expression" and host_callee(n) in _EFFECTS:
                self.effect(n, env)

    def run_loop(self, loop: Node, env: dict[str, Any]) -> bool:
        """Runs a loop that changes names the launch may read, where the case decides its
        condition every time (`while (nth < ncols) nth *= 2;`), up to LOOP_STEPS iterations and
        with no jump in it: whether it ran to its end (``env`` is left as it was if not)."""
        if not _changed(loop, env):
            return True  # it changes nothing the launch could read
        if any(n.type in _JUMPS for n in walk(loop)):
            return False
        cond, update = loop.child_by_field_name("condition"), loop.child_by_field_name("update")
        body = loop.child_by_field_name("body")
        if cond is None or body is None:
            return False
        run = dict(env)
        for step in range(LOOP_STEPS):
            if step or loop.type != "do_statement":
                c = self.value(cond, run)
                if not isinstance(c, int | float | bool):
                    return False
                if not c:
                    env.update(run)
                    return True
            for s in body.named_children if body.type == "compound_statement" else [body]:
                self.execute(s, run)
            if update is not None:
                self.effect(update, run)
        return False

    def forget_changed(self, stmt: Node, where: str, env: dict[str, Any]) -> None:
        """Names a statement the evaluation does not run (a loop; a branch the case does not
        decide) may change: known only when the program runs, unless the case binds them."""
        for name in _changed(stmt, env):
            if name not in self.case:
                env[name] = Unknown(
                    f"{name} {where} at line {self.line(stmt)}, which is run only when the "
                    "program runs"
                )

    def switch_arms(self, stmt: Node, env: dict[str, Any]) -> list[Node] | Unknown:
        """The ``case`` arms a ``switch`` runs at the case: from the label its value selects (the
        ``default`` where none does) through those it falls into, up to the first that breaks;
        Unknown where the value, or a label before the one it selects, is not known."""
        v = self.value(stmt.child_by_field_name("condition"), env)
        if not isinstance(v, int | float | bool):
            return v if isinstance(v, Unknown) else Unknown(f"cannot evaluate {text(stmt)}")
        body = stmt.child_by_field_name("body")
        arms = [c for c in body.named_children if c.type == "case_statement"] if body else []
        entry = None
        for i, arm in enumerate(arms):
            label = arm.child_by_field_name("value")
            if label is None:
                continue
            got = self.value(label, env)
            if not isinstance(got, int | float | bool):
                return Unknown(f"the label `case {text(label)}:` is not known")
            if got == v:
                entry = i
                break
        if entry is None:
            entry = next(
                (i for i, a in enumerate(arms) if a.child_by_field_name("value") is None), None
            )
        out: list[Node] = []
        for arm in arms[entry:] if entry is not None else []:
            out.append(arm)
            if any(s.type in ("break_statement", "return_statement") for s in arm_statements(arm)):
                break
        return out

    def declare(self, decl: Node, env: dict[str, Any]) -> None:
        type_text = " ".join(
            text(c)
            for c in decl.children
            if c.type
            in (
                "primitive_type",
                "type_identifier",
                "qualified_identifier",
                "template_type",
                "sized_type_specifier",
                "placeholder_type_specifier",
            )
        )
        for d in decl.named_children:
            # dim3 grid(B, nh): a constructor, parsed as a prototype
            if d.type == "function_declarator":
                self.construct(d, type_text, env)
                continue
            if d.type not in (
                "init_declarator",
                "identifier",
                "pointer_declarator",
                "array_declarator",
            ):
                continue
            name = declared_name(d)
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            if name in self.case:
                env[name] = self.case[name]
                self.bind_sizes(name, value, env)
                continue
            if value is None and "dim3" in type_text and "*" not in text(d):
                env[name] = Dim3(1)  # dim3's constructor: (1, 1, 1) until fields are set
            elif value is None:
                env[name] = (
                    Buffer(name)
                    if "*" in text(d)
                    else Unknown(f"{name} is declared without a value")
                )
            elif value.type == "argument_list":  # dim3 grid(a, b)
                parts = [self.value(a, env) for a in value.named_children]
                why = next(
                    (p.why for p in parts if isinstance(p, Unknown)), f"{name} is constructed"
                )
                env[name] = (
                    Dim3(*parts)
                    if "dim3" in type_text and all(isinstance(p, int | float) for p in parts)
                    else (parts[0] if len(parts) == 1 else Unknown(why))
                )
            elif value.type == "initializer_list":
                parts = [self.value(a, env) for a in value.named_children]
                env[name] = Dim3(*parts) if "dim3" in type_text and parts else parts
            else:
                v = self.value(value, env)
                if isinstance(v, Unknown) and v.why == f"{text(value)} is not known":
                    v = Unknown(f"{name} is {text(value)}, which the case does not give")
                if isinstance(v, Buffer):
                    v = dataclasses.replace(v, name=name)
                if isinstance(v, NullPointer):  # `float *d = NULL;` then set where not followed
                    v = Unknown(
                        f"{name} starts as a null pointer, set where the host code is not read"
                    )
                if isinstance(v, int | float) and type_text.split()[-1:] and integral(type_text):
                    v = int(v)
                env[name] = v
                if isinstance(v, int | float) and decl.parent.type != "translation_unit":
                    # `int bytes = N * MN * sizeof(int);` (file constants are numbers already)
                    env[TEXT + name] = self.sized_text(value, env)

    def construct(self, d: Node, type_text: str, env: dict[str, Any]) -> None:
        name = text(d.child_by_field_name("declarator"))
        if name in self.case:
            env[name] = self.case[name]
            return
        plist = d.child_by_field_name("parameters")
        parts = (
            [
                self.value(e, env) if (e := parse_expr(text(p))) is not None else Unknown(text(p))
                for p in plist.named_children
            ]
            if plist is not None
            else []
        )
        if "dim3" in type_text and parts and all(isinstance(v, int | float) for v in parts):
            env[name] = Dim3(*parts)
        elif len(parts) == 1:
            env[name] = parts[0]
        else:
            why = next((v.why for v in parts if isinstance(v, Unknown)), None)
            env[name] = Unknown(why or f"{name} is constructed from {text(plist)}")

    def bind_sizes(self, name: str, value: Node | None, env: dict[str, Any]) -> None:
        """``const int B = Q.size(0)`` with B bound: Q's dim 0 is B."""
        if value is None or name not in self.case:
            return
        m = re.fullmatch(
            r"\(?\s*(?:\w+\s*\)\s*)?(\w+)\s*\.\s*(?:size|shape)\s*\(\s*(\d+)\s*\)", text(value)
        )
        m = m or re.fullmatch(r"(\w+)\s*\.\s*(?:size|shape)\s*\[\s*(\d+)\s*\]", text(value))
        if m and isinstance(env.get(m.group(1)), Tensor):
            env[m.group(1)].dims[int(m.group(2))] = int(self.case[name])
            env[m.group(1)].names[int(m.group(2))] = name

    def effect(self, expr: Node, env: dict[str, Any]) -> None:
        if expr.type == "update_expression":  # i++, --n
            name = text(expr.child_by_field_name("argument"))
            if isinstance(env.get(name), int) and name not in self.case:
                env[name] += 1 if "++" in text(expr) else -1
        elif expr.type == "assignment_expression":
            left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
            name = text(left)
            field = re.fullmatch(r"(\w+)\s*\.\s*([xyz])", name)
            if field and isinstance(env.get(field.group(1)), Dim3):  # grid.x = n / 512
                v, op = self.value(right, env), text(expr.child_by_field_name("operator"))
                old = getattr(env[field.group(1)], field.group(2))
                if op != "=":
                    v = (
                        binop(op[:-1], old, v)
                        if isinstance(v, int | float) and isinstance(old, int | float)
                        else Unknown(f"cannot evaluate {text(expr)}")
                    )
                env[field.group(1)] = dataclasses.replace(
                    env[field.group(1)], **{field.group(2): v}
                )
                return
            if not re.fullmatch(r"\w+", name) or name in self.case:
                return
            op = text(expr.child_by_field_name("operator"))
            v = self.value(right, env)
            if op != "=" and isinstance(env.get(name), int | float) and isinstance(v, int | float):
                v = binop(op[:-1], env[name], v)
            env[name] = v
            env[TEXT + name] = self.sized_text(right, env) if op == "=" else None
        elif expr.type == "call_expression" and host_callee(expr) in _COPIES:
            args = expr.child_by_field_name("arguments").named_children
            target = text(args[0]).replace(" ", "").lstrip("&") if args else ""
            if (
                args
                and text(args[0]).lstrip().startswith("&")
                and re.fullmatch(r"\w+", target)
                and target not in self.case
            ):
                env[target] = Unknown(
                    f"{target} is copied back from device memory at line {self.line(expr)}, "
                    "so it is known only when the program runs"
                )
        elif expr.type == "call_expression" and host_callee(expr) in _MEMSETS:
            self.memset(expr, env)
        elif expr.type == "call_expression" and host_callee(expr) in _ALLOCATORS:
            args = expr.child_by_field_name("arguments").named_children
            if len(args) >= 2:
                target = _address_of(text(args[0]))
                nbytes = self.value(args[1], env)
                env[target] = Buffer(
                    target,
                    int(nbytes) if isinstance(nbytes, int | float) else None,
                    size_text=self.sized_text(args[1], env),
                )

    def memset(self, expr: Node, env: dict[str, Any]) -> None:
        args = expr.child_by_field_name("arguments").named_children
        if len(args) < 3:
            return
        target = text(args[0]).replace(" ", "").lstrip("&")
        old = env.get(target)
        if not re.fullmatch(r"\w+", target) or not (old is None or isinstance(old, Buffer)):
            return
        old = old or Buffer(target)
        value, nbytes = self.value(args[1], env), self.value(args[2], env)
        known = old.nbytes is not None or old.shape is not None
        env[target] = dataclasses.replace(
            old,
            nbytes=old.nbytes if known or not isinstance(nbytes, int | float) else int(nbytes),
            size_text=old.size_text if known else self.sized_text(args[2], env),
            fill=0.0 if value == 0 else old.fill,
        )


def _changed(stmt: Node, env: dict[str, Any]) -> list[str]:
    """The names of ``env`` a statement assigns or steps."""
    out = []
    for n in walk(stmt):
        field = {"assignment_expression": "left", "update_expression": "argument"}.get(n.type)
        if field and text(n.child_by_field_name(field)) in env:
            out.append(text(n.child_by_field_name(field)))
    return out


def _once(loop: Node) -> bool:
    """Whether a ``do`` loop's condition is a literal false: its body runs once."""
    cond = loop.child_by_field_name("condition")
    return cond is not None and text(cond).strip("() ") in ("0", "false")


def _address_of(arg: str) -> str:
    """The variable an allocation's first argument points at, its cast dropped:
    ``&x``, ``(void **)&x``, ``reinterpret_cast<void **>(&x)``."""
    bare = re.sub(
        r"^(?:\(void\*\*\)|(?:reinterpret|static)_cast<void\*\*>)", "", arg.replace(" ", "")
    )
    while bare.startswith("(") and bare.endswith(")"):
        bare = bare[1:-1]
    return bare.lstrip("&")


def _on_arguments(stmt: Node) -> bool:
    """Whether a loop or branch turns on the command line (``if (argc > 1) n = atoi(argv[1])``):
    the program is run as it is, with no arguments, so it changes nothing."""
    return bool(identifiers(stmt.child_by_field_name("condition")) & {"argc", "argv"})


def arm_statements(arm: Node) -> list[Node]:
    """The statements of a ``case`` arm, a braced block's own statements in place of the block."""
    label = arm.child_by_field_name("value")
    out: list[Node] = []
    for s in arm.named_children:
        if label is not None and s == label:
            continue
        out += s.named_children if s.type == "compound_statement" else [s]
    return out
