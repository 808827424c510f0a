"""The host code of a .cu file evaluated at a case: the launch of one kernel (grid, block, dynamic
shared memory, template arguments) and what each of its arguments is.

The host code never runs. Its statements before the launch are read in order and evaluated where
they are arithmetic (declarations, assignments, ``dim3``, ``sizeof``, a few math functions, the
file's macros and its one-line helper functions), with the case's names bound first: a name the
case binds wins over the value the code gives it. Buffers are followed from where the host makes
them (``cudaMalloc``, ``malloc``, ``new T[n]``, torch's ``zeros``/``empty``/``*_like``, a tensor's
``size(i)`` assigned to a name the case binds) to the kernel's pointer arguments, through
launcher functions and their callers. What stays unknown is named in one sentence.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from mlxport.cuda_syntax import (
    ancestors,
    declared_name,
    function_name,
    identifiers,
    parse,
    text,
    walk,
)
from mlxport.translate.host.expressions import TYPE_KEY, host_callee
from mlxport.translate.host.statements import HostStatements
from mlxport.translate.host.values import (
    Buffer,
    Dim3,
    HostArg,
    HostEvalError,
    HostLaunch,
    NullPointer,
    Tensor,
    Unknown,
)


def evaluate_launch(
    source: str,
    kernel: str,
    case: dict[str, Any],
    defines: dict[str, str] | None = None,
    grid: Any = None,
    block: Any = None,
    shared_bytes: Any = None,
    types: dict[str, str] | None = None,
    probe: Callable[[str], int | None] | None = None,
) -> HostLaunch:
    """The launch of ``kernel`` at ``case``; ``grid``/``block``/``shared_bytes`` (from flags)
    replace what the host code says; ``types`` are the template types a launcher's ``sizeof(T)``
    means where no call in the file instantiates it; ``probe`` gives the value of a compile-time
    constant of the device code (``x128::size``) that nothing in the host code defines."""
    data = source.encode()
    tree = parse(data)
    ev = HostEvaluator(
        tree.root_node,
        {**case, **{TYPE_KEY + k: v for k, v in (types or {}).items()}},
        defines or {},
        data,
        probe,
    )
    sites = [
        n for n in walk(tree.root_node) if n.type == "kernel_call_syntax" and _launches(n, kernel)
    ]
    if not sites and (grid is None or block is None):
        raise HostEvalError(
            f"the host code never launches {kernel} with <<<...>>>: pass --grid and --block"
        )
    taken = [s for s in sites if ev.taken(s)]  # `if (cols <= 1024) k<T, 128><<<...>>> else ...`
    if sites and not taken:  # a launcher called with other arguments by another caller
        for route in (r for s in sites for r in ev.routes(s)):
            ev.route = route
            taken = [s for s in sites if ev.taken(s)]
            if taken:
                break
        else:
            ev.route = {}
    if sites and not taken and (grid is None or block is None):
        raise HostEvalError(
            f"at this case the host code never launches {kernel}: each launch (line "
            f"{', '.join(str(ev.line(s)) for s in sites)}) is in a branch the case does not take; "
            f"bind other sizes with --case"
        )
    if len(taken) > 1 and (why := ev.undecided(taken[0], kernel)):
        raise HostEvalError(why)
    chosen = len(sites) > 1 or bool(ev.route)
    sites = taken
    errors = []
    for site in sites or [None]:
        try:
            launch = ev.launch(kernel, site, grid, block, shared_bytes)
        except HostEvalError as e:
            errors.append(str(e))
            continue
        launch.arm = launch.arm if chosen else ""  # one launch in the file: nothing was chosen
        # a lone launch in a `switch` arm is chosen too: other values of its selector launch none
        launch.rules = ev.rules(site) if site is not None else []
        return launch
    raise HostEvalError(errors[0])


@dataclass(frozen=True)
class Decision:
    """An ``if`` or ``switch`` around a launch: the branch the launch is in, as the code writes it,
    whether the case takes it (None where it does not decide), and the condition's value."""

    stmt: Node
    arm: str
    taken: bool | None
    value: Any


def _short(s: str) -> str:
    s = re.sub(r"\s+", " ", s)
    return s if len(s) <= 60 else s[:57] + "..."


def _label(arm: Node) -> str:
    value = arm.child_by_field_name("value")
    return f"`case {text(value)}:`" if value is not None else "`default:`"


def _condition(stmt: Node) -> Node:
    return stmt.child_by_field_name("condition")


def file_constants(source: str) -> dict[str, int | float]:
    """The numbers file-scope declarations give (``static const uint COUNT = 240;``)."""
    data = source.encode()
    return HostEvaluator(parse(data).root_node, {}, {}, data).constants


def _template_types(fn: Node, call: Node) -> dict[str, str]:
    """``reduce<float>(...)`` calling ``template <class T> void reduce(...)``:
    {"<type>T": "float"}."""
    callee = call.child_by_field_name("function")
    decl = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else None
    if callee is None or callee.type != "template_function" or decl is None:
        return {}
    params = decl.child_by_field_name("parameters")
    names = (
        [text(p.named_children[-1]) for p in params.named_children if p.named_children]
        if params
        else []
    )
    types = [text(a) for a in callee.child_by_field_name("arguments").named_children]
    return {TYPE_KEY + n: t for n, t in zip(names, types, strict=False)}


def _launches(site: Node, kernel: str) -> bool:
    """The site launches the kernel by name, or through a function pointer its function sets to it
    (``kernel = &transposeNaive; ... kernel<<<grid, threads>>>(...)``)."""
    name = _launched(site.parent)
    if name == kernel:
        return True
    fn = next((a for a in ancestors(site) if a.type == "function_definition"), None)
    if fn is None or not name:
        return False
    own = re.escape(name)
    if re.search(rf"\b{own}\s*=\s*&?\s*{re.escape(kernel)}\b(?!\s*\()", text(fn)):
        return True
    # `fp kernel = pick_kernel(bpw);` where pick_kernel returns `layer_norm_kernel<bpw>`
    picker = re.search(rf"\b{own}\s*=\s*(\w+)\s*\(", text(fn))
    root = next((a for a in ancestors(site) if a.type == "translation_unit"), None)
    return picker is not None and root is not None and _returns(root, picker[1], kernel)


def _returns(root: Node, function: str, kernel: str) -> bool:
    """Whether a function of the file returns the kernel (a pointer to one of its instances)."""
    return any(
        n.type == "function_definition"
        and function_name(n)[0].split("::")[-1] == function
        and re.search(rf"\breturn\s+&?\s*{re.escape(kernel)}\b", text(n))
        for n in root.named_children
    )


def _launched(call: Node | None) -> str:
    fn = call.child_by_field_name("function") if call is not None else None
    # `vllm::kernel<T, true>`: the innermost name, whatever the template arguments hold
    while fn is not None and fn.type == "qualified_identifier" and fn.child_by_field_name("name"):
        fn = fn.child_by_field_name("name")
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return text(fn).split("::")[-1].strip() if fn is not None else ""


class HostEvaluator(HostStatements):
    """The host code of one file evaluated at one case."""

    def __init__(
        self,
        root: Node,
        case: dict[str, Any],
        defines: dict[str, str],
        data: bytes = b"",
        probe: Callable[[str], int | None] | None = None,
    ):
        self.root = root
        self.probe = functools.cache(probe) if probe is not None else None
        self.case = dict(case)
        self.defines = defines
        # preprocessed text carries `# N "file"` markers: lines are reported as the file's own
        self.markers = [
            (m.start(), int(m.group(1))) for m in re.finditer(rb'(?m)^# (\d+) "[^"]*"', data)
        ]
        self.data = data
        self.inlining = 0
        self.route: dict[str, Node] = {}  # function -> the call its parameters come from
        self.calls: dict[str, list[Node]] | None = None  # callee -> its calls, in order
        self.functions = {
            function_name(n)[0].split("::")[-1]: n
            for n in walk(root)
            if n.type == "function_definition"
        }

    @functools.cached_property
    def constants(self) -> dict[str, int | float]:
        """File-scope constants at this case: `const int M = sizeof(real) * N;` with the case's N
        (the file's own `const int N` yields to it)."""
        return self._file_constants(self.case)

    @functools.cached_property
    def derived(self) -> set[str]:
        """File-scope constants whose value the case changes: a size, not a number."""
        static = self._file_constants({})
        return {k for k, v in self.constants.items() if static.get(k) != v}

    def _file_constants(self, case: dict[str, Any]) -> dict[str, int | float]:
        env: dict[str, Any] = dict(case)
        for c in self.root.named_children:
            if c.type == "declaration":
                self.execute(c, env)
                env.update(case)
        return {
            k: v
            for k, v in env.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and k not in case
        }

    # -- the launch

    @functools.cached_property
    def aliases(self) -> dict[str, str]:
        """``using accscalar_t = at::acc_type<scalar_t, true>;`` anywhere in the file (dispatch
        macros included, where tree-sitter sees only an error): the one type each name stands
        for."""
        found: dict[str, set[str]] = {}
        for m in re.finditer(r"\busing\s+(\w+)\s*=\s*([^;{}]+);", text(self.root)):
            t = re.sub(r"\s+", " ", m.group(2)).strip()
            acc = re.fullmatch(r"(?:at::)?acc_type<\s*([\w:]+)\s*,\s*true\s*>", t)
            # PyTorch accumulates half, bfloat16 and float in float on CUDA, double in double
            found.setdefault(m.group(1), set()).add(
                ("double" if acc.group(1) == "double" else "float") if acc else t
            )
        return {k: next(iter(v)) for k, v in found.items() if len(v) == 1}

    def launch(self, kernel: str, site: Node | None, grid, block, shared) -> HostLaunch:
        env = self.scope_before(site) if site is not None else dict(self.case)
        call = site.parent if site is not None else None
        config = [c for c in site.named_children] if site is not None else []
        g = self.dim3(grid if grid is not None else config[0], env, "the grid")
        b = self.dim3(block if block is not None else config[1], env, "the block size")
        smem = shared if shared is not None else (config[2] if len(config) > 2 else 0)
        smem = self.number(smem, env, "the dynamic shared memory size")
        targs: list[str] = []
        fn = call.child_by_field_name("function") if call is not None else None
        if fn is not None and fn.type == "template_function":
            for a in fn.child_by_field_name("arguments").named_children:
                targs.append(self.template_arg(a, env))
        args = []
        arg_list = call.child_by_field_name("arguments") if call is not None else None
        for a in arg_list.named_children if arg_list is not None else []:
            args.append(HostArg(text(a), self.value(a, env)))
        return HostLaunch(
            kernel,
            self.line(site) if site is not None else 0,
            g.tuple(),
            b.tuple(),
            int(smem),
            targs,
            args,
            self.arm(site, kernel) if site is not None else "",
        )

    def taken(self, site: Node) -> bool:
        """False where an ``if`` or ``switch`` around the launch decides, at the case, for
        another branch."""
        return all(d.taken is not False for d in self.decisions(site))

    def decisions(self, site: Node) -> list[Decision]:
        """Each ``if`` and ``switch`` around the launch, innermost first: the branch the launch is
        in, and whether the case takes it (None where the case does not decide)."""
        out = []
        for branch, stmt in zip([site, *ancestors(site)], ancestors(site), strict=False):
            if stmt.type == "if_statement" and branch != stmt.child_by_field_name("condition"):
                cond = stmt.child_by_field_name("condition")
                c = self.value(cond, self.scope_before(stmt))
                c = False if isinstance(c, NullPointer) else c  # `if (bias)`
                inside = branch == stmt.child_by_field_name("consequence")
                arm = f"`if {text(cond)}`" if inside else f"the `else` of `if {text(cond)}`"
                known = isinstance(c, int | float | bool)
                out.append(Decision(stmt, arm, bool(c) == inside if known else None, c))
            elif branch.type == "case_statement" and stmt.parent is not None:
                switch = stmt.parent
                if switch.type != "switch_statement":
                    continue
                cond = switch.child_by_field_name("condition")
                arms = self.switch_arms(switch, self.scope_before(switch))
                took = branch in arms if isinstance(arms, list) else None
                arm = _label(branch)
                if took and arms[0] != branch:  # case 96: case 128: k<128><<<...>>>
                    arm = f"{_label(arms[0])} (falling through to {arm})"
                out.append(Decision(switch, f"{arm} of `switch {text(cond)}`", took, arms))
        return out

    def arm(self, site: Node, kernel: str) -> str:
        """Where the launch is among the branches the case decides, with the names that decide
        them: '' for a launch outside any."""
        chosen = [d for d in self.decisions(site) if d.taken]
        if not chosen:
            return ""
        where = ", in ".join(f"{d.arm} (line {self.line(d.stmt)})" for d in chosen)
        names = sorted(
            {n for d in chosen for n in identifiers(_condition(d.stmt)) if n in self.case}
        )
        bound = ", ".join(f"{n}={self.case[n]}" for n in names)
        through = "".join(
            f", reached through `{_short(text(c))}` (line {self.line(c)})"
            for c in self.route.values()
        )
        return (
            f"the launch of {kernel} at line {self.line(site)} is the one in {where}, "
            f"which the case takes" + (f" ({bound})" if bound else "") + through
        )

    def rules(self, site: Node) -> list[str]:
        """``K == 256`` for each ``switch (K)`` arm the case takes to the launch, K a name the case
        binds: the sizes that take the same arm."""
        out = []
        for d in self.decisions(site):
            cond = _condition(d.stmt)
            while cond.type in ("condition_clause", "parenthesized_expression"):
                cond = cond.named_children[-1]
            if not d.taken or d.stmt.type != "switch_statement" or text(cond) not in self.case:
                continue
            label = d.value[0].child_by_field_name("value")
            got = self.value(label, self.scope_before(d.stmt)) if label is not None else None
            if cond.type == "identifier" and type(got) is int:
                out.append(f"{text(cond)} == {got}")
        return out

    def undecided(self, site: Node, kernel: str) -> str | None:
        """Why the case does not decide the innermost ``switch`` around the launch, or None."""
        for d in self.decisions(site):
            if d.stmt.type == "switch_statement" and d.taken is None:
                cond = _condition(d.stmt)
                why = d.value.why if isinstance(d.value, Unknown) else f"{text(cond)} is not known"
                names = ", ".join(sorted(identifiers(cond) - set(self.case))) or text(cond)
                return (
                    f"each launch of {kernel} is in an arm of `switch {text(cond)}` (line "
                    f"{self.line(d.stmt)}), which this case does not decide: {why}; bind {names} "
                    f"with --case"
                )
        return None

    def template_arg(self, node: Node, env: dict) -> str:
        if node.type == "type_descriptor":  # <T, BLOCK>: a name, parsed as a type, may be a number
            v = env.get(text(node).strip(), self.case.get(text(node).strip()))
            return (
                ("true" if v else "false")
                if isinstance(v, bool)
                else str(int(v))
                if isinstance(v, int | float) and float(v).is_integer()
                else text(node)
            )
        v = self.value(node, env)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float) and float(v).is_integer():
            return str(int(v))
        return text(node)

    def dim3(self, value: Any, env: dict, what: str) -> Dim3:
        v = self.value(value, env) if isinstance(value, Node) else value
        if isinstance(v, tuple | list):
            v = Dim3(*[int(x) for x in v])
        if isinstance(v, int | float):
            v = Dim3(int(v))
        if (
            isinstance(v, Dim3)
            and (bad := next((f for f in (v.x, v.y, v.z) if not isinstance(f, int | float)), None))
            is not None
        ):
            v = bad
        if not isinstance(v, Dim3):
            raise HostEvalError(self.unknown(v, what, value))
        return v

    def number(self, value: Any, env: dict, what: str) -> float | int:
        v = self.value(value, env) if isinstance(value, Node) else value
        if not isinstance(v, int | float | bool):
            raise HostEvalError(self.unknown(v, what, value))
        return v

    def unknown(self, v: Any, what: str, node: Any) -> str:
        why = v.why if isinstance(v, Unknown) else f"it is {type(v).__name__}"
        where = f" ({text(node)}, line {self.line(node)})" if isinstance(node, Node) else ""
        flag = {"the grid": "--grid", "the block size": "--block"}.get(what, "--shared-bytes")
        return f"{what}{where} is not known at this case: {why}; bind it with --case or pass {flag}"

    # -- statements before a node, through the functions that call its function

    def scope_before(self, node: Node, depth: int = 0) -> dict[str, Any]:
        fn = next((a for a in ancestors(node) if a.type == "function_definition"), None)
        env: dict[str, Any] = {}
        if fn is not None:
            env.update(self.constants)  # file-scope constants: static const uint COUNT = 240;
            env.update(self.params(fn, node, depth))
        env.update(
            {k: v for k, v in self.case.items() if not (k.startswith(TYPE_KEY) and k in env)}
        )
        for stmt in self.statements_before(fn, node):
            self.execute(stmt, env)
        return env

    def params(self, fn: Node, node: Node, depth: int) -> dict[str, Any]:
        """A launcher's parameters: from its caller where one calls it (depth-limited), else
        unknown."""
        name, decl = function_name(fn)
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        names = [declared_name(p) for p in plist.named_children] if plist is not None else []
        types = [text(p) for p in plist.named_children] if plist is not None else []
        env: dict[str, Any] = {}
        for n, t in zip(names, types, strict=True):
            if "Tensor" in t:
                env[n] = Tensor(n)
            elif "*" in t:
                env[n] = Buffer(n)
            else:
                env[n] = Unknown(f"{n} is a parameter of {name.split('::')[-1]}()")
        caller = self.caller(name.split("::")[-1]) if depth < 4 else None
        if caller is not None:
            outer = self.scope_before(caller, depth + 1)
            args = caller.child_by_field_name("arguments").named_children
            for k, t in _template_types(fn, caller).items():  # <T> of a templated caller: its T
                env[k] = outer.get(TYPE_KEY + t, t)
            for n, a in zip(names, args, strict=False):
                v = self.value(a, outer)
                if not isinstance(v, Unknown):
                    env[n] = v
        return env

    def caller(self, name: str) -> Node | None:
        """The call the launcher's parameters come from: the one `routes` chose, else the
        first."""
        if name in self.route:
            return self.route[name]
        return next(iter(self.callers(name)), None)

    def callers(self, name: str) -> list[Node]:
        if self.calls is None:  # walked once: a large file's host code asks for many callers
            self.calls = {}
            for n in walk(self.root):
                if n.type == "call_expression":
                    self.calls.setdefault(host_callee(n), []).append(n)
        return self.calls.get(name, [])

    def routes(self, node: Node, depth: int = 0) -> list[dict[str, Node]]:
        """Each choice of a call for each function between ``node`` and the host code's entry
        (`timing(h_x, d_x, 2)` among main's three calls of timing), at most 64."""
        fn = next((a for a in ancestors(node) if a.type == "function_definition"), None)
        if fn is None or depth >= 4:
            return [{}]
        name = function_name(fn)[0].split("::")[-1]
        out = []
        for call in self.callers(name)[:8]:
            out += [{name: call, **rest} for rest in self.routes(call, depth + 1)]
        return out[:64] or [{}]

    def statements_before(self, fn: Node | None, node: Node) -> list[Node]:
        """The statements that run before ``node``: those preceding it in each enclosing block."""
        out: list[Node] = []
        chain = [a for a in ancestors(node) if fn is None or a.start_byte >= fn.start_byte]
        for block in reversed(chain):
            init = (
                block.child_by_field_name("initializer") if block.type == "for_statement" else None
            )
            if init is not None and init.end_byte <= node.start_byte:
                out.append(init)  # a launch in a for loop as its first iteration runs it
            if block.type not in ("compound_statement", "case_statement", "translation_unit"):
                continue
            inner = next(c for c in [node, *ancestors(node)] if c.parent == block)
            out += [c for c in block.named_children if c.end_byte <= inner.start_byte]
        return out
