"""A .cu file with its local headers inlined: ``#include "x.cuh"`` replaced by the header's text,
found next to the including file or in an include folder, each header once. System headers
(``<...>``) stay as they are. This is what the reader reads for a path and what a task made from
a bare file holds, so kernels kept in headers are found and one file has everything."""

from __future__ import annotations

import re
from pathlib import Path

from mlxport.errors import UserError

_LOCAL = re.compile(r'(?m)^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$')
_ONCE = re.compile(r"(?m)^[ \t]*#[ \t]*pragma[ \t]+once[^\n]*$")
MAX_HEADERS = 200
MAX_HEADER_BYTES = 4 * 2**20
# What a header of C, C++ or CUDA is named: never a key file, a .env or a credentials file.
HEADER_SUFFIXES = {".h", ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".cu", ".inl", ".inc", ".ipp",
                   ".tcc", ".tpp", ".c", ".cc", ".cpp", ".cxx"}  # fmt: skip


def amalgamate(path: Path, includes: list[Path] = ()) -> tuple[str, list[str], list[str]]:
    """(the text, the headers inlined, the local headers not found). The .cu file is as hostile
    as candidate code, and this runs in mlxport's own process: a header is read only where it is
    a source file, not hidden, in the file's folder or an include folder (as the sandboxed
    preprocessor would find it), and not larger than MAX_HEADER_BYTES."""
    seen: set[Path] = set()
    inlined: list[str] = []
    missing: list[str] = []
    roots = [p.resolve() for p in (path.parent, *includes)]

    def expand(file: Path, depth: int) -> str:
        text = file.read_text(errors="replace")

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            found = next((d / name for d in (file.parent, *includes) if (d / name).is_file()), None)
            if found is None:
                missing.append(name)
                return m.group(0)
            found = found.resolve()
            check_header(found, name, file.name, roots)
            if found in seen or depth > 16 or len(seen) >= MAX_HEADERS:
                return f"// {m.group(0).strip()} (inlined above)"
            seen.add(found)
            inlined.append(name)
            body = _ONCE.sub("", expand(found, depth + 1))
            return f"// ---- begin {name}\n{body}\n// ---- end {name}"

        return _LOCAL.sub(sub, text)

    seen.add(path.resolve())
    return expand(path, 0), inlined, missing


def check_header(found: Path, name: str, by: str, roots: list[Path]) -> None:
    """Refuse a header mlxport must not read (see `amalgamate`)."""
    root = next((r for r in roots if found.is_relative_to(r)), None)
    why = (
        "is outside the file's folder and the -I folders"
        if root is None
        else "is hidden"
        if any(part.startswith(".") for part in found.relative_to(root).parts)
        else "is not a C, C++ or CUDA source file"
        if found.suffix.lower() not in HEADER_SUFFIXES
        else f"is over {MAX_HEADER_BYTES // 2**20} MB"
        if found.stat().st_size > MAX_HEADER_BYTES
        else None
    )
    if why:
        raise UserError(
            f'{by} includes "{name}", which {why}: mlxport reads only the headers of a '
            "kernel's own project; copy the header beside the file or pass its folder with -I"
        )
