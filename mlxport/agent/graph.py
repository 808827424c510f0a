"""The porting graph: prepare -> reason <-> tools -> assess -> ... -> finalize."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from mlxport.agent.history import trim
from mlxport.agent.models import load_model
from mlxport.agent.providers import cost, window
from mlxport.agent.state import RunConfig, State
from mlxport.backends import get_backend
from mlxport.errors import UserError
from mlxport.prompts.render import render, system_prompt
from mlxport.suite import load_task
from mlxport.tools import schemas
from mlxport.tools.plan import Plan
from mlxport.tools.toolbox import DEVICE_TOOLS, Output, Record, Session, rank, run_tool


def build_graph(model: BaseChatModel | None = None, checkpointer=None):
    """The compiled graph. ``model`` overrides ``RunConfig.model`` (tests); no checkpointer for
    ``langgraph dev``, which brings its own."""
    g = StateGraph(State, context_schema=RunConfig)
    g.add_node("prepare", prepare)
    g.add_node("reason", _reason(model))
    g.add_node("tools", tools)
    g.add_node("assess", assess)
    g.add_node("finalize", finalize)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "reason")
    g.add_conditional_edges("reason", after_reason, ["tools", "reason", "finalize"])
    g.add_edge("tools", "assess")
    g.add_conditional_edges("assess", after_assess, ["reason", "finalize"])
    g.add_edge("finalize", END)
    return g.compile(checkpointer=checkpointer, name="mlxport")


def _ctx(runtime: Runtime[RunConfig] | None) -> RunConfig:
    ctx = runtime.context if runtime is not None else None
    if isinstance(ctx, dict):
        ctx = RunConfig(**ctx)
    return ctx or RunConfig()


def session_of(state: State, ctx: RunConfig) -> Session:
    task = load_task(state["task_dir"])
    records = {k: Record.from_state(v) for k, v in (state.get("records") or {}).items()}
    return Session(task=task, backend=get_backend(ctx.backend), records=records,
                   plan=Plan.model_validate(state.get("plan") or {}), iteration=state.get("iterations", 0),
                   seed=state.get("seed", ctx.seed), chip=ctx.chip)


def _elapsed(state: State, t0: float) -> float:
    return state.get("elapsed", 0.0) + (time.monotonic() - t0)


# ---------------------------------------------------------------- nodes


def prepare(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    t0 = time.monotonic()
    ctx = _ctx(runtime)
    task = load_task(state["task_dir"])
    backend = get_backend(ctx.backend)
    language = "cuda" if backend.name == "cuda" else "msl"
    target = ctx.target_speedup or task.target_speedup
    first = render(
        "task", kernel=task.kernel, task=task.name, description=task.description, folder=task.folder,
        backend=backend.name,
        inputs=", ".join(f"{t.name} {t.dtype}{t.shape}" for t in task.inputs),
        params=", ".join(f"{p.name}: {p.type} = {p.default}" for p in task.params) or "none",
        outputs=", ".join(f"{t.name} {t.dtype}{t.shape}" for t in task.outputs), dtypes=", ".join(task.dtypes),
        cases="; ".join(task.case_label(c) for c in task.cases.visible), target_speedup=target,
        native=task.baselines.native,
        budget=f"{ctx.max_iterations} iterations, patience {ctx.patience} candidates"
               + ("" if backend.timing else " (a simulator: correctness only, no timing)"),
    )
    return {"messages": [SystemMessage(system_prompt(language)), HumanMessage(first)], "iterations": 0,
            "evaluated": 0, "since_improvement": 0, "consecutive_errors": 0, "tool_errors": 0,
            "seed": ctx.seed * 1000 + 1, "records": {}, "plan": Plan().model_dump(), "best_id": None,
            "best_history": [], "stop_reason": None, "finish": None, "final": None, "elapsed": _elapsed(state, t0)}


@cache
def _loaded_model(spec: str, base_url: str | None) -> BaseChatModel:
    return load_model(spec, base_url)


def _reason(model: BaseChatModel | None):
    def reason(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
        t0 = time.monotonic()
        ctx = _ctx(runtime)
        stop = budget_stop(state, ctx)
        if stop:
            return {"stop_reason": stop}
        llm = model or _loaded_model(ctx.model, ctx.base_url)
        llm = llm.bind_tools(schemas.TOOLS)
        prompt = trim(list(state["messages"]), ctx.context_window or window(ctx.model)) + [status_message(state, ctx)]
        try:
            response = llm.invoke(prompt)
        except GraphInterrupt:
            raise
        except Exception as e:  # provider failure after the client's own retries: end cleanly
            return {"stop_reason": f"model_error: {type(e).__name__}: {str(e)[:300]}", "elapsed": _elapsed(state, t0)}
        usage = response.usage_metadata or {}
        update: dict[str, Any] = {
            "messages": [response], "iterations": state.get("iterations", 0) + 1, "elapsed": _elapsed(state, t0),
            "usage": {"reason": {"input_tokens": usage.get("input_tokens", 0),
                                 "output_tokens": usage.get("output_tokens", 0), "calls": 1}},
        }
        if not (response.tool_calls or response.invalid_tool_calls):
            update["messages"].append(HumanMessage("Call one of the tools to continue, or call finish if you are done."))
            update["consecutive_errors"] = state.get("consecutive_errors", 0) + 1
        return update

    return reason


def status_message(state: State, ctx: RunConfig) -> HumanMessage:
    """Rendered into every prompt (never stored): plan, best candidate, budget left."""
    records = state.get("records") or {}
    best = Record.from_state(records[state["best_id"]]) if state.get("best_id") in records else None
    if best is None:
        best_text = "none correct yet"
    else:
        speed = f", {best.speedup:.2f}x native" if best.speedup is not None else ""
        best_text = f"{best.candidate.id} (correct{speed})"
    used = total_tokens(state)
    left = (f"{ctx.max_iterations - state.get('iterations', 0)} iterations, "
            f"{ctx.patience - state.get('since_improvement', 0)} candidates of patience, "
            f"{max(ctx.max_tokens - used, 0)} tokens left")
    return HumanMessage(render("status", iteration=state.get("iterations", 0) + 1, budget_left=left,
                               plan=Plan.model_validate(state.get("plan") or {}).render(), best=best_text))


def total_tokens(state: State) -> int:
    return sum(u.get("input_tokens", 0) + u.get("output_tokens", 0) for u in (state.get("usage") or {}).values())


def spent(state: State, ctx: RunConfig) -> float:
    u = (state.get("usage") or {}).get("reason", {})
    return cost(ctx.model, u.get("input_tokens", 0), u.get("output_tokens", 0), ctx.prices)


def budget_stop(state: State, ctx: RunConfig) -> str | None:
    if state.get("iterations", 0) >= ctx.max_iterations:
        return "iterations"
    if total_tokens(state) >= ctx.max_tokens:
        return "tokens"
    if spent(state, ctx) >= ctx.max_cost:
        return "cost"
    if state.get("elapsed", 0.0) >= ctx.max_wall_seconds:
        return "wall_time"
    if state.get("consecutive_errors", 0) >= ctx.max_consecutive_errors:
        return "consecutive_errors"
    return None


def after_reason(state: State) -> str:
    if state.get("stop_reason"):
        return "finalize"
    last = state["messages"][-1]
    if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
        return "tools"
    return "reason"


def tools(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    t0 = time.monotonic()
    ctx = _ctx(runtime)
    session = session_of(state, ctx)
    last: AIMessage = state["messages"][-1]
    calls = list(last.tool_calls)
    results: dict[str, Output] = {}
    # Reading and searching run concurrently; anything touching the device runs in order, alone.
    light = [c for c in calls if c["name"] not in DEVICE_TOOLS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {c["id"]: pool.submit(run_tool, session, c["name"], c["args"]) for c in light}
        for c in calls:
            if c["name"] in DEVICE_TOOLS:
                results[c["id"]] = run_tool(session, c["name"], c["args"])
        for cid, f in futures.items():
            results[cid] = f.result()
    for bad in last.invalid_tool_calls:
        results[bad["id"]] = Output(f"error: the arguments of your {bad.get('name')} call were not valid JSON "
                                    f"({bad.get('error') or 'could not parse'}); send the call again", error=True)
    messages, records, finish, plan = [], {}, None, None
    for call_id in [c["id"] for c in calls] + [b["id"] for b in last.invalid_tool_calls]:
        out = results[call_id]
        name = next((c["name"] for c in calls if c["id"] == call_id), "invalid_tool_call")
        messages.append(ToolMessage(out.text, tool_call_id=call_id, name=name, status="error" if out.error else "success"))
        records.update({k: r.to_state() for k, r in out.records.items()})
        finish = out.finish or finish
        plan = out.plan or plan
    errors = sum(r.error for r in results.values())
    update: dict[str, Any] = {
        "messages": messages, "records": records, "seed": session.seed, "tool_errors": state.get("tool_errors", 0) + errors,
        "consecutive_errors": state.get("consecutive_errors", 0) + 1 if errors == len(results) else 0,
        "elapsed": _elapsed(state, t0),
    }
    if plan is not None:
        update["plan"] = plan.model_dump()
    if finish is not None:
        update["finish"] = finish
    return update


def assess(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    records = [Record.from_state(r) for r in (state.get("records") or {}).values()]
    evaluated = sum(r.correctness is not None for r in records)
    newly = evaluated - state.get("evaluated", 0)
    ranked = rank(records)
    best = ranked[0] if ranked and ranked[0].correct else None
    previous = state.get("best_id")
    improved = best is not None and (best.candidate.id != previous and _better(best, state))
    update: dict[str, Any] = {"evaluated": evaluated}
    if improved and ctx.approve and not _approved(best):
        rejected = {best.candidate.id: {**state["records"][best.candidate.id], "rejected": True}}
        return {**update, "records": rejected, "since_improvement": state.get("since_improvement", 0) + newly,
                "messages": [HumanMessage(f"The user rejected candidate {best.candidate.id}; it will not be the "
                                          f"result. Try another approach.")]}
    if improved:
        update["best_id"] = best.candidate.id
        update["since_improvement"] = 0
        update["best_history"] = [*state.get("best_history", []), {"iteration": state.get("iterations", 0),
                                  "candidate": best.candidate.id, "speedup": best.speedup}]
    else:
        update["since_improvement"] = state.get("since_improvement", 0) + newly
    target = ctx.target_speedup or load_task(state["task_dir"]).target_speedup
    if state.get("finish"):
        update["stop_reason"] = "finish"
    elif best is not None and best.speedup is not None and best.speedup >= target:
        update["stop_reason"] = "target_speedup"
    elif update["since_improvement"] >= ctx.patience:
        update["stop_reason"] = "patience"
    return update


def _approved(best: Record) -> bool:
    """Pause the graph and ask the person (chat sessions); resumes with their answer."""
    answer = interrupt({"kind": "approve", "candidate_id": best.candidate.id,
                        "speedup": best.speedup, "summary": best.correctness.summary() if best.correctness else ""})
    return str(answer).strip().lower() in ("y", "yes", "approve", "ok", "true", "1", "")


def _better(best: Record, state: State) -> bool:
    prev = (state.get("records") or {}).get(state.get("best_id") or "")
    if prev is None:
        return True
    p = Record.from_state(prev)
    return (best.speedup or 0.0) > (p.speedup or 0.0) * 1.01


def after_assess(state: State) -> str:
    return "finalize" if state.get("stop_reason") else "reason"


def finalize(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Verify the best candidates on held-out cases and extra seeds; the first that passes is the
    result. A candidate that fails held-out cases is never the result."""
    from mlxport.benchmark import benchmark
    from mlxport.correctness import run_correctness

    t0 = time.monotonic()
    ctx = _ctx(runtime)
    session = session_of(state, ctx)
    chosen = (state.get("finish") or {}).get("candidate_id")
    ranked = [r for r in rank(session.records.values()) if r.correct]
    if chosen in session.records and session.records[chosen].correct:
        ranked = [session.records[chosen]] + [r for r in ranked if r.candidate.id != chosen]
    rejected = []
    for record in ranked[:4]:
        with session.device_lock:
            report = run_correctness(session.task, record.candidate, session.backend, seed=session.seed + 50_000,
                                     heldout=True, extra_seeds=ctx.extra_seeds)
        if not report.ok:
            rejected.append({"candidate_id": record.candidate.id, "report": report.model_dump(mode="json")})
            continue
        bench = record.benchmark
        if bench is None:
            try:
                with session.device_lock:
                    bench = benchmark(session.task, record.candidate, session.backend, seed=session.seed,
                                      chip=session.chip)
            except UserError as e:  # wrong at the timed size, or the timing itself failed
                rejected.append({"candidate_id": record.candidate.id, "reason": str(e)})
                continue
        final = {"candidate_id": record.candidate.id, "verified": True, "backend": session.backend.name,
                 "verification": report.model_dump(mode="json"), "benchmark": bench.model_dump(mode="json"),
                 "rejected": rejected}
        return {"final": final, "elapsed": _elapsed(state, t0)}
    return {"final": {"candidate_id": None, "verified": False, "backend": session.backend.name,
                      "rejected": rejected}, "elapsed": _elapsed(state, t0)}
