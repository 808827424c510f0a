"""Constants a file's types and namespaces hold, for host launch math: ``x128::size`` where
``typedef Packed128<floatX> x128;`` and ``Packed128<T>`` has ``static constexpr size_t size =
sizeof(int4) / sizeof(T);`` is ``sizeof(int4) / sizeof(floatX)``; ``cfg::BLOCK`` in
``namespace cfg { constexpr int BLOCK = 256; }`` is ``256``. The result is C text for the
host-expression converter, which knows what ``sizeof(floatX)`` is for the task."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import text, walk
from mlxport.translate.reading.cudafile import KernelInfo, LaunchSite

_STRUCTS = ("struct_specifier", "class_specifier")


def scoped_constant(root: Node, name: str) -> str | None:
    """The initializer of the constant ``Scope::member`` as C text, template arguments in place of
    the scope's template parameters; None where the file defines no such constant."""
    scope, _, member = re.sub(r"\s+", "", name).rpartition("::")
    if not scope or "::" in scope:
        return None
    for ns in _named(root, ("namespace_definition",), scope):
        got = _namespace_member(ns, member)
        if got is not None:
            return got
    base, args = _resolve_alias(root, scope)
    for struct in _named(root, _STRUCTS, base):
        got = _static_member(struct, member)
        if got is None:
            continue
        for param, arg in zip(_template_params(struct), args, strict=False):
            got = re.sub(rf"\b{re.escape(param)}\b", f"{arg}", got)
        return got
    return None


def _named(root: Node, kinds: tuple[str, ...], name: str) -> list[Node]:
    return [
        n
        for n in walk(root)
        if n.type in kinds
        and text(n.child_by_field_name("name")) == name
        and n.child_by_field_name("body") is not None
    ]


def _resolve_alias(root: Node, name: str) -> tuple[str, list[str]]:
    """``x128`` as (``Packed128``, [``floatX``]) through a typedef or a using-alias; a name no
    alias defines is itself, without arguments."""
    for _ in range(8):  # aliases of aliases, never a cycle
        target = _alias_target(root, name)
        if target is None:
            return name, []
        if target.type == "type_descriptor":
            target = target.child_by_field_name("type") or target
        if target.type == "template_type":
            args = target.child_by_field_name("arguments")
            return text(target.child_by_field_name("name")), [
                text(a) for a in (args.named_children if args is not None else [])
            ]
        name = text(target)
    return name, []


def _alias_target(root: Node, name: str) -> Node | None:
    for n in walk(root):
        if n.type == "type_definition" and any(
            text(d) == name for d in n.children_by_field_name("declarator")
        ):
            return n.child_by_field_name("type")
        if n.type == "alias_declaration" and text(n.child_by_field_name("name")) == name:
            return n.child_by_field_name("type")
    return None


def _template_params(struct: Node) -> list[str]:
    decl = struct.parent
    if decl is None or decl.type != "template_declaration":
        return []
    params = decl.child_by_field_name("parameters")
    out = []
    for p in params.named_children if params is not None else []:
        names = [c for c in p.named_children if c.type in ("type_identifier", "identifier")]
        declarator = p.child_by_field_name("declarator") or p.child_by_field_name("name")
        out.append(text(declarator) if declarator is not None else text(names[-1]) if names else "")
    return out


def _static_member(struct: Node, member: str) -> str | None:
    body = struct.child_by_field_name("body")
    for f in body.named_children:
        if f.type not in ("field_declaration", "declaration") or not _is_constant(f):
            continue
        if f.type == "field_declaration":
            if text(f.child_by_field_name("declarator")) == member:
                value = f.child_by_field_name("default_value")
                return text(value) if value is not None else None
            continue
        got = _declared_value(f, member)
        if got is not None:
            return got
    return None


def _namespace_member(ns: Node, member: str) -> str | None:
    body = ns.child_by_field_name("body")
    for d in body.named_children:
        if d.type == "declaration" and _is_constant(d):
            got = _declared_value(d, member)
            if got is not None:
                return got
    return None


def _declared_value(decl: Node, member: str) -> str | None:
    for d in decl.children_by_field_name("declarator"):
        target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
        if d.type == "init_declarator" and text(target) == member and value is not None:
            return text(value)
    return None


def _is_constant(decl: Node) -> bool:
    quals = {
        text(c) for c in decl.children if c.type in ("type_qualifier", "storage_class_specifier")
    }
    return bool(quals & {"constexpr", "const"})


def enumerators(root: Node) -> dict[str, int]:
    """The value of each enumerator the file declares with a plain number or none
    (``GGML_SORT_ORDER_ASC`` in ``enum ggml_sort_order { GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC
    }`` is 0)."""
    out: dict[str, int] = {}
    for enum in (n for n in walk(root) if n.type == "enumerator_list"):
        value = -1
        for e in (c for c in enum.named_children if c.type == "enumerator"):
            given = e.child_by_field_name("value")
            if given is not None and not re.fullmatch(r"-?\d+", text(given).strip()):
                break  # a value this reader does not compute: the later ones are not known
            value = int(text(given)) if given is not None else value + 1
            out.setdefault(text(e.child_by_field_name("name")), value)
    return out


def deduced_template_args(kernel: KernelInfo, site: LaunchSite) -> dict[str, str]:
    """Non-type template parameters a launch gives through an argument's type:
    `std::bool_constant<Atomic>` passed `std::bool_constant<false>{}` sets Atomic to false."""
    out = {}
    for p, arg in zip(kernel.params, site.args, strict=False):
        want = _angle_args(p.type)
        got = _angle_args(arg)
        for name, value in zip(want, got, strict=False):
            if name in {t.name for t in kernel.template_params if t.kind != "typename"}:
                out[name] = value
    return out


def _angle_args(s: str) -> list[str]:
    """`std::integral_constant<int, 4>{}` -> ["int", "4"] (one level of template arguments)."""
    start, end = s.find("<"), s.rfind(">")
    if start < 0 or end < start:
        return []
    return [a.strip() for a in s[start + 1 : end].split(",")]


def instantiations(root: Node, name: str) -> list[list[str]]:
    """The template arguments of each explicit instantiation of function ``name``."""
    out = []
    for n in walk(root):
        if n.type != "template_instantiation":
            continue
        decl = n.child_by_field_name("declarator")
        target = decl.child_by_field_name("declarator") if decl is not None else None
        if target is None or target.type != "template_function":
            continue
        if text(target.child_by_field_name("name")).strip() != name:
            continue
        args = target.child_by_field_name("arguments")
        out.append([text(a).strip() for a in args.named_children] if args is not None else [])
    return out
