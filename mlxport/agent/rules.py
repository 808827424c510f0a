"""The ``rules`` policy: a deterministic, non-LLM baseline behind the chat-model interface.

It drives the same tools an LLM would, in a fixed order: read the source, query the knowledge
base, plan, compile the rule-based translation, check it, benchmark it, then, where the backend
can time them, search its tuning variants, each on top of the fastest so far
(``translate.variants.Search``), and finish. On the simulator the search ranks them by the
benchmark's ESTIMATE for the session's chip (what each did at the bench case, counted), said so
in what it writes; where there is none either, it finishes after the translation. It works
offline and is the default model; every report labels it a non-LLM baseline.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class RulesPolicy(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "rules"

    def bind_tools(self, tools, **kwargs) -> RulesPolicy:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs
    ) -> ChatResult:
        step = len([m for m in messages if isinstance(m, AIMessage)])
        content, calls = decide(messages)
        calls = [
            {"name": name, "args": args, "id": f"rules_{step}_{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(calls)
        ]
        message = AIMessage(
            content,
            tool_calls=calls,
            usage_metadata={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


Call = tuple[str, dict[str, Any]]  # a tool's name and arguments


class Step(NamedTuple):
    """One answered tool call: its name, arguments and outcome (the tool's data, never its text)."""

    tool: str
    args: dict[str, Any]
    outcome: dict[str, Any]


def _history(messages: list[BaseMessage]) -> list[Step]:
    """Every tool call answered so far, with the outcome its tool message carries as an artifact."""
    outcomes = {m.tool_call_id: m.artifact or {} for m in messages if isinstance(m, ToolMessage)}
    return [
        Step(c["name"], c["args"], outcomes[c["id"]])
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"] in outcomes
    ]


def decide(messages: list[BaseMessage]) -> tuple[str, list[Call]]:
    """What to say and the tool calls of the next turn."""
    done = _history(messages)
    names = [d.tool for d in done]
    if "read_cuda_source" not in names:
        return "Reading the CUDA source.", [("read_cuda_source", {})]
    if "query_hardware_kb" not in names:
        return "Checking the CUDA-to-Metal mapping.", [
            (
                "query_hardware_kb",
                {"query": "CUDA to Metal mapping of thread indices, shared memory, barriers"},
            )
        ]
    if "update_plan" not in names:
        return "Planning.", [
            (
                "update_plan",
                {
                    "action": "add",
                    "idea": "rule-based translation of the CUDA kernel",
                    "rationale": "a faithful port first; tune the launch after",
                    "expected_gain": "correctness",
                },
            )
        ]
    if names.count("update_plan") == 1:
        return "", [("update_plan", {"action": "select", "node_id": "p1"})]
    source = next(
        d.outcome for d in done if d.tool == "read_cuda_source"
    )  # the task folder and language
    if "compile_kernel" not in names:
        return _translated_compile(source["task_dir"], source["language"])
    last = done[-1]
    cid = last.outcome.get("candidate_id")
    tried = names.count("compile_kernel") - 1  # variants compiled so far
    if last.tool == "compile_kernel" and last.outcome.get("ok"):
        return "", [("run_correctness", {"candidate_id": cid})]
    if last.tool == "run_correctness" and last.outcome.get("ok"):
        return "", [("benchmark", {"candidate_id": cid})]
    if (
        last.tool == "benchmark"
        and not tried
        and not (last.outcome.get("timed") or last.outcome.get("error"))
        and _speed(last.outcome) is None
    ):
        return _finish("verified on a backend without timing or an estimate; nothing to tune")
    if last.tool in ("compile_kernel", "run_correctness") and not tried:
        why = last.outcome.get("why")
        return _finish(
            "the translated kernel did not compile" + (f": {why}" if why else "")
            if last.tool == "compile_kernel"
            else "the translation is not correct"
        )
    # A variant that failed is dropped; a timed one stands for the final pick.
    return _next_variant(source["task_dir"], source["language"], done) or _finish(
        "tried the translation and its tuning variants"
    )


def _translated_compile(task_dir: str, language: str) -> tuple[str, list[Call]]:
    from mlxport.tools.session import cached_task
    from mlxport.translate.translator import Untranslatable, translate_task

    try:
        translation = translate_task(cached_task(task_dir), language)
    except Untranslatable as e:
        return f"The rule-based translator cannot port this kernel: {e}", [
            ("finish", {"summary": str(e)})
        ]
    notes = "; ".join(translation.notes[:6])
    return f"Compiling the rule-based translation. {notes}", [
        ("compile_kernel", _fields(translation))
    ]


def _fields(translation) -> dict[str, Any]:
    fields = translation.candidate.model_dump(mode="json", exclude_defaults=True)
    fields.pop("language", None)
    return fields


def _next_variant(task_dir: str, language: str, done: list[Step]) -> tuple[str, list[Call]] | None:
    """The search's next tuning variant (on top of the fastest so far), compiled, checked and timed
    in one turn, so the default budget reaches several: a check that fails leaves the timing an
    error and the variant out of the pick. The search is replayed from the history, so a resumed
    run goes on where it stopped."""
    from mlxport.tools.session import cached_task

    compiles = [_compiled_id(d, language) for d in done if d.tool == "compile_kernel"]
    benched = [d for d in done if d.tool == "benchmark"]
    timed = {d.args.get("candidate_id"): _speed(d.outcome) for d in benched}
    by = (
        " (ranked by the simulator's ESTIMATE, not a timing)"
        if any(d.outcome.get("estimated_us") is not None for d in benched)
        else ""
    )
    search = _search(task_dir, language, cached_task(task_dir).source_text())
    times: dict[str, float | None] = {}
    while (variant := search.next(times, base=timed.get(compiles[0]))) is not None:
        label, translation = variant
        cid = translation.candidate.id
        if cid not in compiles[1:]:
            return f"Trying the translation with {label}{by}.", [
                ("compile_kernel", _fields(translation)),
                ("run_correctness", {"candidate_id": cid}),
                ("benchmark", {"candidate_id": cid}),
            ]
        times[label] = timed.get(cid)
    return None


def _speed(outcome: dict[str, Any]) -> float | None:
    """What the search ranks a benchmarked candidate by: its time where the backend times, else
    the simulator's estimate (microseconds either way; None: neither)."""
    return outcome.get("us") if outcome.get("timed") else outcome.get("estimated_us")


def _compiled_id(step: Step, language: str) -> str:
    from mlxport.spec import KernelCandidate

    try:
        return (
            step.outcome.get("candidate_id")
            or KernelCandidate.model_validate({"language": language, **step.args}).id
        )
    except ValueError:
        return ""


@cache
def _search(task_dir: str, language: str, source: str):
    from mlxport.tools.session import cached_task
    from mlxport.translate.tuning.variants import Search

    return Search(cached_task(task_dir), language)


def _finish(why: str) -> tuple[str, list[Call]]:
    return f"Finishing: {why}.", [
        ("finish", {"summary": f"rules policy (non-LLM baseline): {why}"})
    ]
