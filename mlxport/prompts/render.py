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
    """The first message of a port: the task, its contract and the budget."""
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
        target_speedup=target or task.target_speedup,
        native=task.baselines.native
        if task.baselines
        else "none: the task has no MLX op to time against",
        budget=budget + ("" if backend.timing else " (a simulator: correctness only, no timing)"),
    )
