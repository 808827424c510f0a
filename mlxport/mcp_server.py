"""An MCP server over stdio: the graph's tools for any MCP client, so a client's model sits where
the graph's model does.

Every graph tool is served under its own name with the same arguments (generated from the same
pydantic schemas, ``mlxport.tools.schemas``) plus ``task`` and ``backend``, and runs through
``run_tool``, the function the graph's tools node calls; its result is the tool's text and its
typed outcome (``mlxport.tools.outcomes``) as structured content. The server adds what a client
needs around them: ``list_tasks``, ``create_task`` (a task from CUDA text or a .cu file),
``port`` (a whole port, unattended). Its instructions are the graph's system prompt for the
language of its backend; its prompt ``port_kernel`` is the graph's first message; its resources
are the knowledge base and each task's CUDA source and reference. Candidates live in one session
per resolved task folder and backend; ``finish`` verifies and writes the port as ``mlxport port``
does, and closes the session. Run it with ``mlxport mcp``; see docs/mcp.md.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from mlxport.errors import UserError
from mlxport.redaction import redact
from mlxport.tools import schemas
from mlxport.tools.handlers import TOOLS, read_cuda_text, run_tool
from mlxport.tools.outcomes import Outcome, TaskMade
from mlxport.tools.session import Output, Session, open_session

if TYPE_CHECKING:
    from mcp_types import CallToolResult

NOTES = """
Using these tools through MCP: every tool but query_hardware_kb takes `task` (a suite name from
list_tasks, a task folder, or the folder create_task made from your CUDA) and `backend`
(default: this server's, {backend}). read_cuda_source and create_task take the CUDA itself as
`source` where this server cannot see your file. Every result carries typed fields (its structured
content: `ok`, `candidate_id`, per-case verdicts, diagnostics, verifications left) besides its text.
Candidates are remembered per task and backend until finish, which verifies the best one on
held-out shapes, writes kernel.py, report.md and run.json, and closes the session; `session` lists
a session's candidates, and session(new=true) starts another.
"""
TASK_FIELD = Field(
    description="The task: a suite name (list_tasks), a task folder, or the folder create_task "
    "made."
)
BACKEND_FIELD = Field(description="auto, metal, cuda or sim; default: the server's backend.")
MAX_CUDA_CHARS = 1_000_000
SOURCE_FIELD = Field(
    description="The CUDA source text, for a file this server cannot read.",
    max_length=MAX_CUDA_CHARS,
)


@dataclass
class Served:
    """A session of the server, with the calls made in it (its transcript)."""

    session: Session
    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float = field(default_factory=time.monotonic)


class Server:
    """The sessions of one server process, keyed by resolved task folder and backend. A session
    finish closed stays, closed, until session(new=true) starts another on its task."""

    def __init__(self, backend: str = "auto"):
        from mlxport.backends import resolve

        self.backend = resolve(backend)
        self.sessions: dict[tuple[Path, str], Served] = {}
        self.names: dict[str, Path] = {}  # task names seen, for resource URIs
        self.lock = threading.Lock()

    def served(self, task: str, backend: str | None, new: bool = False) -> Served:
        from mlxport.backends import resolve
        from mlxport.tasks import find_task

        folder, name = find_task(task).resolve(), resolve(backend or self.backend)
        with self.lock:
            if new or (folder, name) not in self.sessions:
                self.sessions[(folder, name)] = Served(open_session(folder, name))
                self.names[self.sessions[(folder, name)].session.task.name] = folder
            return self.sessions[(folder, name)]

    def call(self, name: str, task: str | None, backend: str | None, args: dict[str, Any]):
        extra = {k: args.pop(k) for k in EXTRA.get(name, {}) if k in args}
        if not TOOLS[name].needs_task:
            return _result(run_tool(_KB, name, args))
        if name == "read_cuda_source" and (extra.get("source") is not None or _bare_cu(task)):
            return _result(_read_outside(task, extra.get("source"), args))
        served = self.served(_required(task, name), backend, new=extra.get("new", False))
        with served.lock:
            s = served.session
            if s.closed and name != "session":
                raise UserError(
                    f"the session on task {s.task.name} ({s.backend.name}) is closed: finish "
                    f"wrote its port to {s.closed}; call session with new=true to start another"
                )
            out = run_tool(s, name, args)
            s.apply(out)
            served.calls.append({"tool": name, "args": args, "text": out.text, "error": out.error})
            if name == "finish" and not out.error:
                return self.finish(served, out, extra.get("out", "mlxport-out"))
        return _result(out)

    def finish(self, served: Served, out: Output, out_dir: str):
        """Verify as a port's finalize does, write the port's files, and close the session."""
        from dataclasses import asdict

        from mlxport.agent.config import RunConfig
        from mlxport.agent.outputs import Ending, write_outputs
        from mlxport.agent.sessions import new_id
        from mlxport.tools.final import verify_final

        s = served.session
        config = RunConfig(model="mcp client", backend=s.backend.name)
        final = verify_final(s, out.data.candidate_id, extra_seeds=config.extra_seeds)
        folder = Path(out_dir).resolve() / s.task.name
        ending = Ending.of_calls(s, final, served.calls, time.monotonic() - served.started)
        run = write_outputs(folder, s.task, ending, asdict(config), new_id(s.task.name))
        s.closed = str(folder)
        res = run["result"]
        verdict = (
            f"{res['label']}: candidate {res['candidate_id']}"
            if res["verified"]
            else f"no verified kernel: {res.get('why_not')}"
        )
        files = (
            "kernel.py, report.md, run.json"
            if res["verified"]
            else "report.md, run.json, candidates/"
        )
        data = out.data.model_copy(
            update={
                "ok": bool(res["verified"]),
                "verified": bool(res["verified"]),
                "result": res["candidate_id"],
                "folder": str(folder),
            }
        )
        text = f"{out.text}\n{verdict}\nwrote {files} to {folder}; this session is closed"
        return _result(Output(text, data=data))


def _result(out: Output):
    """A tool's output as MCP returns it: its text, and its outcome as structured content."""
    from mcp_types import CallToolResult, TextContent

    text = out.text.removeprefix("error: ") if out.error else out.text
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=out.data.model_dump(mode="json"),
        is_error=out.error,
    )


# Flags of `mlxport tasks new` whose argument of create_task is named otherwise.
ARGUMENTS = {"case": "cases", "shape": "shapes", "include": "includes"}


def _mcp_words(text: str) -> str:
    """A message written for the command line (making a task, finding one), with the tools and
    arguments an MCP client has in place of commands and flags."""
    text = text.replace("(see `mlxport tasks list`)", "(list_tasks lists them)")
    text = text.replace("`mlxport tasks new --from`", "create_task")
    text = text.replace("an -I folder", "a folder of `includes`")
    text = re.sub(r"--case '([^']*)'", r"cases=['\1']", text)
    return re.sub(
        r"--([a-z][a-z-]*)\b",
        lambda m: f"create_task's `{ARGUMENTS.get(m[1], m[1].replace('-', '_'))}`",
        text,
    )


def _required(task: str | None, tool: str) -> str:
    if not task:
        raise UserError(
            f"{tool} needs `task`: a suite name (list_tasks), a task folder, or create_task's "
            "folder"
        )
    return task


def _bare_cu(task: str | None) -> bool:
    path = Path(task or "")
    return path.suffix == ".cu" and path.is_file() and not (path.parent / "task.toml").is_file()


def _read_outside(task: str | None, source: str | None, args: dict[str, Any]) -> Output:
    """read_cuda_source of CUDA outside any task: the client's text or a bare .cu file."""
    from mlxport.errors import read_text

    if source is not None:
        return read_cuda_text(source, "kernel.cu", args)
    return read_cuda_text(read_text(Path(task), "CUDA source"), Path(task).name, args)


class _NoTask:
    name = "none"


# The knowledge base needs neither a task nor a device.
_KB = Session(task=None, backend=_NoTask())  # type: ignore[arg-type]


# ---------------------------------------------------------------- the graph's tools


EXTRA = {
    "finish": {
        "out": (
            str,
            "mlxport-out",
            "Folder for the port's files: OUT/<task>/ gets kernel.py, report.md and run.json.",
        )
    },
    "read_cuda_source": {
        "source": (str | None, None, SOURCE_FIELD.description + " Give it in place of `task`.")
    },
    "session": {
        "new": (
            bool,
            False,
            "Start a new session on the task: after finish closed the last one, or to drop "
            "this one's candidates.",
        )
    },
}


def graph_tool(server: Server, schema: type[schemas.ToolArgs]):
    """A function with the schema's arguments, typed and described as the graph's model sees them
    (plus ``task`` and ``backend``), calling the graph's tool of that name and returning its
    outcome's fields as structured content."""
    from mcp_types import CallToolResult

    name, kw = schema.__name__, inspect.Parameter.KEYWORD_ONLY
    params = []
    if TOOLS[name].needs_task:
        optional = name == "read_cuda_source"  # which may read `source` instead
        params += [
            inspect.Parameter(
                "task",
                kw,
                default=None if optional else inspect.Parameter.empty,
                annotation=Annotated[str | None if optional else str, TASK_FIELD],
            ),
            inspect.Parameter(
                "backend", kw, default=None, annotation=Annotated[str | None, BACKEND_FIELD]
            ),
        ]
    for fname, f in schema.model_fields.items():
        params.append(
            inspect.Parameter(
                fname,
                kw,
                default=inspect.Parameter.empty if f.is_required() else f.default,
                annotation=Annotated[(f.annotation, *f.metadata, Field(description=f.description))],
            )
        )
    for fname, (kind, default, description) in EXTRA.get(name, {}).items():
        params.append(
            inspect.Parameter(
                fname,
                kw,
                default=default,
                annotation=Annotated[kind, Field(description=description)],
            )
        )

    def tool(**kwargs: Any):
        return server.call(name, kwargs.pop("task", None), kwargs.pop("backend", None), kwargs)

    tool.__name__ = name
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=Annotated[CallToolResult, TOOLS[name].outcome]
    )
    return tool


def ask_user_tool():
    """ask_user through MCP elicitation: the client puts the question to its person (and a client
    that cannot is told, as unattended runs are, that no one is here)."""
    from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.resolve import Elicit, Resolve
    from mcp_types import CallToolResult
    from pydantic import BaseModel

    from mlxport.tools.outcomes import Answered

    class Answer(BaseModel):
        answer: str = Field(description="Your answer to the model's question.")

    def ask(question, ctx):
        caps = ctx.client_capabilities
        return (
            Elicit(question, Answer) if caps is not None and caps.elicitation is not None else None
        )

    def ask_user(question, reply):
        # accepted without data: the client cannot ask its person (no one is here)
        answers = (
            None
            if isinstance(reply, AcceptedElicitation) and reply.data is None
            else {question: reply.data.answer if isinstance(reply, AcceptedElicitation) else ""}
        )
        asked = Session(task=None, backend=_NoTask(), answers=answers)  # type: ignore[arg-type]
        return _result(run_tool(asked, "ask_user", {"question": question}))

    field = schemas.ask_user.model_fields["question"]
    ask.__annotations__ = {"question": str, "ctx": Context}
    ask_user.__annotations__ = {
        "question": Annotated[(str, *field.metadata, Field(description=field.description))],
        "reply": Annotated[ElicitationResult[Answer], Resolve(ask)],
        "return": Annotated[CallToolResult, Answered],
    }
    return ask_user


# ---------------------------------------------------------------- the server's own tools


def list_tasks() -> list[dict[str, str]]:
    """The built-in task suite: name and description of each task."""
    from mlxport.tasks import load_task, suite_names

    return [{"name": n, "description": load_task(n).description} for n in suite_names()]


def create_task(
    cases: Annotated[
        list[str],
        Field(
            description="Sizes to check at, each binding the kernel's and host "
            "code's names, e.g. 'N=4096,C=768'."
        ),
    ],
    path: Annotated[
        str | None,
        Field(description="A .cu file on this server's disk with the __global__ kernel to port."),
    ] = None,
    source: Annotated[str | None, SOURCE_FIELD] = None,
    kernel: Annotated[
        str | None, Field(description="The kernel; default: the file's only one.")
    ] = None,
    dtypes: Annotated[
        str | None, Field(description="Dtypes of a templated kernel, e.g. 'float32,float16'.")
    ] = None,
    shapes: Annotated[
        list[str] | None,
        Field(description="A buffer's extent where the host code gives none, 'NAME=EXPR'."),
    ] = None,
    grid: Annotated[
        str | None, Field(description="Blocks per grid, where the host code gives none.")
    ] = None,
    block: Annotated[str | None, Field(description="Threads per block, likewise.")] = None,
    shared_bytes: Annotated[
        str | None, Field(description="Dynamic shared memory of the launch, likewise.")
    ] = None,
    template: Annotated[
        str | None, Field(description="Template arguments the launch does not give, 'T=float'.")
    ] = None,
    includes: Annotated[
        list[str] | None, Field(description="Folders of the file's local headers.")
    ] = None,
    inputs: Annotated[
        str | None,
        Field(description="The values an integer input takes, e.g. 'idx:int32[0,V)'."),
    ] = None,
    folder: Annotated[str, Field(description="Parent folder of the new task.")] = "mlxport-tasks",
    name: Annotated[str | None, Field(description="Task name; default: the kernel's.")] = None,
) -> CallToolResult:
    """Make a task from CUDA (`source`, the text, or `path`, a file): the original kernel, run on
    the CPU executor, is the golden every candidate is checked against, at the cases given.
    Returns the task folder to pass as `task`."""
    import tempfile

    if (path is None) == (source is None):
        raise UserError("create_task needs the CUDA: give either `source` (its text) or `path`")
    with tempfile.TemporaryDirectory(prefix="mlxport-mcp-") as tmp:
        if source is not None:
            path = str(Path(tmp) / "kernel.cu")
            Path(path).write_text(source)
        return _made(
            Path(path),
            Path(folder),
            kernel=kernel,
            cases=cases,
            dtypes=dtypes,
            shapes=shapes,
            grid=grid,
            block=block,
            shared_bytes=shared_bytes,
            template=template,
            includes=[Path(p) for p in includes or []],
            inputs=inputs,
            name=name,
        )


def _made(path: Path, parent: Path, **request: Any):
    from mlxport.tasks import load_task
    from mlxport.tasks.make import TaskRequest, make_task
    from mlxport.tools.handlers import contract

    notes: list[str] = []
    made = make_task(
        TaskRequest.of(source=path, **request),
        parent,
        on_note=lambda n: notes.append(_mcp_words(n)),
    ).resolve()
    task = load_task(made)
    text = "\n".join(
        [
            f"created task {task.name} in {made}: pass task={str(made)!r}",
            contract(task),
            *(f"note: {n}" for n in notes),
        ]
    )
    data = TaskMade(
        task=task.name,
        task_dir=str(made),
        kernel=task.kernel,
        cases=[task.case_label(c) for c in task.cases.visible],
        dtypes=list(task.dtypes),
        notes=notes,
    )
    return _result(Output(text, data=data))


def port(
    task: Annotated[str, TASK_FIELD],
    model: Annotated[
        str, Field(description="rules (the non-LLM baseline) or provider:model")
    ] = "rules",
    backend: Annotated[str | None, BACKEND_FIELD] = None,
    budget: Annotated[
        dict[str, Any] | None,
        Field(
            description="RunConfig fields: max_iterations, patience, "
            "max_tokens, max_cost, max_wall_seconds"
        ),
    ] = None,
    out: Annotated[
        str, Field(description="Output folder: OUT/<task>/ gets the port's files.")
    ] = "mlxport-out",
    base_url: Annotated[str | None, Field(description="An OpenAI-compatible server's URL.")] = None,
    seed: Annotated[int, Field(description="The run's seed (inputs and sampling).")] = 0,
) -> dict[str, Any]:
    """Port a whole task unattended with the agent graph under a budget; writes kernel.py,
    report.md and run.json to OUT/<task>/ and returns the run's summary."""
    from mlxport.agent.port import run_port
    from mlxport.agent.state import RunConfig
    from mlxport.batch import summary_row
    from mlxport.tasks import load_task

    try:
        config = RunConfig(
            model=model,
            backend=backend or SERVER.backend,
            base_url=base_url,
            seed=seed,
            **(budget or {}),
        )
    except TypeError as e:
        raise UserError(
            f"bad budget ({e}): use RunConfig fields such as max_iterations, patience, max_cost"
        ) from e
    run = run_port(load_task(task), config, Path(out))
    row = summary_row(run["task"], "done", run)
    return {
        **row,
        "session": run["session"],
        "candidate_id": run["result"]["candidate_id"],
        "backend": run["result"]["backend"],
        "non_llm_baseline": run["non_llm_baseline"],
        "folder": str(Path(out).resolve() / run["task"]),
    }


SERVER: Server  # set by build_server


# ---------------------------------------------------------------- prompts and resources


def port_kernel(task: Annotated[str, TASK_FIELD]) -> str:
    """Port a task's CUDA kernel with this server's tools: the graph's first message for it."""
    from mlxport.prompts.render import task_prompt

    s = SERVER.served(task, None).session
    return (
        task_prompt(s.task, s.backend, target=None, budget="yours to set")
        + f"\n\nPass task={str(s.task.folder)!r} to every tool. Start with read_cuda_source."
    )


def kb_doc(doc: str) -> str:
    from mlxport.knowledge import all_sections

    sections = [s for s in all_sections() if s.doc_id == doc]
    if not sections:
        raise UserError(f"no knowledge-base document {doc!r}")
    return "\n\n".join(
        f"## {s.heading}\n{s.text}" + (f"\nSource: {s.source_line}" if s.source_line else "")
        for s in sections
    )


def task_source(task: str) -> str:
    s = SERVER.served(str(SERVER.names.get(task, task)), None).session
    return s.task.source_text()


def task_reference(task: str) -> str:
    s = SERVER.served(str(SERVER.names.get(task, task)), None).session
    out = run_tool(s, "read_reference", {})
    if out.error:
        raise UserError(out.text.removeprefix("error: "))
    return out.text


def build_server(backend: str = "auto"):
    global SERVER
    MCPServer = _mcp()
    from mcp.server.mcpserver.resources import FunctionResource

    from mlxport.agent.outputs import package_version
    from mlxport.knowledge import all_sections
    from mlxport.prompts.render import system_prompt

    SERVER = Server(backend)
    from mlxport.backends import get_backend

    instructions = (
        system_prompt(get_backend(SERVER.backend).language)
        + "\n"
        + NOTES.format(backend=SERVER.backend)
    )
    server = MCPServer(
        "mlxport",
        instructions=instructions,
        log_level="WARNING",
        version=package_version("mlxport") or "unknown",
    )
    for schema in (t.schema for t in TOOLS.values()):
        fn = ask_user_tool() if schema is schemas.ask_user else graph_tool(SERVER, schema)
        server.add_tool(
            _as_tool_errors(fn), name=schema.__name__, description=" ".join(schema.__doc__.split())
        )
    _returns(create_task, TaskMade)
    for fn in (list_tasks, create_task, port):
        server.add_tool(
            _as_tool_errors(fn), name=fn.__name__, description=" ".join(fn.__doc__.split())
        )
    server.prompt(name="port_kernel", description=port_kernel.__doc__)(port_kernel)
    docs = {s.doc_id: s.doc_title for s in all_sections()}
    for doc, title in docs.items():
        server.add_resource(
            FunctionResource(
                uri=f"mlxport://kb/{doc}",
                name=f"kb/{doc}",
                title=title,
                description=f"Knowledge base: {title}",
                mime_type="text/markdown",
                fn=functools.partial(kb_doc, doc),
            )
        )
    server.resource(
        "mlxport://task/{task}/source",
        name="task source",
        mime_type="text/x-cuda",
        description="A task's CUDA source (a suite name or a task this server has opened)",
    )(task_source)
    server.resource(
        "mlxport://task/{task}/reference",
        name="task reference",
        mime_type="text/plain",
        description="What a task's candidates are checked against, and its tolerances",
    )(task_reference)
    return server


def _mcp():
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as e:
        raise UserError(
            "the MCP server needs the mcp package (version 2): pip install 'mlxport[mcp]'"
        ) from e
    return MCPServer


def _returns(fn, outcome) -> None:
    """Declare that ``fn`` returns MCP's result with ``outcome`` as its structured content."""
    from mcp_types import CallToolResult

    fn.__annotations__["return"] = Annotated[CallToolResult, outcome]


def _as_tool_errors(fn):
    """Redacted results; a UserError (a call the client can fix) as an error result, not a
    crash."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return redact(fn(*args, **kwargs))
        except UserError as e:
            failed = Output(f"error: {_mcp_words(str(e))}", data=Outcome(ok=False), error=True)
            return redact(_result(failed))

    return wrapper


def serve_mcp(backend: str = "auto") -> None:
    """Serve over stdio until the client closes the stream."""
    server = build_server(backend)
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
        serve_mcp(sys.argv[1] if len(sys.argv) > 1 else "auto")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
