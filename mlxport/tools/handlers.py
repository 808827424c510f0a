"""The tools: one function per tool the model calls, named as the tool and registered by ``@tool``
with its argument schema (the annotation of ``args``, whose docstring the model reads). Each
validates, calls the verification code or a backend, and returns an ``Output``: compact text for
the model plus the outcome as data. ``run_tool`` dispatches a call by name.

Plain functions over a ``Session``, so they run without LangGraph: from the agent's tools node,
the MCP server, or a test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import ValidationError

from mlxport.errors import UserError
from mlxport.spec import CompileResult, CorrectnessReport, Diagnostic, KernelCandidate, KernelTask
from mlxport.tools import outcomes as o
from mlxport.tools import schemas
from mlxport.tools.hints import compile_hints
from mlxport.tools.session import Output, Record, Session, ToolError

SOURCE_LINES = 400  # numbered source lines per page of read_cuda_source
Handler = Callable[[Session, Any], Output]


@dataclass(frozen=True)
class Tool:
    """A tool as every caller sees it: the graph binds ``schema`` to the model, runs the turn's
    ``sequential`` tools one at a time in order (those touching the device, the plan or the
    candidates the calls before them made) and the rest side by side; the MCP server asks for a
    task where ``needs_task``."""

    schema: type[schemas.ToolArgs]
    handler: Handler
    sequential: bool
    needs_task: bool


TOOLS: dict[str, Tool] = {}


def tool(*, sequential: bool = True, needs_task: bool = True) -> Callable[[Handler], Handler]:
    """Register a handler as the tool of its name, with the schema its ``args`` is typed with."""

    def register(fn: Handler) -> Handler:
        schema = getattr(schemas, fn.__name__)
        assert get_type_hints(fn)["args"] is schema, f"{fn.__name__}'s args must be {schema}"
        TOOLS[fn.__name__] = Tool(schema, fn, sequential, needs_task)
        return fn

    return register


def run_tool(session: Session, name: str, args: dict[str, Any]) -> Output:
    """Validate and run one tool call. Errors become an Output with ``error=True``."""
    if name not in TOOLS:
        return Output(f"error: unknown tool {name!r}; available: {', '.join(TOOLS)}", error=True)
    schema = TOOLS[name].schema
    try:
        parsed = schema.model_validate(args)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, er['loc'])) or 'args'}: {er['msg']}" for er in e.errors()[:5]
        )
        return Output(f"error: invalid arguments for {name}: {problems}", error=True)
    try:
        return TOOLS[name].handler(session, parsed)
    except UserError as e:
        return Output(f"error: {e}", error=True)


@tool(sequential=False)
def read_cuda_source(session: Session, args: schemas.read_cuda_source) -> Output:
    from mlxport.translate.reading.reader import read_cuda, summary

    task = session.task
    text = task.source_text()
    cf = read_cuda(text, name=task.source)
    names = [k.name for k in cf.kernels]
    focus = args.kernel or task.kernel
    if focus not in names:
        raise ToolError(f"no kernel {focus!r} in {task.source}; kernels: {', '.join(names)}")
    parts = [
        f"Task {task.name}: {task.description}",
        f"Entry kernel: {task.kernel}",
        summary(cf),
        contract(task),
    ]
    if args.start_line > 1:  # a later page: the summary was on the first
        parts = []
    if args.show_source:
        parts.append(numbered_page(text, task.source, args.start_line, "read_cuda_source"))
    return Output(
        "\n\n".join(parts),
        data=o.Source(
            task=task.name,
            task_dir=str(task.folder),
            kernel=focus,
            backend=session.backend.name,
            language=session.language,
        ),
    )


def numbered_page(text: str, name: str, start: int, tool: str) -> str:
    """Lines ``start``.. of ``text``, numbered, with a notice of what follows when more remain."""
    lines = text.splitlines()
    if start > max(len(lines), 1):
        raise ToolError(f"{name} has {len(lines)} lines; start_line {start} is past the end")
    end = min(start - 1 + SOURCE_LINES, len(lines))
    page = "\n".join(f"{i + 1:4d} {lines[i]}" for i in range(start - 1, end))
    head = f"--- {name}, lines {start}-{end} of {len(lines)} ---"
    more = (
        f"\n--- {len(lines) - end} more lines: {tool}(start_line={end + 1}) shows them ---"
        if end < len(lines)
        else ""
    )
    return f"{head}\n{page}{more}"


def contract(task: KernelTask) -> str:
    ins = ", ".join(f"{t.name}: {t.dtype}{t.shape}" for t in task.inputs)
    params = ", ".join(f"{p.name}: {p.type} = {p.default}" for p in task.params) or "none"
    outs = ", ".join(f"{t.name}: {t.dtype}{t.shape}" for t in task.outputs)
    cases = "; ".join(task.case_label(c) for c in task.cases.visible)
    return (
        f"Port contract (T is each of {', '.join(task.dtypes)}):\n  inputs {ins}\n  params "
        f"{params}\n"
        f"  outputs {outs}\n  visible cases: {cases}\n  (held-out shapes, unseen by you, are "
        f"checked at the end)"
    )


@tool(sequential=False, needs_task=False)
def query_hardware_kb(session: Session, args: schemas.query_hardware_kb) -> Output:
    from mlxport.knowledge import format_hits, search

    try:
        hits = search(args.query, k=3, chip=args.chip)
    except ValueError as e:
        raise ToolError(str(e)) from e
    return Output(
        format_hits(hits) if hits else "no matching section; rephrase the query",
        data=o.Sections(sections=[h.id for h in hits]),
    )


@tool(sequential=False)
def read_reference(session: Session, args: schemas.read_reference) -> Output:
    from mlxport.errors import read_text
    from mlxport.verify.golden import golden_name

    task = session.task
    parts = [f"Candidates are compared with {golden_name(task)}."]
    if task.reference is not None and task.folder is not None:
        module = task.reference.partition(":")[0]
        path = task.folder / f"{module.replace('.', '/')}.py"
        parts.append(numbered_page(read_text(path, "reference"), path.name, 1, "read_reference"))
    else:
        parts.append(
            "The task has no reference.py: read_cuda_source shows the kernel that is the golden."
        )
    if task.baselines:
        parts.append(
            f"Timed against: native {task.baselines.native}, naive {task.baselines.naive}."
        )
    tol = "; ".join(
        f"{d}: atol {t.atol:g}, rtol {t.rtol:g}, error norm {t.norm:g}"
        for d, t in task.tolerance.items()
    )
    parts.append(f"Tolerances: {tol}.")
    return Output("\n\n".join(parts), data=o.Golden(golden=golden_name(task)))


@tool()
def compile_kernel(session: Session, args: schemas.compile_kernel) -> Output:
    fields = {k: v for k, v in args.model_dump(exclude={"based_on"}).items() if v is not None}
    if args.based_on:
        fields = {**session.record(args.based_on).candidate.model_dump(), **fields}
    fields.setdefault("language", session.language)
    fields.setdefault("name", session.task.name)
    if fields.get("inout") and fields.get("init_value") is None:
        fields["init_value"] = float("nan")  # what in-out outputs start as
    try:
        candidate = KernelCandidate.model_validate(fields)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, er['loc']))}: {er['msg']}" for er in e.errors()[:5]
        )
        raise ToolError(f"invalid candidate: {problems}") from e
    if candidate.language != session.language:
        raise ToolError(
            f"the {session.backend.name} backend runs {session.language} candidates, "
            f"not {candidate.language}"
        )
    result = _compile(session, candidate)
    known = session.records.get(candidate.id) or Record(
        candidate=candidate,
        iteration=session.iteration,
        plan_node=session.plan.active.id if session.plan.active else None,
    )
    record = known.model_copy(update={"compile": result})
    head = f"candidate {candidate.id}: {result.summary()}"
    if not result.ok:
        head += "".join(f"\nhint: {h}" for h in compile_hints(candidate, result))
    if result.ok:
        head += "\nnext: run_correctness(candidate_id=...)"
    data = o.Compiled(
        candidate_id=candidate.id,
        compiled=result.ok,
        diagnostics=result.diagnostics,
        why=None if result.ok else result.summary(),
    )
    return Output(head, data=data, records={candidate.id: record})


def _compile(session: Session, candidate: KernelCandidate) -> CompileResult:
    """Compile every distinct instantiation the visible cases need (template values and dtypes
    differ between cases); the first failure is the result, naming its case."""
    from mlxport.tasks import arg_infos, make_inputs

    task = session.task
    seen: set[str] = set()
    result = None
    for case in task.cases.visible:
        for dtype in task.dtypes:
            try:
                infos = arg_infos(task, make_inputs(task, case, dtype, seed=0), case)
                launch = candidate.launch(infos)
            except UserError as e:
                raise ToolError(
                    f"launch expressions fail for case {task.case_label(case)} {dtype}: {e}"
                ) from e
            key = repr((launch.template, launch.output_dtypes, dtype))
            if key in seen:
                continue
            seen.add(key)
            # A GPU compiles in its worker, one call at a time; the simulator's compiler runs beside
            # others.
            with session.device_lock if session.backend.timing else contextlib.nullcontext():
                result = session.backend.compile(candidate, infos)
            if not result.ok:
                if len(seen) > 1:
                    result.diagnostics.insert(
                        0,
                        Diagnostic(
                            message=f"the instantiation for case {task.case_label(case)} {dtype} "
                            f"failed "
                            f"(template {dict(launch.template) or 'none'}); earlier ones compiled",
                            where="generated",
                        ),
                    )
                return result
    return result


@tool()
def run_correctness(session: Session, args: schemas.run_correctness) -> Output:
    from mlxport.verify.correctness import run_correctness as check

    record = session.record(args.candidate_id)
    if record.compile is not None and not record.compile.ok:
        raise ToolError(
            f"candidate {args.candidate_id} did not compile, so it cannot run; fix it and compile "
            f"again. {record.compile.summary()}"
        )
    seed = session.seed + 1
    with session.device_lock:
        report = check(session.task, record.candidate, session.backend, seed=seed)
    record = record.model_copy(update={"correctness": report})
    verdict = "correct" if report.ok else "incorrect"
    hint = "\nnext: benchmark(candidate_id=...)" if report.ok else ""
    return Output(
        f"candidate {args.candidate_id}: {report.summary()}{hint}",
        data=o.Checked(
            candidate_id=args.candidate_id,
            correct=report.ok,
            cases=o.CaseVerdict.visible(report),
        ),
        records={args.candidate_id: record},
        plan=session.plan.attached(args.candidate_id, f"{args.candidate_id} {verdict}"),
        seed=seed,
    )


@tool()
def benchmark(session: Session, args: schemas.benchmark) -> Output:
    from mlxport.verify.benchmark import benchmark as time_candidate
    from mlxport.verify.benchmark import summary
    from mlxport.verify.reverify import FailedReverification, WrongAtBenchSize

    record = session.record(args.candidate_id)
    if record.refuted:
        raise ToolError(
            f"candidate {args.candidate_id} was found wrong by an earlier benchmark: "
            f"{record.refuted}"
        )
    if not record.correct:
        raise ToolError(
            f"candidate {args.candidate_id} has not passed run_correctness; timing an incorrect "
            f"kernel means nothing"
        )
    try:
        with session.device_lock:
            report = time_candidate(
                session.task,
                record.candidate,
                session.backend,
                seed=session.seed,
                chip=session.chip,
                datasheet=session.datasheet,
            )
    except (WrongAtBenchSize, FailedReverification) as e:
        # Wrong where run_correctness did not look: it no longer counts as correct.
        record = record.model_copy(update={"refuted": str(e)})
        return Output(
            f"error: {e}\ncandidate {args.candidate_id} no longer counts as correct; fix it and "
            f"run_correctness again",
            data=o.Timed(candidate_id=args.candidate_id, refuted=True),
            error=True,
            records={args.candidate_id: record},
        )
    record = record.model_copy(update={"benchmark": report})
    timed = report.candidate is not None
    plan = session.plan
    if timed:
        speedup = report.speedups.get("native", 0)
        plan = plan.attached(args.candidate_id, f"{args.candidate_id} {speedup:.2f}x native")
    from mlxport.knowledge import hardware_profile
    from mlxport.tools.profile import launch_facts
    from mlxport.verify.benchmark import primary_dtype

    limit = hardware_profile(
        session.chip.name if session.chip else "M3 Max"
    ).threadgroup_memory_bytes
    facts = launch_facts(
        session.task,
        record.candidate,
        session.task.bench_cases()[0],
        primary_dtype(session.task),
        limit,
    )
    return Output(
        f"candidate {args.candidate_id}: {summary(report)}" + (f"\n  {facts}" if facts else ""),
        data=o.Timed(
            candidate_id=args.candidate_id,
            timed=timed,
            speedups=dict(report.speedups),
            us=report.candidate.median_us if timed else None,
            estimate=report.estimate,
        ),
        records={args.candidate_id: record},
        plan=plan,
    )


@tool()
def verify(session: Session, args: schemas.verify) -> Output:
    from mlxport.verify.correctness import run_correctness as check

    record = session.record(args.candidate_id)
    if record.verified:
        return Output(
            f"candidate {args.candidate_id} was verified before (not counted again): "
            f"{record.verified}",
            data=o.Verified(
                candidate_id=args.candidate_id,
                verified=record.verified.startswith("PASS"),
                verifications_left=session.verifications - _verified(session),
            ),
        )
    if not record.correct:
        raise ToolError(
            f"candidate {args.candidate_id} has not passed run_correctness; verify it once it does"
        )
    used = _verified(session)
    if used >= session.verifications:
        raise ToolError(
            f"this session's {session.verifications} verifications are spent; finish verifies the "
            f"best "
            f"candidate in any case"
        )
    with session.device_lock:
        report = check(
            session.task,
            record.candidate,
            session.backend,
            seed=session.seed + 90_000 + used,
            heldout=True,
        )
    record = record.model_copy(update={"verified": verdicts(session.task, report)})
    left = session.verifications - used - 1
    return Output(
        f"candidate {args.candidate_id}: {record.verified}\n({left} "
        f"verification{'s' * (left != 1)} left)",
        data=o.Verified(
            candidate_id=args.candidate_id, verified=report.ok, verifications_left=left
        ),
        records={args.candidate_id: record},
    )


def _verified(session: Session) -> int:
    return sum(r.verified is not None for r in session.records.values())


def verdicts(task: KernelTask, report: CorrectnessReport) -> str:
    """The verification's verdicts by kind of check, without the held-out shapes or where outputs
    differ (the model would tune to them)."""
    from mlxport.spec.results import MODE_LABELS
    from mlxport.verify.correctness import HINTS

    kinds: dict[str, list] = {}
    heldout: list[str] = []
    for c in report.cases:
        if c.heldout and c.case not in heldout:
            heldout.append(c.case)
        if c.mode != "forward":
            kind = MODE_LABELS[c.mode]
        else:
            kind = "held-out cases" if c.heldout else "visible cases on new inputs"
        where = f"held-out case {heldout.index(c.case) + 1}" if c.heldout else c.case
        kinds.setdefault(kind, []).append((c, where))
    head = "PASS" if report.ok else "FAIL"
    lines = [f"{head} on verification (verdicts only: held-out shapes stay hidden)"]
    for kind, results in kinds.items():
        bad = [(c, where) for c, where in results if c.verdict != "pass"]
        line = f"  {kind}: {len(results) - len(bad)}/{len(results)} pass"
        if bad:
            c, where = bad[0]
            if c.verdict == "error":
                how = "the kernel failed to run"
            elif c.mismatches:
                how = f"{c.mismatches / max(c.total, 1):.1%} of elements wrong"
            else:
                how = "wrong"
            hint = HINTS.get(c.mode, "")
            line += f"; first failure {where} {c.dtype}: {how}" + (f"; {hint}" if hint else "")
        lines.append(line)
    return "\n".join(lines)


@tool()
def show_candidate(session: Session, args: schemas.show_candidate) -> Output:
    r = session.record(args.candidate_id)
    status = [f"compile: {r.compile.summary() if r.compile else 'not compiled'}"]
    if r.correctness:
        status.append(f"correctness: {'PASS' if r.correctness.ok else 'FAIL'}")
    if r.refuted:
        status.append(f"refuted by the benchmark: {r.refuted}")
    if r.speedup is not None:
        status.append(f"speedup over native: {r.speedup:.2f}x")
    if r.verified:
        status.append(f"verification: {r.verified.partition(' ')[0]}")
    return Output(
        f"candidate {args.candidate_id} ({'; '.join(status)}):\n{r.candidate.to_toml()}",
        data=o.Shown(candidate_id=args.candidate_id),
    )


@tool()
def diff_candidates(session: Session, args: schemas.diff_candidates) -> Output:
    old, new = session.record(args.old).candidate, session.record(args.new).candidate
    lines = candidate_diff(old, new)
    return Output(
        "\n".join(lines) or f"{old.id} and {new.id} are identical",
        data=o.Diffed(old=old.id, new=new.id, changed=bool(lines)),
    )


def candidate_diff(old: KernelCandidate, new: KernelCandidate) -> list[str]:
    """A unified diff of two candidates' TOML."""
    import difflib

    return list(
        difflib.unified_diff(
            old.to_toml().splitlines(), new.to_toml().splitlines(), old.id, new.id, lineterm="", n=2
        )
    )


@tool()
def update_plan(session: Session, args: schemas.update_plan) -> Output:
    p = session.plan.model_copy(deep=True)
    try:
        if args.action == "add":
            if not args.idea:
                raise ToolError("update_plan(action='add') needs an idea")
            node = p.add(
                args.idea,
                args.rationale or "",
                args.expected_gain or "",
                args.parent,
                difficulty=0.5 if args.difficulty is None else args.difficulty,
                confidence=0.5 if args.confidence is None else args.confidence,
            )
            text = f"added {node.id}"
        elif args.action == "select":
            node = p.select(_need(args.node_id))
            text = f"working on {node.id}"
        else:
            node = p.close(_need(args.node_id), args.status or "done", args.note or "")
            text = f"closed {node.id}"
    except KeyError as e:
        raise ToolError(f"no idea with id {e.args[0]!r} in the plan") from e
    except ValueError as e:
        raise ToolError(str(e)) from e
    return Output(
        f"{text}\nplan:\n{p.render()}", data=o.Planned(action=args.action, node_id=node.id), plan=p
    )


def _need(node_id: str | None) -> str:
    if not node_id:
        raise ToolError("this action needs node_id (e.g. 'p1')")
    return node_id


@tool(sequential=False, needs_task=False)
def ask_user(session: Session, args: schemas.ask_user) -> Output:
    if session.answers is None:
        return Output(
            "no one is here to answer: decide yourself and go on", data=o.Answered(answered=False)
        )
    answer = session.answers.get(args.question, "").strip()
    return Output(
        f"the person answers: {answer}" if answer else "the person gave no answer: decide yourself",
        data=o.Answered(answered=bool(answer)),
    )


@tool(sequential=False)
def finish(session: Session, args: schemas.finish) -> Output:
    if args.candidate_id:
        session.record(args.candidate_id)
    best = session.best()
    chosen = args.candidate_id or (best.candidate.id if best else None)
    text = f"finishing with {chosen}" if chosen else "finishing without a correct candidate"
    return Output(
        text,
        data=o.Finishing(candidate_id=chosen),
        finish={"candidate_id": chosen, "summary": args.summary},
    )


def parallel_compiles(session: Session, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's compile_kernel calls that may compile side by side: on a backend whose compiler
    runs off the device (the simulator), each starting from nothing or from a candidate already
    known."""
    if session.backend.timing:
        return []
    free = [
        c
        for c in calls
        if c["name"] == "compile_kernel"
        and isinstance(c.get("args"), dict)
        and (not c["args"].get("based_on") or c["args"]["based_on"] in session.records)
    ]
    return free if len(free) > 1 else []
