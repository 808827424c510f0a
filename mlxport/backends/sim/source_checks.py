"""What a candidate's own text holds that kernel code may not, read before it compiles.

An MSL candidate includes only the <metal_*> headers, holds no inline assembly and keeps no mutable
program-scope or static data (Metal allows program-scope data only in the constant address space);
a CUDA candidate keeps no state between calls; a .cu file run on the CPU executor holds no inline
assembly. Each finding is one sentence naming the construct and its line.
"""

from __future__ import annotations

import re

from mlxport.backends.sim.diagnostics import locate, log_line, place_words
from mlxport.backends.sim.rewrite import tokenize
from mlxport.backends.sim.signature import SimSource

# Preprocessor directives an MSL kernel may not hold: an #include of anything but a <metal_*> header
# (the system's headers are not Metal's), and a macro named as the inline-assembly keywords (which
# the compile defines away, below). Directives never come out of a macro, so reading them off the
# text (lines spliced, `%:` read as `#`) finds them all.
_DIRECTIVE = re.compile(
    r"^[ \t]*(?:#|%:)[ \t]*(include|include_next|import|embed|define|undef)\b[ \t]*(\S*)",
    re.MULTILINE,
)
ASM_KEYWORDS = ("asm", "__asm", "__asm__")
# After the simulator's own headers, inline assembly spelled through a macro (``__as##m__``) is a
# name that does not compile: Metal has no inline assembly, and on the simulator it would be the
# host's instructions, out of reach of every check here.
NO_ASM = "".join(f"#define {k} __inline_assembly_is_not_metal\n" for k in ASM_KEYWORDS)


def msl_text_problem(src: SimSource) -> tuple[str, str, int | None] | None:
    """What in an MSL candidate's own text is not Metal whatever it compiles to: an #include of
    anything but a <metal_*> header, inline assembly, a macro named ``asm``. (sentence, where,
    line) or None."""
    for where, rewritten in (("header", src.header), ("source", src.body)):
        text = rewritten.original
        if problem := _directive_problem(text, where) or _asm_problem(text, where):
            return problem
    return None


def _directive_problem(text: str, where: str) -> tuple[str, str, int] | None:
    spliced = text.replace("\\\r\n", "").replace("\\\n", "")
    for m in _DIRECTIVE.finditer(spliced):
        directive, target = m.group(1), m.group(2)
        line = _spliced_line(text, m.start())
        if directive in ("define", "undef"):
            name = re.match(r"\w*", target).group()
            if name in ASM_KEYWORDS:
                return (
                    f"not a Metal kernel: #{directive} {name} (line {line} of the {where}); Metal "
                    "has no inline assembly",
                    where,
                    line,
                )
            continue
        if directive == "include" and re.fullmatch(r"<metal_\w+>", target):
            continue
        return (
            f"not a Metal kernel: includes {target or 'a file'} (line {line} of the {where}); a "
            "Metal kernel includes only the <metal_*> headers",
            where,
            line,
        )
    return None


def _asm_problem(text: str, where: str) -> tuple[str, str, int] | None:
    for t in tokenize(text):
        if t.kind == "ident" and t.text in ASM_KEYWORDS:
            line = text.count("\n", 0, t.start) + 1
            return (
                f"not a Metal kernel: inline assembly (`{t.text}`, line {line} of the {where}); "
                "Metal has none",
                where,
                line,
            )
    return None


_CONST = frozenset({"const", "constexpr"})
_STATIC = frozenset({"static", "thread_local"})
_NAMES = ("identifier", "field_identifier", "qualified_identifier")


def msl_data_problem(src: SimSource) -> tuple[str, str, int | None] | None:
    """A mutable program-scope variable, static data member or ``static`` local in an MSL
    candidate's text, as declared (used or not, which the object check cannot tell once the
    optimiser dropped it): (sentence, where, line) or None. Read on the rewritten text, where
    ``constant`` is ``const``; declarations the parser cannot read whole are left to the object
    check, which sees what any macro made of them."""
    from mlxport.cuda_syntax import parse

    for where, rewritten in (("header", src.header), ("source", src.body)):
        text = rewritten.text
        code = text if where == "header" else "void mlxport_body() {" + text + "\n}"
        found = _mutable_declaration(parse(code.encode()).root_node, program=where == "header")
        if found:
            name, line, static_local = found
            kind = "a static local variable" if static_local else "a mutable program-scope variable"
            scope = "static and program-scope data" if static_local else "program-scope data"
            return (
                f"not a Metal kernel: `{name}` at line {line} of the {where} is {kind}; Metal "
                f"allows {scope} only in the constant address space",
                where,
                line,
            )
    return None


def cuda_state_problem(header: str, body: str) -> str | None:
    """A CUDA candidate keeps no state between calls: a mutable ``__device__`` (or other
    program-scope) variable, or a ``static`` local, is shared by calls MLX runs at once and lets a
    kernel replay an earlier call's answer when its inputs come back. The sentence, or None."""
    from mlxport.cuda_syntax import parse

    for where, code in (("header", header), ("source", "void mlxport_body() {" + body + "\n}")):
        found = _mutable_declaration(
            parse(code.encode()).root_node, program=where == "header", safe=_CUDA_SAFE
        )
        if found:
            name, line, static_local = found
            kind = "a static local variable" if static_local else "a mutable __device__ variable"
            return (
                f"not a stateless kernel: `{name}` at line {line} of the {where} is {kind}, which "
                "keeps state between calls (calls MLX runs at once share it, and a kernel could "
                "replay an earlier answer from it); keep per-call scratch in an extra output "
                "(init_value zeroes it)"
            )
    return None


# read-only, or per block
_CUDA_SAFE = frozenset({"const", "constexpr", "__constant__", "__shared__"})


def _mutable_declaration(
    node, program: bool, safe: frozenset[str] = _CONST
) -> tuple[str, int, bool] | None:
    """(name, line, whether a static local) of the first mutable static-storage variable under
    ``node``."""
    for child in node.named_children:
        kind = child.type
        if kind == "ERROR" or child.has_error:
            continue
        if kind in ("declaration", "field_declaration"):
            words = {
                c.text.decode()
                for c in child.named_children
                if c.type in ("type_qualifier", "storage_class_specifier")
            }
            static = bool(words & _STATIC)
            member = kind == "field_declaration"
            keeps = static if (member or not program) else "extern" not in words
            if keeps and not words & safe:
                for d in child.children_by_field_name("declarator"):
                    if _is_variable(d):
                        return _declared_name(d), d.start_point[0] + 1, not program and not member
        if kind in ("function_definition", "lambda_expression"):
            found = _mutable_declaration(child, program=False, safe=safe)
        else:
            found = _mutable_declaration(child, program, safe)
        if found:
            return found
    return None


def _is_variable(d) -> bool:
    """Whether a declarator declares an object (not a function; a pointer to one is an object)."""
    from mlxport.cuda_syntax import inner_declarator

    for _ in range(16):
        if d is None:
            return False
        if d.type in ("init_declarator", "array_declarator") or d.type in _NAMES:
            return True
        if d.type == "function_declarator":
            inner = d.child_by_field_name("declarator")
            return inner is not None and inner.type == "parenthesized_declarator"
        if d.type not in (
            "pointer_declarator",
            "reference_declarator",
            "attributed_declarator",
            "parenthesized_declarator",
        ):
            return False
        d = inner_declarator(d)
    return False


def _declared_name(d) -> str:
    from mlxport.cuda_syntax import walk

    return next((n.text.decode() for n in walk(d) if n.type in _NAMES), "?")


def _spliced_line(text: str, offset: int) -> int:
    """The line of ``text`` where ``offset`` of its spliced form (backslash-newlines removed) is."""
    removed = 0
    for m in re.finditer(r"\\\r?\n", text):
        if m.start() - removed > offset:
            break
        removed += len(m.group())
    return text.count("\n", 0, offset + removed) + 1


def inline_assembly(text: str) -> tuple[str, str] | None:
    """Inline assembly in the user's part of a CUDA translation unit: PTX, which the CPU cannot run,
    or the host's own instructions, which no check here sees (a system call needs no symbol)."""
    for ident in ASM_KEYWORDS:
        if ident in text and (hit := locate(text, [ident], "cuda")):
            where = f" ({place_words(hit[:3])})"
            return (
                f"not device code: inline assembly (`{ident}`{where}), which the CPU executor does "
                "not run",
                log_line(hit[:3], f"inline asm (`{ident}`) is not run by the CPU executor"),
            )
    return None
