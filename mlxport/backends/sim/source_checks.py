"""What a candidate's own text holds that kernel code may not, read before it compiles.

An MSL candidate includes only the <metal_*> headers, asks no questions of the file system
(``__has_include``, ``#pragma GCC dependency``), holds no inline assembly, copies no bytes of a
pointer (``memcpy``, ``bit_cast``, builtins Metal does not have) and keeps no mutable program-scope
or static data (Metal allows program-scope data only in the constant address space); a CUDA
candidate keeps no state between calls; a .cu file run on the CPU executor holds no inline
assembly. The directives are read on the text as the preprocessor reads it (lines spliced,
comments gone), everything else on the text after the preprocessor too (macros expanded), which is
what the compiler reads. Each finding is one sentence naming the construct and its line.
"""

from __future__ import annotations

import re

from mlxport.backends.sim.diagnostics import locate, log_line, place_words
from mlxport.backends.sim.rewrite import Token, tokenize
from mlxport.backends.sim.signature import SimSource

# Preprocessor directives an MSL kernel may not hold: an #include of anything but a <metal_*> header
# (the system's headers are not Metal's), a macro named as the inline-assembly keywords (which the
# compile defines away, below) and a pragma that reads a file. Directives never come out of a
# macro, so reading them off the text as the preprocessor sees it (lines spliced, comments gone,
# `%:` read as `#`) finds them all.
_DIRECTIVE = re.compile(
    r"^[ \t]*(?:#|%:)[ \t]*(include|include_next|import|embed|define|undef|pragma|line|\d+)\b"
    r"[ \t]*(\S*)([^\n]*)",
    re.MULTILINE,
)
ASM_KEYWORDS = ("asm", "__asm", "__asm__")
# After the simulator's own headers, inline assembly spelled through a macro (``__as##m__``) is a
# name that does not compile: Metal has no inline assembly, and on the simulator it would be the
# host's instructions, out of reach of every check here.
ASM_STAND_IN = "__inline_assembly_is_not_metal"
NO_ASM = "".join(f"#define {k} {ASM_STAND_IN}\n" for k in ASM_KEYWORDS)
# Questions to the file system: the compiler's answer would come from the host's files.
_FILE_PROBES = ("__has_include", "__has_include_next")
# Ways to copy a pointer's bytes into an integer and back (Metal has none of them): the address
# that comes out would be out of reach of the bounds, written-mask and race checks.
_BYTE_COPIES = frozenset(
    ["memcpy", "memmove", "bit_cast", "addressof", "launder", "start_lifetime_as"]
)
# The builtins the simulator's headers' macros expand to (INFINITY, NAN, offsetof) and the
# classification and hint ones; any other ``__builtin_`` is the host compiler's, not Metal's.
_BUILTINS = re.compile(
    r"__builtin_(?:(?:inf|nans?|huge_val)[fl]?|offsetof|expect|unreachable|fpclassify|signbit|"
    r"is(?:nan|inf|finite|normal|unordered|greater|greaterequal|less|lessequal|lessgreater))"
)


def msl_text_problem(src: SimSource) -> tuple[str, str, int | None] | None:
    """What in an MSL candidate's own text is not Metal whatever it compiles to: an #include of
    anything but a <metal_*> header, a question to the file system, inline assembly, a macro named
    ``asm``, a copy of a pointer's bytes. (sentence, where, line) or None."""
    for where, rewritten in (("header", src.header), ("source", src.body)):
        text = rewritten.original
        if problem := lexing_problem(text, where):
            return problem
        comments_gone = as_preprocessed(text)
        if problem := _directive_problem(text, comments_gone, where):
            return problem
        toks = tokenize(comments_gone)
        for k, t in enumerate(toks):
            if t.kind != "ident":
                continue
            line = _spliced_line(text, t.start)
            if problem := _token_problem(t.text, f"line {line} of the {where}", where, line):
                return problem
            if t.text == "_Pragma" and (why := _pragma_operator_problem(toks[k + 1 : k + 4])):
                return (
                    f"not a Metal kernel: _Pragma at line {line} of the {where} {why}",
                    where,
                    line,
                )
    return None


def _pragma_operator_problem(operand: list[Token]) -> str | None:
    """Why a ``_Pragma`` followed by ``operand`` (its next three tokens) is refused: held to the
    rules of ``#pragma`` (no pragma that reads a file), its text one plain string literal so that
    those rules read what the preprocessor does."""
    texts = [t.text for t in operand]
    if len(texts) < 3 or texts[0] != "(" or texts[2] != ")" or not texts[1].startswith('"'):
        return "takes anything but one plain string literal; write #pragma instead"
    if "dependency" in texts[1]:
        return "reads another file (a dependency pragma)"
    return None


def lexing_problem(text: str, where: str) -> tuple[str, str, int] | None:
    """What in ``text`` the compiler could read otherwise than the checks here (which read it
    as ordinary C++ lexing does), refused before anything else reads it: a raw string literal, a
    digit separator, a literal left open, a backslash that is not a line's last character, a
    character outside printable ASCII in code, a control character. A Metal kernel needs none of
    them. Read by one scanner that stops at the first, so nothing it passes is read two ways."""
    if m := _ODD_CHARACTER.search(text):
        what = _ODD_WHY[m.lastgroup] + (f" ({m.group()!r})" if m.lastgroup == "control" else "")
        return _lexing_refusal(what, where, text.count("\n", 0, m.start()) + 1)
    spliced = text.replace("\\\r\n", "").replace("\\\n", "")
    i, n = 0, len(spliced)
    while i < n:
        c = spliced[i]
        if spliced.startswith("//", i):
            i = _find(spliced, "\n", i)
        elif spliced.startswith("/*", i):
            i = _find(spliced, "*/", i + 2) + 2
        elif c in "\"'":
            end = _LITERAL[c].match(spliced, i)
            if end is None:
                return _lexing_refusal("a literal left open", where, _spliced_line(text, i))
            i = end.end()
        elif c == "\\" or not c.isascii():
            what = "a backslash" if c == "\\" else f"{c!r}"
            return _lexing_refusal(f"{what} in code", where, _spliced_line(text, i))
        elif c.isalpha() or c in "_$":
            word = _WORD.match(spliced, i).group()
            i += len(word)
            if word in _RAW_PREFIXES and spliced.startswith('"', i):
                return _lexing_refusal("a raw string literal", where, _spliced_line(text, i))
        elif c.isdigit() or c == "." and spliced[i + 1 : i + 2].isdigit():
            number = _PP_NUMBER.match(spliced, i).group()
            i += len(number)
            if spliced.startswith("'", i):
                return _lexing_refusal(
                    f"a digit separator ({number}')", where, _spliced_line(text, i)
                )
        else:
            i += 1
    return None


# Lone carriage returns (a line's end to some compilers), control characters and a backslash
# followed by spaces before a line's end (a line continuation to GCC and clang, not to the checks).
_ODD_CHARACTER = re.compile(
    r"(?P<cr>\r(?!\n))|(?P<control>[\x00-\x08\x0e-\x1f\x7f])|(?P<splice>\\[ \t\f\v]+(?=\r?\n))"
)
_ODD_WHY = {
    "cr": "a carriage return that ends no line",
    "control": "a control character",
    "splice": "a backslash followed by spaces at a line's end",
}
_LITERAL = {
    '"': re.compile(r'"(?:\\.|[^"\\\n])*"'),
    "'": re.compile(r"'(?:\\.|[^'\\\n])*'"),
}
_WORD = re.compile(r"[A-Za-z0-9_$]+")
_RAW_PREFIXES = frozenset(["R", "u8R", "uR", "UR", "LR"])
# GCC's preprocessing number: a digit (or a dot and a digit), then letters, digits, dots, a sign
# after an exponent's letter, and the digit separator; stopping before a quote, it is refused.
_PP_NUMBER = re.compile(r"\.?\d(?:[eEpP][+-]|[A-Za-z0-9_.])*")


def _find(text: str, what: str, start: int) -> int:
    at = text.find(what, start)
    return len(text) if at < 0 else at


def _lexing_refusal(what: str, where: str, line: int) -> tuple[str, str, int]:
    return (
        f"not a Metal kernel: {what} at line {line} of the {where}, which the checks and the "
        "compiler could read differently; Metal code needs none (write plain strings, numbers "
        "and ASCII code)",
        where,
        line,
    )


def as_preprocessed(text: str) -> str:
    """``text`` as the preprocessor reads it: backslash-newlines removed, and comments blanked
    (each character of a comment but its newlines made a space, so that offsets stay those of
    the spliced text)."""
    spliced = text.replace("\\\r\n", "").replace("\\\n", "")

    def blank(m: re.Match[str]) -> str:
        if m.group("comment") is None:
            return m.group()
        return re.sub(r"[^\n]", " ", m.group())

    return _COMMENT_OR_LITERAL.sub(blank, spliced)


_COMMENT_OR_LITERAL = re.compile(
    r"""(?P<literal>R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)"|"""
    r""""(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(?P<comment>//[^\n]*|/\*.*?\*/)""",
    re.DOTALL,
)


def _directive_problem(text: str, comments_gone: str, where: str) -> tuple[str, str, int] | None:
    for m in _DIRECTIVE.finditer(comments_gone):
        directive, target, rest = m.group(1), m.group(2), m.group(3)
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
        if directive == "pragma":
            if "dependency" in f"{target} {rest}":
                return (
                    f"not a Metal kernel: #pragma {target} dependency (line {line} of the "
                    f"{where}) reads another file",
                    where,
                    line,
                )
            continue
        if directive == "include" and re.fullmatch(r"<metal_\w+>", target):
            continue
        if directive == "line" or directive.isdigit():
            return (
                f"not a Metal kernel: a #line directive (line {line} of the {where}) would hide "
                "where its code is",
                where,
                line,
            )
        return (
            f"not a Metal kernel: includes {target or 'a file'} (line {line} of the {where}); a "
            "Metal kernel includes only the <metal_*> headers",
            where,
            line,
        )
    return None


def _token_problem(name: str, at: str, where: str, line: int | None):
    """The sentence refusing identifier ``name`` (found ``at``), or None where kernels may use
    it."""
    if name in ASM_KEYWORDS or name == ASM_STAND_IN:
        shown = f"`{name}`, " if name != ASM_STAND_IN else "spelled through a macro, "
        return f"not a Metal kernel: inline assembly ({shown}{at}); Metal has none", where, line
    if name in _FILE_PROBES:
        return (
            f"not a Metal kernel: `{name}` ({at}) asks the host's file system; a Metal kernel "
            "includes only the <metal_*> headers",
            where,
            line,
        )
    if name in _BYTE_COPIES or name.startswith("__builtin_") and not _BUILTINS.fullmatch(name):
        return (
            f"not a Metal kernel: `{name}` ({at}) is not Metal's; a kernel reads a value's bits "
            "with as_type, and a pointer's never",
            where,
            line,
        )
    return None


def expanded_problem(preprocessed: str) -> tuple[str, str, int | None] | None:
    """What the candidate's part of the whole translation unit after the preprocessor holds that
    kernel code may not (macros expanded, so a name pasted together or hidden in a macro shows):
    a file entered from it (an #include however spelled), inline assembly, a builtin or copy of a
    pointer's bytes, a way to read a pointer's bits as numbers or numbers as a pointer
    (pun_problem). Its part starts at the first line marker of the candidate's header, the
    generated signature or its source (the candidate writes no line markers: #line is refused);
    (sentence, where, line) or None."""
    start = re.search(r'^# \d+ "(?:header|generated|source)"', preprocessed, re.MULTILINE)
    if start is None:
        return None
    file, line = "header", 1
    placed: list[tuple[Token, str, int]] = []  # the candidate's tokens, each with its file and line
    for raw in preprocessed[start.start() :].split("\n"):
        marker = _LINE_MARKER.match(raw)
        if marker:
            file, line = marker.group(2), int(marker.group(1))
            if " 1" in marker.group(3):  # flag 1: a file entered
                return (
                    f"not a Metal kernel: includes {file}; a Metal kernel includes only the "
                    "<metal_*> headers",
                    "generated",
                    None,
                )
            continue
        if file != "generated":  # the candidate's, or a file it entered
            placed += [(t, file, line) for t in tokenize(raw)]
        line += 1
    for t, file, line in placed:
        if t.kind == "ident" and (
            problem := _token_problem(t.text, f"line {line} of the {file}", file, line)
        ):
            return problem
    return pun_problem(placed)


# What lets a kernel read a pointer's bits as numbers, or make a pointer of numbers, around the
# checked conversions MSL has ((device float4*)p, as_type of values): the address that comes out
# would be out of reach of the bounds, written-mask and race checks.
_PUNS = {
    "union": "a union holds one value as another type (a pointer's bits as numbers, or numbers as "
    "a pointer); read a value's bits with as_type",
    "reinterpret_cast": "reinterpret_cast to a type in no address space (a reference, an alias) "
    "reads one value's storage as another's; cast pointers with their address space named "
    "(reinterpret_cast<device float4*>(p)) and values with as_type",
    "new": "placement new makes any storage hold a pointer",
    "mlxsim": "it names the simulator's own code, which hands out raw addresses; a Metal kernel "
    "names Metal's",
    "sim_detail": "it names the simulator's own code, which hands out raw addresses; a Metal "
    "kernel names Metal's",
}
_ALIAS_OF_POINTER = frozenset(["*", "&", "&&", "decltype", "typeof", "__typeof__", "__typeof"])


def pun_problem(placed: list) -> tuple[str, str, int] | None:
    """The first way, in the candidate's preprocessed tokens ``placed`` ((token, file, line)), to
    read a pointer's bits as numbers or make a pointer of numbers: a union, a reinterpret_cast
    the rewrite left (those to a type in an address space are checked conversions by then), a
    cast to a reference type, a static_cast to a thread pointer or reference, a C-style cast to
    a pointer in no address space, an alias of a pointer or reference type (a cast through it
    is no (thread T*) cast), placement new, an explicit operator call
    (``a.operator->()``, a buffer element's raw address) or the simulator's own names."""
    toks = [t for t, _, _ in placed]
    for k, (t, file, line) in enumerate(placed):
        if why := _pun_at(toks, k):
            return f"not a Metal kernel: `{t.text}` at line {line} of the {file}: {why}", file, line
    return None


def _plain_marker(toks: list[Token], k: int) -> bool:
    """Whether token ``k`` starts the rewrite's ``using mlxsim_plain = <alias>::PlainOf<...>`` in
    a struct of plain members: its alias of the runtime's namespace is a hash of the candidate's
    own text, which that text cannot hold, so a candidate cannot write one that compiles."""
    return (
        k >= 0
        and [t.text for t in toks[k : k + 3]] == ["using", "mlxsim_plain", "="]
        and k + 3 < len(toks)
        and toks[k + 3].text.startswith("__sim_")
    )


def _pun_at(toks: list[Token], k: int) -> str | None:
    """Why token ``k`` of ``toks`` starts a pun (pun_problem), or None."""
    t = toks[k]
    prev = toks[k - 1].text if k else ""
    nxt = _next(toks, k, 1)
    if t.kind == "ident" and t.text in _PUNS:
        return _PUNS[t.text]
    if t.kind == "ident" and t.text.startswith("mlxsim_") and not _plain_marker(toks, k - 1):
        return _PUNS["mlxsim"]
    if t.text == "operator" and prev in (".", "->", "::"):
        return "an explicit operator call (a.operator->()) is a buffer element's raw address"
    if t.text == "static_cast" and nxt == "<" and {"*", "&", "&&"} & _angled(toks, k + 1):
        return (
            "static_cast to a thread pointer or reference (from a void pointer, or a struct as "
            "another derived from it) views one value's storage as another's; cast pointers "
            "with (thread T*) and values with as_type"
        )
    if t.text in ("&", "&&") and nxt == ")" and _is_cast(toks, _opening(toks, k + 1)):
        return "a cast to a reference type reads one value's storage as another's"
    if _plain_pointer_cast(toks, k):
        return "a cast to a pointer in no address space; name it (thread float*)x, (device float*)x"
    alias = t.text == "typedef" or t.text == "using" and _next(toks, k, 2) == "="
    alias = alias and not _plain_marker(toks, k)
    if alias and _ALIAS_OF_POINTER & {x.text for x in toks[k : _statement_end(toks, k)]}:
        return "an alias of a pointer or reference type makes casts through it unchecked"
    return None


def _angled(toks: list[Token], k: int) -> set[str]:
    """The texts of the tokens inside the ``<`` at ``k`` and its matching ``>``."""
    depth, inside = 0, set()
    for m in range(k, len(toks)):
        depth += (toks[m].text == "<") - (toks[m].text == ">") - 2 * (toks[m].text == ">>")
        if depth <= 0:
            break
        inside.add(toks[m].text)
    return inside


def _plain_pointer_cast(toks: list[Token], k: int) -> bool:
    """Whether the ``)`` at ``k`` closes a C-style cast to a pointer type that the rewrite left
    as it was: MSL names every pointer's address space, and the rewrite follows a cast to a
    thread pointer with its PtrOnly (``(float*)(ns::PtrOnly)x``), so the cast is a plain
    reinterpretation of whatever follows (a checked pointer's own storage, say)."""
    if toks[k].text != ")":
        return False
    star = k - 1
    while star > 0 and toks[star].text in ("const", "volatile"):
        star -= 1
    if toks[star].text != "*" or not _is_cast(toks, _opening(toks, k)):
        return False
    return not (_next(toks, k, 1) == "(" and _next(toks, k, 4) == "PtrOnly")


def _next(toks: list, k: int, n: int) -> str:
    return toks[k + n].text if k + n < len(toks) else ""


def _opening(toks: list, close: int) -> int:
    """The index of the ``(`` that the ``)`` at ``close`` closes, or -1."""
    depth = 0
    for m in range(close, -1, -1):
        if toks[m].text == ")":
            depth += 1
        elif toks[m].text == "(":
            depth -= 1
            if depth == 0:
                return m
    return -1


def _is_cast(toks: list, opening: int) -> bool:
    """Whether the parentheses opening at ``opening`` are a C-style cast's, not a call's or a
    declaration's (``f(float&)``, ``sizeof(T&)``, ``[](float&)``, ``operator()(float&)``)."""
    if opening < 0:
        return False
    before = toks[opening - 1] if opening else None
    return (
        before is None
        or before.text == "return"
        or before.text not in (")", "]", ">")
        and (before.kind != "ident")
    )


def _statement_end(toks: list, k: int) -> int:
    """The index after the ``;`` ending the declaration starting at ``k`` (braces nested)."""
    depth = 0
    for m in range(k, len(toks)):
        text = toks[m].text
        depth += text == "{"
        depth -= text == "}"
        if text == ";" and depth <= 0:
            return m + 1
    return len(toks)


_LINE_MARKER = re.compile(r'^# (\d+) "((?:\\.|[^"\\])*)"((?: \d)*)\s*$')


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
