"""Sessions on disk: how a port or chat started in ``OUT/<task>/`` is found and resumed.

Every session started in a task's output folder is listed in its ``sessions.json`` (id -> task
folder and configuration); ``session.json`` holds the newest. Its checkpoints are in the
folder's ``checkpoints.sqlite`` under the session id. ``mlxport port --resume``, ``mlxport chat
--session`` and a rerun batch all resume through ``find`` or ``latest``. Files and checkpoints
are written through ``mlxport.redaction``: no secret is stored.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from mlxport.agent.config import RunConfig
from mlxport.errors import UserError
from mlxport.redaction import redact, write_text

LATEST = "session.json"
ALL = "sessions.json"


@dataclass
class Saved:
    """A session as saved: its id, output folder, task folder and the configuration it runs with."""

    id: str
    folder: Path
    task_dir: str
    config: RunConfig


def new_id(task: str) -> str:
    return f"{task}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def ensure_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".mlxport-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(
            f"cannot write to output folder {folder} ({e.strerror}): pass a writable --out"
        ) from e


def save(folder: Path, session: str, task_dir: str | Path, config: RunConfig) -> Saved:
    """Record a new session in ``folder`` (the newest, and one of all started there)."""
    entry = {"config": asdict(config), "task_dir": str(task_dir)}
    write_text(folder / LATEST, json.dumps({"session": session, **entry}, indent=2))
    every = _all(folder)
    every[session] = entry
    write_text(folder / ALL, json.dumps(every, indent=2))
    return Saved(session, folder, str(task_dir), config)


def latest(folder: Path) -> Saved | None:
    """The newest session of ``folder``, or None if none started (or its file was cut short)."""
    try:
        data = json.loads((folder / LATEST).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return _saved(data["session"], folder, data)


def find(out: Path, session: str) -> Saved:
    """The session ``session`` among the task folders under ``out``."""
    for path in sorted(out.glob(f"*/{ALL}")):
        entry = _all(path.parent).get(session)
        if entry is not None:
            return _saved(session, path.parent, entry)
    raise UserError(
        f"no session {session!r} under {out}: check the id (see <out>/<task>/{LATEST}) and --out"
    )


def _saved(session: str, folder: Path, entry: dict[str, Any]) -> Saved:
    return Saved(session, folder, entry["task_dir"], RunConfig(**entry["config"]))


def _all(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / ALL).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


class RedactingSaver(SqliteSaver):
    """SQLite checkpoints with every secret redacted from the state and the pending writes."""

    def put(self, config, checkpoint, metadata, new_versions):
        return super().put(config, redact(checkpoint), redact(metadata), new_versions)

    def put_writes(
        self, config, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        super().put_writes(
            config, [(channel, redact(value)) for channel, value in writes], task_id, task_path
        )


def checkpointer(folder: Path) -> tuple[RedactingSaver, sqlite3.Connection]:
    """The checkpointer of the sessions in ``folder`` and its connection (the caller closes it)."""
    conn = sqlite3.connect(folder / "checkpoints.sqlite", check_same_thread=False)
    return RedactingSaver(conn), conn
