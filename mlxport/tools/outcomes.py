"""What each tool found, as typed fields: the rules policy reads them from the tool message's
artifact, the MCP server returns them as structured content (each tool's output schema is its
outcome's), and the text for the model is written from the same values. Held-out cases never
appear here: the model must not see them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mlxport.spec import CorrectnessReport, Diagnostic
from mlxport.spec.results import Mode, Verdict

BUDGET_LEFT = "verify calls this session has left"


class Outcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: bool = Field(
        True,
        description="The call did what it is for: the candidate compiled, passed the check, passed "
        "verification, was measured; false for an error (the text says why).",
    )


class Source(Outcome):
    task: str | None = Field(description="The task's name; none for CUDA read without a task.")
    task_dir: str | None = None
    kernel: str | None = Field(description="The kernel in focus.")
    kernels: list[str] = Field(default_factory=list, description="Every kernel of the source.")
    backend: str | None = None
    language: str | None = None


class Sections(Outcome):
    sections: list[str]


class Golden(Outcome):
    golden: str  # what candidates are compared with


class Compiled(Outcome):
    candidate_id: str
    name: str = Field(description="The kernel's name, accepted in place of the id.")
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
    cases: list[CaseVerdict] = Field(default_factory=list)


class Timed(Outcome):
    candidate_id: str
    timed: bool = Field(False, description="False on the simulator, which never times.")
    speedups: dict[str, float] = Field(default_factory=dict)
    us: float | None = None  # the candidate's median
    estimate: str = Field("", description="The simulator's labelled estimate, not a measurement.")
    estimated_us: float | None = Field(
        None,
        description="The simulator's ESTIMATE for the session's chip in microseconds, from what "
        "the candidate did at the bench case; not a measurement. None where the backend times.",
    )


class Check(BaseModel):
    """One kind of check of the verification (held-out cases, threads reversed, ...): how many of
    its runs passed. The held-out shapes themselves stay hidden."""

    kind: str
    passed: int
    total: int


class Verified(Outcome):
    candidate_id: str
    checks: list[Check] = Field(default_factory=list)
    budget_left: int = Field(description=BUDGET_LEFT)


class Shown(Outcome):
    candidate_id: str


class Diffed(Outcome):
    old: str
    new: str
    changed: bool


class Planned(Outcome):
    action: str
    node_id: str
    candidate: str | None = Field(None, description="The candidate credited to the idea.")


class Answered(Outcome):
    answered: bool


class CandidateState(BaseModel):
    candidate_id: str
    name: str
    iteration: int
    compiled: bool | None = Field(description="None: not compiled in this session.")
    correct: bool | None = Field(description="run_correctness's verdict; None: not run.")
    verified: bool | None = Field(description="verify's verdict; None: not run.")
    speedup: float | None = Field(description="Measured speedup over native; None: not timed.")
    refuted: bool = Field(False, description="The benchmark found it wrong after it passed.")
    plan_node: str | None = Field(None, description="The plan idea it was credited to.")


class SessionState(Outcome):
    task: str
    backend: str
    candidates: list[CandidateState]
    best: str | None = Field(description="The candidate finish would choose now.")
    budget_left: int = Field(description=BUDGET_LEFT)
    closed: bool = Field(description="finish closed the session; its port is written.")


class Finishing(Outcome):
    candidate_id: str | None = Field(description="The candidate finish chose.")
    why: str = Field("", description="Why finish chose it.")
    verified: bool | None = Field(
        None, description="The final verification's verdict (known once the port is written)."
    )
    result: str | None = Field(
        None, description="The candidate the final verification accepted (it may fall back)."
    )
    folder: str | None = Field(None, description="Where the port's files were written.")


class TaskMade(Outcome):
    """What MCP's create_task made: a task folder to pass as `task`."""

    task: str
    task_dir: str
    kernel: str
    cases: list[str] = Field(description="The visible cases' labels.")
    dtypes: list[str]
    notes: list[str] = Field(default_factory=list, description="What making the task found.")
