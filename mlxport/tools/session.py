"""A porting session: the task, the backend, every candidate so far and the plan.

The agent's tools node and the MCP server hold one each and change it only through
``Session.apply`` of what a tool returned, so both see the same state after the same calls.
No LangGraph here.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mlxport.backends import get_backend
from mlxport.backends.base import Backend
from mlxport.errors import UserError
from mlxport.spec import (
    BenchmarkReport,
    CompileResult,
    CorrectnessReport,
    Datasheet,
    KernelCandidate,
    KernelTask,
)
from mlxport.tasks import find_task, load_task
from mlxport.tools.outcomes import Outcome
from mlxport.tools.plan import Plan


class ToolError(UserError):
    """A tool call the model should fix; goes back to it as a message."""


class Record(BaseModel):
    """A candidate and everything measured about it in this session. Frozen: a tool returns a new
    record (``model_copy(update=...)``) and ``Session.apply`` takes it in; the graph's state holds
    ``model_dump(mode="json")`` of each."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: KernelCandidate
    iteration: int = 0
    compile: CompileResult | None = None
    correctness: CorrectnessReport | None = None
    benchmark: BenchmarkReport | None = None
    plan_node: str | None = None
    rejected: bool = False  # a person rejected it in a chat session
    refuted: str | None = None  # why the benchmark found it wrong after run_correctness passed
    verified: str | None = None  # the verify tool's verdicts

    @property
    def correct(self) -> bool:
        return (
            self.correctness is not None
            and self.correctness.ok
            and not self.rejected
            and not self.refuted
        )

    @property
    def passed_verify(self) -> bool | None:
        """The verify tool's verdict; None where it never ran on this candidate."""
        return None if self.verified is None else self.verified.startswith("PASS")

    @property
    def speedup(self) -> float | None:
        if self.benchmark is None or self.benchmark.candidate is None:
            return None
        return self.benchmark.speedups.get("native")

    @property
    def estimated_us(self) -> float | None:
        """The simulator's ESTIMATE for the session's chip (not a measurement); None where the
        backend times or made none."""
        return None if self.benchmark is None else self.benchmark.estimated_us


@dataclass
class Output:
    """What a tool returns: text for the model, ``data`` (the outcome as plain values, for policies
    and clients that must not parse text), and what it changed: new records, a new plan, the seed
    it drew inputs from, a finish request. Handlers never change the session themselves."""

    text: str
    data: Outcome = field(default_factory=Outcome)
    records: dict[str, Record] = field(default_factory=dict)
    plan: Plan | None = None
    seed: int | None = None
    finish: dict[str, Any] | None = None
    error: bool = False


@dataclass
class Session:
    task: KernelTask
    backend: Backend
    records: dict[str, Record] = field(default_factory=dict)
    plan: Plan = field(default_factory=Plan)
    iteration: int = 0
    seed: int = 0
    chip: Datasheet | None = None  # the Apple chip simulator estimates are for
    datasheet: Datasheet | None = None  # this machine's GPU figures, for roofline fractions
    finish: dict[str, Any] | None = None
    verifications: int = 3  # candidates the verify tool may check in this session
    closed: str | None = None  # where finish wrote the port, once it closed the session (MCP)
    answers: dict[str, str] | None = (
        None  # a person's answers to ask_user by question; None: no one is here
    )

    @property
    def language(self) -> str:
        return self.backend.language

    @property
    def device_lock(self) -> threading.Lock:
        """One lock per backend in the process: sessions running side by side (batch) never
        overlap on a device, so timings stay clean."""
        return _DEVICE_LOCKS.setdefault(self.backend.name, threading.Lock())

    def apply(self, out: Output) -> None:
        """Take in what a tool changed, so the next call (in the same turn too) sees it."""
        self.records.update(out.records)
        if out.plan is not None:
            self.plan = out.plan
        if out.seed is not None:
            self.seed = out.seed
        if out.finish is not None:
            self.finish = out.finish

    def record(self, candidate_id: str) -> Record:
        """The candidate of an id, or of a name (compile_kernel's ``name``; the latest candidate
        that has it)."""
        if candidate_id in self.records:
            return self.records[candidate_id]
        named = [r for r in self.records.values() if r.candidate.name == candidate_id]
        if named:
            return named[-1]
        known = (
            ", ".join(f"{k} ({r.candidate.name})" for k, r in list(self.records.items())[-8:])
            or "none yet: compile_kernel returns a new candidate's id"
        )
        raise ToolError(f"unknown candidate {candidate_id!r}; known ids (names): {known}")

    def best(self) -> Record | None:
        ranked = rank(self.records.values())
        return ranked[0] if ranked and ranked[0].correct else None

    @property
    def verifications_left(self) -> int:
        return self.verifications - sum(r.verified is not None for r in self.records.values())


_DEVICE_LOCKS: dict[str, threading.Lock] = {}


def rank(records) -> list[Record]:
    """Correct before incorrect; among the correct, those that passed verify, then those it never
    ran on, then those it failed; then faster (measured speedup over native, else, on a backend
    that does not time, the lower ESTIMATE); then earlier."""
    order = {True: 0, None: 1, False: 2}
    return sorted(
        records,
        key=lambda r: (
            not r.correct,
            order[r.passed_verify],
            -(r.speedup or 0.0),
            r.estimated_us if r.estimated_us is not None else math.inf,
            r.iteration,
        ),
    )


def why_best(records, timing: bool) -> str:
    """Why ``rank`` puts its first correct candidate first, in words for the model ("it passed
    verify, the only candidate that did")."""
    correct = [r for r in records if r.correct]
    if not correct:
        return "no candidate passed run_correctness"
    best = rank(correct)[0]
    peers = [r for r in correct if r.passed_verify == best.passed_verify]
    kind = {
        True: "it passed verify",
        None: "it passed run_correctness and verify never ran on it",
        False: "it passed run_correctness but failed verify",
    }[best.passed_verify]
    if len(peers) == 1:
        how = "the only candidate that did"
    elif not timing and best.estimated_us is not None:
        how = (
            f"the lowest ESTIMATE of the {len(peers)} that did ({best.estimated_us:.1f} us from "
            f"the simulator's counts, not a measurement)"
        )
    elif not timing:
        how = f"the earliest of the {len(peers)} that did (this backend does not time)"
    elif best.speedup is None:
        how = f"the earliest of the {len(peers)} that did (none of them was timed)"
    else:
        how = f"the fastest of the {len(peers)} that did ({best.speedup:.2f}x native)"
    return f"{kind}, {how}"


def open_session(task: str | Path, backend: str, *, chip: str = "M3 Max", **fields: Any) -> Session:
    """A session on a task folder (or suite name) and a backend (``auto`` resolved). The task is
    read from disk once per process while its files are unchanged."""
    from mlxport.knowledge import hardware_profile, local_datasheet

    be = get_backend(backend)
    try:
        estimate_chip = hardware_profile(chip).datasheet()
    except ValueError as e:
        raise UserError(str(e)) from e
    datasheet = local_datasheet() if be.timing else None
    return Session(
        task=cached_task(task), backend=be, chip=estimate_chip, datasheet=datasheet, **fields
    )


_TASKS: dict[Path, tuple[tuple, KernelTask]] = {}
_TASKS_LOCK = threading.Lock()


def cached_task(name_or_dir: str | Path) -> KernelTask:
    """``load_task``, kept while none of the folder's files changed: the graph's nodes, the tools
    and the rules policy all ask for the task of the session they serve."""
    folder = find_task(name_or_dir).resolve()
    stamp = tuple(
        sorted(
            (p.name, p.stat().st_mtime_ns, p.stat().st_size)
            for p in folder.iterdir()
            if p.is_file()
        )
    )
    with _TASKS_LOCK:
        hit = _TASKS.get(folder)
        if hit is None or hit[0] != stamp:
            hit = _TASKS[folder] = (stamp, load_task(folder))
        return hit[1]
