"""The simulator's cache on disk: its folder, keys over what a build reads, and publishing a file
into it atomically."""

from __future__ import annotations

import functools
import hashlib
import os
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


def publish(tmp: Path, final: Path) -> None:
    os.replace(tmp, final)  # atomic: concurrent builders never see a half-written file
