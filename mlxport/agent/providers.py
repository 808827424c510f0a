"""What is known about models without loading any: providers, install hints, API keys, prices,
context windows. Light on purpose: the CLI checks a model spec before importing LangChain."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

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
WINDOWS: dict[str, int] = {
    "openai:gpt-4o": 128_000,
    "openai:gpt-4o-mini": 128_000,
    "anthropic:claude-sonnet-4-5": 200_000,
    "google_genai:gemini-2.5-pro": 1_000_000,
}
DEFAULT_WINDOW = 128_000


def cost(
    model: str, input_tokens: int, output_tokens: int, prices: tuple[float, float] | None = None
) -> float:
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
        if not path.exists():
            raise UserError(
                f"scripted model {path} does not exist: pass scripted:FILE.json, or scripted:DIR "
                f"holding "
                f"<task>.json files"
            )
        return
    provider, _, name = spec.partition(":")
    if not name:
        raise UserError(
            f"model {spec!r} must look like provider:model (e.g. openai:gpt-4.1-mini), rules or "
            f"scripted:FILE"
        )
    if provider not in PROVIDERS:
        raise UserError(
            f"unknown provider {provider!r}: use one of {', '.join(PROVIDERS)}, or openai with "
            f"--base-url for a local OpenAI-compatible server"
        )
    package, extra, keys = PROVIDERS[provider]
    if importlib.util.find_spec(package) is None:
        raise UserError(
            f"provider {provider} needs {package.replace('_', '-')}: pip install 'mlxport[{extra}]'"
        )
    if keys and not base_url and not any(os.environ.get(k) for k in keys):
        raise UserError(
            f"no API key for {provider}: set {' or '.join(keys)} (or use --base-url for a local "
            f"server)"
        )
