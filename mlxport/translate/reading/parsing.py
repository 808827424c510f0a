"""Loading CUDA input, checking that it is source text, and parsing and walking it within time
limits; the reads of this process remembered by their text."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from tree_sitter import Node, Tree

from mlxport.cuda_syntax import parser, walk
from mlxport.translate.reading.cudafile import CudaFile, CudaReadError

MAX_BYTES = 4 * 1024 * 1024
MAX_WALK_DEPTH = 2000

# (deadline, the seconds it allows) of the read in progress
_DEADLINE: ContextVar[tuple[float, float]] = ContextVar("_DEADLINE", default=(float("inf"), 0.0))
_STEPS = [0]  # nodes visited by all walks; many small walks must also hit the deadline check

# A port reads the same source many times (the translation, each tuning variant, a resumed run's
# search): the reads of this process, keyed by the whole text and its name, least recent dropped.
# Only in memory, so nothing another process writes can change what a read returns.
REMEMBERED_READS = 128
REMEMBERED_BYTES = 256 * 1024  # a larger source is read each time (at most 32 MB kept)
_READS: OrderedDict[tuple[bytes, str], CudaFile] = OrderedDict()
_READS_LOCK = threading.Lock()


def load(source: str | Path, name: str) -> tuple[bytes, str]:
    """The bytes of `source` (a path or source text) and the name to report it by."""
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        if not path.is_file():
            raise CudaReadError(
                f"{path} does not exist or is not a file: pass the path of a .cu file"
            )
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise CudaReadError(_too_big(path.name, size))
        from mlxport.translate.reading.includes import amalgamate

        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            # judged as binary below
            return path.read_bytes(), (str(path) if name == "<source>" else name)
        text, _, _ = amalgamate(path)  # kernels kept in local headers are the file's too
        return text.encode("utf-8"), (str(path) if name == "<source>" else name)
    if isinstance(source, bytes | bytearray):
        return bytes(source), name
    if not isinstance(source, str):
        raise CudaReadError(
            f"cannot read a {type(source).__name__}: pass CUDA source text or a Path"
        )
    if len(source) > MAX_BYTES:
        raise CudaReadError(_too_big(name, len(source.encode("utf-8", "replace"))))
    return source.encode("utf-8", "replace"), name


def _looks_like_path(text: str) -> bool:
    return (
        len(text) < 4096
        and "\n" not in text
        and "{" not in text
        and "(" not in text
        and text.strip().endswith((".cu", ".cuh", ".h", ".hpp", ".cpp", ".txt"))
    )


def _too_big(name: str, size: int) -> str:
    return (
        f"{name}: input is {size / 1e6:.1f} MB; the reader accepts up to {MAX_BYTES / 1e6:.0f} MB: "
        "pass the file that defines the kernel"
    )


def source_text_of(data: bytes, name: str) -> str:
    """`data` decoded; raises for input too large, binary or empty."""
    if len(data) > MAX_BYTES:
        raise CudaReadError(_too_big(name, len(data)))
    head = data[:65536]
    if b"\x00" in head:
        raise CudaReadError(f"{name}: input is binary, not CUDA source: pass a .cu text file")
    text = data.decode("utf-8", "replace")
    sample = text[:65536]
    bad = sum(1 for c in sample if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f\v"))
    if sample and bad / len(sample) > 0.05:
        raise CudaReadError(f"{name}: input is binary, not CUDA source: pass a .cu text file")
    if not text.strip():
        raise CudaReadError(f"{name} is empty: pass a file that defines a __global__ kernel")
    return text


def remembered_read(data: bytes, name: str, read: Callable[[bytes, str], CudaFile]) -> CudaFile:
    """``read(data, name)``, or a copy of what it returned before for the same text and name. A
    read that raises is not remembered; each caller gets its own copy to change."""
    key = (data, name)
    with _READS_LOCK:
        known = _READS.get(key)
        if known is not None:
            _READS.move_to_end(key)
    if known is None:
        known = read(data, name)
        if len(data) <= REMEMBERED_BYTES:
            with _READS_LOCK:
                _READS[key] = known
                while len(_READS) > REMEMBERED_READS:
                    _READS.popitem(last=False)
    return known.model_copy(deep=True)


def parse_within(data: bytes, name: str, seconds: float) -> Tree:
    deadline = time.monotonic() + seconds
    expired = False

    # tree-sitter 0.25+ has no timeout; ending the input early makes a pathological parse stop.
    def read(offset: int, _point: tuple[int, int]) -> bytes:
        nonlocal expired
        if time.monotonic() > deadline:
            expired = True
            return b""
        return data[offset : offset + 2048]

    tree = parser().parse(read)
    if expired:
        raise CudaReadError(
            f"{name}: parsing took longer than {seconds:.0f} s (pathological input): "
            "pass a smaller or well-formed .cu file"
        )
    return tree


@contextmanager
def read_deadline(seconds: float) -> Iterator[None]:
    """Make `timed_walk` raise once `seconds` have passed."""
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def timed_walk(node: Node, stop: frozenset[str] = frozenset()) -> Iterator[Node]:
    """`walk` to MAX_WALK_DEPTH that raises CudaReadError past the `read_deadline`."""
    for cur in walk(node, MAX_WALK_DEPTH, stop):
        _STEPS[0] += 1
        if _STEPS[0] % 8192 == 0 and time.monotonic() > _DEADLINE.get()[0]:
            raise CudaReadError(
                f"reading took longer than {_DEADLINE.get()[1]:.0f} s (pathological input): "
                "pass a smaller or well-formed .cu file"
            )
        yield cur
