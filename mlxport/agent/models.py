"""Loading the model that drives the graph: ``rules``, ``scripted:FILE`` or ``provider:model``.

A model that cannot be loaded is a user error with the fix in the message; there is never a
silent fallback to another model, so an eval row is always the model it names.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from mlxport.agent.providers import check_model_spec
from mlxport.errors import UserError


def load_model(
    spec: str, base_url: str | None = None, *, max_retries: int = 4, timeout: float = 300.0
) -> BaseChatModel:
    check_model_spec(spec, base_url)
    if spec == "rules":
        from mlxport.agent.rules import RulesPolicy

        return RulesPolicy()
    if spec.startswith("scripted:"):
        path = Path(spec.removeprefix("scripted:"))
        return ScriptedModel.from_dir(path) if path.is_dir() else ScriptedModel.from_file(path)
    provider, _, name = spec.partition(":")
    kwargs: dict[str, Any] = {"max_retries": max_retries, "timeout": timeout}
    if provider == "openai":
        kwargs.update(use_responses_api=False, stream_usage=True)
        if base_url:
            kwargs.update(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "not-needed"))
    elif base_url:
        kwargs["base_url"] = base_url
    from langchain.chat_models import init_chat_model

    return init_chat_model(name, model_provider=provider, **kwargs)


class ScriptedModel(BaseChatModel):
    """Replays a recorded list of AI messages, one per call (tests and eval fixtures).

    The file is JSON: a list of messages, or ``{"messages": [...], "repeat_last": true}``. A message
    is ``{"content": "...", "tool_calls": [{"name": ..., "args": {...}}], "usage": {"input_tokens":
    n, "output_tokens": m}}``. ``"raw_tool_calls"`` gives tool calls whose arguments are raw
    (possibly malformed) JSON text. A folder of ``<task>.json`` files (``scripted:DIR``) scripts
    each task separately, with ``default.json`` for the rest.
    """

    script: list[dict[str, Any]] = []
    repeat_last: bool = False
    by_task: dict[str, ScriptedModel] = {}

    @classmethod
    def from_file(cls, path: Path) -> ScriptedModel:
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"scripted model file {path} is not valid JSON ({e})") from e
        if isinstance(data, list):
            data = {"messages": data}
        return cls(script=data["messages"], repeat_last=data.get("repeat_last", False))

    @classmethod
    def from_dir(cls, folder: Path) -> ScriptedModel:
        scripts = {p.stem: cls.from_file(p) for p in sorted(folder.glob("*.json"))}
        if not scripts:
            raise UserError(f"scripted model folder {folder} has no .json scripts")
        return cls(by_task=scripts)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs) -> ScriptedModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs
    ) -> ChatResult:
        if self.by_task:
            task = _task_name(messages)
            chosen = self.by_task.get(task) or self.by_task.get("default")
            if chosen is None:
                return _result(AIMessage(f"(no script for task {task!r})"))
            return chosen._generate(messages, stop, run_manager, **kwargs)
        # The position in the script is the number of AI turns already in the conversation, so a
        # resumed session replays from where it stopped.
        index = sum(isinstance(m, AIMessage) for m in messages)
        if index >= len(self.script):
            if not self.repeat_last or not self.script:
                return _result(AIMessage("(script exhausted)"))
            index = len(self.script) - 1
        return _result(script_message(self.script[index], index))


def _task_name(messages: list[BaseMessage]) -> str:
    for m in messages:
        found = re.search(r"of task `(\w+)`", str(m.content))
        if found:
            return found.group(1)
    return ""


def script_message(entry: dict[str, Any], index: int) -> AIMessage:
    calls = [
        {
            "name": c["name"],
            "args": c.get("args", {}),
            "id": c.get("id", f"call_{index}_{i}"),
            "type": "tool_call",
        }
        for i, c in enumerate(entry.get("tool_calls", []))
    ]
    invalid = [
        {
            "name": c.get("name"),
            "args": c.get("args"),
            "id": c.get("id", f"bad_{index}_{i}"),
            "error": "malformed JSON arguments",
            "type": "invalid_tool_call",
        }
        for i, c in enumerate(entry.get("raw_tool_calls", []))
    ]
    usage = entry.get("usage", {"input_tokens": 0, "output_tokens": 0})
    usage = {**usage, "total_tokens": usage.get("input_tokens", 0) + usage.get("output_tokens", 0)}
    return AIMessage(
        entry.get("content", ""), tool_calls=calls, invalid_tool_calls=invalid, usage_metadata=usage
    )


def _result(message: AIMessage) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=message)])
