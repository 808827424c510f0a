"""Structured run logs: one JSON object per line in ``<out>/<task>/log.jsonl``.

Secrets never reach the file: every event passes through ``mlxport.redaction`` before rendering.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from mlxport.redaction import redact


def _redact(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    return redact(event)


@contextmanager
def run_log(path: Path, **context: Any) -> Iterator[structlog.BoundLogger]:
    """A logger appending JSON lines to ``path`` (a resumed run appends to the same file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", buffering=1) as stream:
        logger = structlog.wrap_logger(
            structlog.WriteLogger(stream),
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                _redact,
                structlog.processors.JSONRenderer(default=str),
            ],
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
                {
                    "tool": m.name,
                    "status": getattr(m, "status", ""),
                    "head": str(m.content).splitlines()[0][:160] if m.content else "",
                }
            )
    for key in ("best_id", "stop_reason"):
        if update.get(key):
            fields[key] = update[key]
    if update.get("final"):
        fields["final"] = {
            k: update["final"].get(k) for k in ("candidate_id", "verified", "backend")
        }
    log.info("step", **fields)
