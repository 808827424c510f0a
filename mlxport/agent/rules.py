"""The ``rules`` policy: a deterministic, non-LLM baseline behind the chat-model interface.

It drives the same tools an LLM would, in a fixed order: read the source, query the knowledge
base, plan, compile the rule-based translation, check it, benchmark it, try a few threadgroup
sizes where the backend can time them, finish. It works offline and is the default model; every
report labels it a non-LLM baseline.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

THREADGROUP_SIZES = (64, 128, 512)
# Kernels using only these features compute the same thing at any block size.
FREE_BLOCK_FEATURES = {"builtin", "math", "memory", "vector", "type", "half", "attribute", "pattern", "bits", "debug"}
_ID = re.compile(r"^candidate (\w+):")


class RulesPolicy(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "rules"

    def bind_tools(self, tools, **kwargs) -> RulesPolicy:
        return self

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs) -> ChatResult:
        step = len([m for m in messages if isinstance(m, AIMessage)])
        content, call = decide(messages)
        calls = [{"name": call[0], "args": call[1], "id": f"rules_{step}", "type": "tool_call"}] if call else []
        message = AIMessage(content, tool_calls=calls,
                            usage_metadata={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
        return ChatResult(generations=[ChatGeneration(message=message)])


def _history(messages: list[BaseMessage]) -> list[tuple[str, dict[str, Any], str]]:
    """(tool name, args, result text) for every tool call answered so far."""
    results = {m.tool_call_id: str(m.content) for m in messages if isinstance(m, ToolMessage)}
    done = []
    for m in messages:
        if isinstance(m, AIMessage):
            for c in m.tool_calls:
                if c["id"] in results:
                    done.append((c["name"], c["args"], results[c["id"]]))
    return done


def _task_line(messages: list[BaseMessage], key: str) -> str:
    for m in messages:
        if isinstance(m, HumanMessage) and f"\n{key}: " in f"\n{m.content}":
            return re.search(rf"^{key}: (.*)$", str(m.content), re.M).group(1).strip()
    return ""


def decide(messages: list[BaseMessage]) -> tuple[str, tuple[str, dict[str, Any]] | None]:
    done = _history(messages)
    names = [d[0] for d in done]
    if "read_cuda_source" not in names:
        return "Reading the CUDA source.", ("read_cuda_source", {})
    if "query_hardware_kb" not in names:
        return "Checking the CUDA-to-Metal mapping.", ("query_hardware_kb", {"query": "CUDA to Metal mapping of thread "
                                                                                     "indices, shared memory, barriers"})
    if "update_plan" not in names:
        return "Planning.", ("update_plan", {"action": "add", "idea": "rule-based translation of the CUDA kernel",
                                             "rationale": "a faithful port first; tune the launch after",
                                             "expected_gain": "correctness"})
    if names.count("update_plan") == 1:
        return "", ("update_plan", {"action": "select", "node_id": "p1"})
    compiles = [d for d in done if d[0] == "compile_kernel"]
    if not compiles:
        return _translated_compile(messages)
    last_name, last_args, last_text = done[-1]
    cid = _ID.match(last_text).group(1) if _ID.match(last_text) else None
    if last_name == "compile_kernel":
        if cid and "compiled on" in last_text:
            return "", ("run_correctness", {"candidate_id": cid})
        return _finish(done, "the translated kernel did not compile")
    if last_name == "run_correctness":
        if cid and ": PASS" in last_text:
            return "", ("benchmark", {"candidate_id": cid})
        return _finish(done, "the translation is not correct")
    if last_name == "benchmark":
        if "ESTIMATE" in last_text:
            return _finish(done, "verified on a backend without timing; nothing to tune")
        return _next_variant(done, messages) or _finish(done, "tried the translation and a few block sizes")
    return _finish(done, "done")


def _translated_compile(messages: list[BaseMessage]) -> tuple[str, tuple[str, dict[str, Any]] | None]:
    from mlxport.suite import load_task
    from mlxport.translate.translator import Untranslatable, translate_task

    task = load_task(_task_line(messages, "Task folder"))
    target = "cuda" if _task_line(messages, "Backend") == "cuda" else "msl"
    try:
        translation = translate_task(task, target)
    except Untranslatable as e:
        return f"The rule-based translator cannot port this kernel: {e}", ("finish", {"summary": str(e)})
    fields = translation.candidate.model_dump(mode="json", exclude_defaults=True)
    fields.pop("language", None)
    notes = "; ".join(translation.notes[:6])
    return f"Compiling the rule-based translation. {notes}", ("compile_kernel", fields)


def _next_variant(done, messages: list[BaseMessage]) -> tuple[str, tuple[str, dict[str, Any]]] | None:
    """The next block size to try, where the backend times kernels and the block size is free."""
    if not any(d[0] == "benchmark" and "ESTIMATE" not in d[2] for d in done):
        return None
    from mlxport.suite import load_task

    task = load_task(_task_line(messages, "Task folder"))
    target = "cuda" if _task_line(messages, "Backend") == "cuda" else "msl"
    tried = len([d for d in done if d[0] == "compile_kernel"]) - 1
    variants = block_size_variants(task, target)
    if tried >= len(variants):
        return None
    size, translation = variants[tried]
    fields = translation.candidate.model_dump(mode="json", exclude_defaults=True)
    fields.pop("language", None)
    return f"Trying block size {size}.", ("compile_kernel", fields)


def block_size_variants(task, target: str) -> list[tuple[int, Any]]:
    """Re-translations with another block size, for kernels where the block size is a free
    parameter: launched with a #define'd block, no shared memory, no warp-level code."""
    from mlxport.translate.reader import read_cuda
    from mlxport.translate.translator import Untranslatable, translate

    source = task.source_text()
    cf = read_cuda(source, name=task.source)
    kernel = next((k for k in cf.kernels if k.name == task.kernel), None)
    launch = next((site for site in cf.launches if site.kernel == task.kernel), None)
    if kernel is None or launch is None or kernel.shared or launch.block not in cf.defines:
        return []
    if any(f.category not in FREE_BLOCK_FEATURES for f in kernel.features):
        return []
    out = []
    for size in THREADGROUP_SIZES:
        if str(size) == cf.defines[launch.block].strip():
            continue
        changed = re.sub(rf"(#define\s+{launch.block}\s+)\S+", rf"\g<1>{size}", source, count=1)
        try:
            out.append((size, translate(changed, kernel=task.kernel, target=target, task=task)))
        except Untranslatable:
            continue
    return out


def _finish(done, why: str) -> tuple[str, tuple[str, dict[str, Any]]]:
    return f"Finishing: {why}.", ("finish", {"summary": f"rules policy (non-LLM baseline): {why}"})
