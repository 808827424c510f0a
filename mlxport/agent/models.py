"""Loading the model that drives the graph: ``rules``, ``scripted:FILE`` or ``provider:model``.

A model that cannot be loaded is a user error with the fix in the message; there is never a
silent fallback to another model, so an eval row is always the model it names.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from mlxport.errors import UserError

# provider -> (package, extra, API key variables: any one suffices)
PROVIDERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openai": ("langchain_openai", "openai", ("OPENAI_API_KEY",)),
    "anthropic": ("langchain_anthropic", "anthropic", ("ANTHROPIC_API_KEY",)),
    "google_genai": ("langchain_google_genai", "google", ("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    "ollama": ("langchain_ollama", "ollama", ()),
}

# USD per million tokens (input, output), for the cost budget and eval reports. Unknown models
# cost 0 and are reported as such.
PRICES: dict[str, tuple[float, float]] = {
    "openai:gpt-4.1": (2.0, 8.0),
    "openai:gpt-4.1-mini": (0.4, 1.6),
    "openai:gpt-4o": (2.5, 10.0),
    "openai:gpt-4o-mini": (0.15, 0.6),
    "openai:o3": (2.0, 8.0),
    "openai:o4-mini": (1.1, 4.4),
    "anthropic:claude-sonnet-4-5": (3.0, 15.0),
    "anthropic:claude-opus-4-1": (15.0, 75.0),
    "anthropic:claude-haiku-4-5": (1.0, 5.0),
    "google_genai:gemini-2.5-pro": (1.25, 10.0),
    "google_genai:gemini-2.5-flash": (0.3, 2.5),
}

# Context windows in tokens; the default suits most current chat models.
WINDOWS: dict[str, int] = {"openai:gpt-4o": 128_000, "openai:gpt-4o-mini": 128_000,
                           "anthropic:claude-sonnet-4-5": 200_000, "google_genai:gemini-2.5-pro": 1_000_000}
DEFAULT_WINDOW = 128_000


def cost(model: str, input_tokens: int, output_tokens: int, prices: tuple[float, float] | None = None) -> float:
    p_in, p_out = prices or PRICES.get(model, (0.0, 0.0))
    return (input_tokens * p_in + output_tokens * p_out) / 1e6


def window(model: str) -> int:
    if model == "rules" or model.startswith("scripted:"):
        return 10**9
    return WINDOWS.get(model, DEFAULT_WINDOW)


def check_model_spec(spec: str, base_url: str | None = None) -> None:
    """Fail fast, before any work, on a model that cannot be used."""
    if spec == "rules":
        return
    if spec.startswith("scripted:"):
        path = Path(spec.removeprefix("scripted:"))
        if not path.is_file():
            raise UserError(f"scripted model file {path} does not exist: pass scripted:PATH to a JSON script")
        return
    provider, _, name = spec.partition(":")
    if not name:
        raise UserError(f"model {spec!r} must look like provider:model (e.g. openai:gpt-4.1-mini), rules or "
                        f"scripted:FILE")
    if provider not in PROVIDERS:
        raise UserError(f"unknown provider {provider!r}: use one of {', '.join(PROVIDERS)}, or openai with "
                        f"--base-url for a local OpenAI-compatible server")
    package, extra, keys = PROVIDERS[provider]
    try:
        importlib.import_module(package)
    except ImportError as e:
        raise UserError(f"provider {provider} needs {package.replace('_', '-')}: pip install 'mlxport[{extra}]'") from e
    if keys and not base_url and not any(os.environ.get(k) for k in keys):
        raise UserError(f"no API key for {provider}: set {' or '.join(keys)} (or use --base-url for a local server)")


def load_model(spec: str, base_url: str | None = None, *, max_retries: int = 4, timeout: float = 300.0) -> BaseChatModel:
    check_model_spec(spec, base_url)
    if spec == "rules":
        from mlxport.agent.rules import RulesPolicy

        return RulesPolicy()
    if spec.startswith("scripted:"):
        return ScriptedModel.from_file(Path(spec.removeprefix("scripted:")))
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
    (possibly malformed) JSON text.
    """

    script: list[dict[str, Any]]
    repeat_last: bool = False
    _calls: int = PrivateAttr(default=0)

    @classmethod
    def from_file(cls, path: Path) -> ScriptedModel:
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"scripted model file {path} is not valid JSON ({e})") from e
        if isinstance(data, list):
            data = {"messages": data}
        return cls(script=data["messages"], repeat_last=data.get("repeat_last", False))

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs) -> ChatResult:
        # The position in the script is the number of AI turns already in the conversation, so a
        # resumed session replays from where it stopped.
        index = sum(isinstance(m, AIMessage) for m in messages)
        if index >= len(self.script):
            if not self.repeat_last or not self.script:
                return _result(AIMessage("(script exhausted)"))
            index = len(self.script) - 1
        return _result(script_message(self.script[index], index))


def script_message(entry: dict[str, Any], index: int) -> AIMessage:
    calls = [{"name": c["name"], "args": c.get("args", {}), "id": c.get("id", f"call_{index}_{i}"),
              "type": "tool_call"} for i, c in enumerate(entry.get("tool_calls", []))]
    invalid = [{"name": c.get("name"), "args": c.get("args"), "id": c.get("id", f"bad_{index}_{i}"),
                "error": "malformed JSON arguments", "type": "invalid_tool_call"}
               for i, c in enumerate(entry.get("raw_tool_calls", []))]
    usage = entry.get("usage", {"input_tokens": 0, "output_tokens": 0})
    usage = {**usage, "total_tokens": usage.get("input_tokens", 0) + usage.get("output_tokens", 0)}
    return AIMessage(entry.get("content", ""), tool_calls=calls, invalid_tool_calls=invalid, usage_metadata=usage)


def _result(message: AIMessage) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=message)])
