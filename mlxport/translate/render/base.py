"""Rendering a kernel's tree back to source: a node's text with its children replaced by their
rendering, and rules that replace whole nodes. The base rule, shared by both targets, splits
read-write pointers: reads come from the input, writes go to its output."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tree_sitter import Node

from mlxport.cuda_syntax import ancestors, callee, declared_name, line, text, walk
from mlxport.translate.bind.kernel_facts import KernelFacts


class RenderError(Exception):
    def __init__(self, construct: str, node_line: int, reason: str):
        super().__init__(f"{construct} at line {node_line}: {reason}")
        self.construct = construct
        self.line = node_line
        self.reason = reason


@dataclass
class FnCtx:
    """What names mean in the function being rendered."""

    kind: str  # "kernel" | "helper"
    # pointer/array/ref -> address spaces
    spaces: dict[str, frozenset[str]] = field(default_factory=dict)
    name: str = ""
    # cooperative-group variable -> tile width (0: block)
    groups: dict[str, int] = field(default_factory=dict)


def short(s: str) -> str:
    """`s` on one line, cut to 48 characters (for naming a construct in an error)."""
    s = re.sub(r"\s+", " ", s)
    return s if len(s) <= 48 else s[:45] + "..."


def call_args(call: Node) -> list[Node]:
    a = call.child_by_field_name("arguments")
    return [c for c in a.named_children if c.type != "comment"] if a is not None else []


_LVALUES = ("subscript_expression", "field_expression", "pointer_expression")


def declared_type(value: Node) -> str | None:
    """The type a local variable or parameter named by ``value`` is declared with, as written."""
    if value.type != "identifier":
        return None
    fn = value
    while fn is not None and fn.type != "function_definition":
        fn = fn.parent
    for n in walk(fn) if fn is not None else []:
        if n.type in ("declaration", "parameter_declaration") and any(
            declared_name(d) == text(value) for d in n.children_by_field_name("declarator")
        ):
            return text(n.child_by_field_name("type")).strip()
    return None


def root_name(node: Node | None) -> str | None:
    """The variable a pointer or lvalue expression is based on (`p` in `((float4*)p)[i].x`)."""
    leaf = root_node(node)
    return text(leaf) if leaf is not None else None


def root_node(node: Node | None) -> Node | None:
    """The identifier `root_name` names."""
    for _ in range(64):
        if node is None:
            return None
        t = node.type
        if t == "identifier":
            return node
        if t == "binary_expression":
            node = node.child_by_field_name("left")
        elif t == "cast_expression":
            node = node.child_by_field_name("value")
        elif t in (
            "pointer_expression",
            "subscript_expression",
            "field_expression",
            "update_expression",
        ):
            node = node.child_by_field_name("argument")
        elif t == "parenthesized_expression":
            node = node.named_children[-1]
        elif t == "call_expression" and callee(node) in (
            "reinterpret_cast",
            "static_cast",
            "const_cast",
        ):
            args = call_args(node)
            node = args[0] if args else None
        else:
            return None
    return None


def assigned(node: Node) -> Node | None:
    """The lvalue of an assignment or update expression."""
    return (
        node.child_by_field_name("left")
        if node.type == "assignment_expression"
        else node.child_by_field_name("argument")
    )


def dereferences(lvalue: Node | None) -> bool:
    return lvalue is not None and lvalue.type in (
        "subscript_expression",
        "pointer_expression",
        "field_expression",
    )


def namespace_of(node: Node) -> str:
    """The namespace a definition is in, as a call outside it names it (`a::b`; "" for none or
    an anonymous one)."""
    names = []
    for a in ancestors(node):
        if a.type == "namespace_definition":
            name = a.child_by_field_name("name")
            if name is None:
                return ""
            names.append(text(name))
    return "::".join(reversed(names))


def namespace_lines(kernel: Node) -> list[str]:
    """`using namespace` for each namespace the kernel sits in, outermost first: its body, moved
    out of them, still names their helpers unqualified (`silu(x)` in `namespace vllm`)."""
    parts = namespace_of(kernel).split("::") if namespace_of(kernel) else []
    return [f"using namespace {'::'.join(parts[: i + 1])};" for i in range(len(parts))]


def splice(src: bytes, node: Node, part: Callable[[Node], str]) -> str:
    """The source text of `node` with each child replaced by `part(child)`."""
    out, pos = [], node.start_byte
    for c in node.children:
        out.append(src[pos : c.start_byte].decode("utf-8", "replace"))
        out.append(part(c))
        pos = c.end_byte
    out.append(src[pos : node.end_byte].decode("utf-8", "replace"))
    return "".join(out)


_FLOAT_MACROS = {
    "FLT_MAX": "3.402823466e+38F",
    "FLT_MIN": "1.175494351e-38F",
    "FLT_EPSILON": "1.192092896e-07F",
    # <math.h>'s constants: Metal names them M_PI_F and so on
    "M_PI": "3.14159265358979323846F",
    "M_PI_2": "1.57079632679489661923F",
    "M_PI_4": "0.78539816339744830962F",
    "M_1_PI": "0.31830988618379067154F",
    "M_2_PI": "0.63661977236758134308F",
    "M_2_SQRTPI": "1.12837916709551257390F",
    "M_SQRT2": "1.41421356237309504880F",
    "M_SQRT1_2": "0.70710678118654752440F",
    "M_E": "2.71828182845904523536F",
    "M_LN2": "0.69314718055994530942F",
    "M_LN10": "2.30258509299404568402F",
    "M_LOG2E": "1.44269504088896340736F",
}


def float_limit_guards(code: str) -> str:
    """Guarded #defines of the <cfloat> limits and <math.h> constants that `code` uses."""
    return "".join(
        f"#ifndef {k}\n#define {k} {v}\n#endif\n"
        for k, v in _FLOAT_MACROS.items()
        if re.search(rf"\b{k}\b", code)
    )


class TreeRender:
    def __init__(self, src: bytes, facts: KernelFacts, notes: list[str]):
        self.src = src
        self.facts = facts
        self.notes = notes
        self.override: dict[int, Callable[[Node], str]] = {}
        # the body reads a read-write buffer back: the header needs the helper
        self.reads_back = False

    def render(self, node: Node, ctx: FnCtx) -> str:
        hook = self.override.get(node.id)
        if hook is not None:
            return hook(node)
        rule = self.rule(node, ctx)
        if rule is not None:
            return rule
        return self.copy(node, ctx)

    def copy(self, node: Node, ctx: FnCtx, skip: Callable[[Node], str | None] | None = None) -> str:
        """The node's text with its children rendered, or replaced by `skip(child)` where not
        None."""
        if not node.children:
            return self.leaf(node)

        def part(c: Node) -> str:
            got = skip(c) if skip is not None else None
            return got if got is not None else self.render(c, ctx)

        return splice(self.src, node, part)

    def leaf(self, node: Node) -> str:
        return text(node)

    def rule(self, node: Node, ctx: FnCtx) -> str | None:
        if node.type in ("assignment_expression", "update_expression"):
            return self.assignment(node, ctx)
        if node.type == "subscript_expression":
            return self.read_back(node, ctx)
        return None

    # the helper read_back calls, per target; P and Q may be device or constant pointers
    READ_BACK = {
        # a vector element (a float4 view) is read back component by component
        "msl": "template <typename T> inline T mlxport_kept(T v, T in) {\n"
        "  return isnan(float(v)) ? in : v;\n}\n"
        "template <typename T, int N> inline vec<T, N> mlxport_kept(vec<T, N> v, vec<T, N> in) {\n"
        "  return select(v, in, isnan(vec<float, N>(v)));\n}\n"
        "template <typename P, typename Q, typename I>\n"
        "inline auto mlxport_read_back(P out, Q in, I i) {\n"
        "  auto v = out[i];\n  return mlxport_kept(v, decltype(v)(in[i]));\n}\n",
        "cuda": "template <typename P, typename Q, typename I>\n"
        "__device__ inline auto mlxport_read_back(P out, Q in, I i) {\n"
        "  auto v = out[i];\n  return isnan(float(v)) ? decltype(v)(in[i]) : v;\n}\n",
    }

    def read_back(self, node: Node, ctx: FnCtx) -> str | None:
        """``x[i]`` of a read-write ``x`` read through its output: what the kernel wrote there, else
        the input's element (the output starts as NaN)."""
        root = node.child_by_field_name("argument")
        if (
            ctx.kind != "kernel"
            or root is None
            or root.type != "identifier"
            or text(root) not in self.facts.read_through
        ):
            return None
        parent = node.parent
        if parent is not None and parent.type == "pointer_expression":
            return None  # &x[i] stays the input's address
        index = node.child_by_field_name("indices") or node.named_children[-1]
        inner = (
            index.named_children[0]
            if index.type == "subscript_argument_list" and index.named_children
            else index
        )
        self.reads_back = True
        output, index = self.facts.rw[text(root)], self.render(inner, ctx)
        return f"mlxport_read_back({output}, {text(root)}, {index})"

    def assignment(self, node: Node, ctx: FnCtx) -> str | None:
        """A store through a read-write pointer, redirected to its output."""
        if ctx.kind != "kernel":
            return None
        left = assigned(node)
        root = root_name(left)
        if root in self.facts.rw and left.type == "identifier" and text(left) == root:
            return self.advance(node, root, ctx)
        if root not in self.facts.rw or not dereferences(left):
            return None
        if node.type == "update_expression":
            raise RenderError(
                f"`{text(node)}`", line(node), f"in-place update of read-write `{root}`"
            )
        op = text(node.child_by_field_name("operator"))
        target = self.rename_root(left, root, self.facts.rw[root], ctx)
        right = self.render(node.child_by_field_name("right"), ctx)
        if op == "=":
            return f"{target} = {right}"
        return f"{target} = {self.render(left, ctx)} {op[:-1]} ({right})"

    def advance(self, node: Node, root: str, ctx: FnCtx) -> str:
        """`C += off` on a read-write pointer moves its output along: `(C += off, C_out += off)`."""
        out = self.facts.rw[root]
        if node.type == "update_expression":
            op = text(node.child_by_field_name("operator"))
            return f"({root}{op}, {out}{op})"
        op = text(node.child_by_field_name("operator"))
        if op not in ("+=", "-="):
            raise RenderError(
                f"`{short(text(node))}`",
                line(node),
                f"read-write `{root}` re-pointed: only "
                f"`{root} += n` and `{root}++` keep its output in step",
            )
        right = self.render(node.child_by_field_name("right"), ctx)
        return f"({root} {op} ({right}), {out} {op} ({right}))"

    def rename_root(self, node: Node, root: str, new: str, ctx: FnCtx) -> str:
        if node.type == "identifier" and text(node) == root:
            return new
        if not node.children:
            return self.render(node, ctx)
        leaf = root_node(node)
        if node.type not in _LVALUES and leaf is not None:
            # `(uint4*)b_ptr`, `reinterpret_cast<float4*>(&C[i])`, `C + off`: rendered by the
            # rules, C renamed (an lvalue's own subscript is no read, so it is copied piecewise)
            self.override[leaf.id] = lambda _n: new
            try:
                return self.render(node, ctx)
            finally:
                self.override.pop(leaf.id, None)
        out, pos = [], node.start_byte
        arg = node.child_by_field_name("argument") or node.child_by_field_name("left")
        for c in node.children:
            out.append(self.src[pos : c.start_byte].decode())
            out.append(self.rename_root(c, root, new, ctx) if c == arg else self.render(c, ctx))
            pos = c.end_byte
        out.append(self.src[pos : node.end_byte].decode())
        return "".join(out)
