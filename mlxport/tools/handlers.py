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
from mlxport.spec import CompileResult, Diagnostic, KernelCandidate
from mlxport.tools import outcomes as o
from mlxport.tools import schemas
from mlxport.tools.hints import compile_hints, with_metal_names
from mlxport.tools.session import Output, Record, Session, ToolError, why_best
from mlxport.tools.texts import (
    candidate_diff,
    candidate_state,
    contract,
    measured,
    state_words,
    status_words,
    verdicts,
)

SOURCE_LINES = 400  # numbered source lines per page of read_cuda_source
Handler = Callable[[Session, Any], Output]


@dataclass(frozen=True)
class Tool:
    """A tool as every caller sees it: the graph binds ``schema`` to the model, runs the turn's
    ``sequential`` tools one at a time in order (those touching the device, the plan or the
    candidates the calls before them made) and the rest side by side; the MCP server asks for a
    task where ``needs_task`` and returns ``outcome`` as structured content."""

    schema: type[schemas.ToolArgs]
    handler: Handler
    outcome: type[o.Outcome]
    sequential: bool
    needs_task: bool


TOOLS: dict[str, Tool] = {}


def tool(
    outcome: type[o.Outcome], *, sequential: bool = True, needs_task: bool = True
) -> Callable[[Handler], Handler]:
    """Register a handler as the tool of its name, with the schema its ``args`` is typed with and
    the outcome its output carries."""

    def register(fn: Handler) -> Handler:
        schema = getattr(schemas, fn.__name__)
        assert get_type_hints(fn)["args"] is schema, f"{fn.__name__}'s args must be {schema}"
        TOOLS[fn.__name__] = Tool(schema, fn, outcome, sequential, needs_task)
        return fn

    return register


def run_tool(session: Session, name: str, args: dict[str, Any]) -> Output:
    """Validate and run one tool call. Errors become an Output with ``error=True`` (and an
    outcome that is not ``ok``)."""
    if name not in TOOLS:
        return _failed(f"unknown tool {name!r}; available: {', '.join(TOOLS)}")
    schema = TOOLS[name].schema
    try:
        parsed = schema.model_validate(args)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, er['loc'])) or 'args'}: {er['msg']}" for er in e.errors()[:5]
        )
        return _failed(f"invalid arguments for {name}: {problems}")
    try:
        out = TOOLS[name].handler(session, parsed)
    except UserError as e:
        return _failed(str(e))
    if out.error:
        out.data = out.data.model_copy(update={"ok": False})
    return out


def _failed(why: str) -> Output:
    return Output(f"error: {why}", data=o.Outcome(ok=False), error=True)


@tool(o.Source, sequential=False)
def read_cuda_source(session: Session, args: schemas.read_cuda_source) -> Output:
    from mlxport.translate.reading.reader import summary

    task = session.task
    text = task.source_text()
    cf, names = _read(text, task.source, args.kernel)
    focus = args.kernel or task.kernel
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
            kernels=names,
            backend=session.backend.name,
            language=session.language,
        ),
    )


def read_cuda_text(text: str, name: str, args: dict[str, Any]) -> Output:
    """read_cuda_source of CUDA outside any task (a client's text, a .cu file): its summary and
    pages of its source."""
    from mlxport.translate.reading.reader import summary

    try:
        parsed = schemas.read_cuda_source.model_validate(args)
        cf, names = _read(text, name, parsed.kernel)
        parts = [summary(cf)] if parsed.start_line == 1 else []
        if parsed.show_source:
            parts.append(numbered_page(text, name, parsed.start_line, "read_cuda_source"))
    except (ValidationError, UserError) as e:
        return _failed(str(e))
    parts.append(
        "create_task makes a task of it (give it the same CUDA), to compile and check ports "
        "against this kernel."
    )
    focus = parsed.kernel or (names[0] if len(names) == 1 else None)
    return Output("\n\n".join(parts), data=o.Source(task=None, kernel=focus, kernels=names))


def _read(text: str, name: str, kernel: str | None):
    """The CUDA read, and its kernels' names (``kernel`` among them where given)."""
    from mlxport.translate.reading.reader import CudaReadError, read_cuda

    try:
        cf = read_cuda(text, name=name)
    except CudaReadError as e:
        raise ToolError(str(e)) from e
    names = [k.name for k in cf.kernels]
    if kernel is not None and kernel not in names:
        raise ToolError(
            f"no kernel {kernel!r} in {name}; pass `kernel` as one of: {', '.join(names)}"
        )
    return cf, names


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


@tool(o.Sections, sequential=False, needs_task=False)
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


@tool(o.Golden, sequential=False)
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


@tool(o.Compiled)
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
    result = with_metal_names(_compile(session, candidate), session.language)
    known = session.records.get(candidate.id) or Record(
        candidate=candidate, iteration=session.iteration
    )
    record = known.model_copy(update={"compile": result})
    head = f"candidate {candidate.id} ({candidate.name}): {result.summary()}"
    if not result.ok:
        head += "".join(f"\nhint: {h}" for h in compile_hints(candidate, result))
    if result.ok:
        head += f"\nnext: run_correctness(candidate_id={candidate.id!r})"
    data = o.Compiled(
        ok=result.ok,
        candidate_id=candidate.id,
        name=candidate.name,
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


@tool(o.Checked)
def run_correctness(session: Session, args: schemas.run_correctness) -> Output:
    from mlxport.verify.correctness import run_correctness as check

    record = session.record(args.candidate_id)
    cid = record.candidate.id
    if record.compile is not None and not record.compile.ok:
        raise ToolError(
            f"candidate {cid} did not compile, so it cannot run; fix it and call compile_kernel "
            f"again. {record.compile.summary()}"
        )
    seed = session.seed + 1
    with session.device_lock:
        report = check(session.task, record.candidate, session.backend, seed=seed)
    record = record.model_copy(update={"correctness": report})
    verdict = "correct" if report.ok else "incorrect"
    if not report.ok:
        hint = ""
    elif session.backend.timing:
        hint = f"\nnext: benchmark(candidate_id={cid!r})"
    else:
        hint = f"\nnext: verify(candidate_id={cid!r}) (this backend does not time)"
    return Output(
        f"candidate {cid}: {report.summary()}{hint}",
        data=o.Checked(ok=report.ok, candidate_id=cid, cases=o.CaseVerdict.visible(report)),
        records={cid: record},
        plan=session.plan.attached(cid, f"{cid} {verdict}"),
        seed=seed,
    )


@tool(o.Timed)
def benchmark(session: Session, args: schemas.benchmark) -> Output:
    from mlxport.verify.benchmark import benchmark as time_candidate
    from mlxport.verify.benchmark import summary
    from mlxport.verify.reverify import FailedReverification, WrongAtBenchSize

    record = session.record(args.candidate_id)
    cid = record.candidate.id
    if record.refuted:
        raise ToolError(
            f"candidate {cid} was found wrong by an earlier benchmark: {record.refuted}"
        )
    if not record.correct:
        raise ToolError(
            f"candidate {cid} has not passed run_correctness; timing an incorrect kernel means "
            f"nothing"
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
            f"error: {e}\ncandidate {cid} no longer counts as correct; fix it and call "
            f"run_correctness again",
            data=o.Timed(ok=False, candidate_id=cid),
            error=True,
            records={cid: record},
        )
    record = record.model_copy(update={"benchmark": report})
    timed = report.candidate is not None
    plan = session.plan
    if timed:
        speedup = report.speedups.get("native", 0)
        plan = plan.attached(cid, f"{cid} {speedup:.2f}x native")
    elif report.estimated_us is not None:
        plan = plan.attached(cid, f"{cid} ESTIMATE {report.estimated_us:.1f} us (simulator counts)")
    facts = _launch_facts(session, record.candidate)
    return Output(
        f"candidate {cid}: {summary(report)}" + (f"\n  {facts}" if facts else ""),
        data=o.Timed(
            candidate_id=cid,
            timed=timed,
            speedups=dict(report.speedups),
            us=report.candidate.median_us if timed else None,
            estimate=report.estimate,
            estimated_us=report.estimated_us,
        ),
        records={cid: record},
        plan=plan,
    )


def _launch_facts(session: Session, candidate: KernelCandidate) -> str:
    from mlxport.knowledge import hardware_profile
    from mlxport.tools.profile import launch_facts
    from mlxport.verify.benchmark import primary_dtype

    chip = session.chip.name if session.chip else "M3 Max"
    limit = hardware_profile(chip).threadgroup_memory_bytes
    task = session.task
    return launch_facts(task, candidate, task.bench_cases()[0], primary_dtype(task), limit)


@tool(o.Verified)
def verify(session: Session, args: schemas.verify) -> Output:
    from mlxport.verify.correctness import run_correctness as check

    record = session.record(args.candidate_id)
    cid = record.candidate.id
    left = session.verifications_left
    if record.verified:
        return Output(
            f"candidate {cid} was verified before (not counted again): {record.verified}",
            data=o.Verified(ok=record.passed_verify, candidate_id=cid, budget_left=left),
        )
    if not record.correct:
        raise ToolError(f"candidate {cid} has not passed run_correctness; verify it once it does")
    if left <= 0:
        raise ToolError(
            f"this session's {session.verifications} verifications are spent; finish verifies the "
            f"best candidate in any case"
        )
    used = session.verifications - left
    with session.device_lock:
        report = check(
            session.task,
            record.candidate,
            session.backend,
            seed=session.seed + 90_000 + used,
            heldout=True,
        )
    text, checks = verdicts(session.task, report)
    record = record.model_copy(update={"verified": text})
    left -= 1
    return Output(
        f"candidate {cid}: {text}\n({left} verification{'s' * (left != 1)} left)",
        data=o.Verified(ok=report.ok, candidate_id=cid, checks=checks, budget_left=left),
        records={cid: record},
    )


@tool(o.Shown)
def show_candidate(session: Session, args: schemas.show_candidate) -> Output:
    r = session.record(args.candidate_id)
    return Output(
        f"candidate {r.candidate.id} ({'; '.join(status_words(r))}):\n{r.candidate.to_toml()}",
        data=o.Shown(candidate_id=r.candidate.id),
    )


@tool(o.Diffed)
def diff_candidates(session: Session, args: schemas.diff_candidates) -> Output:
    old, new = session.record(args.old).candidate, session.record(args.new).candidate
    lines = candidate_diff(old, new)
    return Output(
        "\n".join(lines) or f"{old.id} and {new.id} are identical",
        data=o.Diffed(old=old.id, new=new.id, changed=bool(lines)),
    )


@tool(o.Planned)
def update_plan(session: Session, args: schemas.update_plan) -> Output:
    p = session.plan.model_copy(deep=True)
    record = session.record(args.candidate) if args.candidate else None
    try:
        if args.action == "add":
            if not args.idea:
                raise ToolError("update_plan(action='add') needs `idea`")
            node = p.add(
                args.idea,
                args.rationale or "",
                args.expected_gain or "",
                args.parent,
                difficulty=0.5 if args.difficulty is None else args.difficulty,
                confidence=0.5 if args.confidence is None else args.confidence,
            )
            text = f"added {node.id}: {node.idea}"
        elif args.action == "select":
            node = p.select(_need(args.node_id))
            text = f"working on {node.id}"
        else:
            node = p.close(_need(args.node_id), args.status or "done", args.note or "")
            text = f"closed {node.id} ({node.status})"
    except KeyError as e:
        raise ToolError(f"no idea with id {e.args[0]!r} in the plan") from e
    except ValueError as e:
        raise ToolError(str(e)) from e
    records = {}
    if record is not None:
        cid = record.candidate.id
        p.credit(node.id, cid, measured(record))
        records[cid] = record.model_copy(update={"plan_node": node.id})
        text += f"; {cid} tried under it"
    return Output(
        text,
        data=o.Planned(
            action=args.action, node_id=node.id, candidate=record.candidate.id if record else None
        ),
        plan=p,
        records=records,
    )


def _need(node_id: str | None) -> str:
    if not node_id:
        raise ToolError("this action needs `node_id` (e.g. 'p1')")
    return node_id


@tool(o.Answered, sequential=False, needs_task=False)
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


@tool(o.SessionState)
def session(session: Session, args: schemas.session) -> Output:
    best = session.best()
    rows = [candidate_state(r) for r in session.records.values()]
    lines = [
        f"session on task {session.task.name}, backend {session.backend.name}"
        + (f": closed by finish (the port is in {session.closed})" if session.closed else ""),
        f"{len(rows)} candidate(s); {session.verifications_left} verification(s) left",
        *(f"  {c.candidate_id} ({c.name}): {state_words(c)}" for c in rows),
        f"finish would choose {best.candidate.id}: "
        f"{why_best(session.records.values(), session.backend.timing)}"
        if best
        else "finish would choose: none (no candidate passed run_correctness)",
        f"plan:\n{session.plan.render()}",
    ]
    return Output(
        "\n".join(lines),
        data=o.SessionState(
            task=session.task.name,
            backend=session.backend.name,
            candidates=rows,
            best=best.candidate.id if best else None,
            budget_left=session.verifications_left,
            closed=session.closed is not None,
        ),
    )


@tool(o.Finishing)
def finish(session: Session, args: schemas.finish) -> Output:
    best = session.best()
    why_default = why_best(session.records.values(), session.backend.timing)
    if args.candidate_id:
        r = session.record(args.candidate_id)
        chosen, why = r.candidate.id, f"you named it ({'; '.join(status_words(r))})"
        if not r.correct and best is not None:
            why += (
                f"; it is not correct, so the final verification takes the best correct one, "
                f"{best.candidate.id}: {why_default}"
            )
    else:
        chosen, why = (best.candidate.id if best else None), why_default
    text = f"finishing with {chosen}: {why}" if chosen else f"finishing without a result: {why}"
    return Output(
        text,
        data=o.Finishing(ok=chosen is not None, candidate_id=chosen, why=why),
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
