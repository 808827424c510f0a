"""What the tuning rewrites ask of a kernel's syntax tree: the conditions a node runs under and
whether it runs on every pass, the names a subtree assigns and the name a target belongs to, a
function's parameters, a subscript's index, the template declaration holding a definition, and
source text cut and spliced by byte offsets."""

from __future__ import annotations

from tree_sitter import Node

from mlxport.cuda_syntax import function_declarator, text, walk


def conditions(n: Node, top: Node) -> list[Node]:
    """The conditions deciding whether ``n`` runs, up to ``top``: of the ifs, loops, switches and
    ?: it is in, and left of any && or || it is right of."""
    out, cur = [], n
    while cur is not None and cur != top:
        parent = cur.parent
        if parent is None:
            break
        if (
            parent.type
            in (
                "if_statement",
                "while_statement",
                "do_statement",
                "for_statement",
                "switch_statement",
                "conditional_expression",
            )
            and parent.child_by_field_name("condition") is not None
        ):
            out.append(parent.child_by_field_name("condition"))
        if (
            parent.type == "binary_expression"
            and text(parent.child_by_field_name("operator")) in ("&&", "||")
            and parent.child_by_field_name("right") == cur
        ):
            out.append(parent.child_by_field_name("left"))
        cur = parent
    return out


def conditional(n: Node, top: Node) -> bool:
    """Whether the node runs only on some paths through ``top``: under an if, ?:, && or ||."""
    return not guarded(n, top)


def guarded(n: Node, top: Node, guard=None) -> bool:
    """Whether ``n`` runs on every pass through ``top`` in which the conditions ``guard`` accepts
    hold: it is in no else branch, right of no && or ||, and in the first branch of an if or ?:
    only where ``guard`` accepts its condition (None: no condition)."""
    cur = n
    while cur != top:
        parent = cur.parent
        if parent is None:
            return False
        branch = (
            parent.type in ("if_statement", "conditional_expression")
            and parent.child_by_field_name("condition") != cur
        )
        if branch and (
            parent.child_by_field_name("consequence") != cur
            or guard is None
            or not guard(parent.child_by_field_name("condition"))
        ):
            return False
        if (
            parent.type == "binary_expression"
            and text(parent.child_by_field_name("operator")) in ("&&", "||")
            and parent.child_by_field_name("right") == cur
        ):
            return False
        cur = parent
    return True


def assigned_names(node: Node) -> set[str]:
    """Names assigned, incremented or address-taken in the subtree."""
    out = set()
    for n in walk(node):
        target = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif (
            n.type == "update_expression"
            or n.type == "pointer_expression"
            and text(n.child_by_field_name("operator")) == "&"
        ):
            target = n.child_by_field_name("argument")
        if target is not None and target.type == "identifier":
            out.add(text(target))
    return out


def root_name(target: Node | None) -> Node | None:
    """The name an assignment's target belongs to: ``t``, ``(t)``, ``a[0]``, ``p.a``, ``*p``."""
    while target is not None and target.type in (
        "parenthesized_expression",
        "subscript_expression",
        "field_expression",
        "pointer_expression",
    ):
        target = (
            target.named_children[0]
            if target.type == "parenthesized_expression"
            else target.child_by_field_name("argument")
        )
    return target if target is not None and target.type == "identifier" else None


def params_of(fn: Node) -> list[Node]:
    _, decl = function_declarator(fn)
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    return (
        [p for p in plist.named_children if p.type == "parameter_declaration"]
        if plist is not None
        else []
    )


def pointer_params(fn: Node) -> list[tuple[int, str]]:
    out = []
    for i, p in enumerate(params_of(fn)):
        decl = p.child_by_field_name("declarator")
        name = (
            decl.child_by_field_name("declarator")
            if decl is not None and decl.type == "pointer_declarator"
            else None
        )
        if name is not None and name.type == "identifier" and "volatile" not in text(p):
            out.append((i, text(name)))
    return out


def index_of(sub: Node) -> Node | None:
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    if idx is not None and idx.type == "subscript_argument_list":
        return idx.named_children[0] if len(idx.named_children) == 1 else None
    return idx


def holder_of(fn: Node) -> Node:
    return fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else fn


def file_scope(fn: Node) -> bool:
    holder = holder_of(fn)
    return holder.parent is not None and holder.parent.type in (
        "translation_unit",
        "declaration_list",
    )


def source_slice(raw: bytes, node: Node | None) -> str:
    return (
        raw[node.start_byte : node.end_byte].decode("utf-8", "replace") if node is not None else ""
    )


def spliced(raw: bytes, node: Node, edits: list[tuple[int, int, str]]) -> str:
    out, at = [], node.start_byte
    for s, e, new in sorted(edits):
        out += [raw[at:s].decode("utf-8", "replace"), new]
        at = e
    return "".join(out) + raw[at : node.end_byte].decode("utf-8", "replace")


def template_types(fn: Node) -> set[str]:
    """The type parameters of the template a function is defined in (MLX instantiates a kernel's
    with its dtypes)."""
    holder = holder_of(fn)
    if holder.type != "template_declaration":
        return set()
    params = holder.child_by_field_name("parameters")
    return {
        text(c)
        for p in (params.named_children if params is not None else [])
        if p.type == "type_parameter_declaration"
        for c in p.named_children
        if c.type == "type_identifier"
    }
