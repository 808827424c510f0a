"""Structured run logs: one JSON object per line in ``<out>/<task>/log.jsonl``.

Secrets never reach the file: values under secret-looking keys, strings shaped like API keys,
and credentials inside URLs are redacted before rendering.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|authorization)", re.I)
SECRET_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,})")
URL_CREDENTIALS = re.compile(r"(https?://)[^/\s:@]+:[^/\s@]+@")
REDACTED = "[redacted]"


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        value = URL_CREDENTIALS.sub(r"\1[redacted]@", value)
        for secret in _environment_secrets():
            value = value.replace(secret, REDACTED)
        return SECRET_VALUE.sub(REDACTED, value)
    if isinstance(value, dict):
        return {k: REDACTED if SECRET_KEY.search(str(k)) else _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def _environment_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if SECRET_KEY.search(k) and len(v) >= 8]


def redact(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    return _scrub(event)


@contextmanager
def run_log(path: Path, **context: Any) -> Iterator[structlog.BoundLogger]:
    """A logger appending JSON lines to ``path`` (a resumed run appends to the same file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", buffering=1) as stream:
        logger = structlog.wrap_logger(
            structlog.WriteLogger(stream),
            processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                        redact, structlog.processors.JSONRenderer(default=str)],
        )
        yield logger.bind(**context)


def node_event(log: structlog.BoundLogger, node: str, update: dict[str, Any]) -> None:
    """One line per graph step: what the model called, what the tools answered, stop reasons."""
    fields: dict[str, Any] = {"node": node}
    for m in update.get("messages") or []:
        if getattr(m, "type", "") == "ai":
            fields.setdefault("tool_calls", []).extend(c["name"] for c in m.tool_calls)
            usage = getattr(m, "usage_metadata", None) or {}
            fields["tokens"] = [usage.get("input_tokens", 0), usage.get("output_tokens", 0)]
        elif getattr(m, "type", "") == "tool":
            fields.setdefault("tool_results", []).append(
                {"tool": m.name, "status": getattr(m, "status", ""), "head": str(m.content).splitlines()[0][:160]
                 if m.content else ""})
    for key in ("best_id", "stop_reason"):
        if update.get(key):
            fields[key] = update[key]
    if update.get("final"):
        fields["final"] = {k: update["final"].get(k) for k in ("candidate_id", "verified", "backend")}
    log.info("step", **fields)
