"""The one base class for errors a user can cause and fix (the CLI prints them as one sentence),
and the one way to read a file a user gave: as UTF-8 text, or that sentence."""

from __future__ import annotations

from pathlib import Path


class UserError(ValueError):
    """Bad input, a missing file or backend, an invalid task or candidate. The message names the
    fix."""


def read_text(path: str | Path, what: str = "file") -> str:
    """``path`` as UTF-8 text; a missing, unreadable or binary file is a UserError naming it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"no {what} {path}: check the path") from None
    except OSError as e:
        raise UserError(
            f"cannot read {what} {path} ({e.strerror}): check the path and its permissions"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{what} {path} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}): "
            f"save it as UTF-8"
        ) from None
