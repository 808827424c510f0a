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
        return render(
            "system",
            target="NVIDIA GPUs",
            api="mx.fast.cuda_kernel",
            api_rules=template("api_cuda"),
        )
    return render(
        "system",
        target="Apple silicon GPUs",
        api="mx.fast.metal_kernel",
        api_rules=template("api_msl"),
    )


def task_prompt(task, backend, *, target: float | None, budget: str) -> str:
    """The first message of a port: the task, its contract, the target where there is a baseline
    to time against, and the budget."""
    target_line = (
        f"Target: {target or task.target_speedup}x the native baseline ({task.baselines.native}).\n"
        if task.baselines and backend.timing
        else ""
    )
    return render(
        "task",
        kernel=task.kernel,
        task=task.name,
        description=task.description,
        folder=task.folder,
        backend=backend.name,
        inputs=", ".join(f"{t.name} {t.dtype}{t.shape}" for t in task.inputs),
        params=", ".join(f"{p.name}: {p.type} = {p.default}" for p in task.params) or "none",
        outputs=", ".join(f"{t.name} {t.dtype}{t.shape}" for t in task.outputs),
        dtypes=", ".join(task.dtypes),
        cases="; ".join(task.case_label(c) for c in task.cases.visible),
        target=target_line,
        budget=budget + ("" if backend.timing else " (a simulator: correctness only, no timing)"),
    )
