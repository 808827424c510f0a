"""The porting graph: prepare -> reason <-> tools -> assess -> ... -> finalize.

Two searches share it. ``linear``: one ReAct thread; the model keeps the plan. ``tree`` (after
K-Search): the plan is the world model; ``select`` starts a cycle on the best-rated open idea, the
model generates, debugs and improves candidates for it until ``stagnation`` checked candidates
bring no improvement, and ``assess`` then closes the cycle with the measured outcome (done or
failed) and updates the ratings.
"""

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
from mlxport.prompts.render import render, system_prompt, task_prompt
from mlxport.tools.final import verify_final
from mlxport.tools.handlers import TOOLS, parallel_compiles, run_tool
from mlxport.tools.plan import Plan
from mlxport.tools.session import Output, Record, Session, open_session, rank


def build_graph(model: BaseChatModel | None = None, checkpointer=None):
    """The compiled graph. ``model`` overrides ``RunConfig.model`` (tests); no checkpointer for
    ``langgraph dev``, which brings its own."""
    g = StateGraph(State, context_schema=RunConfig)
    g.add_node("prepare", prepare)
    g.add_node("reason", _reason(model))
    g.add_node("tools", tools)
    g.add_node("assess", assess)
    g.add_node("finalize", finalize)
    g.add_node("select", select)
    g.add_edge(START, "prepare")
    g.add_conditional_edges("prepare", after_assess, ["select", "reason", "finalize"])
    g.add_edge("select", "reason")
    g.add_conditional_edges("reason", after_reason, ["tools", "reason", "finalize"])
    g.add_edge("tools", "assess")
    g.add_conditional_edges("assess", after_assess, ["select", "reason", "finalize"])
    g.add_edge("finalize", END)
    return g.compile(checkpointer=checkpointer, name="mlxport")


def _ctx(runtime: Runtime[RunConfig] | None) -> RunConfig:
    ctx = runtime.context if runtime is not None else None
    if isinstance(ctx, dict):
        ctx = RunConfig(**ctx)
    return ctx or RunConfig()


def session_of(state: State, ctx: RunConfig) -> Session:
    records = {k: Record.model_validate(v) for k, v in state.records.items()}
    return open_session(
        state.task_dir,
        ctx.backend,
        chip=ctx.chip,
        records=records,
        plan=Plan.model_validate(state.plan),
        iteration=state.iterations,
        seed=state.seed,
        verifications=ctx.max_verifications,
    )


def _elapsed(state: State, t0: float) -> float:
    return state.elapsed + (time.monotonic() - t0)


# ---------------------------------------------------------------- nodes


def prepare(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    t0 = time.monotonic()
    ctx = _ctx(runtime)
    session = open_session(state.task_dir, ctx.backend, chip=ctx.chip)
    task, backend = session.task, session.backend
    first = task_prompt(
        task,
        backend,
        target=ctx.target_speedup,
        budget=f"{ctx.max_iterations} iterations, patience {ctx.patience} candidates, "
        f"{ctx.max_verifications} verifications",
    )
    return {
        "messages": [SystemMessage(system_prompt(session.language)), HumanMessage(first)],
        "seed": ctx.seed * 1000 + 1,
        "plan": Plan().model_dump(),
        "search": ctx.search,
        "elapsed": _elapsed(state, t0),
    }


@cache
def _loaded_model(spec: str, base_url: str | None, timeout: float) -> BaseChatModel:
    return load_model(spec, base_url, timeout=timeout)


def _reason(model: BaseChatModel | None):
    def reason(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
        t0 = time.monotonic()
        ctx = _ctx(runtime)
        stop = budget_stop(state, ctx)
        if stop:
            return {"stop_reason": stop}
        llm = model or _loaded_model(ctx.model, ctx.base_url, ctx.request_timeout)
        llm = llm.bind_tools([t.schema for t in TOOLS.values()])
        prompt = trim(list(state.messages), ctx.context_window or window(ctx.model)) + [
            status_message(state, ctx)
        ]
        try:
            response = llm.invoke(prompt)
        except GraphInterrupt:
            raise
        except Exception as e:  # provider failure after the client's own retries: end cleanly
            return {
                "stop_reason": f"model_error: {type(e).__name__}: {str(e)[:300]}",
                "elapsed": _elapsed(state, t0),
            }
        usage = response.usage_metadata or {}
        update: dict[str, Any] = {
            "messages": [response],
            "iterations": state.iterations + 1,
            "elapsed": _elapsed(state, t0),
            "usage": {
                "reason": {
                    "input_tokens": usage.get("input_tokens", 0),
                    "output_tokens": usage.get("output_tokens", 0),
                    "calls": 1,
                }
            },
        }
        if not (response.tool_calls or response.invalid_tool_calls):
            update["messages"].append(
                HumanMessage("Call one of the tools to continue, or call finish if you are done.")
            )
            update["consecutive_errors"] = state.consecutive_errors + 1
        return update

    return reason


def status_message(state: State, ctx: RunConfig) -> HumanMessage:
    """Rendered into every prompt (never stored): plan, best candidate, verdicts of verify, budget
    left, and on the last iteration that it is the last."""
    timing = get_backend(ctx.backend).timing
    records = [Record.model_validate(r) for r in state.records.values()]
    verified = [r for r in records if r.passed_verify is not None]
    patience = f"{ctx.patience - state.since_improvement} candidates of patience" + (
        "" if timing else " (wrong ones only: this backend does not time)"
    )
    left = (
        f"{ctx.max_iterations - state.iterations} iterations, {patience}, "
        f"{ctx.max_verifications - len(verified)} verifications, "
        f"{max(ctx.max_tokens - state.total_tokens(), 0)} tokens left"
    )
    text = render(
        "status",
        iteration=state.iterations + 1,
        budget_left=left,
        plan=Plan.model_validate(state.plan).render(),
        best=_best_words(state, timing),
    )
    if verified:
        said = {True: "passed", False: "failed"}
        text += "\nverify: " + ", ".join(
            f"{r.candidate.id} {said[r.passed_verify]}" for r in verified
        )
    if state.cycle:
        c = state.cycle
        text += (
            f"\nCycle {c['number']} on {c['node']}: {c['since']} of {ctx.stagnation} checked "
            f"candidates without improvement"
        )
    if state.iterations + 1 >= ctx.max_iterations:
        text += "\nlast iteration: call finish"
    return HumanMessage(text)


def _best_words(state: State, timing: bool) -> str:
    """The best candidate and what makes it the best."""
    if state.best_id not in state.records:
        return "none correct yet"
    best = Record.model_validate(state.records[state.best_id])
    words = [
        "correct",
        {True: "passed verify", False: "failed verify", None: "not verified"}[best.passed_verify],
    ]
    if best.speedup is not None:
        words.append(f"{best.speedup:.2f}x native")
    if best.estimated_us is not None:
        words.append(f"ESTIMATE {best.estimated_us:.1f} us, not a measurement")
    text = f"{best.candidate.id} ({', '.join(words)})"
    if not timing and best.estimated_us is not None:
        text += (
            "; this backend does not time, so the best is the correct candidate with the lowest "
            "estimate from the simulator's counts, those that passed verify first"
        )
    elif not timing:
        text += (
            "; this backend does not time, so the best is the earliest correct candidate, those "
            "that passed verify first"
        )
    return text


def spent(state: State, ctx: RunConfig) -> float:
    u = state.usage.get("reason", {})
    return cost(ctx.model, u.get("input_tokens", 0), u.get("output_tokens", 0), ctx.prices)


def budget_stop(state: State, ctx: RunConfig) -> str | None:
    if state.iterations >= ctx.max_iterations:
        return "iterations"
    if state.total_tokens() >= ctx.max_tokens:
        return "tokens"
    if spent(state, ctx) >= ctx.max_cost:
        return "cost"
    if state.elapsed >= ctx.max_wall_seconds:
        return "wall_time"
    if state.consecutive_errors >= ctx.max_consecutive_errors:
        return "consecutive_errors"
    return None


def after_reason(state: State) -> str:
    if state.stop_reason:
        return "finalize"
    last = state.messages[-1]
    if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
        return "tools"
    return "reason"


def tools(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Run the last model turn's tool calls. Reading and searching run concurrently; calls that
    touch the device run in order, each seeing what the ones before it changed, except compiles
    that depend on nothing of the turn, which compile side by side where the backend allows."""
    t0 = time.monotonic()
    ctx = _ctx(runtime)
    session = session_of(state, ctx)
    last: AIMessage = state.messages[-1]
    calls = list(last.tool_calls)
    if ctx.approve:
        # Before any tool runs: the node runs again from its start when the person answers.
        session.answers = {
            q: str(interrupt({"kind": "ask", "question": q})) for q in _questions(calls)
        }
    results: dict[str, Output] = {}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            c["id"]: pool.submit(run_tool, session, c["name"], c["args"])
            for c in calls
            if not _sequential(c["name"])
        }
        compiles = {
            c["id"]: pool.submit(run_tool, session, c["name"], c["args"])
            for c in parallel_compiles(session, calls)
        }
        for cid, f in compiles.items():
            results[cid] = f.result()
            session.apply(results[cid])
        for c in calls:
            if _sequential(c["name"]) and c["id"] not in results:
                results[c["id"]] = run_tool(session, c["name"], c["args"])
                session.apply(results[c["id"]])
        for cid, f in futures.items():
            results[cid] = f.result()
            session.apply(results[cid])
    for bad in last.invalid_tool_calls:
        results[bad["id"]] = Output(
            f"error: the arguments of your {bad.get('name')} call were not valid JSON "
            f"({bad.get('error') or 'could not parse'}); send the call again",
            error=True,
        )
    names = {c["id"]: c["name"] for c in calls}
    messages = [
        ToolMessage(
            out.text,
            tool_call_id=cid,
            name=names.get(cid, "invalid_tool_call"),
            status="error" if out.error else "success",
            artifact=_artifact(out),
        )
        for cid, out in ((c["id"], results[c["id"]]) for c in [*calls, *last.invalid_tool_calls])
    ]
    changed = {
        k: r.model_dump(mode="json") for out in results.values() for k, r in out.records.items()
    }
    errors = sum(out.error for out in results.values())
    update: dict[str, Any] = {
        "messages": messages,
        "records": changed,
        "seed": session.seed,
        "plan": session.plan.model_dump(),
        "tool_errors": state.tool_errors + errors,
        "consecutive_errors": state.consecutive_errors + 1 if errors == len(results) else 0,
        "elapsed": _elapsed(state, t0),
    }
    if session.finish is not None:
        update["finish"] = session.finish
    return update


def _sequential(name: str) -> bool:
    """An unknown tool's call runs in order too: its error message is all it returns."""
    return name not in TOOLS or TOOLS[name].sequential


def _questions(calls: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in calls:
        if (
            c["name"] == "ask_user"
            and isinstance(q := (c.get("args") or {}).get("question"), str)
            and q.strip()
        ):
            out.append(q)
    return list(dict.fromkeys(out))


def assess(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    records = [Record.model_validate(r) for r in state.records.values()]
    evaluated = sum(r.correctness is not None for r in records)
    correct = sum(r.correct for r in records)
    newly = evaluated - state.evaluated
    if not get_backend(ctx.backend).timing:
        # No timing: a correct candidate is as good as the best, so only wrong ones spend patience.
        newly = max(newly - max(correct - state.correct, 0), 0)
    ranked = rank(records)
    best = ranked[0] if ranked and ranked[0].correct else None
    improved = best is not None and best.candidate.id != state.best_id and _better(best, state)
    update: dict[str, Any] = {"evaluated": evaluated, "correct": correct}
    if improved and ctx.approve and not _approved(best):
        rejected = {best.candidate.id: {**state.records[best.candidate.id], "rejected": True}}
        return {
            **update,
            "records": rejected,
            "since_improvement": state.since_improvement + newly,
            "messages": [
                HumanMessage(
                    f"The user rejected candidate {best.candidate.id}; it will not be the "
                    f"result. Try another approach."
                )
            ],
        }
    if improved:
        update["best_id"] = best.candidate.id
        update["since_improvement"] = 0
        update["best_history"] = [
            *state.best_history,
            {
                "iteration": state.iterations,
                "candidate": best.candidate.id,
                "speedup": best.speedup,
            },
        ]
    else:
        update["since_improvement"] = state.since_improvement + newly
    target = ctx.target_speedup or session_of(state, ctx).task.target_speedup
    if state.finish:
        update["stop_reason"] = "finish"
    elif best is not None and best.speedup is not None and best.speedup >= target:
        update["stop_reason"] = "target_speedup"
    elif update["since_improvement"] >= ctx.patience:
        update["stop_reason"] = "patience"
    if ctx.search == "tree":
        _end_cycle(
            state,
            ctx,
            update,
            ranked[0] if ranked and ranked[0].correct else None,
            last="stop_reason" in update,
        )
    return update


def _approved(best: Record) -> bool:
    """Pause the graph and ask the person (chat sessions); resumes with their answer."""
    answer = interrupt(
        {
            "kind": "approve",
            "candidate_id": best.candidate.id,
            "speedup": best.speedup,
            "summary": best.correctness.summary() if best.correctness else "",
        }
    )
    return str(answer).strip().lower() in ("y", "yes", "approve", "ok", "true", "1", "")


def _better(best: Record, state: State) -> bool:
    """``rank``'s first is an improvement on the best so far: that one is no longer correct, or
    the new one passed verify where it did not, or is faster by more than noise (where neither is
    timed: the simulator's estimate is lower by more than 1%)."""
    prev = state.records.get(state.best_id or "")
    if prev is None:
        return True
    prev = Record.model_validate(prev)
    order = {True: 0, None: 1, False: 2}
    if not prev.correct or order[best.passed_verify] < order[prev.passed_verify]:
        return True
    if best.speedup is None and prev.speedup is None and best.estimated_us is not None:
        return prev.estimated_us is None or best.estimated_us < prev.estimated_us * 0.99
    return (best.speedup or 0.0) > (prev.speedup or 0.0) * 1.01


def after_assess(state: State) -> str:
    if state.stop_reason:
        return "finalize"
    return "select" if state.search == "tree" and state.cycle is None else "reason"


def select(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Tree search: start a cycle on the frontier idea with the best rating, or ask for ideas."""
    ctx = _ctx(runtime)
    plan = Plan.model_validate(state.plan)
    frontier = plan.frontier(ctx.max_difficulty)
    if not frontier:
        return {
            "messages": [
                HumanMessage(
                    f"Tree search: no open idea rated at most {ctx.max_difficulty:g} difficult. "
                    f"Add ideas with update_plan "
                    f"(expected_gain, difficulty, confidence, under the idea they refine); the "
                    f"best rated is tried next, "
                    f"or finish."
                )
            ]
        }
    node = plan.select(frontier[0].id)
    number = len(state.cycles) + 1
    return {
        "plan": plan.model_dump(),
        "cycle": {
            "node": node.id,
            "number": number,
            "since": 0,
            "improved": False,
            "start": state.iterations + 1,  # the iteration its first candidate is compiled at
        },
        "messages": [
            HumanMessage(
                f'Cycle {number}: work on {node.id} "{node.idea}" (score {node.score:.2f}). Write, '
                f"fix and improve "
                f"candidates for it; the cycle ends after {ctx.stagnation} checked candidates "
                f"without improvement."
            )
        ],
    }


def _end_cycle(
    state: State, ctx: RunConfig, update: dict[str, Any], best: Record | None, last: bool
) -> None:
    """Tree search: count the cycle's checked candidates; past the stagnation window (or when the
    run stops: ``last``), attach the measured outcome to its idea (done if it improved the best,
    else failed)."""
    cycle = dict(state.cycle or {})
    if not cycle:
        return
    improved = update.get("since_improvement") == 0 and "best_id" in update
    cycle["improved"] = cycle["improved"] or improved
    cycle["since"] = 0 if improved else cycle["since"] + update["evaluated"] - state.evaluated
    plan = Plan.model_validate(update.get("plan", state.plan))
    node = plan.get(cycle["node"])
    if cycle["since"] < ctx.stagnation and node.status == "active" and not last:
        update["cycle"] = cycle
        return
    speed = f", {best.speedup:.2f}x native" if best is not None and best.speedup is not None else ""
    outcome = (
        f"improved the best to {best.candidate.id}{speed}"
        if cycle["improved"] and best is not None
        else f"no improvement in {cycle['since']} candidates"
    )
    for cid, r in state.records.items():  # the candidates of the cycle were tried under its idea
        if r.get("iteration", 0) >= cycle.get("start", 0):
            plan.credit(node.id, cid)
    if node.status == "active":
        plan.measured(node.id, cycle["improved"], outcome)
    update.update(
        plan=plan.model_dump(),
        cycle=None,
        cycles=[
            *state.cycles,
            {
                "node": node.id,
                "idea": node.idea,
                "improved": cycle["improved"],
                "outcome": outcome,
                "iteration": state.iterations,
            },
        ],
    )


def finalize(state: State, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    t0 = time.monotonic()
    ctx = _ctx(runtime)
    chosen = (state.finish or {}).get("candidate_id")
    final = verify_final(
        session_of(state, ctx),
        chosen,
        extra_seeds=ctx.extra_seeds,
        on_progress=runtime.stream_writer,  # heard where the graph is streamed with "custom"
    )
    return {"final": final, "elapsed": _elapsed(state, t0)}


def _artifact(out) -> dict:
    """A tool's outcome as data for policies: its data, whether it failed, and why in its words."""
    data = out.data.model_dump(mode="json")
    return {**data, "error": out.error, **({"why": out.text} if out.error else {})}
