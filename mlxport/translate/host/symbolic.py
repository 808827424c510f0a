"""The host function that launches a kernel, evaluated symbolically: its local variables, `if`
clamps and branches, `switch` arms, dim3 values and device queries, down to each launch's grid,
block, shared bytes and template and scalar arguments as expressions over the task's inputs
(`launch` combines the launches into the one the port makes)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from tree_sitter import Node

from mlxport.cuda_syntax import callee, function_name, line, parse_expr, text, walk
from mlxport.translate.host.binding import Binder
from mlxport.translate.host.cexpr import CaseBound, CExprError, CToAst, num
from mlxport.translate.host.device import DeviceQueries
from mlxport.translate.host.loops import LOOPS, loop_changes, run_loop
from mlxport.translate.host.type_constants import (
    deduced_template_args,
    enumerators,
    instantiations,
    scoped_constant,
)
from mlxport.translate.reading.cudafile import CudaFile, KernelInfo, LaunchSite

TypeSize = Callable[[str], ast.expr | None]  # sizeof(type name), None when unknown


class Dim3:
    def __init__(self, parts: list[ast.expr]):
        self.parts = (parts + [num(1), num(1), num(1)])[:3]


class _Lazy:
    def __init__(self, error: CExprError):
        self.error = error


@dataclass
class LaunchValues:
    """A launch's grid (in blocks) and block sizes, dynamic shared-memory bytes, and its template
    and scalar kernel arguments, as expressions over the task's inputs and params."""

    blocks: list[ast.expr]
    threads: list[ast.expr]
    smem: ast.expr | None
    targs: dict[str, ast.expr]
    kargs: dict[str, ast.expr | CExprError]
    line: int


@dataclass
class SiteValues(LaunchValues):
    conds: list[ast.expr] = field(default_factory=list)  # the branch conditions that reach the site


def file_constants(root) -> dict[str, tuple[None, str]]:
    """``static const unsigned int THREADS = 128;`` at file scope: host launch math may use it like
    an object-like macro."""
    out = {}
    for n in root.named_children:
        quals = {
            text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")
        }
        if n.type != "declaration" or not quals & {"const", "constexpr"} or "__device__" in text(n):
            continue
        for d in n.children_by_field_name("declarator"):
            name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if (
                d.type == "init_declarator"
                and name is not None
                and name.type == "identifier"
                and value is not None
            ):
                out[text(name)] = (None, text(value))
    return out


class HostFunction:
    """Symbolic evaluation of one host function down to its launches of one kernel."""

    def __init__(
        self,
        fn: Node,
        cf: CudaFile,
        kernel: KernelInfo,
        binder: Binder,
        type_size: TypeSize,
        root: Node,
        device: DeviceQueries,
    ):
        self.fn = fn
        self.device = device
        self.cf = cf
        self.kernel = kernel
        self.binder = binder
        self.type_size = type_size
        self.root = root
        self.macros = file_constants(root) | {m.name: (m.params, m.body) for m in cf.macros}
        self.env: dict[str, ast.expr | Dim3 | _Lazy] = {}
        self.sites: list[SiteValues] = []
        self.passed: dict[str, ast.expr] = {}
        self.resolving: set[str] = set()
        self.enumerators = enumerators(root)
        self.notes: list[str] = []
        self._bind_params()

    def _scoped(self, name: str, env: dict) -> ast.expr | None:
        """``x128::size``: a constant of a type or namespace the file defines."""
        src = scoped_constant(self.root, name)
        if src is None:
            return None
        self.resolving.add(name)
        try:
            return self.conv(env).text(src)
        finally:
            self.resolving.discard(name)

    def conv(self, env: dict) -> CToAst:
        def lookup(name: str) -> ast.expr | None:
            v = env.get(name)
            base, _, field_ = name.partition(".")
            if v is None and isinstance(env.get(base), Dim3) and field_ in ("x", "y", "z"):
                v = env[base].parts["xyz".index(field_)]
                if isinstance(v, _Unknown):
                    raise v.error
            if isinstance(v, Dim3):
                return None
            got = self.binder.bound(name)  # what the case binds wins, as in the original's run
            bound = self.binder.binds(name)
            if got is None and name in self.device.set_by_calls and not bound:
                got = v  # a device query in this function: the documented value, unless bound
            if got is None and (v is None or bound):
                got = self.device.field(name)
            if got is not None:
                return got
            if bound:  # and the code's own value is not what the original used
                raise CaseBound(name)
            if isinstance(v, _Lazy):
                raise v.error
            if v is None and (value := self.enumerators.get(name)) is not None:
                return num(value)
            if v is None and "::" in name and name not in self.resolving:
                return self._scoped(name, env)
            return v

        return CToAst(lookup, self.macros, self.type_size)

    def _bind_params(self) -> None:
        _, decl = function_name(self.fn)
        params = decl.child_by_field_name("parameters") if decl is not None else None
        for p in params.named_children if params is not None else []:
            d = p.child_by_field_name("declarator")
            if d is not None and d.type == "reference_declarator" and "Tensor" in text(p):
                d = next((c for c in d.named_children if c.type == "identifier"), None)
            if d is None or d.type != "identifier":
                continue  # pointers and references carry no launch value
            name = text(d)
            if "Tensor" in text(p) and self.binder.spec(name) is not None:
                # a torch tensor the task has as an input: x.size(i) is x.shape[i]
                self.env[name] = ast.Name(name)
                continue
            got = self.binder.scalar(name)
            if (
                got is None
                and self.binder.task is None
                and name
                in {q.name for q in self.kernel.params if not (q.is_pointer or q.is_reference)}
            ):
                got = ast.Name(name)  # without a task the kernel's scalars are its inputs
            if got is not None:
                self.env[name] = got
            else:
                self.env[name] = _Lazy(
                    CExprError(
                        f"host parameter `{name}` (no task input or param matches it)", line(p)
                    )
                )
        tdecl = self.fn.parent
        if tdecl is not None and tdecl.type == "template_declaration":
            self._bind_template_params(tdecl)

    def _bind_template_params(self, tdecl: Node) -> None:
        plist = tdecl.child_by_field_name("parameters")
        name, _ = function_name(self.fn)
        insts = instantiations(self.root, name)
        for i, p in enumerate(plist.named_children if plist is not None else []):
            if p.type != "parameter_declaration" and p.type != "optional_parameter_declaration":
                continue
            pname = text(p.child_by_field_name("declarator"))
            values = {inst[i] for inst in insts if i < len(inst)}
            if len(values) == 1:
                node = parse_expr(values.pop())
                try:
                    self.env[pname] = (
                        self.conv(self.env).node(node)
                        if node is not None
                        else _Lazy(CExprError(f"template parameter `{pname}`", line(p)))
                    )
                    continue
                except CExprError as e:
                    self.env[pname] = _Lazy(e)
                    continue
            got = self.binder.scalar(pname)
            self.env[pname] = (
                got
                if got is not None
                else _Lazy(
                    CExprError(
                        f"host template parameter `{pname}` (instantiated with "
                        f"{sorted(values)}; no task dimension matches)",
                        line(p),
                    )
                )
            )

    def run(self, sites: list[LaunchSite]) -> list[SiteValues]:
        body = self.fn.child_by_field_name("body")
        lines = {s.line: s for s in sites}
        self._bind_arguments(sites)
        self._block(body, dict(self.env), [], lines)
        return self.sites

    def _bind_arguments(self, sites: list[LaunchSite]) -> None:
        """A host variable passed as a scalar argument has the value of the task's param for that
        kernel parameter: `N = B * T; k<<<ceil_div(N, 256), 256>>>(x, N)` launches over N."""
        self.passed: dict[str, ast.expr] = {}
        passing: dict[str, set[str]] = {}  # kernel parameter -> what the sites pass it
        for site in sites:
            for p, arg in zip(self.kernel.params, site.args, strict=False):
                passing.setdefault(p.name, set()).add(arg.strip())
        for site in sites:
            for p, arg in zip(self.kernel.params, site.args, strict=False):
                differs = len(passing[p.name]) > 1  # `size` at one launch, `n_blocks` at another
                if p.is_pointer or p.is_reference or differs or not arg.isidentifier():
                    continue
                got = self.binder.scalar(p.name) if self.binder.task is not None else None
                if got is not None and isinstance(self.env.get(arg), _Lazy | type(None)):
                    self.passed[arg] = got
        self.env.update(self.passed)

    def _contains(self, node: Node, lines: dict[int, LaunchSite]) -> bool:
        """Whether a launch is in ``node``: on one of its lines, and a launch under it (a macro
        puts a whole host function on one line, loops before the launch included)."""
        first, last = node.start_point[0] + 1, node.end_point[0] + 1
        return any(first <= ln <= last for ln in lines) and any(
            _is_launch(n, lines) for n in walk(node)
        )

    def _block(
        self, block: Node, env: dict, conds: list[ast.expr], lines: dict[int, LaunchSite]
    ) -> None:
        stmts = block.named_children if block.type == "compound_statement" else [block]
        self._stmts(stmts, env, conds, lines)

    def _stmts(
        self, stmts: list[Node], env: dict, conds: list[ast.expr], lines: dict[int, LaunchSite]
    ) -> None:
        for st in stmts:
            if st.type == "comment":  # one sharing a launch's line
                continue
            if not self._contains(st, lines):
                self._apply(st, env)
                continue
            t = st.type
            if t == "compound_statement":
                self._block(st, env, conds, lines)
            elif t == "if_statement":
                cond_node = st.child_by_field_name("condition")
                try:
                    cond = self.conv(env).node(_unparen(cond_node), line(st))
                except CExprError as e:
                    cond = _Unknown(e)
                cons, alt = (
                    st.child_by_field_name("consequence"),
                    st.child_by_field_name("alternative"),
                )
                self._block(cons, dict(env), conds + [cond], lines)
                if alt is not None:
                    alt_body = alt.named_children[-1] if alt.type == "else_clause" else alt
                    self._block(alt_body, dict(env), conds + [_Not(cond)], lines)
            elif t == "switch_statement":
                self._switch(st, env, conds, lines)
            elif t in ("while_statement", "for_statement"):
                self._first_iteration(st, env, conds, lines)
            elif t in ("expression_statement", "return_statement", "declaration"):
                for n in walk(st):
                    if _is_launch(n, lines):
                        self._site(lines[line(n)], env, conds)
                        break
                self._apply(st, env)
            else:
                raise CExprError(f"a launch inside a {t.replace('_', ' ')}", line(st))

    def _first_iteration(
        self, st: Node, env: dict, conds: list[ast.expr], lines: dict[int, LaunchSite]
    ) -> None:
        """A launch in a loop as its first iteration runs it (the one launch a task describes),
        under the loop's condition."""
        init = st.child_by_field_name("initializer")
        if init is not None and init.type == "declaration":
            self._apply(init, env)
        elif init is not None and init.type == "assignment_expression":
            self._assign(init, env)
        cond_node = st.child_by_field_name("condition")
        try:
            cond = [self.conv(env).node(_unparen(cond_node), line(st))] if cond_node else []
        except CExprError as e:
            cond = [_Unknown(e)]
        self.notes.append(
            f"the launch in the {st.type.split('_')[0]} loop at line {line(st)} is ported as its "
            f"first iteration runs it"
        )
        self._block(st.child_by_field_name("body"), dict(env), conds + cond, lines)

    def _switch(
        self, st: Node, env: dict, conds: list[ast.expr], lines: dict[int, LaunchSite]
    ) -> None:
        """Each arm of a `switch` as a branch taken when the value is one of the labels that
        fall through into it (`default:` when it is none of them)."""
        try:
            value = self.conv(env).node(_unparen(st.child_by_field_name("condition")), line(st))
        except CExprError as e:
            value = _Unknown(e)
        body = st.child_by_field_name("body")
        arms = [c for c in body.named_children if c.type == "case_statement"] if body else []
        every, chain = [], []
        for arm in arms:
            label = arm.child_by_field_name("value")
            if label is not None:
                try:
                    test = ast.Compare(value, [ast.Eq()], [self.conv(env).node(label, line(arm))])
                except CExprError as e:
                    test = _Unknown(e)
                every.append(test)
            else:
                test = _Not(_any(every)) if every else num(True)
            chain.append(test)
            stmts = [c for c in arm.named_children if c is not label and c.type != "comment"]
            if any(self._contains(c, lines) for c in stmts):
                self._stmts(stmts, dict(env), [*conds, _any(chain)], lines)
            if stmts and _ends_arm(stmts[-1]):
                chain = []

    def _apply(self, st: Node, env: dict) -> None:
        t = st.type
        if t == "declaration":
            for d in st.children_by_field_name("declarator"):
                self._declare(d, env)
        elif t == "expression_statement" and st.named_children:
            e = st.named_children[0]
            if e.type == "assignment_expression":
                self._assign(e, env)
            for call in (n for n in walk(e) if n.type == "call_expression"):
                self._query(call, env)
        elif t == "if_statement":
            self._if_assign(st, env)
        elif t in LOOPS:
            self._loop(st, env)

    def _loop(self, st: Node, env: dict) -> None:
        """A loop with no launch in it, run where the port's requires decide it (`loops`)."""
        why = run_loop(
            st,
            env,
            lambda s, e: (
                self._assign(s, e) if s.type == "assignment_expression" else self._apply(s, e)
            ),
            lambda c, e: self.conv(e).node(_unparen(c), line(st)),
            self.binder.task,
        )
        kind = st.type.split("_")[0]
        for name in loop_changes(st) if why else []:
            if name in env and name not in self.passed:
                env[name] = _Lazy(
                    CExprError(
                        f"`{name}`, changed in the {kind} loop at line {line(st)} {why}", line(st)
                    )
                )
        if why is None and loop_changes(st):
            self.notes.append(
                f"the {kind} loop at line {line(st)} is run where the port's requires fix the "
                "sizes its condition reads"
            )

    def _query(self, call: Node, env: dict) -> None:
        """`cudaDeviceGetAttribute(&n, ...)`: n is the target's documented value."""
        try:
            got = self.device.call(call, lambda n: self.conv(env).node(n, line(call)))
        except CExprError as e:
            got = (text(call.child_by_field_name("arguments").named_children[0])[1:], _Lazy(e))
        if got is not None and got[0] not in self.passed:
            env[got[0]] = got[1]
            self.device.set_by_calls.add(got[0])

    def _declare(self, d: Node, env: dict) -> None:
        if d.type == "function_declarator" and _is_dim3(d):
            # `dim3 block(TILE, TILE);` parses as a function declaration (the most vexing parse)
            params = d.child_by_field_name("parameters")
            nodes = (
                [parse_expr(text(p)) for p in params.named_children] if params is not None else []
            )
            if all(n is not None for n in nodes):
                env[text(d.child_by_field_name("declarator"))] = Dim3(self._parts(nodes, env))
            return
        if d.type == "identifier":
            if _is_dim3(d):  # `dim3 grid;` is (1, 1, 1) until assigned
                env[text(d)] = Dim3([])
            return
        if d.type != "init_declarator":
            return
        target = d.child_by_field_name("declarator")
        if target is None or target.type != "identifier":
            return
        name = text(target)
        value = d.child_by_field_name("value")
        if value is None or name in self.passed:
            return
        if value.type in ("argument_list", "initializer_list"):
            parts = self._parts(value.named_children, env)
            env[name] = (
                Dim3(parts)
                if len(value.named_children) > 1 or _is_dim3(d)
                else (parts[0] if parts else num(0))
            )
            if _is_dim3(d):
                env[name] = Dim3(parts)
            return
        if value.type == "call_expression" and callee(value) == "dim3":
            env[name] = Dim3(
                self._parts(value.child_by_field_name("arguments").named_children, env)
            )
            return
        try:
            got = self.conv(env).node(value, line(d))
            env[name] = Dim3([got]) if _is_dim3(d) else got
        except CExprError as e:
            env[name] = _Lazy(e)

    def _parts(self, nodes: list[Node], env: dict) -> list[ast.expr]:
        out = []
        for n in nodes:
            try:
                out.append(self.conv(env).node(n, line(n)))
            except CExprError as e:
                out.append(_Unknown(e))
        return out

    def _assign(self, e: Node, env: dict) -> None:
        left = e.child_by_field_name("left")
        if left is not None and left.type == "field_expression":
            self._assign_field(e, env)
            return
        if left is None or left.type != "identifier" or text(left) in self.passed:
            return
        name = text(left)
        op = text(e.child_by_field_name("operator"))
        right = e.child_by_field_name("right")
        if op == "=" and (isinstance(env.get(name), Dim3) or _dim3_value(right)):
            env[name] = Dim3(self._dims(text(right), env, line(e)))  # grid = dim3(n / 256);
            return
        try:
            value = self.conv(env).node(e.child_by_field_name("right"), line(e))
            if op != "=":
                old = self.conv(env).name(name, line(e))
                ops = {
                    "+=": ast.Add,
                    "-=": ast.Sub,
                    "*=": ast.Mult,
                    "/=": ast.FloorDiv,
                    "%=": ast.Mod,
                }
                if op not in ops:
                    raise CExprError(f"operator {op} on host variable `{name}`", line(e))
                value = ast.BinOp(old, ops[op](), value)
            env[name] = value
        except CExprError as err:
            env[name] = _Lazy(err)

    def _assign_field(self, e: Node, env: dict) -> None:
        """``grid.x = n / 512;`` on a dim3."""
        left = e.child_by_field_name("left")
        obj, field_ = left.child_by_field_name("argument"), left.child_by_field_name("field")
        old = env.get(text(obj))
        if not isinstance(old, Dim3) or text(field_) not in ("x", "y", "z"):
            return
        parts = list(old.parts)
        i = "xyz".index(text(field_))
        op = text(e.child_by_field_name("operator"))
        try:
            value = self.conv(env).node(e.child_by_field_name("right"), line(e))
            if op != "=":
                raise CExprError(f"operator {op} on `{text(left)}`", line(e))
            parts[i] = value
        except CExprError as err:
            parts[i] = _Unknown(err)
        env[text(obj)] = Dim3(parts)

    def _if_assign(self, st: Node, env: dict) -> None:
        """`if (c) v = a; [else v = b;]` on host ints becomes v = c ? a : v."""
        cons, alt = st.child_by_field_name("consequence"), st.child_by_field_name("alternative")
        branch_envs = []
        for br in (
            cons,
            alt.named_children[-1] if alt is not None and alt.type == "else_clause" else alt,
        ):
            sub = dict(env)
            if br is not None:
                for s in br.named_children if br.type == "compound_statement" else [br]:
                    self._apply(s, sub)
            branch_envs.append(sub)
        changed = {k for sub in branch_envs for k in sub if sub.get(k) is not env.get(k)}
        if not changed:
            return
        try:
            cond = self.conv(env).node(_unparen(st.child_by_field_name("condition")), line(st))
        except CExprError as e:
            for k in changed:
                env[k] = _Lazy(e)
            return
        for k in changed:
            a, b = branch_envs[0].get(k), branch_envs[1].get(k)
            if isinstance(a, ast.expr) and isinstance(b, ast.expr):
                env[k] = ast.IfExp(cond, a, b)
            elif isinstance(a, Dim3) and isinstance(b, Dim3):  # each field chosen as a scalar is
                env[k] = Dim3(
                    [
                        x if ast.dump(x) == ast.dump(y) else ast.IfExp(cond, x, y)
                        for x, y in zip(a.parts, b.parts, strict=True)
                    ]
                )
            else:
                env[k] = _Lazy(CExprError(f"host variable `{k}` set under a condition", line(st)))

    def _site(self, site: LaunchSite, env: dict, conds: list[ast.expr]) -> None:
        ln = site.line
        blocks = self._dims(site.grid, env, ln)
        threads = self._dims(site.block, env, ln)
        smem = None
        if site.shared_mem and site.shared_mem.strip() not in ("0", "0u", "0UL"):
            smem = self._value(site.shared_mem, env, ln)
        targs: dict[str, ast.expr] = {}
        for tp, arg in zip(self.kernel.template_params, site.template_args, strict=False):
            if tp.kind == "typename":
                continue
            targs[tp.name] = self._value(arg, env, ln)
        for name, arg in deduced_template_args(self.kernel, site).items():
            targs.setdefault(name, self._value(arg, env, ln))
        kargs: dict[str, ast.expr | CExprError] = {}
        for p, arg in zip(self.kernel.params, site.args, strict=False):
            if p.is_pointer or p.is_reference:
                continue
            try:
                kargs[p.name] = self.conv(env).text(arg, ln)
            except CExprError as e:
                kargs[p.name] = e
        self.sites.append(SiteValues(blocks, threads, smem, targs, kargs, ln, conds))

    def _value(self, src: str, env: dict, ln: int) -> ast.expr:
        try:
            return self.conv(env).text(src, ln)
        except CExprError as e:
            return _Unknown(e)

    def _dims(self, src: str, env: dict, ln: int) -> list[ast.expr]:
        if src.strip().startswith("{"):  # <<<n, {X, Y, 1}>>>
            src = f"dim3{src.strip()}"
        node = parse_expr(src)
        if node is not None and node.type == "identifier" and isinstance(env.get(text(node)), Dim3):
            return list(env[text(node)].parts)
        if node is not None and node.type == "call_expression" and callee(node) == "dim3":
            return Dim3(
                self._parts(node.child_by_field_name("arguments").named_children, env)
            ).parts
        if node is not None and node.type == "compound_literal_expression":
            node = node.child_by_field_name("value")  # dim3{X, Y, 1}
        if node is not None and node.type == "initializer_list":
            return Dim3(self._parts(node.named_children, env)).parts
        return [self._value(src, env, ln), num(1), num(1)]


class _Unknown(ast.Constant):
    """A value that failed to convert; raises when a plan uses it."""

    def __init__(self, error: CExprError):
        super().__init__(value=None)
        self.error = error


def _Not(c: ast.expr) -> ast.expr:  # noqa: N802 - mirrors ast.Not
    return c if isinstance(c, _Unknown) else ast.UnaryOp(ast.Not(), c)


def _any(tests: list[ast.expr]) -> ast.expr:
    return tests[0] if len(tests) == 1 else ast.BoolOp(ast.Or(), list(tests))


def _ends_arm(st: Node) -> bool:
    """A `break;` or `return` ends a switch arm (no fall-through into the next)."""
    while st.type == "compound_statement" and st.named_children:
        st = st.named_children[-1]
    return st.type in ("break_statement", "return_statement")


def _unparen(n: Node) -> Node:
    while (
        n is not None
        and n.type in ("parenthesized_expression", "condition_clause")
        and n.named_children
    ):
        n = n.named_children[-1]
    return n


def _dim3_value(n: Node | None) -> bool:
    """``dim3(...)`` or ``dim3{...}``: a dim3 made in place."""
    return n is not None and (
        (n.type == "call_expression" and callee(n) == "dim3")
        or (n.type == "compound_literal_expression" and text(n).lstrip().startswith("dim3"))
    )


def _is_dim3(d: Node) -> bool:
    decl = d.parent
    return decl is not None and text(decl.child_by_field_name("type")).strip() == "dim3"


def find_unknown(e: ast.expr | None) -> CExprError | None:
    if e is None:
        return None
    for n in ast.walk(e):
        if isinstance(n, _Unknown):
            return n.error
    return None


def _is_launch(n: Node, lines: dict[int, LaunchSite]) -> bool:
    return (
        n.type == "call_expression"
        and line(n) in lines
        and (
            any(c.type == "kernel_call_syntax" for c in n.children)
            or callee(n).startswith("cudaLaunch")
        )
    )
