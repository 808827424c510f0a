"""A .cu file with its local headers inlined: ``#include "x.cuh"`` replaced by the header's text,
found next to the including file or in an include folder, each header once. System headers
(``<...>``) stay as they are. This is what the reader reads for a path and what a task made from
a bare file holds, so kernels kept in headers are found and one file has everything."""

from __future__ import annotations

import re
from pathlib import Path

_LOCAL = re.compile(r'(?m)^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$')
_ONCE = re.compile(r"(?m)^[ \t]*#[ \t]*pragma[ \t]+once[^\n]*$")
MAX_HEADERS = 200


def amalgamate(path: Path, includes: list[Path] = ()) -> tuple[str, list[str], list[str]]:
    """(the text, the headers inlined, the local headers not found)."""
    seen: set[Path] = set()
    inlined: list[str] = []
    missing: list[str] = []

    def expand(file: Path, depth: int) -> str:
        text = file.read_text(errors="replace")

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            found = next((d / name for d in (file.parent, *includes) if (d / name).is_file()), None)
            if found is None:
                missing.append(name)
                return m.group(0)
            found = found.resolve()
            if found in seen or depth > 16 or len(seen) >= MAX_HEADERS:
                return f"// {m.group(0).strip()} (inlined above)"
            seen.add(found)
            inlined.append(name)
            body = _ONCE.sub("", expand(found, depth + 1))
            return f"// ---- begin {name}\n{body}\n// ---- end {name}"

        return _LOCAL.sub(sub, text)

    seen.add(path.resolve())
    return expand(path, 0), inlined, missing
