"""Declarations in a .cu file as the reader records them: parameters, template parameters,
__shared__ arrays (with their byte size when it is static) and __constant__/__device__ globals."""

from __future__ import annotations

import re

from tree_sitter import Node

from mlxport.cuda_syntax import collapse_spaces, declared_name, line, source_text
from mlxport.translate.reading.cudafile import GlobalVar, Param, SharedDecl, TemplateParam
from mlxport.translate.reading.parsing import timed_walk


def template_params(fn: Node) -> list[TemplateParam]:
    """The template parameters of a function definition inside a template declaration."""
    parent = fn.parent
    if parent is None or parent.type != "template_declaration":
        return []
    plist = parent.child_by_field_name("parameters")
    out = []
    for p in plist.named_children if plist else []:
        default = source_text(
            p.child_by_field_name("default_type") or p.child_by_field_name("default_value")
        )
        default = default or None
        if p.type in (
            "type_parameter_declaration",
            "optional_type_parameter_declaration",
            "variadic_type_parameter_declaration",
        ):
            name = next(
                (source_text(c) for c in p.named_children if c.type == "type_identifier"),
                source_text(p),
            )
            out.append(
                TemplateParam(
                    name=name,
                    kind="typename",
                    default=default,
                    variadic=p.type.startswith("variadic"),
                )
            )
        elif p.type == "template_template_parameter_declaration":
            out.append(TemplateParam(name=collapse_spaces(source_text(p)), kind="template"))
        else:
            d = p.child_by_field_name("declarator")
            if d is not None and d.type == "variadic_declarator":  # `Op... Ops`
                d = next((c for c in d.named_children if c.type == "identifier"), d)
            name = declared_name(d)
            kind = collapse_spaces(source_text(p.child_by_field_name("type"))) or "int"
            out.append(
                TemplateParam(
                    name=name, kind=kind, default=default, variadic=p.type.startswith("variadic")
                )
            )
    return out


def params(decl: Node) -> list[Param]:
    """The parameters of a function_declarator (read/write flags are set later)."""
    plist = decl.child_by_field_name("parameters")
    out = []
    for p in plist.named_children if plist else []:
        if p.type not in (
            "parameter_declaration",
            "optional_parameter_declaration",
            "variadic_parameter_declaration",
        ):
            continue
        out.append(_param(p, len(out)))
    return out


def _param(p: Node, index: int) -> Param:
    type_node = p.child_by_field_name("type")
    declarator = p.child_by_field_name("declarator")
    name = declared_name(declarator) if declarator is not None else ""
    kinds = {n.type for n in timed_walk(declarator)} if declarator is not None else set()
    direct_quals = {source_text(c) for c in p.children if c.type == "type_qualifier"}
    all_quals = {source_text(n) for n in timed_walk(p) if n.type == "type_qualifier"}
    is_pointer = bool(
        kinds
        & {
            "pointer_declarator",
            "abstract_pointer_declarator",
            "array_declarator",
            "abstract_array_declarator",
        }
    )
    full = re.sub(r"\s+([*&])", r"\1", collapse_spaces(source_text(p)))
    # the type is the text without the name (its last occurrence)
    type_text = (
        collapse_spaces(re.sub(rf"\b{re.escape(name)}\b(?!.*\b{re.escape(name)}\b)", "", full))
        if name
        else full
    )
    if p.type == "optional_parameter_declaration":
        type_text = type_text.split("=")[0].strip()
    return Param(
        name=name or f"arg{index}",
        type=type_text,
        base_type=collapse_spaces(source_text(type_node)),
        is_pointer=is_pointer,
        is_reference=bool(kinds & {"reference_declarator", "abstract_reference_declarator"}),
        is_const="const" in (direct_quals if is_pointer else all_quals),
        is_restrict=bool(all_quals & {"__restrict__", "__restrict", "restrict"}),
        default=source_text(p.child_by_field_name("default_value"))
        if p.type == "optional_parameter_declaration"
        else None,
    )


def _array_dims(declarator: Node) -> tuple[str, list[str], bool]:
    dims: list[str] = []
    empty = False
    cur = declarator
    for _ in range(32):
        if cur is None:
            break
        if cur.type == "init_declarator":
            cur = cur.child_by_field_name("declarator")
            continue
        if cur.type == "array_declarator":
            size = cur.child_by_field_name("size")
            if size is None:
                empty = True
            dims.insert(0, collapse_spaces(source_text(size)))
            cur = cur.child_by_field_name("declarator")
            continue
        if cur.type in ("pointer_declarator", "reference_declarator", "attributed_declarator"):
            cur = cur.child_by_field_name("declarator") or (
                cur.named_children[-1] if cur.named_children else None
            )
            continue
        break
    return declared_name(declarator), dims, empty


_SIZES = {
    "float": 4,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "uint32_t": 4,
    "int32_t": 4,
    "double": 8,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "char": 1,
    "unsigned char": 1,
    "uint8_t": 1,
    "int8_t": 1,
    "short": 2,
    "half2": 4,
    "__half2": 4,
    "float2": 8,
    "float4": 16,
    "int4": 16,
    "int2": 8,
    "uint4": 16,
    "long long": 8,
    "unsigned long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "bool": 1,
}


def _static_bytes(type_: str, dims: list[str], defines: dict[str, str]) -> int | None:
    size = _SIZES.get(type_)
    if size is None:
        return None
    for d in dims:
        value = _int_expr(d, defines)
        if value is None:
            return None
        size *= value
    return size


def _int_expr(expr: str, defines: dict[str, str]) -> int | None:
    for _ in range(8):
        changed = re.sub(
            r"\b[A-Za-z_]\w*\b",
            lambda m: (
                f"({defines[m.group()]})"
                if m.group() in defines and not defines[m.group()].startswith("(")
                else m.group()
            ),
            expr,
        )
        if changed == expr:
            break
        expr = changed
    expr = re.sub(r"(?<=\d)[uUlL]+\b", "", expr)
    if len(expr) > 200 or not re.fullmatch(r"[\d\s()+\-*/%]+", expr):
        return None
    try:
        value = eval(expr.replace("/", "//"), {"__builtins__": {}}, {})  # noqa: S307 - digits and operators only
    except Exception:
        return None
    return value if isinstance(value, int) and 0 <= value < 1 << 40 else None


def shared_arrays(body: Node, defines: dict[str, str]) -> list[SharedDecl]:
    """The __shared__ arrays declared in a function body; `defines`: object-like #defines for
    sizes."""
    out = []
    for node in timed_walk(body):
        if node.type != "declaration":
            continue
        quals = {source_text(c) for c in node.children if c.type == "type_qualifier"}
        if "__shared__" not in quals:
            continue
        extern = any(
            source_text(c) == "extern" for c in node.children if c.type == "storage_class_specifier"
        )
        type_ = collapse_spaces(source_text(node.child_by_field_name("type")))
        for d in node.children_by_field_name("declarator"):
            name, dims, empty = _array_dims(d)
            dynamic = extern or empty
            out.append(
                SharedDecl(
                    name=name,
                    type=type_,
                    dims=dims,
                    dynamic=dynamic,
                    line=line(node),
                    bytes=None if dynamic else _static_bytes(type_, dims, defines),
                )
            )
    return out


_SPACES = {
    "__constant__": "constant",
    "__device__": "device",
    "__shared__": "shared",
    "__managed__": "managed",
}


def global_vars(node: Node) -> list[GlobalVar]:
    """The __constant__/__device__/__shared__/__managed__ variables a file-scope declaration
    declares."""
    quals = [source_text(c) for c in node.children if c.type in ("type_qualifier", "__device__")]
    space = next((_SPACES[q] for q in reversed(quals) if q in _SPACES), None)
    if space is None or any(
        d.type == "function_declarator" for d in node.children_by_field_name("declarator")
    ):
        return []
    type_ = collapse_spaces(source_text(node.child_by_field_name("type")))
    out = []
    for d in node.children_by_field_name("declarator"):
        name, dims, _ = _array_dims(d)
        out.append(
            GlobalVar(
                name=name,
                type=type_,
                space=space,
                dims=dims,
                line=line(node),
                initialized=d.type == "init_declarator",
            )
        )
    return out
