"""Read a whole .cu file with tree-sitter-cuda: kernels, device functions, launches, defines.

`read_cuda` returns the full structure as pydantic data; `summary` renders the compact text the
model sees; `assess` (from features.py) maps each CUDA feature to Metal.

Read/write rule for pointer, reference and array parameters (conservative: a false "written"
only adds an output, a missed one loses data):
- written: the parameter, or a local pointer/reference derived from it (`T* q = p + off`,
  `T& r = p[i]`, `q = p`), is the base of a dereferencing assignment target (`p[i] = `, `*p = `,
  `p->x = `, `p[i].x += `, `reinterpret_cast<float4*>(p)[i] = `, `*(p + i) = `, `p[i]++`), is passed
  to an atomic* function, to a known storing call (memcpy/memset destination,
  wmma::store_matrix_sync, cub `.Store`), or to a device function of this file whose matching
  parameter is written;
- read: every other use (compound assignments `p[i] += ` are both). A pointer passed to an
  unknown function counts as read only; the parameter records the call in `unknown_calls`.
By-value scalars are never "written" (the kernel only changes its own copy).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from pydantic import BaseModel, Field
from tree_sitter import Node, Tree

from mlxport.errors import UserError
from mlxport.translate import features as F
from mlxport.translate.features import Assessment, assess
from mlxport.translate.tsutil import function_declarator, parser

__all__ = ["Assessment", "CudaFile", "CudaReadError", "Feature", "KernelInfo", "LaunchSite", "MacroDef",
           "Param", "SharedDecl", "TemplateParam", "GlobalVar", "assess", "read_cuda", "summary"]

MAX_BYTES = 4 * 1024 * 1024
MAX_MACRO_DEPTH = 16
MAX_EXPANDED_BYTES = 8 * 1024 * 1024
PARSE_SECONDS = 10.0
READ_SECONDS = 20.0  # everything after the parse; walks check it every few thousand nodes
MAX_WALK_DEPTH = 2000


class CudaReadError(UserError):
    """The input cannot be read as CUDA; the message names the problem and the fix."""


class TemplateParam(BaseModel):
    name: str
    kind: str  # "typename", or the type of a non-type parameter ("int", "bool", ...)
    default: str | None = None


class Param(BaseModel):
    name: str
    type: str
    base_type: str
    is_pointer: bool = False
    is_reference: bool = False
    is_const: bool = False
    is_restrict: bool = False
    read: bool = False
    written: bool = False
    unknown_calls: list[str] = Field(default_factory=list)


class SharedDecl(BaseModel):
    name: str
    type: str
    dims: list[str] = Field(default_factory=list)
    dynamic: bool = False
    line: int
    bytes: int | None = None  # when every dim is a literal or an object-like #define of one


class Feature(BaseModel):
    name: str
    category: str
    line: int
    detail: str = ""


class KernelInfo(BaseModel):
    name: str
    kind: str  # "global" | "device"
    line: int
    template_params: list[TemplateParam] = Field(default_factory=list)
    params: list[Param] = Field(default_factory=list)
    shared: list[SharedDecl] = Field(default_factory=list)
    features: list[Feature] = Field(default_factory=list)
    body: str = ""
    body_line: int = 0
    calls: list[str] = Field(default_factory=list)
    qualifiers: list[str] = Field(default_factory=list)
    launch_bounds: list[str] = Field(default_factory=list)
    instantiations: list[str] = Field(default_factory=list)
    specialization: str | None = None  # template args of an explicit specialization `k<float>`
    namespace: str = ""
    macro: str | None = None  # the macro whose expansion defined this function
    warnings: list[str] = Field(default_factory=list)


class LaunchSite(BaseModel):
    kernel: str
    template_args: list[str] = Field(default_factory=list)
    grid: str
    block: str
    shared_mem: str | None = None
    stream: str | None = None
    args: list[str] = Field(default_factory=list)
    line: int
    enclosing_function: str | None = None
    api: str = "<<<>>>"  # or cudaLaunchKernel / cudaLaunchCooperativeKernel


class MacroDef(BaseModel):
    name: str
    params: list[str] | None = None  # None for object-like macros
    body: str
    line: int


class GlobalVar(BaseModel):
    name: str
    type: str
    space: str  # "constant" | "device" | "shared" | "managed"
    dims: list[str] = Field(default_factory=list)
    line: int


class CudaFile(BaseModel):
    path: str
    kernels: list[KernelInfo] = Field(default_factory=list)
    device_functions: list[KernelInfo] = Field(default_factory=list)
    launches: list[LaunchSite] = Field(default_factory=list)
    defines: dict[str, str] = Field(default_factory=dict)
    macros: list[MacroDef] = Field(default_factory=list)
    includes: list[str] = Field(default_factory=list)
    globals: list[GlobalVar] = Field(default_factory=list)
    features: list[Feature] = Field(default_factory=list)  # host code and file scope
    warnings: list[str] = Field(default_factory=list)

    def kernel(self, name: str) -> KernelInfo:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no __global__ kernel named {name!r}; kernels: {[k.name for k in self.kernels]}")


# ---------------------------------------------------------------------------------------------
# input checks


def _load(source: str | Path, name: str) -> tuple[bytes, str]:
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        if not path.is_file():
            raise CudaReadError(f"{path} does not exist or is not a file: pass the path of a .cu file")
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise CudaReadError(_too_big(path.name, size))
        return path.read_bytes(), (str(path) if name == "<source>" else name)
    if isinstance(source, bytes | bytearray):
        return bytes(source), name
    if not isinstance(source, str):
        raise CudaReadError(f"cannot read a {type(source).__name__}: pass CUDA source text or a Path")
    if len(source) > MAX_BYTES:
        raise CudaReadError(_too_big(name, len(source.encode("utf-8", "replace"))))
    return source.encode("utf-8", "replace"), name


def _looks_like_path(text: str) -> bool:
    return (len(text) < 4096 and "\n" not in text and "{" not in text and "(" not in text
            and text.strip().endswith((".cu", ".cuh", ".h", ".hpp", ".cpp", ".txt")))


def _too_big(name: str, size: int) -> str:
    return (f"{name}: input is {size / 1e6:.1f} MB; the reader accepts up to {MAX_BYTES / 1e6:.0f} MB: "
            "pass the file that defines the kernel")


def _check_bytes(data: bytes, name: str) -> str:
    if len(data) > MAX_BYTES:
        raise CudaReadError(_too_big(name, len(data)))
    head = data[:65536]
    if b"\x00" in head:
        raise CudaReadError(f"{name}: input is binary, not CUDA source: pass a .cu text file")
    text = data.decode("utf-8", "replace")
    sample = text[:65536]
    bad = sum(1 for c in sample if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f\v"))
    if sample and bad / len(sample) > 0.05:
        raise CudaReadError(f"{name}: input is binary, not CUDA source: pass a .cu text file")
    if not text.strip():
        raise CudaReadError(f"{name} is empty: pass a file that defines a __global__ kernel")
    return text


def _parse(data: bytes, name: str) -> Tree:
    deadline = time.monotonic() + PARSE_SECONDS
    expired = False

    # tree-sitter 0.25+ has no timeout; ending the input early makes a pathological parse stop.
    def read(offset: int, _point: tuple[int, int]) -> bytes:
        nonlocal expired
        if time.monotonic() > deadline:
            expired = True
            return b""
        return data[offset:offset + 2048]

    tree = parser().parse(read)
    if expired:
        raise CudaReadError(f"{name}: parsing took longer than {PARSE_SECONDS:.0f} s (pathological input): "
                            "pass a smaller or well-formed .cu file")
    return tree


# ---------------------------------------------------------------------------------------------
# tree helpers


# The source of the tree being read. Trees parsed through a read callback keep no text, and
# Node.text would call the callback again, so text is sliced from here.
_SOURCE: ContextVar[bytes] = ContextVar("_SOURCE", default=b"")
_DEADLINE: ContextVar[float] = ContextVar("_DEADLINE", default=float("inf"))


def _text(node: Node | None) -> str:
    if node is None:
        return ""
    return _SOURCE.get()[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _line(node: Node) -> int:
    return node.start_point[0] + 1


_STEPS = [0]  # nodes visited by all walks; many small walks must also hit the deadline check


def _walk(node: Node, stop: frozenset[str] = frozenset()) -> Iterator[Node]:
    """Pre-order walk with an explicit stack; does not enter node types in `stop`."""
    stack = [(node, 0)]
    while stack:
        cur, depth = stack.pop()
        _STEPS[0] += 1
        if _STEPS[0] % 8192 == 0 and time.monotonic() > _DEADLINE.get():
            raise CudaReadError(f"reading took longer than {READ_SECONDS:.0f} s (pathological input): "
                                "pass a smaller or well-formed .cu file")
        yield cur
        if depth >= MAX_WALK_DEPTH or (cur is not node and cur.type in stop):
            continue
        stack.extend((c, depth + 1) for c in reversed(cur.children))


def _ancestors(node: Node) -> Iterator[Node]:
    cur = node.parent
    while cur is not None:
        yield cur
        cur = cur.parent


def _decl_name(declarator: Node | None) -> str:
    """The declared name inside a (possibly nested) declarator."""
    cur = declarator
    for _ in range(64):
        if cur is None:
            return ""
        if cur.type in ("identifier", "field_identifier", "type_identifier", "operator_name",
                        "destructor_name"):
            return _text(cur)
        if cur.type in ("qualified_identifier", "template_function"):
            return _norm(_text(cur))
        nxt = cur.child_by_field_name("declarator") or cur.child_by_field_name("name")
        if nxt is None:
            nxt = next((c for c in cur.named_children if c.type not in ("type_qualifier", "attribute_specifier",
                                                                         "ms_pointer_modifier")), None)
        cur = nxt
    return ""


# ---------------------------------------------------------------------------------------------
# macros


# One pass over the text finds comments, string/char literals and preprocessor directive lines;
# each alternative is linear so that unterminated comments or quotes cannot make it quadratic.
_LEX = re.compile(
    rb"//[^\n]*|/\*(?:.*?\*/|.*\Z)|\"(?:[^\"\\\n]|\\.)*\"?|'(?:[^'\\\n]|\\.){0,8}'?"
    rb"|^[ \t]*#(?:[^\n\\]|\\.|\\\n)*", re.M | re.S)
_DEFINE = re.compile(rb"#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)", re.S)
_KERNEL_MARK = re.compile(rb"__global__|__device__|__launch_bounds__|<<<")
_IDENT = re.compile(rb"[A-Za-z_]\w*")


def _lex(data: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, bytes]]]:
    """Spans to leave alone (comments, literals, directives) and the directive texts by offset."""
    spans, directives = [], []
    for m in _LEX.finditer(data):
        spans.append((m.start(), m.end()))
        if m.group().lstrip()[:1] == b"#":
            directives.append((m.start(), m.group()))
    return spans, directives


def _collect_macros(data: bytes, directives: list[tuple[int, bytes]]) -> list[MacroDef]:
    out: list[MacroDef] = []
    for offset, text in directives:
        m = _DEFINE.match(text.strip())
        if not m:
            continue
        body = re.sub(rb"\\\r?\n", b" ", m.group(3))
        body = re.sub(rb"//[^\n]*|/\*.*?\*/", b" ", body, flags=re.S).strip()
        params = None
        if m.group(2) is not None:
            params = [p.strip().decode("utf-8", "replace") for p in m.group(2)[1:-1].split(b",") if p.strip()]
            if params and params[-1].endswith("..."):
                params[-1] = params[-1][:-3].strip() or "__VA_ARGS__"
        out.append(MacroDef(name=m.group(1).decode(), params=params, body=_norm(body.decode("utf-8", "replace")),
                            line=data.count(b"\n", 0, offset) + 1))
    return out


class _Expander:
    """Bounded expansion of the macros that produce kernels, device functions or launches."""

    def __init__(self, macros: list[MacroDef], name: str):
        self.name = name
        self.macros = {m.name.encode(): m for m in macros}
        self.kernel_macros = self._kernel_macros()
        self.total = 0

    def _kernel_macros(self) -> dict[bytes, MacroDef]:
        found: dict[bytes, MacroDef] = {}
        for key, m in self.macros.items():
            if _KERNEL_MARK.search(m.body.encode()):
                found[key] = m
        # macros that invoke kernel macros also define kernels (bounded fixed point)
        for _ in range(MAX_MACRO_DEPTH):
            grew = False
            for key, m in self.macros.items():
                if key not in found and any(t in found for t in _IDENT.findall(m.body.encode())):
                    found[key] = m
                    grew = True
            if not grew:
                break
        return found

    def expand(self, text: bytes, skip: list[tuple[int, int]], depth: int) -> tuple[bytes, list[tuple]]:
        """Expand kernel-macro uses in `text`; returns new text and (start, end, macro) spans."""
        if depth > MAX_MACRO_DEPTH:
            raise CudaReadError(f"{self.name}: macro expansion is nested deeper than {MAX_MACRO_DEPTH} "
                                "levels (recursive macro?): simplify the macros that define kernels")
        if not self.kernel_macros:
            return text, []
        out, spans, pos, si = bytearray(), [], 0, 0
        for m in _IDENT.finditer(text):
            if m.start() < pos:
                continue
            while si < len(skip) and skip[si][1] <= m.start():
                si += 1
            if si < len(skip) and skip[si][0] <= m.start():
                continue
            macro = self.kernel_macros.get(m.group())
            if macro is None:
                continue
            end, args = m.end(), None
            if macro.params is not None:
                parsed = _macro_args(text, m.end(), f"{self.name}: macro {macro.name}")
                if parsed is None:
                    continue
                args, end = parsed
            body = _substitute(macro, args or [])
            inner, _ = self.expand(body, _string_spans(body), depth + 1)
            if end < len(text) and text[end:end + 1] == b";" and b"}" in inner[-2:]:
                end += 1  # `DEFINE_KERNEL(x);` leaves a stray `;` that is harmless, but drop it
            self.total += len(inner)
            if self.total > MAX_EXPANDED_BYTES:
                raise CudaReadError(f"{self.name}: macro expansion grows past {MAX_EXPANDED_BYTES // 2**20} MB: "
                                    "simplify the macros that define kernels")
            out += text[pos:m.start()]
            start = len(out)
            # keep line numbers: the expansion sits on the invocation's first line
            out += inner.replace(b"\n", b" ") + b"\n" * text.count(b"\n", m.start(), end)
            spans.append((start, len(out), macro.name))
            pos = end
        out += text[pos:]
        return bytes(out), spans


def _string_spans(text: bytes) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(rb'"(?:[^"\\\n]|\\.)*"', text)]


_ARG_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|[()\[\]{},]')


def _macro_args(text: bytes, pos: int, name: str) -> tuple[list[bytes], int] | None:
    """Arguments of a function-like macro call at `pos` (None when no `(` follows)."""
    m = re.compile(rb"\s*\(").match(text, pos)
    if m is None:
        return None
    depth, args, start = 1, [], m.end()
    for tok in _ARG_TOKEN.finditer(text, m.end()):
        ch = tok.group()
        if ch in (b"(", b"[", b"{"):
            depth += 1
        elif ch in (b")", b"]", b"}"):
            depth -= 1
            if depth == 0:
                args.append(text[start:tok.start()].strip())
                return args, tok.end()
        elif ch == b"," and depth == 1:
            args.append(text[start:tok.start()].strip())
            start = tok.end()
    line = text.count(b"\n", 0, pos) + 1
    raise CudaReadError(f"{name} called at line {line} is not closed: check its parentheses")


def _substitute(macro: MacroDef, args: list[bytes]) -> bytes:
    params = [p.encode() for p in macro.params or []]
    if params and params[-1] == b"__VA_ARGS__" and len(args) > len(params):
        args = args[:len(params) - 1] + [b", ".join(args[len(params) - 1:])]
    binding = dict(zip(params, args + [b""] * (len(params) - len(args)), strict=False))
    body = macro.body.encode()

    def stringify(m: re.Match) -> bytes:
        arg = binding.get(m.group(1))
        return b'"' + arg.replace(b'"', b'\\"') + b'"' if arg is not None else m.group()

    body = re.sub(rb"(?<!#)#\s*([A-Za-z_]\w*)", stringify, body)
    body = _IDENT.sub(lambda m: binding.get(m.group(), m.group()), body)
    return re.sub(rb"\s*##\s*", b"", body)


# ---------------------------------------------------------------------------------------------
# top-level structure


_DESCEND = frozenset({"translation_unit", "namespace_definition", "declaration_list", "linkage_specification",
                      "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef",
                      "template_declaration", "ERROR", "class_specifier", "struct_specifier",
                      "field_declaration_list"})
_CUDA_QUALS = ("__global__", "__device__", "__host__", "__forceinline__", "__noinline__", "static", "inline")


_PREDEFINED = frozenset({"__CUDACC__", "__NVCC__", "__CUDA_ARCH__", "__cplusplus", "__CUDA_RUNTIME_H__"})


def _top_level(root: Node, macros: list[MacroDef]) -> Iterator[tuple[Node, bool]]:
    """Definitions, declarations and instantiations outside function bodies, with whether they sit
    in the branch of an #ifdef/#ifndef/#if defined() that is active without -D flags."""
    stack = [(root, True)]
    while stack:
        node, active = stack.pop()
        if node.type in ("function_definition", "template_instantiation", "declaration", "field_declaration"):
            yield node, active
            continue
        if node.type not in _DESCEND or _is_if0(node):
            continue
        taken = _branch_taken(node, macros)
        alternative = node.child_by_field_name("alternative")
        for child in reversed(node.children):
            branch = active if taken is None else active and (taken != (child == alternative))
            stack.append((child, branch))


def _is_if0(node: Node) -> bool:
    return node.type == "preproc_if" and _text(node.child_by_field_name("condition")).strip() == "0"


def _branch_taken(node: Node, macros: list[MacroDef]) -> bool | None:
    """True/False when a conditional's first branch is (in)active; None when unknown or not one."""
    if node.type not in ("preproc_ifdef", "preproc_if"):
        return None
    line = _line(node)
    if node.type == "preproc_ifdef":
        name, negate = _text(node.child_by_field_name("name")), _text(node.children[0]).strip() == "#ifndef"
    else:
        m = re.fullmatch(r"\s*(!?)\s*defined\s*\(?\s*(\w+)\s*\)?\s*", _text(node.child_by_field_name("condition")))
        if m is None:
            return None
        name, negate = m.group(2), bool(m.group(1))
    defined = name in _PREDEFINED or any(mac.name == name and mac.line < line for mac in macros)
    return defined != negate


def _qualifiers(fn: Node) -> list[str]:
    return [c.type for c in fn.children if c.type in _CUDA_QUALS] + [
        _text(c) for c in fn.children if c.type == "storage_class_specifier"]


def _template_params(fn: Node) -> list[TemplateParam]:
    parent = fn.parent
    if parent is None or parent.type != "template_declaration":
        return []
    plist = parent.child_by_field_name("parameters")
    out = []
    for p in plist.named_children if plist else []:
        default = _text(p.child_by_field_name("default_type") or p.child_by_field_name("default_value")) or None
        if p.type in ("type_parameter_declaration", "optional_type_parameter_declaration",
                      "variadic_type_parameter_declaration"):
            name = next((_text(c) for c in p.named_children if c.type == "type_identifier"), _text(p))
            out.append(TemplateParam(name=name, kind="typename", default=default))
        elif p.type == "template_template_parameter_declaration":
            out.append(TemplateParam(name=_norm(_text(p)), kind="template"))
        else:
            name = _decl_name(p.child_by_field_name("declarator"))
            out.append(TemplateParam(name=name, kind=_norm(_text(p.child_by_field_name("type"))) or "int",
                                     default=default))
    return out


def _namespace(node: Node) -> str:
    parts = [_text(a.child_by_field_name("name")) for a in _ancestors(node) if a.type == "namespace_definition"]
    return "::".join(reversed([p for p in parts if p]))


def _function_name(fn: Node) -> tuple[str, Node | None]:
    # The reader's own _text: its tree was parsed through a read callback (see _parse).
    name_node, decl = function_declarator(fn)
    return (_norm(_text(name_node)), decl) if decl is not None else ("", None)


def _params(decl: Node) -> list[Param]:
    plist = decl.child_by_field_name("parameters")
    out = []
    for p in plist.named_children if plist else []:
        if p.type not in ("parameter_declaration", "optional_parameter_declaration",
                          "variadic_parameter_declaration"):
            continue
        out.append(_param(p, len(out)))
    return out


def _param(p: Node, index: int) -> Param:
    type_node = p.child_by_field_name("type")
    declarator = p.child_by_field_name("declarator")
    name = _decl_name(declarator) if declarator is not None else ""
    kinds = {n.type for n in _walk(declarator)} if declarator is not None else set()
    direct_quals = {_text(c) for c in p.children if c.type == "type_qualifier"}
    all_quals = {_text(n) for n in _walk(p) if n.type == "type_qualifier"}
    is_pointer = bool(kinds & {"pointer_declarator", "abstract_pointer_declarator", "array_declarator",
                               "abstract_array_declarator"})
    full = re.sub(r"\s+([*&])", r"\1", _norm(_text(p)))
    type_text = _norm(re.sub(rf"\b{re.escape(name)}\b(?!.*\b{re.escape(name)}\b)", "", full)) if name else full
    if p.type == "optional_parameter_declaration":
        type_text = type_text.split("=")[0].strip()
    return Param(
        name=name or f"arg{index}", type=type_text, base_type=_norm(_text(type_node)),
        is_pointer=is_pointer, is_reference=bool(kinds & {"reference_declarator", "abstract_reference_declarator"}),
        is_const="const" in (direct_quals if is_pointer else all_quals),
        is_restrict=bool(all_quals & {"__restrict__", "__restrict", "restrict"}),
    )


# ---------------------------------------------------------------------------------------------
# read/write analysis


_CASTS = frozenset({"reinterpret_cast", "static_cast", "const_cast", "dynamic_cast"})
_STORE_CALLS = {"memcpy": 0, "memset": 0, "store_matrix_sync": 0, "Store": 0, "__stcs": 0, "__stcg": 0,
                "__stwt": 0, "store_vector": 0, "cudaMemcpyAsync": 0, "memcpy_async": 0}
_LOAD_CALLS = frozenset({"__ldg", "__ldcg", "__ldcs", "__ldlu", "__ldca", "load_matrix_sync", "Load",
                         "load_vector", "printf", "sizeof"})


def _callee(call: Node) -> str:
    fn = call.child_by_field_name("function")
    if fn is None:
        return ""
    if fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    if fn is not None and fn.type == "field_expression":
        fn = fn.child_by_field_name("field")
    if fn is not None and fn.type == "qualified_identifier":
        return _norm(_text(fn)).split("::")[-1].split("<")[0].strip()
    return _norm(_text(fn))


def _climb(node: Node) -> tuple[Node, bool]:
    """Climb the lvalue path above an identifier; returns the top node and whether it dereferences."""
    cur, deref = node, False
    for _ in range(64):
        parent = cur.parent
        if parent is None:
            break
        t = parent.type
        if t == "subscript_expression" and parent.child_by_field_name("argument") == cur:
            deref = True
        elif t == "field_expression" and parent.child_by_field_name("argument") == cur:
            deref = deref or _text(parent.child_by_field_name("operator")) == "->"
        elif t == "pointer_expression":
            op = _text(parent.child_by_field_name("operator"))
            if op == "*":
                deref = True
            elif op == "&":
                deref = False
        elif t in ("parenthesized_expression", "cast_expression"):
            pass
        elif t == "binary_expression" and _text(parent.child_by_field_name("operator")) in ("+", "-"):
            if deref:
                break
        elif t == "argument_list" and parent.parent is not None and parent.parent.type == "call_expression" \
                and _callee(parent.parent) in _CASTS and parent.named_child_count == 1:
            cur = parent.parent
            continue
        else:
            break
        cur = parent
    return cur, deref


class _RW:
    def __init__(self, is_ref: bool = False) -> None:
        self.is_ref = is_ref
        self.read = False
        self.written = False
        self.aliases: set[str] = set()
        self.unknown: list[str] = []


def _analyze_rw(fn: KernelInfo, body: Node, known: dict[str, KernelInfo]) -> None:
    tracked = {p.name: _RW(p.is_reference and not p.is_pointer) for p in fn.params if p.is_pointer or p.is_reference}
    scalars = {p.name for p in fn.params if not (p.is_pointer or p.is_reference)}
    idents = [n for n in _walk(body) if n.type == "identifier"]
    used = {_text(n) for n in idents}
    for p in fn.params:
        if p.name in scalars:
            p.read = p.name in used
    done: set[int] = set()
    for _ in range(8):
        before = len(tracked)
        for n in idents:
            name = _text(n)
            if name in tracked and n.id not in done:
                done.add(n.id)
                _classify(n, tracked[name], tracked, known)
        if len(tracked) == before:
            break
    for p in fn.params:
        if p.name not in tracked:
            continue
        seen, stack = set(), [p.name]
        while stack:
            cur = stack.pop()
            if cur in seen or len(seen) > 256:
                continue
            seen.add(cur)
            rw = tracked[cur]
            p.read |= rw.read
            p.written |= rw.written
            p.unknown_calls.extend(c for c in rw.unknown if c not in p.unknown_calls)
            stack.extend(a for a, r in tracked.items() if cur in r.aliases)


_DECLARATORS = frozenset({"pointer_declarator", "reference_declarator", "array_declarator", "declaration",
                          "parameter_declaration", "function_declarator", "init_declarator"})


def _declared_here(ident: Node) -> bool:
    parent = ident.parent
    if parent is None or parent.type not in _DECLARATORS:
        return False
    return ident not in (parent.child_by_field_name("value"), parent.child_by_field_name("size"))


def _classify(ident: Node, rw: _RW, tracked: dict[str, _RW], known: dict[str, KernelInfo]) -> None:
    if _declared_here(ident):
        return
    top, deref = _climb(ident)
    parent = top.parent
    if parent is None:
        rw.read = True
        return
    t = parent.type
    if t == "assignment_expression" and parent.child_by_field_name("left") == top:
        if deref or (rw.is_ref and top == ident):
            rw.written = True
            rw.read |= _text(parent.child_by_field_name("operator")) != "="
        return
    if t == "assignment_expression" and not deref:
        left = parent.child_by_field_name("left")
        if left is not None and left.type == "identifier":
            _alias(_text(left), _text(ident), tracked)
            return
    if t == "update_expression":
        if deref or rw.is_ref:
            rw.written = rw.read = True
        return
    if t == "init_declarator" and parent.child_by_field_name("value") == top:
        decl = parent.child_by_field_name("declarator")
        if decl is not None and (not deref or decl.type == "reference_declarator"):
            _alias(_decl_name(decl), _text(ident), tracked, decl.type == "reference_declarator")
            return
    if t == "argument_list" and parent.parent is not None and parent.parent.type == "call_expression":
        _call_use(parent.parent, parent, top, deref, rw, known)
        return
    rw.read = True


def _alias(local: str, source: str, tracked: dict[str, _RW], is_ref: bool = False) -> None:
    if local and local != source:
        tracked.setdefault(local, _RW(is_ref)).aliases.add(source)


def _call_use(call: Node, args: Node, top: Node, deref: bool, rw: _RW, known: dict[str, KernelInfo]) -> None:
    callee = _callee(call)
    index = next((i for i, c in enumerate(args.named_children) if c == top), -1)
    if deref:
        rw.read = True
        return
    base = callee.split("_block")[0].split("_system")[0]
    if (base in F.ATOMICS and index == 0) or _STORE_CALLS.get(callee) == index:
        rw.written = True
    elif callee in _LOAD_CALLS or callee in F.CALLS:
        rw.read = True
    elif callee in known and 0 <= index < len(known[callee].params):
        target = known[callee].params[index]
        rw.read |= target.read or not (target.is_pointer or target.is_reference)
        rw.written |= target.written
    else:
        rw.read = True
        if callee and callee not in rw.unknown:
            rw.unknown.append(callee)


# ---------------------------------------------------------------------------------------------
# features


class _Ctx:
    """What feature detection needs to know about the file."""

    def __init__(self, macros: dict[str, MacroDef], globals_: list[GlobalVar], root: Node):
        self.macros = macros
        self.constants = {g.name for g in globals_ if g.space == "constant"}
        self.device_globals = {g.name for g in globals_ if g.space in ("device", "managed")}
        self.cg_names = {"cooperative_groups", "cg"}
        self.wmma_names = {"wmma", "nvcuda::wmma"}
        for node in _walk(root, frozenset({"function_definition"})):
            if node.type == "namespace_alias_definition":
                target = _norm(_text(node.named_children[-1])) if node.named_children else ""
                alias = _text(node.child_by_field_name("name"))
                if "cooperative_groups" in target:
                    self.cg_names.add(alias)
                if "wmma" in target:
                    self.wmma_names.add(alias)


_WMMA_NAMES = frozenset({"fragment", "load_matrix_sync", "store_matrix_sync", "mma_sync", "fill_fragment"})


def _feature_from_name(name: str, ctx: _Ctx, qualifier: str = "") -> tuple[str, F.Rule] | None:
    q = qualifier.rstrip(":")
    head = q.split("::")[0] if q else ""
    if q in ctx.cg_names or head in ctx.cg_names:
        rule = F.COOP.get(name)
        return (name, rule) if rule else None
    if q in ctx.wmma_names or q.endswith("wmma") or head == "wmma":
        return (f"wmma::{name}", F.WMMA) if name in _WMMA_NAMES else None
    if head == "cub":
        return f"cub::{name}", F.rule_for(f"cub::{name}")
    if head == "thrust":
        return f"thrust::{name}", F.THRUST
    for table in (F.BUILTINS, F.CALLS, F.TYPES):
        if name in table:
            return name, table[name]
    if name in ctx.constants:
        return "constant_memory", F.SYNTAX["constant_memory"]
    if name in ctx.device_globals:
        return "device_global", F.SYNTAX["device_global"]
    return None


_NAME_NODES = frozenset({"identifier", "type_identifier", "primitive_type", "namespace_identifier",
                         "field_identifier"})


def _qualifier_of(node: Node) -> str:
    parent = node.parent
    if parent is not None and parent.type == "template_type":
        node, parent = parent, parent.parent
    if parent is not None and parent.type == "template_function":
        node, parent = parent, parent.parent
    if parent is None or parent.type != "qualified_identifier" or parent.child_by_field_name("scope") == node:
        return ""
    parts = []
    cur = parent
    while cur is not None and cur.type == "qualified_identifier":
        scope = cur.child_by_field_name("scope")
        if scope is not None:
            parts.append(_norm(_text(scope)))
        cur = cur.parent
    return "::".join(reversed(parts))


def _detect(fn_node: Node, body: Node, ctx: _Ctx, kind: str) -> list[Feature]:
    found: list[Feature] = []
    grid_vars: set[str] = set()
    for node in _walk(body):
        t = node.type
        if t in _NAME_NODES:
            _name_feature(node, ctx, found)
        elif t == "call_expression":
            _call_feature(node, ctx, found)
        elif t == "gnu_asm_expression":
            asm = _text(node)
            name = "mma_ptx" if re.search(r"\bmma\.sync|\bwgmma|\bldmatrix", asm) else "inline_ptx"
            found.append(Feature(name=name, category=F.SYNTAX[name].category, line=_line(node),
                                 detail=_norm(_text(node.child_by_field_name("assembly_code")))[:60]))
        elif t == "kernel_call_syntax":
            found.append(Feature(name="dynamic_parallelism", category="dynamic_parallelism", line=_line(node)))
        elif t == "init_declarator" and "gridDim" in _text(node.child_by_field_name("value")):
            grid_vars.add(_decl_name(node.child_by_field_name("declarator")))
        elif t == "assignment_expression" and _text(node.child_by_field_name("operator")) == "+=":
            rhs = _text(node.child_by_field_name("right"))
            if "gridDim" in rhs or any(re.search(rf"\b{re.escape(v)}\b", rhs) for v in grid_vars if v):
                found.append(Feature(name="grid_stride_loop", category="pattern", line=_line(node)))
        elif t == "declaration":
            _decl_feature(node, found)
    signature = fn_node.child_by_field_name("declarator")
    for node in _walk(signature) if signature is not None else []:
        if node.type in ("type_identifier", "primitive_type") and _text(node) in F.TYPES:
            rule = F.TYPES[_text(node)]
            found.append(Feature(name=_text(node), category=rule.category, line=_line(node), detail="parameter"))
    for lb in (c for c in fn_node.children if c.type == "launch_bounds"):
        found.append(Feature(name="launch_bounds", category="attribute", line=_line(lb),
                             detail=_norm(_text(lb))[len("__launch_bounds__"):]))
    return _dedupe(found)


def _name_feature(node: Node, ctx: _Ctx, found: list[Feature]) -> None:
    name = _text(node)
    parent = node.parent
    if _is_callee(node):
        return  # handled as a call
    if node.type == "field_identifier":
        return
    hit = _feature_from_name(name, ctx, _qualifier_of(node))
    if hit is None and name in ctx.macros and parent is not None and parent.type != "call_expression":
        _macro_features(name, ctx, _line(node), found)
        return
    if hit is not None and hit[1] is not None:
        found.append(Feature(name=hit[0], category=hit[1].category, line=_line(node)))


def _is_callee(node: Node) -> bool:
    cur = node
    for _ in range(16):
        parent = cur.parent
        if parent is None:
            return False
        if parent.type == "call_expression":
            return parent.child_by_field_name("function") == cur
        if parent.type not in ("template_function", "qualified_identifier") or \
                cur not in (parent.child_by_field_name("name"), parent.child_by_field_name("function")):
            return False
        cur = parent
    return False


def _call_feature(call: Node, ctx: _Ctx, found: list[Feature]) -> None:
    fn = call.child_by_field_name("function")
    if fn is None:
        return
    args = call.child_by_field_name("arguments")
    arg_nodes = args.named_children if args is not None else []
    line = _line(call)
    if fn.type == "field_expression":
        field = _text(fn.child_by_field_name("field"))
        obj = _text(fn.child_by_field_name("argument"))
        if field == "sync" and ("grid" in obj.lower() or "this_grid" in obj):
            found.append(Feature(name="grid.sync", category="grid_sync", line=line, detail=obj))
        elif field in ("shfl_down", "shfl_xor", "shfl_up", "shfl", "ballot", "any", "all", "sync"):
            metal = {"sync": "__syncthreads"}.get(field, f"__{field}_sync")
            if field == "sync":
                found.append(Feature(name="__syncthreads", category="barrier", line=line, detail=f"{obj}.sync()"))
            else:
                found.append(Feature(name=metal, category="warp", line=line, detail=f"{obj}.{field}()"))
        return
    name = _callee(call)
    qual = ""
    inner = fn.child_by_field_name("name") if fn.type == "template_function" else fn
    if inner is not None and inner.type == "qualified_identifier":
        qual = _norm(_text(inner)).rsplit("::", 1)[0]
    hit = _feature_from_name(name, ctx, qual + "::" if qual else "")
    if hit is None:
        if name in ctx.macros:
            _macro_features(name, ctx, line, found)
        return
    feat, rule = hit
    if rule is None:
        return
    detail = ""
    if feat.split("_block")[0].split("_system")[0] in F.ATOMICS and arg_nodes:
        detail = _atomic_type(arg_nodes[0], call)
    elif feat.startswith("__shfl") and feat.endswith("_sync") and arg_nodes:
        detail = f"mask={_norm(_text(arg_nodes[0]))}"
        if len(arg_nodes) >= 4:
            detail += f" width={_norm(_text(arg_nodes[3]))}"
    elif feat.startswith("__shfl") and len(arg_nodes) >= 3:
        detail = f"width={_norm(_text(arg_nodes[2]))}"
    elif feat in ("__ballot_sync", "__any_sync", "__all_sync") and arg_nodes:
        detail = f"mask={_norm(_text(arg_nodes[0]))}"
    elif feat == "tiled_partition":
        tf = next((n for n in _walk(fn) if n.type == "template_function"), None)
        targs = tf.child_by_field_name("arguments") if tf is not None else None
        detail = f"size={_norm(_text(targs))[1:-1]}" if targs is not None else ""
    found.append(Feature(name=feat, category=rule.category, line=line, detail=detail))


def _atomic_type(arg: Node, call: Node) -> str:
    text = _norm(_text(arg))
    cast = re.search(r"\(\s*([\w\s]+?)\s*\*\s*\)", text) or re.search(r"_cast<\s*([\w\s]+?)\s*\*\s*>", text)
    if cast:
        return cast.group(1)
    root = next((n for n in _walk(arg) if n.type == "identifier"), None)
    if root is None:
        return ""
    name = _text(root)
    fn = next((a for a in _ancestors(call) if a.type == "function_definition"), None)
    if fn is None:
        return ""
    for node in _walk(fn):
        if node.type in ("parameter_declaration", "declaration") and _declares(node, name):
            return _norm(_text(node.child_by_field_name("type")))
    return ""


def _declares(decl: Node, name: str) -> bool:
    return any(_decl_name(d) == name for d in decl.children_by_field_name("declarator"))


def _decl_feature(node: Node, found: list[Feature]) -> None:
    quals = {_text(c) for c in node.children if c.type == "type_qualifier"}
    if "__shared__" in quals and "volatile" in quals:
        found.append(Feature(name="volatile_shared", category="shared", line=_line(node)))


def _macro_features(name: str, ctx: _Ctx, line: int, found: list[Feature]) -> None:
    """Features hidden in a macro used inside a function body (bounded, iterative)."""
    stack, seen = [name], set()
    while stack and len(seen) < 64:
        cur = stack.pop()
        if cur in seen or cur not in ctx.macros:
            continue
        seen.add(cur)
        body = ctx.macros[cur].body
        for tok in re.finditer(r"(?:(\w+)\s*::\s*)?\b([A-Za-z_]\w*)\b", body):
            hit = _feature_from_name(tok.group(2), ctx, (tok.group(1) or "") + "::" if tok.group(1) else "")
            if hit is not None and hit[1] is not None:
                found.append(Feature(name=hit[0], category=hit[1].category, line=line, detail=f"via macro {name}"))
            elif tok.group(2) in ctx.macros:
                stack.append(tok.group(2))
        if re.search(r"\+=\s*[^;]*gridDim", body):
            found.append(Feature(name="grid_stride_loop", category="pattern", line=line, detail=f"via macro {name}"))
        if "asm" in re.findall(r"\b\w+\b", body):
            found.append(Feature(name="inline_ptx", category="ptx", line=line, detail=f"via macro {name}"))


def _dedupe(found: list[Feature]) -> list[Feature]:
    seen, out = set(), []
    for f in found:
        key = (f.name, f.line, f.detail)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return sorted(out, key=lambda f: (f.line, f.name))


# ---------------------------------------------------------------------------------------------
# shared memory and globals


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
            dims.insert(0, _norm(_text(size)))
            cur = cur.child_by_field_name("declarator")
            continue
        if cur.type in ("pointer_declarator", "reference_declarator", "attributed_declarator"):
            cur = cur.child_by_field_name("declarator") or (cur.named_children[-1] if cur.named_children else None)
            continue
        break
    return _decl_name(declarator), dims, empty


_SIZES = {"float": 4, "int": 4, "unsigned": 4, "unsigned int": 4, "uint32_t": 4, "int32_t": 4, "double": 8,
          "half": 2, "__half": 2, "__nv_bfloat16": 2, "char": 1, "unsigned char": 1, "uint8_t": 1, "int8_t": 1,
          "short": 2, "half2": 4, "__half2": 4, "float2": 8, "float4": 16, "int4": 16, "int2": 8, "uint4": 16,
          "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8, "bool": 1}


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
        changed = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: f"({defines[m.group()]})"
                         if m.group() in defines and not defines[m.group()].startswith("(") else m.group(), expr)
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


def _shared(body: Node, defines: dict[str, str]) -> list[SharedDecl]:
    out = []
    for node in _walk(body):
        if node.type != "declaration":
            continue
        quals = {_text(c) for c in node.children if c.type == "type_qualifier"}
        if "__shared__" not in quals:
            continue
        extern = any(_text(c) == "extern" for c in node.children if c.type == "storage_class_specifier")
        type_ = _norm(_text(node.child_by_field_name("type")))
        for d in node.children_by_field_name("declarator"):
            name, dims, empty = _array_dims(d)
            dynamic = extern or empty
            out.append(SharedDecl(name=name, type=type_, dims=dims, dynamic=dynamic, line=_line(node),
                                  bytes=None if dynamic else _static_bytes(type_, dims, defines)))
    return out


_SPACES = {"__constant__": "constant", "__device__": "device", "__shared__": "shared", "__managed__": "managed"}


def _global_var(node: Node, defines: dict[str, str]) -> list[GlobalVar]:
    quals = [_text(c) for c in node.children if c.type in ("type_qualifier", "__device__")]
    space = next((_SPACES[q] for q in reversed(quals) if q in _SPACES), None)
    if space is None or any(d.type == "function_declarator" for d in node.children_by_field_name("declarator")):
        return []
    type_ = _norm(_text(node.child_by_field_name("type")))
    out = []
    for d in node.children_by_field_name("declarator"):
        name, dims, _ = _array_dims(d)
        out.append(GlobalVar(name=name, type=type_, space=space, dims=dims, line=_line(node)))
    return out


# ---------------------------------------------------------------------------------------------
# launches


_LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cudaLaunchKernelEx")


def _launches(root: Node) -> list[LaunchSite]:
    out = []
    for node in _walk(root):
        if node.type == "kernel_call_syntax" and node.parent is not None:
            site = _chevron_launch(node.parent, node)
        elif node.type == "call_expression" and _callee(node) in _LAUNCH_APIS:
            site = _api_launch(node)
        else:
            continue
        if site is not None:
            out.append(site)
    return out


def _enclosing(node: Node) -> str | None:
    fn = next((a for a in _ancestors(node) if a.type == "function_definition"), None)
    return _function_name(fn)[0] or None if fn is not None else None


def _chevron_launch(call: Node, config: Node) -> LaunchSite | None:
    fn = call.child_by_field_name("function")
    targs: list[str] = []
    if fn is not None and fn.type == "template_function":
        targs = [_norm(_text(a)) for a in fn.child_by_field_name("arguments").named_children] \
            if fn.child_by_field_name("arguments") else []
        fn = fn.child_by_field_name("name")
    parts = [_norm(_text(c)) for c in config.named_children]
    if len(parts) < 2 or fn is None:
        return None
    args = call.child_by_field_name("arguments")
    return LaunchSite(kernel=_norm(_text(fn)).split("::")[-1], template_args=targs, grid=parts[0], block=parts[1],
                      shared_mem=parts[2] if len(parts) > 2 else None, stream=parts[3] if len(parts) > 3 else None,
                      args=[_norm(_text(a)) for a in args.named_children] if args else [], line=_line(call),
                      enclosing_function=_enclosing(call))


def _api_launch(call: Node) -> LaunchSite | None:
    args = call.child_by_field_name("arguments")
    parts = [_norm(_text(a)) for a in args.named_children] if args else []
    if len(parts) < 3:
        return None
    m = re.search(r"([A-Za-z_]\w*)\s*(<[^()]*>)?\s*\)?\s*$", parts[0])
    if not m:
        return None
    targs = [a.strip() for a in m.group(2)[1:-1].split(",")] if m.group(2) else []
    return LaunchSite(kernel=m.group(1), template_args=targs, grid=parts[1], block=parts[2],
                      shared_mem=parts[4] if len(parts) > 4 else None, stream=parts[5] if len(parts) > 5 else None,
                      args=[parts[3]] if len(parts) > 3 else [], line=_line(call),
                      enclosing_function=_enclosing(call), api=_callee(call))


_HOST_APIS = {
    "cudaMalloc": "device allocation (MLX arrays replace it)", "cudaMallocManaged": "unified memory",
    "cudaMemcpy": "copy (not needed: unified memory)", "cudaMemcpyAsync": "copy (not needed: unified memory)",
    "cudaMemset": "fill (mx.zeros / init_value)", "cudaFree": "free (MLX manages memory)",
    "cudaStreamCreate": "stream (mx.new_stream)", "cudaDeviceSynchronize": "sync (mx.eval)",
    "cudaFuncSetAttribute": "kernel attribute (dynamic shared memory > 48 KB?)",
    "cudaLaunchCooperativeKernel": "cooperative launch (grid sync: split into dispatches)",
    "cudaMallocHost": "pinned memory (not needed)", "cudaEventRecord": "timing (use the benchmark tool)",
    "cudaGetLastError": "error check", "cudaMemcpyToSymbol": "constant memory upload (pass an input)",
    "cudaBindTexture": "texture (pass a buffer)", "cudaCreateTextureObject": "texture (pass a buffer)",
}


def _host_features(root: Node, kernel_ranges: list[tuple[int, int]]) -> list[Feature]:
    out = []
    for node in _walk(root):
        if node.type != "call_expression":
            continue
        if any(s <= node.start_byte < e for s, e in kernel_ranges):
            continue
        name = _callee(node)
        if name.startswith(("cublas", "cudnn", "cufft", "curand", "cusparse")):
            out.append(Feature(name=name.split("_")[0], category="library", line=_line(node),
                               detail="library call: use the matching MLX op"))
        elif name in _HOST_APIS:
            out.append(Feature(name=name, category="host", line=_line(node), detail=_HOST_APIS[name]))
        elif "thrust::" in _text(node.child_by_field_name("function")):
            out.append(Feature(name=f"thrust::{name}", category="thrust", line=_line(node)))
    return _dedupe(out)


# ---------------------------------------------------------------------------------------------
# errors that make the structure unusable


def _check_function(fn: Node, name: str, kind: str, file: str) -> list[str]:
    """Raise for a broken signature or unclosed body; return warnings for local body errors."""
    _, decl = _function_name(fn)
    label = f"{'kernel' if kind == 'global' else 'device function'} {name or '?'}"
    if decl is None or decl.has_error:
        line = _line(decl or fn)
        raise CudaReadError(f"{file}: parse error at line {line}: the signature of {label} does not parse: "
                            "fix the parameter list (or expand the macro it uses)")
    body = fn.child_by_field_name("body")
    last = body.children[-1] if body is not None and body.children else None
    if body is None or last is None or last.type != "}" or last.is_missing:
        raise CudaReadError(f"{file}: parse error at line {_line(fn)}: the body of {label} is not closed "
                            "(the file looks truncated): pass the complete file")
    warnings = []
    if body.has_error:
        for node in _walk(body):
            if node.is_error or node.is_missing:
                what = f"missing {node.type!r}" if node.is_missing else f"cannot parse {_norm(_text(node))[:40]!r}"
                warnings.append(f"line {_line(node)}: {what} in {label} (unexpanded macro?)")
                if len(warnings) >= 3:
                    break
    return warnings


def _stray_globals(root: Node, file: str) -> None:
    """A `__global__` token that is not part of a parsed definition means a kernel was lost."""
    for node in _walk(root, frozenset({"compound_statement", "preproc_def", "preproc_function_def"})):
        if node.type != "__global__":
            continue
        parent = node.parent
        if parent is not None and parent.type in ("function_definition", "declaration", "template_instantiation",
                                                  "field_declaration"):
            continue
        if any(a.type == "ERROR" and a.end_byte >= len(_SOURCE.get().rstrip()) for a in _ancestors(node)):
            raise CudaReadError(f"{file}: parse error at line {_line(node)}: the __global__ kernel here is not "
                                "closed (the file looks truncated): pass the complete file")
        raise CudaReadError(f"{file}: parse error at line {_line(node)}: a __global__ kernel here does not parse: "
                            "fix the syntax (or define the macros it uses in the file)")


def _no_kernel(tree: Tree, file: str) -> CudaReadError:
    root = tree.root_node
    errors = [n for n in root.children if n.is_error or n.has_error]
    covered = sum(n.end_byte - n.start_byte for n in errors)
    if root.end_byte and covered / root.end_byte > 0.5:
        return CudaReadError(f"{file} does not look like CUDA source (parse errors from line {_line(errors[0])}) "
                             "and has no __global__ kernel: pass a .cu file that defines one")
    return CudaReadError(f"{file} has no __global__ kernel: pass a file that defines one")


# ---------------------------------------------------------------------------------------------
# entry points


def read_cuda(source: str | Path, *, name: str = "<source>") -> CudaFile:
    """Read CUDA source text or a .cu path into a CudaFile; raises CudaReadError on bad input.

    A `str` that is a single line ending in .cu/.cuh/.h/... is taken as a path; any other `str` is
    source text.
    """
    data, file = _load(source, name)
    text = _check_bytes(data, file)
    data = text.encode("utf-8")
    skip, directives = _lex(data)
    macros = _collect_macros(data, directives)
    expanded, spans = _Expander(macros, file).expand(data, skip, 0)
    # the grammar does not know __align__; alignas(N) means the same and keeps offsets
    expanded = re.sub(rb"__align__\((\s*\w+\s*)\)", lambda m: b"alignas(" + m.group(1) + b")  ", expanded)
    if not re.search(rb"\b__global__\b", expanded):
        expanded = expanded[:65536]  # only to word the "no kernel" error; quick
    tree = _parse(expanded, file)
    source, deadline = _SOURCE.set(expanded), _DEADLINE.set(time.monotonic() + READ_SECONDS)
    try:
        return _build(tree, file, macros, spans)
    finally:
        _SOURCE.reset(source)
        _DEADLINE.reset(deadline)


def _build(tree: Tree, file: str, macros: list[MacroDef], spans: list[tuple]) -> CudaFile:
    root = tree.root_node
    defines = {m.name: (m.body if m.params is None else f"({', '.join(m.params)}) {m.body}") for m in macros}
    object_defines = {m.name: m.body for m in macros if m.params is None}
    cf = CudaFile(path=file, defines=defines, macros=macros, includes=_includes(root))
    functions, instantiations = [], []
    for node, active in _top_level(root, macros):
        if node.type == "function_definition":
            quals = _qualifiers(node)
            if "__global__" in quals or "__device__" in quals:
                functions.append((node, quals, active))
        elif node.type == "template_instantiation":
            instantiations.append(node)
        elif node.type == "declaration":
            cf.globals.extend(_global_var(node, object_defines))
    _stray_globals(root, file)
    ctx = _Ctx({m.name: m for m in macros}, cf.globals, root)
    known: dict[str, KernelInfo] = {}
    infos = []
    active_names = {_function_name(n)[0] for n, _, active in functions if active}
    for node, quals, active in functions:
        if not active and _function_name(node)[0] in active_names:
            continue  # the other branch of an #ifdef defines it
        info = _function(node, quals, file, object_defines, spans, ctx)
        if info is None:
            continue
        infos.append((info, node))
        if info.kind == "device":
            known.setdefault(info.name, info)
    # device functions first, twice, so callers see their callees' read/write results
    order = [x for x in infos if x[0].kind == "device"] * 2 + [x for x in infos if x[0].kind == "global"]
    for info, node in order:
        for p in info.params:
            p.read = p.written = False
            p.unknown_calls = []
        _analyze_rw(info, node.child_by_field_name("body"), known)
    names = {i.name for i, _ in infos if i.kind == "device"}
    for info, node in infos:
        info.calls = sorted({_callee(c) for c in _walk(node.child_by_field_name("body"))
                             if c.type == "call_expression"} & names - {info.name})
    _attach_instantiations(infos, instantiations)
    seen: set[tuple] = set()
    for info, _ in infos:
        key = (info.kind, info.name, tuple(p.type for p in info.params))
        if key in seen:
            continue  # the same function in both branches of an #if
        seen.add(key)
        (cf.kernels if info.kind == "global" else cf.device_functions).append(info)
        cf.warnings.extend(info.warnings)
    if not cf.kernels:
        raise _no_kernel(tree, file)
    cf.launches = _launches(root)
    ranges = [(n.start_byte, n.end_byte) for _, n in infos]
    cf.features = _host_features(root, ranges) + [
        Feature(name="constant_memory" if g.space == "constant" else "device_global", category="memory",
                line=g.line, detail=g.name) for g in cf.globals if g.space != "shared"]
    return cf


def _includes(root: Node) -> list[str]:
    return [_text(n.child_by_field_name("path")).strip('"<>') for n in _walk(root, frozenset({"function_definition"}))
            if n.type == "preproc_include"]


def _function(node: Node, quals: list[str], file: str, defines: dict[str, str], spans: list[tuple],
              ctx: _Ctx) -> KernelInfo | None:
    name, decl = _function_name(node)
    kind = "global" if "__global__" in quals else "device"
    warnings = _check_function(node, name, kind, file)
    if decl is None or not name:
        return None
    body = node.child_by_field_name("body")
    info = KernelInfo(name=name, kind=kind, line=_line(node), template_params=_template_params(node),
                      params=_params(decl), body=_text(body), body_line=_line(body), qualifiers=quals,
                      namespace=_namespace(node), warnings=warnings)
    info.launch_bounds = [_norm(_text(c))[len("__launch_bounds__"):] for c in node.children
                          if c.type == "launch_bounds"]
    target = decl.child_by_field_name("declarator")
    if target is not None and target.type == "template_function":
        info.specialization = _norm(_text(target.child_by_field_name("arguments")))
    info.macro = next((m for s, e, m in spans if s <= node.start_byte < e), None)
    info.shared = _shared(body, defines)
    feats = _detect(node, body, ctx, kind)
    for sh in info.shared:
        fname = "dynamic_shared" if sh.dynamic else "static_shared"
        detail = f"{sh.name}" + (f" bytes={sh.bytes}" if sh.bytes is not None else "")
        feats.append(Feature(name=fname, category="shared", line=sh.line, detail=detail))
    if any(p.is_restrict for p in info.params):
        feats.append(Feature(name="restrict", category="memory", line=info.line))
    info.features = _dedupe(feats)
    return info


def _attach_instantiations(infos: list[tuple[KernelInfo, Node]], nodes: list[Node]) -> None:
    by_name = {i.name: i for i, _ in infos}
    for node in nodes:
        decl = node.child_by_field_name("declarator")
        target = decl.child_by_field_name("declarator") if decl is not None else None
        if target is None or target.type != "template_function":
            continue
        info = by_name.get(_norm(_text(target.child_by_field_name("name"))))
        if info is not None:
            info.instantiations.append(_norm(_text(target.child_by_field_name("arguments"))))


# ---------------------------------------------------------------------------------------------
# summary


def _param_line(p: Param) -> str:
    rw = ("r" if p.read else "") + ("w" if p.written else "")
    if not (p.is_pointer or p.is_reference):
        rw = "scalar"
    return f"{p.name}: {p.type} [{rw or 'unused'}]"


def _kernel_summary(k: KernelInfo, launches: list[LaunchSite]) -> list[str]:
    head = f"{k.kind} {k.name}{k.specialization or ''} (line {k.line}"
    head += f", from macro {k.macro})" if k.macro else ")"
    if k.template_params:
        tps = ", ".join(f"{t.kind} {t.name}" + (f"={t.default}" if t.default else "") for t in k.template_params)
        head += f" template<{tps}>"
    lines = [head]
    if k.instantiations:
        lines.append(f"  instantiations: {', '.join(k.instantiations)}")
    if k.params:
        lines.append("  params: " + "; ".join(_param_line(p) for p in k.params))
    for sh in k.shared:
        dims = "".join(f"[{d}]" for d in sh.dims)
        kind = "dynamic" if sh.dynamic else (f"{sh.bytes} B" if sh.bytes is not None else "static")
        lines.append(f"  shared: {sh.type} {sh.name}{dims} ({kind}, line {sh.line})")
    if k.calls:
        lines.append(f"  calls: {', '.join(k.calls)}")
    rows = assess(k)
    if k.kind == "global":
        for r in rows:
            if r.needs_rewrite:
                lines.append(f"  ! {r.feature} (line {r.line}): needs rewrite: {r.reason}"
                             + (f" [try {r.metal}]" if r.metal else ""))
        maps = sorted({f"{r.feature}->{_short(r.metal)}" for r in rows if not r.needs_rewrite and r.metal
                       and r.feature not in ("restrict",) and not r.feature.startswith("static_shared")})
        if maps:
            lines.append("  maps: " + "; ".join(maps))
        for ln in launches:
            if ln.kernel == k.name:
                lines.append("  launch: " + _launch_text(ln))
    else:
        flagged = [f"{r.feature}(l{r.line})" for r in rows if r.needs_rewrite]
        plain = sorted({r.feature for r in rows if not r.needs_rewrite})
        if plain or flagged:
            lines.append("  features: " + ", ".join(plain + [f"!{f}" for f in flagged]))
    for w in k.warnings[:2]:
        lines.append(f"  warning: {w}")
    return lines


def _short(metal: str) -> str:
    return re.split(r" \(|; | or ", metal)[0]


def _launch_text(ln: LaunchSite) -> str:
    targs = f"<{', '.join(ln.template_args)}>" if ln.template_args else ""
    cfg = [ln.grid, ln.block] + ([ln.shared_mem] if ln.shared_mem else []) + ([ln.stream] if ln.stream else [])
    where = f" in {ln.enclosing_function}" if ln.enclosing_function else ""
    return f"{ln.kernel}{targs}<<<{', '.join(cfg)}>>> line {ln.line}{where}"


def summary(cf: CudaFile) -> str:
    """Compact text for the model: kernels, params with r/w, shared memory, features, launches."""
    lines = [f"{cf.path}: {len(cf.kernels)} kernel(s), {len(cf.device_functions)} device function(s), "
             f"{len(cf.launches)} launch(es)"]
    kernel_defines = {m.name for m in cf.macros if m.params is None and len(m.body) < 40 and m.body}
    if kernel_defines:
        shown = list(sorted(kernel_defines))[:12]
        lines.append("defines: " + ", ".join(f"{n}={cf.defines[n]}" for n in shown)
                     + (" ..." if len(kernel_defines) > 12 else ""))
    for k in cf.kernels:
        lines.extend(_kernel_summary(k, cf.launches))
    for d in cf.device_functions:
        lines.extend(_kernel_summary(d, cf.launches))
    known = {k.name for k in cf.kernels}
    other = [ln for ln in cf.launches if ln.kernel not in known]
    for ln in other[:4]:
        lines.append("launch of unknown kernel: " + _launch_text(ln))
    host = sorted({f.name for f in cf.features if f.category in ("host", "library", "thrust", "memory")})
    if host:
        lines.append("host/file: " + ", ".join(host))
    return "\n".join(lines)
