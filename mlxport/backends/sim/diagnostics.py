"""Where in a candidate's text the compiler's errors and the checks' findings are.

The compiler's log becomes diagnostics placed in the candidate's ``source`` or ``header`` (the
original text, before the simulator rewrote it); a name a check refuses is found through the line
markers of the translation unit, in the user's part of it only.
"""

from __future__ import annotations

import bisect
import functools
import re
from pathlib import Path

from mlxport.backends.sim.rewrite import tokenize
from mlxport.backends.sim.signature import SimSource
from mlxport.spec import Diagnostic

USER_FILES = ("source", "header")

_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+): "
    r"(?P<sev>fatal error|error|warning|note): (?P<msg>.*)$",
    re.MULTILINE,
)


def _pretty(msg: str) -> str:
    """Show checked pointers in compiler messages as the MSL types they stand for, and suggest no
    name of the simulator's own."""

    def sub(m: re.Match[str]) -> str:
        return f"{m.group(1) or ''}{m.group(3).lower()} {m.group(2)}*"

    msg = re.sub(
        r"(?:::)?mlxsim::Ptr<(const )?([^,<>]+(?:<[^<>]*>)?), (?:::)?mlxsim::AS_(\w+)>", sub, msg
    )
    msg = re.sub(r";? ?did you mean '[^']*sim_detail::[^']*'\??", "", msg)
    return msg.replace("mlxsim::", "")


def diagnostics(log: str, src: SimSource) -> list[Diagnostic]:
    """Errors from the compiler log, each placed in the candidate's ``source`` or ``header``.

    An error inside a runtime header (a template instantiated with bad arguments) is placed at
    the candidate line its instantiation notes lead back to.
    """
    entries = [m.groupdict() for m in _DIAG.finditer(log)]
    out: list[Diagnostic] = []
    for i, e in enumerate(entries):
        if e["sev"] not in ("error", "fatal error"):
            continue
        place = e
        if Path(e["file"]).name not in USER_FILES:
            for n in entries[i + 1 :]:
                if n["sev"] != "note":
                    break
                if n["file"] in USER_FILES:
                    place = n
                    break
        out.append(_diagnostic(place, e["msg"], src, origin=e["file"]))
        if len(out) >= 20:
            break
    if not out:
        tail = [ln for ln in log.strip().splitlines() if ln.strip()][-3:]
        out.append(
            Diagnostic(message=_pretty(" ".join(tail))[:800] or "compile failed", where="generated")
        )
    return out


def _diagnostic(place: dict[str, str], msg: str, src: SimSource, origin: str) -> Diagnostic:
    file, line, col = place["file"], int(place["line"]), int(place["col"])
    text = _pretty(msg)
    if file != origin and Path(origin).name not in USER_FILES:
        text += f" (inside {Path(origin).name})"
    if file in USER_FILES:
        rewritten = src.body if file == "source" else src.header
        line, col = rewritten.original_position(line, col)
        return Diagnostic(message=text, where=file, line=line, column=col)
    return Diagnostic(message=text, where="generated", line=line, column=col)


def place_words(place: tuple[str, int, int]) -> str:
    file, line, _ = place
    if file in USER_FILES:
        return f"line {line} of the {file}"
    return f"line {line} of {Path(file).name}"


def log_line(place: tuple[str, int, int] | None, message: str) -> str:
    """A compiler-style error line, so the callers' diagnostics place it as any compile error."""
    if place is None:
        return f"kernel.cpp:1:1: error: {message}\n"
    file, line, col = place
    return f"{file}:{line}:{col}: error: {message}\n"


_MARKER = re.compile(r'^[ \t]*#[ \t]*(?:line[ \t]+)?(\d+)[ \t]+"((?:\\.|[^"\\\n])*)"', re.MULTILINE)
_CALL_BEFORE = {
    "(",
    ",",
    "=",
    ";",
    "{",
    "}",
    ":",
    "?",
    "!",
    "+",
    "-",
    "/",
    "%",
    "|",
    "^",
    "[",
    "<",
    ">",
    "return",
    "&&",
    "||",
    "==",
    "!=",
    "<=",
    ">=",
    "+=",
    "-=",
    "*=",
    "/=",
    "::",
}


def locate(
    text: str, idents: list[str], language: str, call: bool = False
) -> tuple[str, int, int, int] | None:
    """Where one of ``idents`` (most specific first) appears in the user's part of ``text``:
    (file as its line marker names it, line, column, offset in ``text``), a call site preferred
    when ``call``. The
    user's part is the candidate's header and source for MSL, the files of the .cu otherwise."""
    markers = [
        (m.start(), int(m.group(1)), m.group(2), text.count("\n", 0, m.start()))
        for m in _MARKER.finditer(text)
    ]
    if not markers:
        return None
    marker_at = [m[0] for m in markers]
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def place(offset: int) -> tuple[str, int, int, int] | None:
        k = bisect.bisect_right(marker_at, offset) - 1
        if k < 0:
            return None
        _, number, file, marker_line = markers[k]
        if language == "msl" and file not in USER_FILES:
            return None
        if language != "msl" and (file.startswith("<") or file == "generated"):
            return None
        line = bisect.bisect_right(starts, offset) - 1
        return file, number + line - marker_line - 1, offset - starts[line] + 1, offset

    toks = _tokens(text)
    for ident in idents:
        hits = [
            (i, p)
            for i, t in enumerate(toks)
            if t.kind == "ident" and t.text == ident and (p := place(t.start)) is not None
        ]
        if not hits:
            continue
        if call:
            for i, p in hits:
                before = toks[i - 1].text if i else ";"
                if i + 1 < len(toks) and toks[i + 1].text == "(" and before in _CALL_BEFORE:
                    return p
        return hits[0][1]
    return None


@functools.lru_cache(maxsize=4)
def _tokens(text: str) -> list:
    return tokenize(text)
