"""The backend protocol: where kernels compile and run (metal, cuda, sim)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mlxport.errors import UserError
from mlxport.spec import ArrayInfo, CompileResult, Datasheet, KernelCandidate, KernelTask

# What a backend receives per kernel input: an array (mx.array or numpy) or a Python scalar.
Arg = Any
# What expressions and signature generation need to know of an input.
ArgInfo = ArrayInfo | int | float | bool


ORDERS = ("forward", "reversed", "shuffled")  # thread orders a reordering backend runs
# A launch's outputs may take this many times the golden's (a candidate may keep scratch in an
# extra output), and at least OUTPUT_FLOOR: enough for any honest port of the task, and no more
# for a shape such as `a.size * 1000000` to take the worker's memory with.
OUTPUT_FACTOR = 8
OUTPUT_FLOOR = 64 << 20


def output_budget(golden: list[np.ndarray]) -> int:
    """The most bytes a candidate's outputs may take on a task whose golden outputs are these."""
    return max(OUTPUT_FLOOR, OUTPUT_FACTOR * sum(int(np.asarray(g).nbytes) for g in golden))


def cache_root() -> Path:
    """Where mlxport keeps what it builds and measures on this machine: $MLXPORT_CACHE, else
    ~/.cache/mlxport (its own, so other programs' caches and locks never stall it)."""
    return Path(os.environ.get("MLXPORT_CACHE") or Path.home() / ".cache" / "mlxport")


@contextlib.contextmanager
def timing_lock(backend: str) -> Iterator[None]:
    """Held while a backend times kernels, so the timings of mlxport processes sharing a GPU (a
    batch beside a benchmark, benchmark jobs) take turns. Their checks still run beside a timing.
    One lock file per backend and set of visible GPUs, in the temporary folder, so processes with
    different caches still share it; where none can be made, timing goes on without it."""
    devices = re.sub(r"[^\w-]", "_", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    path = (
        Path(tempfile.gettempdir())
        / f"mlxport-{os.getuid()}"
        / f"{backend}{'-' + devices if devices else ''}.lock"
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")  # noqa: SIM115 (held across the yield)
    except OSError:
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class BackendUnavailable(UserError):
    """The backend cannot run on this machine; the message says why and what to do."""


@dataclass
class Availability:
    ok: bool
    reason: str = ""


@dataclass
class RunResult:
    """Outputs of one launch, or the fault that stopped it.

    ``outputs`` are numpy arrays in the declared dtypes (bfloat16 as float32, since numpy has
    none). ``unwritten`` marks elements no thread wrote, where the backend can tell.
    """

    outputs: list[np.ndarray] = field(default_factory=list)
    unwritten: list[np.ndarray | None] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    # what the kernel did, where the run was asked to count (run(count=...)): sim/counters.py
    counts: dict[str, int] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Backend(Protocol):
    name: str
    language: str  # the candidate language it compiles: "msl" or "cuda"
    timing: bool  # whether measure() gives real device timings (the simulator never does)
    reorders: bool  # whether run(order=...) can run threads out of order (the simulator)
    overlaps: bool  # whether run_together's calls may run at once on the device (MLX on a GPU)
    counts: bool  # whether run(count=...) counts what the kernel does (the simulator)

    def available(self) -> Availability: ...

    def device_info(self, datasheet: Datasheet | None = None) -> dict[str, Any]:
        """What the device is; ``datasheet`` (this machine's published figures, from the knowledge
        base above this layer) is what an uncalibrated GPU's roofline fractions are of."""

    def compile(self, candidate: KernelCandidate, args: dict[str, ArgInfo]) -> CompileResult:
        """Compile for the input signature described by ``args`` (dtypes, sizes, scalars; extra
        names are in scope for template expressions)."""

    def run(
        self,
        candidate: KernelCandidate,
        inputs: dict[str, Arg],
        *,
        timeout: float = 60.0,
        order: str = "forward",
        poison: str = "nan",
        count: dict[str, int] | None = None,
        output_bytes: int | None = None,
    ) -> RunResult:
        """Launch once, isolated from the caller. ``inputs`` holds at least
        ``candidate.input_names``; any other names (the task's params) are in scope for the launch
        expressions only.
        ``order`` (where ``reorders``): ``reversed`` or ``shuffled`` runs the threads of each
        threadgroup, and the threadgroups, in that order (one of ORDERS), so a result that depends
        on the order of unsynchronised threads changes. ``poison``: what outputs without an
        init_value hold before the launch, ``nan`` (NaNs) or ``finite`` (numbers), so a kernel that
        reads an output before writing it gives another answer (the simulator draws them for each
        run and element, the GPU backends one value for each run: mlx_kernel.drawn_poison).
        ``count`` (where ``counts``): the line and bank sizes (``line_bytes``, ``banks``,
        ``bank_bytes``) to count the kernel's memory accesses in, for ``RunResult.counts``.
        ``output_bytes``: the most the outputs may take (verification passes ``output_budget`` of
        the golden's); a launch over it is refused before anything is allocated. None: the
        backend's own ceiling."""

    def run_op(
        self, folder: Path, arrays: list[np.ndarray], dtypes: list[str], params: dict[str, Any]
    ) -> RunResult:
        """A port's written kernel.py (in ``folder``) called on these inputs as a user calls it, its
        kernel run on this backend (``backends/op_call.py``)."""

    def run_together(
        self, candidate: KernelCandidate, input_sets: list[dict[str, Arg]], *, timeout: float = 60.0
    ) -> list[RunResult]:
        """One launch per input set, all submitted together (where ``overlaps``), so calls that
        share state outside their own buffers (module globals) mix their results."""

    def measure(
        self,
        task: KernelTask,
        candidate: KernelCandidate,
        case: dict[str, Any],
        dtype: str,
        *,
        seed: int,
        warmup: int,
        iters: int,
        baselines: bool = True,
    ) -> dict[str, list[float]]:
        """Seconds per call of the candidate and, with ``baselines``, of every baseline of the task
        ("native", "naive"), timed side by side on the same inputs; only where ``timing`` is
        true."""
