"""The one redaction: everything mlxport prints or writes passes through ``redact`` first.

A secret is the value of an environment variable whose name looks like a credential, anything
shaped like a provider's API key or a bearer token, the value after ``Authorization:`` or
``api_key=``, a password inside a URL, and any value stored under a credential-like key. Words
such as ``tokens`` or ``max_tokens`` are counts, not secrets, and stay.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path
from typing import Any, TextIO

REDACTED = "[redacted]"
# environment variables whose values are kept from workers and scrubbed from every output
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# mapping keys whose values are secrets; `token` only as a whole word, so `max_tokens` stays
SECRET_FIELD = re.compile(
    r"api[_-]?key|secret|passw|authorization|credential|cookie|(^|[_-])token$", re.I
)
_TOKEN = r"[A-Za-z0-9._~+/=\-]"
SHAPES = re.compile(
    "|".join(
        [
            # OpenAI, Anthropic (sk-ant-), DeepSeek, OpenRouter (sk-or-)
            r"\bsk-[A-Za-z0-9_\-]{16,}",
            r"\bAIza[0-9A-Za-z_\-]{30,}",  # Google
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bhf_[A-Za-z0-9]{30,}",
            r"\bgsk_[A-Za-z0-9]{20,}",
            r"\bxai-[A-Za-z0-9]{20,}",
            r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
            r"\bAKIA[0-9A-Z]{16}\b",
            r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
        ]
    )
)
LABELLED = re.compile(  # Authorization: Bearer X, api_key=X, "x-api-key": "X", access_token=X
    r"(?i)(\b(?:authorization|proxy-authorization|x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token)"
    r"[\"']?\s*[:=]\s*[\"']?(?:bearer\s+|basic\s+)?)(?!(?:bearer|basic)\b)" + _TOKEN + "{4,}"
)
BEARER = re.compile(r"(?i)(\b(?:bearer|basic)\s+)" + _TOKEN + "{8,}")
URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]+@", re.I)
MIN_SECRET = 8  # shorter environment values ("1", "true") are too common to be told apart


def environment_secrets() -> list[str]:
    """Values of credential-like environment variables, longest first (one may contain another)."""
    found = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET}
    return sorted(found, key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    for secret in environment_secrets() if secrets is None else secrets:
        text = text.replace(secret, REDACTED)
    text = URL_CREDENTIALS.sub(r"\1" + REDACTED + "@", text)
    text = LABELLED.sub(r"\1" + REDACTED, text)
    text = BEARER.sub(r"\1" + REDACTED, text)
    return SHAPES.sub(REDACTED, text)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """``value`` with every secret replaced: strings, mappings, sequences, pydantic models (chat
    messages) and dataclasses, rebuilt only where something changed."""
    secrets = environment_secrets() if secrets is None else secrets
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {
            k: REDACTED
            if isinstance(k, str) and SECRET_FIELD.search(k) and isinstance(v, str) and v
            else redact(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        items = [redact(v, secrets) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    fields = _fields(value)
    if fields:
        changed = {}
        for name in fields:
            old = getattr(value, name, None)
            new = redact(old, secrets)
            if new is not old and new != old:
                changed[name] = new
        if changed:
            return (
                value.model_copy(update=changed)
                if hasattr(value, "model_copy")
                else dataclasses.replace(value, **changed)
            )
    return value


def _fields(value: Any) -> list[str]:
    model_fields = getattr(type(value), "model_fields", None)
    if isinstance(model_fields, dict) and hasattr(value, "model_copy"):
        return list(model_fields)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [f.name for f in dataclasses.fields(value) if f.init]
    return []


def write_text(path: Path, text: str) -> None:
    """Write a file mlxport leaves behind (reports, run records, transcripts, candidates): whole or
    not at all, so a run killed mid-write leaves no half file (a run.json says a port is done)."""
    if path.exists() and not path.is_file():  # a device or pipe (-o /dev/stdout): written as it is
        path.write_text(redact_text(text))
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(redact_text(text))
    os.replace(tmp, path)


class RedactingStream:
    """A text stream that redacts each write before passing it on (the terminal)."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_terminal() -> None:
    """Redact everything the process prints from now on."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
