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

import dataclasses
import functools
import math
import re
from collections.abc import Callable
from typing import Any

from tree_sitter import Node

from mlxport.cuda_syntax import declared_name, function_name, parse, text, walk
from mlxport.translate.host.helpers import call_helper
from mlxport.translate.host.values import (
    MATH,
    SIZES,
    Buffer,
    Dim3,
    HostArg,
    HostEvalError,
    HostLaunch,
    Tensor,
    Unknown,
    binop,
    integral,
    number,
)

_ALLOCATORS = {
    "cudaMalloc",
    "cudaMallocManaged",
    "cudaMallocAsync",
    "cudaMallocHost",
    "cudaHostAlloc",
}
_RANDOM = re.compile(r"make_(random|zeros|ones)\w*|make_\w+_float|malloc|calloc")
_TORCH_MAKE = {
    "zeros",
    "empty",
    "ones",
    "full",
    "rand",
    "randn",
    "zeros_like",
    "empty_like",
    "ones_like",
    "full_like",
    "randn_like",
    "rand_like",
}


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
    """The launch of ``kernel`` at ``case``; ``grid``/``block``/``shared_bytes`` (from flags) replace
    what the host code says; ``types`` are the template types a launcher's ``sizeof(T)`` means where
    no call in the file instantiates it; ``probe`` gives the value of a compile-time constant of the
    device code (``x128::size``) that nothing in the host code defines."""
    data = source.encode()
    tree = parse(data)
    ev = _Evaluator(
        tree.root_node,
        {**case, **{_TYPE + k: v for k, v in (types or {}).items()}},
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
    if sites and not taken and (grid is None or block is None):
        raise HostEvalError(
            f"at this case the host code never launches {kernel}: each launch (line "
            f"{', '.join(str(ev.line(s)) for s in sites)}) is in a branch the case does not take; "
            f"bind other sizes with --case"
        )
    sites = taken
    errors = []
    for site in sites or [None]:
        try:
            return ev.launch(kernel, site, grid, block, shared_bytes)
        except HostEvalError as e:
            errors.append(str(e))
    raise HostEvalError(errors[0])


def file_constants(source: str) -> dict[str, int | float]:
    """The numbers file-scope declarations give (``static const uint COUNT = 240;``)."""
    data = source.encode()
    return _Evaluator(parse(data).root_node, {}, {}, data).constants


_TYPE = "<type>"  # env key prefix: a template type parameter bound by the call, e.g. T -> float


def _template_types(fn: Node, call: Node) -> dict[str, str]:
    """``reduce<float>(...)`` calling ``template <class T> void reduce(...)``: {"<type>T": "float"}."""
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
    return {_TYPE + n: t for n, t in zip(names, types, strict=False)}


def _launches(site: Node, kernel: str) -> bool:
    """The site launches the kernel by name, or through a function pointer its function sets to it
    (``kernel = &transposeNaive; ... kernel<<<grid, threads>>>(...)``)."""
    name = _launched(site.parent)
    if name == kernel:
        return True
    fn = next((a for a in _ancestors(site) if a.type == "function_definition"), None)
    return (
        fn is not None
        and re.search(rf"\b{re.escape(name)}\s*=\s*&?\s*{re.escape(kernel)}\b(?!\s*\()", text(fn))
        is not None
    )


def _launched(call: Node | None) -> str:
    fn = call.child_by_field_name("function") if call is not None else None
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return text(fn).split("::")[-1].strip() if fn is not None else ""


class _Evaluator:
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
        self.functions = {
            function_name(n)[0].split("::")[-1]: n
            for n in walk(root)
            if n.type == "function_definition"
        }

    @functools.cached_property
    def constants(self) -> dict[str, int | float]:
        env: dict[str, Any] = {}
        for c in self.root.named_children:
            if c.type == "declaration":
                self.execute(c, env)
        return {
            k: v for k, v in env.items() if isinstance(v, int | float) and not isinstance(v, bool)
        }

    # -- the launch

    @functools.cached_property
    def aliases(self) -> dict[str, str]:
        """``using accscalar_t = at::acc_type<scalar_t, true>;`` anywhere in the file (dispatch macros
        included, where tree-sitter sees only an error): the one type each name stands for."""
        found: dict[str, set[str]] = {}
        for m in re.finditer(r"\busing\s+(\w+)\s*=\s*([^;{}]+);", text(self.root)):
            t = re.sub(r"\s+", " ", m.group(2)).strip()
            acc = re.fullmatch(r"(?:at::)?acc_type<\s*([\w:]+)\s*,\s*true\s*>", t)
            # PyTorch accumulates half, bfloat16 and float in float on CUDA, double in double
            found.setdefault(m.group(1), set()).add(
                ("double" if acc.group(1) == "double" else "float") if acc else t
            )
        return {k: next(iter(v)) for k, v in found.items() if len(v) == 1}

    def line(self, node: Node) -> int:
        before = [m for m in self.markers if m[0] < node.start_byte]
        if not before:
            return node.start_point[0] + 1
        start, number = before[-1]
        return number + self.data.count(b"\n", start, node.start_byte) - 1

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
        )

    def taken(self, site: Node) -> bool:
        """False where an ``if`` around the launch decides, at the case, for the other branch."""
        for branch, stmt in zip([site, *_ancestors(site)], _ancestors(site), strict=False):
            if stmt.type != "if_statement" or branch == stmt.child_by_field_name("condition"):
                continue
            c = self.value(stmt.child_by_field_name("condition"), self.scope_before(stmt))
            if isinstance(c, int | float | bool) and bool(c) != (
                branch == stmt.child_by_field_name("consequence")
            ):
                return False
        return True

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
        fn = next((a for a in _ancestors(node) if a.type == "function_definition"), None)
        env: dict[str, Any] = {}
        if fn is not None:
            env.update(self.constants)  # file-scope constants: static const uint COUNT = 240;
            env.update(self.params(fn, node, depth))
        env.update({k: v for k, v in self.case.items() if not (k.startswith(_TYPE) and k in env)})
        for stmt in self.statements_before(fn, node):
            self.execute(stmt, env)
        return env

    def params(self, fn: Node, node: Node, depth: int) -> dict[str, Any]:
        """A launcher's parameters: from its caller where one calls it (depth-limited), else unknown."""
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
            env.update(_template_types(fn, caller))
            for n, a in zip(names, args, strict=False):
                v = self.value(a, outer)
                if not isinstance(v, Unknown):
                    env[n] = v
        return env

    def caller(self, name: str) -> Node | None:
        for n in walk(self.root):
            if n.type == "call_expression" and _callee(n) == name:
                return n
        return None

    def statements_before(self, fn: Node | None, node: Node) -> list[Node]:
        """The statements that run before ``node``: those preceding it in each enclosing block."""
        out: list[Node] = []
        chain = [a for a in _ancestors(node) if fn is None or a.start_byte >= fn.start_byte]
        for block in reversed(chain):
            if block.type not in ("compound_statement", "case_statement", "translation_unit"):
                continue
            inner = next(c for c in [node, *_ancestors(node)] if c.parent == block)
            out += [c for c in block.named_children if c.end_byte <= inner.start_byte]
        return out

    def execute(self, stmt: Node, env: dict[str, Any]) -> None:
        if stmt.type == "declaration":
            self.declare(stmt, env)
        elif stmt.type == "expression_statement" and stmt.named_children:
            self.effect(stmt.named_children[0], env)
        elif stmt.type == "for_statement":
            init = stmt.child_by_field_name("initializer")
            if init is not None and init.type == "declaration":
                self.declare(init, env)
        elif stmt.type == "if_statement":  # a branch the case decides: its statements count
            c = self.value(stmt.child_by_field_name("condition"), env)
            if isinstance(c, int | float | bool):
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
            if (
                d.type == "function_declarator"
            ):  # dim3 grid(B, nh): a constructor, parsed as a prototype
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
                if isinstance(v, Buffer):
                    v = dataclasses.replace(v, name=name)
                if isinstance(v, int | float) and type_text.split()[-1:] and integral(type_text):
                    v = int(v)
                env[name] = v

    def construct(self, d: Node, type_text: str, env: dict[str, Any]) -> None:
        name = text(d.child_by_field_name("declarator"))
        if name in self.case:
            env[name] = self.case[name]
            return
        plist = d.child_by_field_name("parameters")
        parts = (
            [
                self.value(e, env) if (e := _parse_expr(text(p))) is not None else Unknown(text(p))
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
        if expr.type == "assignment_expression":
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
        elif expr.type == "call_expression" and _callee(expr) in (
            "cudaMemcpy",
            "cudaMemcpyAsync",
            "memcpy",
        ):
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
        elif expr.type == "call_expression" and _callee(expr) in _ALLOCATORS:
            args = expr.child_by_field_name("arguments").named_children
            if len(args) >= 2:
                target = re.sub(
                    r"^\(\s*void\s*\*\s*\*\s*\)", "", text(args[0]).replace(" ", "")
                ).lstrip("&")
                nbytes = self.value(args[1], env)
                env[target] = Buffer(
                    target,
                    int(nbytes) if isinstance(nbytes, int | float) else None,
                    size_text=self.sized_text(args[1], env),
                )

    # -- expressions

    def value(self, node: Node, env: dict[str, Any]) -> Any:
        t = node.type
        if t == "number_literal":
            return number(text(node))
        if t in ("true", "false"):
            return t == "true"
        if t == "compound_literal_expression" and node.child_by_field_name("value") is not None:
            return self.value(
                node.child_by_field_name("value"), env
            )  # dim3{X, Y, 1}, or <<<N, {X, Y, 1}>>>
        if t == "initializer_list":  # dim3 block = {X, Y, 1};
            parts = [self.value(c, env) for c in node.named_children]
            bad = next((v for v in parts if not isinstance(v, int | float)), None)
            return (
                tuple(int(v) for v in parts)
                if bad is None
                else bad
                if isinstance(bad, Unknown)
                else Unknown(f"cannot evaluate {text(node)}")
            )
        if t in ("parenthesized_expression", "condition_clause"):
            return self.value(node.named_children[-1], env)
        if t == "identifier":
            return self.name(text(node), env)
        if (
            t == "qualified_identifier"
        ):  # std::min's name, or a constant of a type or namespace (x128::size)
            got = self.name(text(node).split("::")[-1], env)
            return (
                self.name(re.sub(r"\s+", "", text(node)), env) if isinstance(got, Unknown) else got
            )
        if t == "binary_expression":
            a, b = (
                self.value(node.child_by_field_name("left"), env),
                self.value(node.child_by_field_name("right"), env),
            )
            op = text(node.child_by_field_name("operator"))
            if isinstance(a, Unknown):
                return a
            if isinstance(b, Unknown):
                return b
            if isinstance(a, Buffer) and isinstance(b, int | float) and op in "+-":
                return a  # x + offset points into x
            if not isinstance(a, int | float) or not isinstance(b, int | float):
                return Unknown(f"cannot evaluate {text(node)}")
            return binop(op, a, b)
        if t == "unary_expression":
            v = self.value(node.child_by_field_name("argument"), env)
            op = text(node.child_by_field_name("operator"))
            if not isinstance(v, int | float):
                return v if isinstance(v, Unknown) else Unknown(f"cannot evaluate {text(node)}")
            if op == "~":
                return ~int(v)
            return -v if op == "-" else (not v) if op in ("!", "not") else v
        if t == "conditional_expression":
            c = self.value(node.child_by_field_name("condition"), env)
            if not isinstance(c, int | float | bool):
                return Unknown(f"cannot decide {text(node)}")
            return self.value(node.child_by_field_name("consequence" if c else "alternative"), env)
        if t == "cast_expression":
            v = self.value(node.child_by_field_name("value"), env)
            tt = text(node.child_by_field_name("type"))
            if isinstance(v, int | float) and "*" not in tt:
                return int(v) if integral(tt) else float(v)
            return v
        if t == "sizeof_expression":
            inner = node.child_by_field_name("type") or (
                node.named_children[0] if node.named_children else None
            )
            name = re.sub(r"\s+", " ", text(inner)).strip("() ")
            name = env.get(_TYPE + name, name)
            if name in SIZES:
                return SIZES[name]
            got = self.probe(f"sizeof({name})") if self.probe is not None else None
            alias = self.aliases.get(name)
            if got is None and alias in SIZES:
                got = SIZES[alias]
            return got if got is not None else Unknown(f"the size of {name} is not known")
        if t == "call_expression":
            return self.call(node, env)
        if t == "field_expression":
            bound = re.sub(r"\s+", "", text(node)).replace("->", ".")
            if bound in self.case:  # --case params.batch=4
                return self.case[bound]
            base = self.value(node.child_by_field_name("argument"), env)
            field_name = text(node.child_by_field_name("field"))
            if isinstance(base, Dim3) and field_name in ("x", "y", "z"):
                return getattr(base, field_name)
            return Unknown(f"cannot evaluate {text(node)}")
        if t == "initializer_list":
            return [self.value(c, env) for c in node.named_children]
        if t == "new_expression":
            decl = node.child_by_field_name("declarator")
            tt = text(node.child_by_field_name("type"))
            if decl is not None and decl.type == "new_declarator":
                n = (
                    self.value(decl.named_children[0], env)
                    if decl.named_children
                    else Unknown("new[]")
                )
                if isinstance(n, int | float) and tt in SIZES:
                    return Buffer("new", int(n) * SIZES[tt])
            return Unknown(f"cannot evaluate {text(node)}")
        if t == "pointer_expression" and text(node).startswith("&"):
            return self.value(node.child_by_field_name("argument"), env)
        return Unknown(f"cannot evaluate {text(node)}")

    def name(self, name: str, env: dict[str, Any]) -> Any:
        if name in env:
            return env[name]
        if name in self.case:
            return self.case[name]
        if name in self.defines:
            body = self.defines[name].strip()
            parsed = _parse_expr(body)
            return (
                self.value(parsed, env)
                if parsed is not None
                else Unknown(f"the macro {name} is not a number")
            )
        if name in ("INFINITY", "HUGE_VALF"):
            return math.inf
        if name in ("M_PI",):
            return math.pi
        if name == "C10_WARP_SIZE":  # PyTorch's warp size on CUDA (64 only on ROCm)
            return 32
        # a constant of the device code (x128::size, WARP_SIZE); host variables are never probed
        if (
            self.probe is not None
            and re.fullmatch(r"[A-Z][A-Z0-9_]*|\w+(::\w+)+", name)
            and (got := self.probe(name)) is not None
        ):
            return got
        return Unknown(f"nothing gives {name} a value")

    def call(self, node: Node, env: dict[str, Any]) -> Any:
        name = _callee(node)
        args = node.child_by_field_name("arguments").named_children
        if name in ("data_ptr", "data", "contiguous", "cuda", "to", "view", "reshape"):
            return (
                self.value(_receiver(node), env) if _receiver(node) is not None else Unknown(name)
            )
        if name in ("size", "shape") and _receiver(node) is not None:
            t = self.value(_receiver(node), env)
            i = self.value(args[0], env) if args else None
            if isinstance(t, Tensor) and isinstance(i, int) and i in t.dims:
                return t.dims[i]
            if isinstance(t, Buffer) and t.shape is not None and isinstance(i, int):
                return t.shape[i]
            return Unknown(f"{text(node)} is not known: bind the name it is assigned to")
        if name in ("numel",) and _receiver(node) is not None:
            t = self.value(_receiver(node), env)
            if isinstance(t, Buffer) and t.shape is not None:
                return math.prod(t.shape)
            return Unknown(f"{text(node)} is not known")
        if name in _TORCH_MAKE:
            return self.torch(name, node, args, env)
        if name in MATH:
            vals = [self.value(a, env) for a in args]
            bad = next((v for v in vals if not isinstance(v, int | float)), None)
            if bad is not None:
                return bad if isinstance(bad, Unknown) else Unknown(f"cannot evaluate {text(node)}")
            return MATH[name](*vals)
        if name in ("dim3", "make_uint3", "make_int3"):
            vals = [self.value(a, env) for a in args]
            return (
                Dim3(*vals)
                if all(isinstance(v, int | float) for v in vals)
                else Unknown(f"{text(node)}")
            )
        if _RANDOM.fullmatch(name):
            n = self.value(args[0], env) if args else None
            scale = 1 if name.startswith("make_") else 1
            return Buffer(
                name,
                int(n) * 4 * scale
                if isinstance(n, int | float) and name.startswith("make_")
                else int(n)
                if isinstance(n, int | float)
                else None,
            )
        if len(args) == 1 and (
            name in SIZES or _TYPE + name in env or name in self.aliases
        ):  # U(epsilon)
            v = self.value(args[0], env)
            t = env.get(_TYPE + name, name)
            t = self.aliases.get(t, t)
            return (int(v) if integral(t) else float(v)) if isinstance(v, int | float) else v
        fn = self.functions.get(name)
        if fn is not None:
            return call_helper(self, fn, [self.value(a, env) for a in args])
        return Unknown(f"{name}() is host code the executor does not evaluate")

    def torch(self, name: str, node: Node, args: list[Node], env: dict[str, Any]) -> Any:
        if name.endswith("_like"):
            src = self.value(args[0], env) if args else None
            fill = 0.0 if name.startswith("zeros") else 1.0 if name.startswith("ones") else None
            if isinstance(src, Tensor):
                named = len(src.names) == len(src.dims)
                return Buffer(
                    name,
                    shape=src.shape(),
                    fill=fill,
                    dims=tuple(src.names[i] for i in range(len(src.dims)))
                    if named and src.shape()
                    else None,
                )
            return Buffer(
                name,
                shape=src.shape if isinstance(src, Buffer) else None,
                fill=fill,
                dims=src.dims if isinstance(src, Buffer) else None,
            )
        dims = self.value(args[0], env) if args else None
        shape = (
            tuple(int(d) for d in dims)
            if isinstance(dims, list) and all(isinstance(d, int | float) for d in dims)
            else None
        )
        names = None
        if (
            args
            and args[0].type == "initializer_list"
            and all(c.type == "identifier" and text(c) in self.case for c in args[0].named_children)
        ):
            names = tuple(text(c) for c in args[0].named_children)
        fill = {"zeros": 0.0, "ones": 1.0}.get(name)
        if name == "full" and len(args) > 1:
            v = self.value(args[1], env)
            fill = float(v) if isinstance(v, int | float) else None
        return Buffer(name, shape=shape, fill=fill, dims=names)

    def sized_text(self, node: Node, env: dict[str, Any]) -> str | None:
        """The byte count as an expression over the case's names (sizeof() evaluated), where it is one."""
        out = text(node)
        for n in walk(node):
            if n.type == "sizeof_expression":
                v = self.value(n, env)
                if not isinstance(v, int):
                    return None
                out = out.replace(text(n), str(v))
            elif n.type == "identifier" and text(n) in self.constants:
                out = re.sub(rf"\b{text(n)}\b", str(self.constants[text(n)]), out)
            elif (
                n.type == "identifier"
                and text(n) not in self.case
                or n.type in ("call_expression", "field_expression", "conditional_expression")
            ):
                return None
        return re.sub(r"\(\s*(?:size_t|int|long|unsigned)\s*\)", "", out)


def _ancestors(node: Node):
    cur = node.parent
    while cur is not None:
        yield cur
        cur = cur.parent


def _callee(call: Node) -> str:
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    if fn is not None and fn.type == "field_expression":
        fn = fn.child_by_field_name("field")
    return text(fn).split("<")[0].split("::")[-1].strip() if fn is not None else ""


def _receiver(call: Node) -> Node | None:
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return (
        fn.child_by_field_name("argument")
        if fn is not None and fn.type == "field_expression"
        else None
    )


def _parse_expr(src: str) -> Node | None:
    from mlxport.cuda_syntax import parse_expr

    return parse_expr(src)
