"""The simulator's cache on disk: its folder, keys over what a build reads, and publishing a file
into it atomically with the SHA-256 of its content recorded beside it.

Only mlxport's own process writes here (the sandboxed compiler writes into a private folder and
mlxport copies its output in; workers never see the cache). A cached file is used only while its
content matches the hash recorded when it was published (``recorded``, ``read_verified``): a
library replaced or edited since, by anything, is built again, never loaded.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path

from mlxport.backends.base import cache_root


def cache_dir() -> Path:
    path = cache_root() / "sim"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def headers_digest(*dirs: Path) -> str:
    h = hashlib.sha256()
    for d in dirs:
        for p in sorted(f for f in d.rglob("*") if f.is_file()):
            h.update(str(p.relative_to(d)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@functools.cache
def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:24]


def _record(final: Path) -> Path:
    return final.with_name(final.name + ".sha256")


def _tmp(final: Path) -> Path:
    return final.with_name(f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _read(path: Path) -> bytes:
    """A regular file's bytes, never through a symbolic link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def publish_bytes(data: bytes, final: Path) -> str:
    """Write ``data`` to ``final`` atomically (concurrent builders never see a half-written file)
    and record its content hash; the hash."""
    sha = hashlib.sha256(data).hexdigest()
    tmp = _tmp(final)
    try:
        _write(tmp, data)
        os.replace(tmp, final)
        record = _tmp(_record(final))
        _write(record, sha.encode() + b"\n")
        os.replace(record, _record(final))
    finally:
        tmp.unlink(missing_ok=True)
    return sha


def publish(tmp: Path, final: Path) -> str:
    """Move mlxport's own ``tmp`` (in the cache folder) to ``final``, recording its content hash;
    the hash."""
    try:
        return publish_bytes(_read(tmp), final)
    finally:
        tmp.unlink(missing_ok=True)


def read_verified(final: Path) -> bytes | None:
    """``final``'s content, if it is there and matches the hash recorded when it was published;
    else None (missing, never recorded, or changed since: build it again)."""
    try:
        want = _read(_record(final)).decode().strip()
        data = _read(final)
    except (OSError, UnicodeDecodeError):
        return None
    return data if hashlib.sha256(data).hexdigest() == want else None


def recorded(final: Path) -> str | None:
    """The content hash of ``final`` if it matches the one recorded when it was published."""
    data = read_verified(final)
    return None if data is None else hashlib.sha256(data).hexdigest()
