"""Prompt templates (text files beside this module) and their rendering."""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).parent


@cache
def template(name: str) -> str:
    return (HERE / f"{name}.md").read_text()


def render(name: str, **values: object) -> str:
    return template(name).format(**values).strip()


def system_prompt(language: str) -> str:
    if language == "cuda":
        return render("system", target="NVIDIA GPUs", api="mx.fast.cuda_kernel", api_rules=template("api_cuda"))
    return render("system", target="Apple silicon GPUs", api="mx.fast.metal_kernel", api_rules=template("api_msl"))
