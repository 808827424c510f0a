"""The tools' implementations: validate, call the backends, format a compact result.

Plain functions over a ``Session`` (the task, the backend, the candidates so far), so they run
without LangGraph: from the agent's tools node, the MCP server, or a test.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from mlxport.backends.base import Backend
from mlxport.errors import UserError
from mlxport.spec import BenchmarkReport, CompileResult, CorrectnessReport, KernelCandidate, KernelTask
from mlxport.tools import schemas
from mlxport.tools.plan import Plan


class ToolError(UserError):
    """A tool call the model should fix; goes back to it as a message."""


@dataclass
class Record:
    """A candidate and everything measured about it in this session."""

    candidate: KernelCandidate
    iteration: int = 0
    compile: CompileResult | None = None
    correctness: CorrectnessReport | None = None
    benchmark: BenchmarkReport | None = None
    plan_node: str | None = None
    rejected: bool = False  # a person rejected it in a chat session
    refuted: str | None = None  # why the benchmark found it wrong after run_correctness passed

    @property
    def correct(self) -> bool:
        return self.correctness is not None and self.correctness.ok and not self.rejected and not self.refuted

    @property
    def speedup(self) -> float | None:
        if self.benchmark is None or self.benchmark.candidate is None:
            return None
        return self.benchmark.speedups.get("native")

    def to_state(self) -> dict[str, Any]:
        return {"candidate": self.candidate.model_dump(mode="json"), "iteration": self.iteration,
                "compile": _dump(self.compile), "correctness": _dump(self.correctness),
                "benchmark": _dump(self.benchmark), "plan_node": self.plan_node, "rejected": self.rejected,
                "refuted": self.refuted}

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> Record:
        return cls(candidate=KernelCandidate.model_validate(d["candidate"]), iteration=d.get("iteration", 0),
                   compile=_load(CompileResult, d.get("compile")),
                   correctness=_load(CorrectnessReport, d.get("correctness")),
                   benchmark=_load(BenchmarkReport, d.get("benchmark")), plan_node=d.get("plan_node"),
                   rejected=d.get("rejected", False), refuted=d.get("refuted"))


def _dump(m: BaseModel | None) -> dict | None:
    return m.model_dump(mode="json") if m is not None else None


def _load(cls, d):
    return cls.model_validate(d) if d is not None else None


@dataclass
class Output:
    """What a tool returns: text for the model, and the records/plan it changed."""

    text: str
    records: dict[str, Record] = field(default_factory=dict)
    plan: Plan | None = None
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
    chip: str = "M3 Max"
    calls: int = 0

    @property
    def device_lock(self) -> threading.Lock:
        """One lock per backend in the process: sessions running side by side (batch) never
        overlap on a device, so timings stay clean."""
        return _DEVICE_LOCKS.setdefault(self.backend.name, threading.Lock())

    def record(self, candidate_id: str) -> Record:
        if candidate_id not in self.records:
            known = ", ".join(list(self.records)[-8:]) or "none yet: call compile_kernel first"
            raise ToolError(f"unknown candidate id {candidate_id!r}; known ids: {known}")
        return self.records[candidate_id]

    def best(self) -> Record | None:
        ranked = rank(self.records.values())
        return ranked[0] if ranked and ranked[0].correct else None


_DEVICE_LOCKS: dict[str, threading.Lock] = {}


def rank(records) -> list[Record]:
    """Correct before incorrect; then faster (measured speedup over native); then earlier."""
    return sorted(records, key=lambda r: (not r.correct, -(r.speedup or 0.0), r.iteration))


# ---------------------------------------------------------------- dispatch


def run_tool(session: Session, name: str, args: dict[str, Any]) -> Output:
    """Validate and run one tool call. Errors become an Output with ``error=True``."""
    schema = schemas.TOOL_NAMES.get(name)
    if schema is None:
        return Output(f"error: unknown tool {name!r}; available: {', '.join(schemas.TOOL_NAMES)}", error=True)
    try:
        parsed = schema.model_validate(args)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, er['loc'])) or 'args'}: {er['msg']}" for er in e.errors()[:5])
        return Output(f"error: invalid arguments for {name}: {problems}", error=True)
    session.calls += 1
    try:
        return HANDLERS[name](session, parsed)
    except UserError as e:
        return Output(f"error: {e}", error=True)


def read_source(session: Session, args: schemas.read_cuda_source) -> Output:
    from mlxport.translate.reader import read_cuda, summary

    text = session.task.source_text()
    cf = read_cuda(text, name=session.task.source)
    names = [k.name for k in cf.kernels]
    focus = args.kernel or session.task.kernel
    if focus not in names:
        raise ToolError(f"no kernel {focus!r} in {session.task.source}; kernels: {', '.join(names)}")
    parts = [f"Task {session.task.name}: {session.task.description}", f"Entry kernel: {session.task.kernel}",
             summary(cf), _task_contract(session.task)]
    if args.show_source:
        numbered = "\n".join(f"{i + 1:4d} {line}" for i, line in enumerate(text.splitlines()[:600]))
        parts.append(f"--- {session.task.source} ---\n{numbered}")
    return Output("\n\n".join(parts))


def _task_contract(task: KernelTask) -> str:
    ins = ", ".join(f"{t.name}: {t.dtype}{t.shape}" for t in task.inputs)
    params = ", ".join(f"{p.name}: {p.type} = {p.default}" for p in task.params) or "none"
    outs = ", ".join(f"{t.name}: {t.dtype}{t.shape}" for t in task.outputs)
    cases = "; ".join(task.case_label(c) for c in task.cases.visible)
    return (f"Port contract (T is each of {', '.join(task.dtypes)}):\n  inputs {ins}\n  params {params}\n"
            f"  outputs {outs}\n  visible cases: {cases}\n  (held-out shapes, unseen by you, are checked at the end)")


def query_kb(session: Session, args: schemas.query_hardware_kb) -> Output:
    from mlxport.knowledge import format_hits, search

    try:
        hits = search(args.query, k=3, chip=args.chip)
    except ValueError as e:
        raise ToolError(str(e)) from e
    return Output(format_hits(hits) if hits else "no matching section; rephrase the query")


def compile_candidate(session: Session, args: schemas.compile_kernel) -> Output:
    fields = {k: v for k, v in args.model_dump(exclude={"based_on"}).items() if v is not None}
    if args.based_on:
        fields = {**session.record(args.based_on).candidate.model_dump(), **fields}
    fields.setdefault("language", "cuda" if session.backend.name == "cuda" else "msl")
    fields.setdefault("name", session.task.name)
    try:
        candidate = KernelCandidate.model_validate(fields)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, er['loc']))}: {er['msg']}" for er in e.errors()[:5])
        raise ToolError(f"invalid candidate: {problems}") from e
    want = "cuda" if session.backend.name == "cuda" else "msl"
    if candidate.language != want:
        raise ToolError(f"the {session.backend.name} backend runs {want} candidates, not {candidate.language}")
    result = _compile(session, candidate)
    record = session.records.get(candidate.id) or Record(candidate, iteration=session.iteration,
                                                          plan_node=session.plan.active.id if session.plan.active else None)
    record.compile = result
    head = f"candidate {candidate.id}: {result.summary()}"
    if result.ok:
        head += "\nnext: run_correctness(candidate_id=...)"
    return Output(head, records={candidate.id: record})


def _compile(session: Session, candidate: KernelCandidate) -> CompileResult:
    from mlxport.inputs import arg_infos, make_inputs

    task = session.task
    case = task.cases.visible[0]
    for dtype in task.dtypes:
        try:
            infos = arg_infos(task, make_inputs(task, case, dtype, seed=0), case)
            candidate.launch(infos)
        except UserError as e:
            raise ToolError(f"launch expressions fail for case {task.case_label(case)} {dtype}: {e}") from e
        with session.device_lock:
            result = session.backend.compile(candidate, infos)
        if not result.ok:
            return result
    return result


def correctness(session: Session, args: schemas.run_correctness) -> Output:
    from mlxport.correctness import run_correctness

    record = session.record(args.candidate_id)
    if record.compile is not None and not record.compile.ok:
        raise ToolError(f"candidate {args.candidate_id} did not compile; fix it and compile again")
    session.seed += 1
    with session.device_lock:
        report = run_correctness(session.task, record.candidate, session.backend, seed=session.seed)
    record.correctness = report
    outcome = "correct" if report.ok else "incorrect"
    session.plan.attach(args.candidate_id, f"{args.candidate_id} {outcome}")
    hint = "\nnext: benchmark(candidate_id=...)" if report.ok else ""
    return Output(f"candidate {args.candidate_id}: {report.summary()}{hint}", records={args.candidate_id: record},
                  plan=session.plan)


def bench(session: Session, args: schemas.benchmark) -> Output:
    from mlxport.benchmark import FailedReverification, WrongAtBenchSize, benchmark, summary

    record = session.record(args.candidate_id)
    if record.refuted:
        raise ToolError(f"candidate {args.candidate_id} was found wrong by an earlier benchmark: {record.refuted}")
    if not record.correct:
        raise ToolError(f"candidate {args.candidate_id} has not passed run_correctness; timing an incorrect "
                        f"kernel means nothing")
    try:
        with session.device_lock:
            report = benchmark(session.task, record.candidate, session.backend, seed=session.seed, chip=session.chip)
    except (WrongAtBenchSize, FailedReverification) as e:
        # Wrong where run_correctness did not look: it no longer counts as correct.
        record.refuted = str(e)
        return Output(f"error: {e}\ncandidate {args.candidate_id} no longer counts as correct; fix it and "
                      f"run_correctness again", error=True, records={args.candidate_id: record})
    record.benchmark = report
    if report.candidate is not None:
        session.plan.attach(args.candidate_id, f"{args.candidate_id} {report.speedups.get('native', 0):.2f}x native")
    return Output(f"candidate {args.candidate_id}: {summary(report)}", records={args.candidate_id: record},
                  plan=session.plan)


def show(session: Session, args: schemas.show_candidate) -> Output:
    r = session.record(args.candidate_id)
    status = [f"compile: {r.compile.summary() if r.compile else 'not compiled'}"]
    if r.correctness:
        status.append(f"correctness: {'PASS' if r.correctness.ok else 'FAIL'}")
    if r.refuted:
        status.append(f"refuted by the benchmark: {r.refuted}")
    if r.speedup is not None:
        status.append(f"speedup over native: {r.speedup:.2f}x")
    return Output(f"candidate {args.candidate_id} ({'; '.join(status)}):\n{r.candidate.to_toml()}")


def plan(session: Session, args: schemas.update_plan) -> Output:
    p = session.plan
    try:
        if args.action == "add":
            if not args.idea:
                raise ToolError("update_plan(action='add') needs an idea")
            node = p.add(args.idea, args.rationale or "", args.expected_gain or "", args.parent)
            text = f"added {node.id}"
        elif args.action == "select":
            text = f"working on {p.select(_need(args.node_id)).id}"
        else:
            text = f"closed {p.close(_need(args.node_id), args.status or 'done', args.note or '').id}"
    except KeyError as e:
        raise ToolError(f"no idea with id {e.args[0]!r} in the plan") from e
    except ValueError as e:
        raise ToolError(str(e)) from e
    return Output(f"{text}\nplan:\n{p.render()}", plan=p)


def _need(node_id: str | None) -> str:
    if not node_id:
        raise ToolError("this action needs node_id (e.g. 'p1')")
    return node_id


def finish(session: Session, args: schemas.finish) -> Output:
    if args.candidate_id:
        session.record(args.candidate_id)
    best = session.best()
    chosen = args.candidate_id or (best.candidate.id if best else None)
    text = f"finishing with {chosen}" if chosen else "finishing without a correct candidate"
    return Output(text, finish={"candidate_id": chosen, "summary": args.summary})


HANDLERS = {
    "read_cuda_source": read_source,
    "query_hardware_kb": query_kb,
    "compile_kernel": compile_candidate,
    "run_correctness": correctness,
    "benchmark": bench,
    "show_candidate": show,
    "update_plan": plan,
    "finish": finish,
}
# Run in order, one at a time: tools that touch the device, and update_plan, whose ideas the
# device tools attach outcomes to.
DEVICE_TOOLS = {"compile_kernel", "run_correctness", "benchmark", "update_plan"}
