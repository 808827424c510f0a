"""What each tool found, as typed fields: the rules policy reads them from the tool message's
artifact, the MCP server returns them as structured content, and the text for the model is
written from the same values. Held-out cases never appear here: the model must not see them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mlxport.spec import CorrectnessReport, Diagnostic
from mlxport.spec.results import Mode, Verdict


class Outcome(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Source(Outcome):
    task: str
    task_dir: str
    kernel: str
    backend: str
    language: str


class Sections(Outcome):
    sections: list[str]


class Golden(Outcome):
    golden: str  # what candidates are compared with


class Compiled(Outcome):
    candidate_id: str
    compiled: bool
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    why: str | None = None  # the compiler's summary where it failed


class CaseVerdict(BaseModel):
    case: str
    dtype: str
    mode: Mode
    verdict: Verdict
    max_abs_err: float | None = None
    error: str = ""

    @classmethod
    def visible(cls, report: CorrectnessReport) -> list[CaseVerdict]:
        return [
            cls(
                case=c.case,
                dtype=c.dtype,
                mode=c.mode,
                verdict=c.verdict,
                max_abs_err=c.max_abs,
                error=c.error or c.pattern,
            )
            for c in report.cases
            if not c.heldout
        ]


class Checked(Outcome):
    candidate_id: str
    correct: bool
    cases: list[CaseVerdict] = Field(default_factory=list)


class Timed(Outcome):
    candidate_id: str
    timed: bool = False  # False on the simulator, which never times
    speedups: dict[str, float] = Field(default_factory=dict)
    us: float | None = None  # the candidate's median
    estimate: str = ""  # the simulator's labelled estimate
    refuted: bool = False  # the benchmark found it wrong where run_correctness did not look


class Verified(Outcome):
    candidate_id: str
    verified: bool
    verifications_left: int


class Shown(Outcome):
    candidate_id: str


class Diffed(Outcome):
    old: str
    new: str
    changed: bool


class Planned(Outcome):
    action: str
    node_id: str


class Answered(Outcome):
    answered: bool


class Finishing(Outcome):
    candidate_id: str | None
