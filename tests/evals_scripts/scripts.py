"""Scripted "models" of known behaviour for eval tests and the suite benchmark, generated from
each task's expert port (never committed copies, so they follow the ports).

- expert/<task>.json: read the source, compile the expert port, check it, finish.
- buggy/<task>.json: read the source, compile a kernel with a syntax error, then one that returns
  before writing its outputs, check that one, finish.
- looper.json: reads the source forever (until the iteration budget ends).
- clumsy.json: only calls unknown tools, with invalid or malformed arguments, or on unknown ids.

Every turn reports fixed token usage (USAGE), so token and cost metrics are exact.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlxport.spec import KernelCandidate
from mlxport.tasks import expert_ports, load_task

USAGE = {"input_tokens": 1000, "output_tokens": 100}
EXPERT_TURNS = 4
BUGGY_TURNS = 5


def turn(tool: str, **args) -> dict:
    return {"tool_calls": [{"name": tool, "args": args}], "usage": USAGE}


def compile_turn(candidate: KernelCandidate) -> dict:
    fields = candidate.model_dump(mode="json", exclude_defaults=True)
    fields.pop("language", None)
    return turn("compile_kernel", **fields)


def expert_script(task: str) -> list[dict]:
    port = expert_ports(load_task(task))["msl"]
    return [
        turn("read_cuda_source"),
        compile_turn(port),
        turn("run_correctness", candidate_id=port.id),
        turn("finish", summary="the expert port"),
    ]


def buggy_kernels(task: str) -> tuple[KernelCandidate, KernelCandidate]:
    """(does not compile, compiles but writes nothing)."""
    port = expert_ports(load_task(task))["msl"]
    broken = port.model_copy(update={"source": port.source + "\nthis is not Metal;\n"})
    wrong = port.model_copy(update={"source": "return;  // forgot the work\n" + port.source})
    return broken, wrong


def buggy_script(task: str) -> list[dict]:
    broken, wrong = buggy_kernels(task)
    return [
        turn("read_cuda_source"),
        compile_turn(broken),
        compile_turn(wrong),
        turn("run_correctness", candidate_id=wrong.id),
        turn("finish", summary="done"),
    ]


LOOPER = {"messages": [turn("read_cuda_source")], "repeat_last": True}
CLUMSY = {
    "messages": [
        turn("port_the_kernel", kernel="all"),
        turn("compile_kernel", grid="not a list"),
        {"raw_tool_calls": [{"name": "compile_kernel", "args": '{"name": "x"'}], "usage": USAGE},
        turn("run_correctness", candidate_id="deadbeef"),
    ],
    "repeat_last": True,
}


def write_scripts(dest: Path, tasks: list[str]) -> dict[str, str]:
    """Write the four scripted models under ``dest``; return name -> model spec."""
    for name, make in (("expert", expert_script), ("buggy", buggy_script)):
        (dest / name).mkdir(parents=True, exist_ok=True)
        for task in tasks:
            (dest / name / f"{task}.json").write_text(json.dumps(make(task), indent=1))
    (dest / "looper.json").write_text(json.dumps(LOOPER))
    (dest / "clumsy.json").write_text(json.dumps(CLUMSY))
    return {
        "expert": f"scripted:{dest / 'expert'}",
        "buggy": f"scripted:{dest / 'buggy'}",
        "looper": f"scripted:{dest / 'looper.json'}",
        "clumsy": f"scripted:{dest / 'clumsy.json'}",
    }
