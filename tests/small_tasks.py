"""Suite tasks with cases the simulator checks in a moment, for tests that use a task only as a
vehicle (a port, an eval, a batch): the same kernel, reference and expert ports, with cases of
the suite's kinds (even visible sizes, odd held-out ones, a tail block, a one-block case), but
thousands of elements, not millions."""

from __future__ import annotations

import shutil
from pathlib import Path

from mlxport.tasks import SUITE_DIR

ELEMENTWISE = (
    "[cases]\n"
    "visible = [{ N = 2048 }, { N = 4096 }]\n"
    "heldout = [{ N = 1003 }, { N = 7 }, { N = 517 }]\n"
    "bench = [{ N = 65536 }]\n"
)
ROWS = (
    "[cases]\n"
    "visible = [{ R = 4, C = 1024 }, { R = 64, C = 128 }]\n"
    "heldout = [{ R = 5, C = 1000 }, { R = 3, C = 4097 }, { R = 100, C = 33 }]\n"
    "bench = [{ R = 64, C = 1024 }]\n"
)
MATRIX = (
    "[cases]\n"
    "visible = [{ M = 64, N = 96 }, { M = 32, N = 48 }]\n"
    "heldout = [{ M = 100, N = 33 }, { M = 7, N = 257 }, { M = 129, N = 65 }]\n"
    "bench = [{ M = 256, N = 256 }]\n"
)
CASES = {
    "vector_add": ELEMENTWISE,
    "gelu_tanh": ELEMENTWISE,
    "softmax_rows": ROWS,
    "transpose_tiled": MATRIX,
}


def small_task(name: str, dest: Path) -> Path:
    """A copy of suite task ``name`` in ``dest``/``name`` with small cases (and so without the
    [original] launches of the suite's cases: its golden is its reference)."""
    folder = dest / name
    shutil.copytree(SUITE_DIR / name, folder, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(toml[: toml.index("[cases]")] + CASES[name])
    return folder
