"""What the tools say beyond their own results: a task's contract, a candidate's status and its
verdicts, the verification's verdicts by kind of check, a diff of two candidates."""

from __future__ import annotations

from mlxport.spec import CorrectnessReport, KernelCandidate, KernelTask
from mlxport.tools import outcomes as o
from mlxport.tools.session import Record


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


def verdicts(task: KernelTask, report: CorrectnessReport) -> tuple[str, list[o.Check]]:
    """The verification's verdicts by kind of check, without the held-out shapes or where outputs
    differ (the model would tune to them): as text and as counts."""
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
    checks = []
    for kind, results in kinds.items():
        bad = [(c, where) for c, where in results if c.verdict != "pass"]
        checks.append(o.Check(kind=kind, passed=len(results) - len(bad), total=len(results)))
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
    return "\n".join(lines), checks


def status_words(r: Record) -> list[str]:
    status = [f"compile: {r.compile.summary() if r.compile else 'not compiled'}"]
    if r.correctness:
        status.append(f"correctness: {'PASS' if r.correctness.ok else 'FAIL'}")
    if r.refuted:
        status.append(f"refuted by the benchmark: {r.refuted}")
    if r.speedup is not None:
        status.append(f"speedup over native: {r.speedup:.2f}x")
    if r.verified:
        status.append(f"verification: {r.verified.partition(' ')[0]}")
    return status


def candidate_diff(old: KernelCandidate, new: KernelCandidate) -> list[str]:
    """A unified diff of two candidates' TOML."""
    import difflib

    return list(
        difflib.unified_diff(
            old.to_toml().splitlines(), new.to_toml().splitlines(), old.id, new.id, lineterm="", n=2
        )
    )


def measured(r: Record) -> str:
    """A candidate's measured outcome so far, as the plan shows it."""
    if r.speedup is not None:
        return f"{r.candidate.id} {r.speedup:.2f}x native"
    if r.correctness is not None:
        return f"{r.candidate.id} {'correct' if r.correct else 'incorrect'}"
    return ""


def candidate_state(r: Record) -> o.CandidateState:
    return o.CandidateState(
        candidate_id=r.candidate.id,
        name=r.candidate.name,
        iteration=r.iteration,
        compiled=None if r.compile is None else r.compile.ok,
        correct=None if r.correctness is None else r.correct,
        verified=r.passed_verify,
        speedup=r.speedup,
        refuted=r.refuted is not None,
        plan_node=r.plan_node,
    )


def state_words(c: o.CandidateState) -> str:
    said = {None: "not run", True: "pass", False: "fail"}
    words = [f"compile {said[c.compiled]}", f"correctness {said[c.correct]}"]
    words.append(f"verify {said[c.verified]}")
    if c.refuted:
        words.append("refuted by the benchmark")
    if c.speedup is not None:
        words.append(f"{c.speedup:.2f}x native")
    return ", ".join(words)
