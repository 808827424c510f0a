"""The one TOML writer: task.toml and candidate files (tomllib reads, nothing in the standard
library writes). Values first, multi-line strings after them (a candidate reads as launch settings
followed by code), then tables and arrays of tables."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def dumps(data: dict[str, Any]) -> str:
    """``data`` as TOML that ``tomllib.loads`` reads back equal (None values are left out)."""
    lines: list[str] = []
    _table(data, [], lines)
    return "\n".join(lines).strip() + "\n"


def _table(data: dict[str, Any], prefix: list[str], lines: list[str]) -> None:
    values = {k: v for k, v in data.items() if v is not None and not _is_table(v)}
    values = {k: v for k, v in values.items() if not _is_table_array(v)}
    for k in sorted(values, key=lambda k: _multiline(values[k])):
        lines.append(f"{_key(k)} = {_value(values[k], top=True)}")
    for k, v in data.items():
        path = ".".join(_key(p) for p in [*prefix, k])
        if _is_table(v):
            lines += ["", f"[{path}]"]
            _table(v, [*prefix, k], lines)
        elif _is_table_array(v):
            for item in v:
                lines += ["", f"[[{path}]]"]
                _table(item, [*prefix, k], lines)


def _is_table(v: Any) -> bool:
    return isinstance(v, dict) and any(isinstance(x, dict | list) for x in v.values())


def _is_table_array(v: Any) -> bool:
    return (
        isinstance(v, list)
        and bool(v)
        and all(isinstance(x, dict) for x in v)
        and any(_is_table(x) or any(isinstance(y, list) for y in x.values()) for x in v)
    )


def _multiline(v: Any) -> bool:
    return isinstance(v, str) and "\n" in v


def _value(v: Any, top: bool = False) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v, multiline=top and "\n" in v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        items = ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None)
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _string(s: str, *, multiline: bool) -> str:
    if not multiline:
        return _basic(s)
    body = s.replace("\\", "\\\\").replace('"', '\\"')
    body = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", body.replace("\r", "\\r"))
    return '"""\n' + body + '"""'


def _basic(s: str) -> str:
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML refuses DEL


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else _basic(k)
