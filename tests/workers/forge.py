"""Worker targets (``tests.workers.forge:...``) standing in for a kernel that got past the checks
and writes its own reply on the worker's protocol pipe: what mlxport reads must be checked."""

import json
import os
import stat
import struct

import numpy as np


def object_dtype(header: dict, arrays: list) -> tuple[dict, list]:
    """Write a reply listing an array of Python objects, as a kernel finding the pipe would."""
    proto = _protocol_fd()
    blob = json.dumps({"__arrays__": [{"dtype": "O", "shape": [4]}]}).encode()
    os.write(proto, struct.pack("<Q", len(blob)) + blob + bytes(64))
    os._exit(0)


def too_few_arrays(header: dict, arrays: list) -> tuple[dict, list]:
    return {"error": None, "stats": [0] * 4, "counts": None}, []


def terminal_escapes(header: dict, arrays: list) -> tuple[dict, list]:
    """A reply of the right arrays whose error would retitle and clear the user's terminal."""
    outputs = [s for s in header["slots"] if s["role"] == "output"]
    data = [np.zeros(int(np.prod(s["shape"])), dtype=np.dtype(s["storage"])) for s in outputs]
    masks = [np.ones(int(np.prod(s["shape"])), dtype=np.uint8) for s in outputs]
    error = "\x1b]0;pwned-title\x07\x1b[2J\x1b[32mPASS\r"
    return {"error": error, "stats": [0] * 4, "counts": None}, data + masks


def _protocol_fd() -> int:
    """The pipe the worker replies on: the one open pipe that is neither stdin nor stderr."""
    taken = {os.fstat(0).st_ino, os.fstat(2).st_ino}
    for fd in range(3, 64):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode) and st.st_ino not in taken:
            return fd
    raise RuntimeError("no protocol pipe")
