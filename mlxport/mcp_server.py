"""An MCP server over stdio exposing mlxport's tools, so any MCP client can drive a port.

Thin: every tool goes through ``mlxport.tools.handlers.run_tool`` (the same implementation the
agent calls) or ``run_port``. Candidates compiled through the server are remembered per (task,
backend) for the server's lifetime, so ``check`` and ``benchmark`` take the id ``compile_kernel``
returned, as in an agent session. Run it with ``mlxport mcp`` or ``python -m mlxport.mcp_server``;
see docs/mcp.md.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

from mlxport.errors import UserError
from mlxport.redaction import redact
from mlxport.tools import schemas
from mlxport.tools.handlers import run_tool
from mlxport.tools.session import Session, open_session

INSTRUCTIONS = """mlxport ports CUDA kernels to MLX custom kernels (Metal, or CUDA through MLX) and
verifies them against a reference. A task is a suite name (list_tasks) or a task folder. Typical
use: read_cuda_source, query_hardware_kb, compile_kernel, check, benchmark; or port for a whole
unattended port. Backends: auto, metal, cuda, sim (the simulator checks correctness only)."""

_sessions: dict[tuple[str, str], Session] = {}
_lock = threading.Lock()


def _mcp():
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as e:
        raise UserError("the MCP server needs the mcp package (version 2): pip install 'mlxport[mcp]'") from e
    return MCPServer, ToolError


def session(task: str, backend: str = "auto") -> Session:
    """The server's session for a task on a backend, created on first use."""
    with _lock:
        key = (task, backend)
        if key not in _sessions:
            _sessions[key] = open_session(task, backend)
        return _sessions[key]


def run(s: Session, name: str, args: dict[str, Any]):
    """One tool call; keeps what it changed in the session, as the agent's tools node does."""
    out = run_tool(s, name, args)
    if out.error:
        raise UserError(out.text.removeprefix("error: "))
    s.apply(out)
    return out


def call(s: Session, name: str, args: dict[str, Any]) -> str:
    return run(s, name, args).text


def _compile(s: Session, fields: dict[str, Any]) -> tuple[str, str]:
    """Compile and return (candidate id, tool text)."""
    out = run(s, "compile_kernel", fields)
    return next(iter(out.records)), out.text


def _candidate_fields(candidate_toml: str | None, candidate: dict[str, Any] | None) -> dict[str, Any]:
    if candidate_toml:
        try:
            fields = tomllib.loads(candidate_toml)
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"candidate_toml is not valid TOML ({e}): fix the syntax") from e
    else:
        fields = dict(candidate or {})
    fields.pop("language", None)  # the backend decides the language
    return fields


def _candidate_id(s: Session, candidate_id: str | None, candidate_toml: str | None) -> tuple[str, list[str]]:
    if candidate_id:
        return candidate_id, []
    if not candidate_toml:
        raise UserError("pass candidate_id (from compile_kernel) or candidate_toml")
    cid, text = _compile(s, _candidate_fields(candidate_toml, None))
    return cid, [text]


# ---------------------------------------------------------------- tools


def list_tasks() -> list[dict[str, str]]:
    """The built-in task suite: name and description of each task."""
    from mlxport.tasks import load_task, suite_names

    return [{"name": n, "description": load_task(n).description} for n in suite_names()]


def read_cuda_source(path: str, kernel: str | None = None, show_source: bool = True) -> str:
    """Read CUDA source: a structured summary (kernels, parameters read/written, shared memory,
    intrinsics, launch sites, how each feature maps to Metal), then the numbered source. `path` is a
    task name or folder, or any .cu file."""
    file = Path(path)
    if file.suffix == ".cu" and file.is_file() and not (file.parent / "task.toml").is_file():
        return _read_file(file, kernel, show_source)
    task = str(file.parent) if file.suffix == ".cu" else path
    return call(session(task, "sim"), "read_cuda_source", {"kernel": kernel, "show_source": show_source})


def _read_file(file: Path, kernel: str | None, show_source: bool) -> str:
    from mlxport.translate.reader import CudaReadError, read_cuda, summary

    text = file.read_text(errors="replace")
    try:
        cf = read_cuda(text, name=file.name)
    except CudaReadError as e:
        raise UserError(str(e)) from e
    names = [k.name for k in cf.kernels]
    if kernel and kernel not in names:
        raise UserError(f"no kernel {kernel!r} in {file}; kernels: {', '.join(names)}")
    parts = [summary(cf)]
    if show_source:
        parts.append("\n".join(f"{i + 1:4d} {line}" for i, line in enumerate(text.splitlines()[:600])))
    return "\n\n".join(parts)


def query_hardware_kb(query: str, chip: str | None = None) -> str:
    return call(_KB, "query_hardware_kb", {"query": query, "chip": chip})


def compile_kernel(task: str, candidate_toml: str | None = None, candidate: dict[str, Any] | None = None,
                   backend: str = "auto") -> str:
    """Compile a kernel candidate for a task and register it; returns its id and the compiler's
    verdict. Give the candidate as TOML text (the format of a task's ports/msl.toml) or as fields
    (name, source, input_names, output_names, output_shapes, output_dtypes, grid, threadgroup, ...;
    `based_on` an earlier id plus the fields you change). `grid` counts threads."""
    return _compile(session(task, backend), _candidate_fields(candidate_toml, candidate))[1]


def check(task: str, candidate_id: str | None = None, candidate_toml: str | None = None, backend: str = "auto") -> str:
    """Check a candidate against the task's reference on every visible shape case and dtype
    (tolerances from the task). Pass the id from compile_kernel, or candidate_toml to compile and
    check in one call."""
    s = session(task, backend)
    cid, texts = _candidate_id(s, candidate_id, candidate_toml)
    return "\n".join([*texts, call(s, "run_correctness", {"candidate_id": cid})])


def benchmark(task: str, candidate_id: str | None = None, candidate_toml: str | None = None,
              backend: str = "auto") -> str:
    """Time a correct candidate against the task's baselines (native MLX op, naive path). The
    simulator has no timing: there it returns a labelled roofline estimate."""
    s = session(task, backend)
    cid, texts = _candidate_id(s, candidate_id, candidate_toml)
    if not s.record(cid).correct:
        texts.append(call(s, "run_correctness", {"candidate_id": cid}))
    return "\n".join([*texts, call(s, "benchmark", {"candidate_id": cid})])


def port(task: str, model: str = "rules", backend: str = "auto", budget: dict[str, Any] | None = None,
         out: str = "mlxport-out", base_url: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Port a whole task unattended with the agent graph (model: rules, the non-LLM baseline, or
    provider:model) under a budget (RunConfig fields such as max_iterations, patience, max_tokens,
    max_cost, max_wall_seconds); writes kernel.py, report.md and run.json to OUT/<task>/ and returns
    the run's summary."""
    from mlxport.agent.port import run_port
    from mlxport.agent.state import RunConfig
    from mlxport.batch import summary_row
    from mlxport.tasks import load_task

    try:
        config = RunConfig(model=model, backend=backend, base_url=base_url, seed=seed, **(budget or {}))
    except TypeError as e:
        raise UserError(f"bad budget ({e}): use RunConfig fields such as max_iterations, patience, max_cost") from e
    run = run_port(load_task(task), config, Path(out))
    row = summary_row(run["task"], "done", run)
    return {**row, "session": run["session"], "candidate_id": run["result"]["candidate_id"],
            "backend": run["result"]["backend"], "non_llm_baseline": run["non_llm_baseline"],
            "folder": str(Path(out).resolve() / run["task"])}


class _NoTask:
    name = "none"


# The knowledge base needs neither a task nor a device.
_KB = Session(task=None, backend=_NoTask())  # type: ignore[arg-type]

TOOLS = {"list_tasks": (list_tasks, None), "read_cuda_source": (read_cuda_source, None),
         "query_hardware_kb": (query_hardware_kb, schemas.query_hardware_kb.__doc__),
         "compile_kernel": (compile_kernel, None), "check": (check, None), "benchmark": (benchmark, None),
         "port": (port, None)}


def build_server():
    MCPServer, ToolError = _mcp()
    server = MCPServer("mlxport", instructions=INSTRUCTIONS, log_level="WARNING")
    for name, (fn, doc) in TOOLS.items():
        server.add_tool(_as_tool_errors(fn, ToolError), name=name, description=" ".join((doc or fn.__doc__).split()))
    return server


def _as_tool_errors(fn, tool_error):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return redact(fn(*args, **kwargs))
        except UserError as e:  # a call the client can fix: an error result, never a crash
            raise tool_error(redact(str(e))) from e

    return wrapper


def serve_mcp() -> None:
    """Serve over stdio until the client closes the stream."""
    server = build_server()
    _protect_stdout()
    server.run("stdio")


def _protect_stdout() -> None:
    """Only protocol messages may reach stdout: anything else (a worker process, a stray print)
    writing to file descriptor 1 lands on stderr instead."""
    protocol = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(protocol, "w", buffering=1)


if __name__ == "__main__":
    try:
        serve_mcp()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
