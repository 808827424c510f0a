"""What a port leaves behind in ``<out>/<task>/``: an importable op, its parity test, a report,
the run record, every candidate tried and the transcript."""

from __future__ import annotations

import json
import platform
import shutil
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from mlxport.agent.report import report_md
from mlxport.agent.report_html import render_port_html
from mlxport.agent.state import State
from mlxport.redaction import write_text
from mlxport.spec import (
    CorrectnessReport,
    KernelCandidate,
    KernelTask,
    OriginalLaunch,
)
from mlxport.tools.session import Record, Session
from mlxport.verify.reverify import verdict_label


@dataclass
class Ending:
    """What a port's files are written from, whatever drove it: the graph (``of_state``) or an MCP
    client's calls (mcp_server.py)."""

    records: dict[str, Record]
    final: dict[str, Any]
    messages: list[BaseMessage]
    plan: dict[str, Any]
    stop_reason: str | None
    iterations: int = 0
    elapsed: float = 0.0
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    best_history: list[dict[str, Any]] = field(default_factory=list)
    cycles: list[dict[str, Any]] = field(default_factory=list)
    tool_errors: int = 0
    finish: dict[str, Any] | None = None

    @classmethod
    def of_state(cls, state: State) -> Ending:
        return cls(
            records={k: Record.model_validate(v) for k, v in state.records.items()},
            final=state.final or {},
            messages=state.messages,
            plan=state.plan,
            stop_reason=state.stop_reason,
            iterations=state.iterations,
            elapsed=state.elapsed,
            usage=state.usage,
            best_history=state.best_history,
            cycles=state.cycles,
            tool_errors=state.tool_errors,
            finish=state.finish,
        )

    @classmethod
    def of_calls(
        cls, session: Session, final: dict[str, Any], calls: list[dict[str, Any]], elapsed: float
    ) -> Ending:
        """A session an MCP client drove: its calls (tool, args, text, error) are the
        transcript."""
        from langchain_core.messages import AIMessage, ToolMessage

        messages: list[BaseMessage] = []
        for i, c in enumerate(calls):
            messages.append(
                AIMessage("", tool_calls=[{"id": f"mcp{i}", "name": c["tool"], "args": c["args"]}])
            )
            status = "error" if c["error"] else "success"
            messages.append(ToolMessage(c["text"], tool_call_id=f"mcp{i}", status=status))
        return cls(
            records=dict(session.records),
            final=final,
            messages=messages,
            plan=session.plan.model_dump(),
            stop_reason="finish",
            iterations=len(calls),
            elapsed=elapsed,
            tool_errors=sum(c["error"] for c in calls),
            finish=session.finish,
        )


def write_outputs(
    out: Path, task: KernelTask, state: Ending, config: dict[str, Any], session_id: str
) -> dict[str, Any]:
    """The port's files: the op (where a candidate passed final verification), every candidate,
    the transcript, report.md and report.html, and run.json last (it marks the port done)."""
    out.mkdir(parents=True, exist_ok=True)
    records = state.records
    final = state.final
    cand_dir = out / "candidates"
    cand_dir.mkdir(exist_ok=True)
    for cid, r in records.items():
        write_text(cand_dir / f"{cid}.toml", r.candidate.to_toml())
    _write_transcript(out / "transcript.jsonl", state.messages)
    best = records.get(final.get("candidate_id") or "")
    if best is not None:
        _write_op(out, task, best.candidate, config, final)
    run = run_record(task, state, config, session_id, records)
    write_text(out / "report.md", report_md(task, run, records, final))
    write_text(
        out / "report.html", render_port_html(task, run, records, final, _ceilings(final, config))
    )
    write_text(
        out / "run.json", json.dumps(run, indent=2, default=str)
    )  # last: it marks the port done
    return run


def _ceilings(final: dict, config: dict[str, Any]):
    """The device figures the roofline is drawn under: this machine's GPU where the port was timed,
    else the chip the simulator's estimates are for."""
    from mlxport.knowledge import hardware_profile, local_datasheet

    if ((final.get("benchmark") or {}).get("candidate")) is not None:
        return local_datasheet()
    try:
        return hardware_profile(config.get("chip") or "M3 Max").datasheet()
    except ValueError:
        return None


def _write_transcript(path: Path, messages: list[BaseMessage]) -> None:
    write_text(
        path,
        "".join(
            json.dumps(
                {
                    "type": m.type,
                    "content": m.content,
                    "tool_calls": getattr(m, "tool_calls", None) or None,
                    "tool_call_id": getattr(m, "tool_call_id", None),
                },
                default=str,
            )
            + "\n"
            for m in messages
        ),
    )


def _write_op(
    out: Path, task: KernelTask, c: KernelCandidate, config: dict[str, Any], final: dict
) -> None:
    """The op (kernel.py and what it reads), its parity test replaying the op check's cases, and a
    copy of the task it was verified on."""
    from mlxport.op import write_op
    from mlxport.op.check import golden_cases

    task_copy = out / "task"
    if task_copy.exists():
        shutil.rmtree(task_copy)
    shutil.copytree(task.folder, task_copy, ignore=shutil.ignore_patterns("__pycache__"))
    op = final.get("op") or {}
    checked = task
    if op.get("launches") and task.original is not None:
        launches = task.original.launches + [OriginalLaunch(**x) for x in op["launches"]]
        checked = task.model_copy(
            update={"original": task.original.model_copy(update={"launches": launches})}
        )
    golden = golden_cases(checked, op["cases"], op["seed"]) if op.get("cases") else []
    if op.get("cases_rule"):  # the sizes the op check found the original runs at
        task = task.model_copy(update={"cases": task.cases.model_copy(update=op["cases_rule"])})
    write_op(
        out, task, c, label=verdict_label(final), model=str(config.get("model")), golden=golden
    )


def run_record(
    task: KernelTask,
    state: Ending,
    config: dict[str, Any],
    session_id: str,
    records: dict[str, Record],
) -> dict[str, Any]:
    from mlxport.agent.providers import cost

    usage = state.usage
    reason = usage.get("reason", {})
    final = state.final
    bench = final.get("benchmark") or {}
    history = state.best_history
    return {
        "session": session_id,
        "task": task.name,
        "model": config.get("model"),
        "config": config,
        "non_llm_baseline": config.get("model") == "rules",
        "stop_reason": state.stop_reason,
        "iterations": state.iterations,
        "wall_seconds": round(state.elapsed, 3),
        "tokens": {
            "input": reason.get("input_tokens", 0),
            "output": reason.get("output_tokens", 0),
        },
        "usage_by_node": usage,
        "cost_usd": round(
            cost(
                config.get("model", ""),
                reason.get("input_tokens", 0),
                reason.get("output_tokens", 0),
                config.get("prices"),
            ),
            6,
        ),
        "candidates": len(records),
        "compile_failures": sum(
            r.compile is not None and not r.compile.ok for r in records.values()
        ),
        "tool_errors": state.tool_errors,
        "result": {
            "candidate_id": final.get("candidate_id"),
            "verified": bool(final.get("verified")),
            "backend": final.get("backend"),
            "speedups": bench.get("speedups", {}),
            "timed": bench.get("candidate") is not None,
            "estimate": bench.get("estimate", ""),
            "estimated_us": bench.get("estimated_us"),  # the simulator's, not a measurement
            "golden": (final.get("verification") or {}).get("golden", ""),
            "timed_size": final.get("timed_size"),
            "label": verdict_label(final),
            "why_not": None if final.get("verified") else why_not(state, records),
        },
        "rejected_in_final_verification": [r["candidate_id"] for r in final.get("rejected", [])],
        "iterations_to_best": history[-1]["iteration"] if history else None,
        "best_history": history,
        "plan": state.plan.get("nodes", []),
        "cycles": state.cycles,
        "seed": config.get("seed"),
        "versions": {
            p: package_version(p) for p in ("mlxport", "mlx", "langgraph", "langchain-core")
        },
        "host": {"platform": platform.platform(), "python": platform.python_version()},
    }


def package_version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except Exception:
        return None


def why_not(state: Ending, records: dict[str, Record]) -> str:
    """One sentence on why no kernel was verified: the first check a candidate failed, with its case
    and first mismatch, or the construct the port stopped at."""
    for r in state.final.get("rejected", []):
        if r.get("reason"):
            return f"candidate {r['candidate_id']}: {r['reason']}"
        report = CorrectnessReport.model_validate(r["report"])
        bad = next(c for c in report.cases if c.verdict != "pass")
        return (
            f"candidate {r['candidate_id']} failed final verification at {bad.label} {bad.dtype}: "
            + (bad.error or _mismatch(bad))
        )
    for rec in sorted(records.values(), key=lambda x: -x.iteration):
        if rec.correctness is not None and not rec.correctness.ok:
            bad = next(c for c in rec.correctness.cases if c.verdict != "pass")
            return f"candidate {rec.candidate.id} is wrong at {bad.label} {bad.dtype}: " + (
                bad.error or _mismatch(bad)
            )
        if rec.compile is not None and not rec.compile.ok:
            first = rec.compile.diagnostics[0] if rec.compile.diagnostics else None
            where = f" ({first.where} line {first.line})" if first and first.line else ""
            message = first.message if first else "unknown"
            return f"candidate {rec.candidate.id} does not compile{where}: {message}"
    summary = (state.finish or {}).get("summary")
    return summary or f"the port stopped ({state.stop_reason}) before any candidate was correct"


def _mismatch(c) -> str:
    at = (
        f"; first at {c.first_mismatch}: got {c.got:.6g}, expected {c.expected:.6g}"
        if c.first_mismatch is not None and c.got is not None
        else ""
    )
    return f"{c.pattern}{at}"
