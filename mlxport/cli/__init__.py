"""The ``mlxport`` command line: ``mlxport COMMAND ...``, one module per command.

The dispatcher imports only the command it runs, so ``mlxport kb chip`` does not load the agent.
Every error a user can fix ends as one sentence on stderr and exit code 2; nothing printed carries
a secret (mlxport.redaction).
"""

from __future__ import annotations

import importlib
import sys

from mlxport.errors import UserError
from mlxport.redaction import guard_terminal

# command -> one line of help; the module mlxport.cli.<command> holds it as a Typer app named
# ``app``
COMMANDS = {
    "port": "Port a CUDA kernel to a verified MLX op: kernel.py, test_kernel.py and a report.",
    "chat": "Port a kernel interactively: watch each step, steer, approve; resume with --session.",
    "batch": "Port many kernels unattended; rerun the same command to resume.",
    "eval": "Compare LLMs on one graph, tools and budget; `eval report DIR` rebuilds the reports.",
    "check": "Compile a candidate and check it against the task's golden on every case and dtype.",
    "bench": "Check a candidate, then time it against the task's baselines.",
    "read": "Read a CUDA file: kernels, parameters, shared memory, intrinsics, launches, Metal.",
    "translate": "Rule-based translation (a non-LLM baseline) of a CUDA kernel into a candidate.",
    "tasks": "The task suite: list, show, check, new.",
    "kb": "The Apple-GPU knowledge base: search, chip, chips.",
    "doctor": "Which backends run here, and why not; --calibrate measures the GPU.",
    "mcp": "Serve mlxport's tools to an MCP client over stdio.",
    "export": "Write a verified port as a Python package a user can pip install.",
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {text}" for name, text in COMMANDS.items())
    return (
        f"usage: mlxport COMMAND [ARGS]...\n\nPort CUDA kernels to fast, verified MLX custom "
        f"kernels.\n\n"
        f"commands:\n{rows}\n\n`mlxport COMMAND --help` shows a command's options."
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    guard_terminal()
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        sys.exit(0 if argv else 2)
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(
            f"error: no command {name!r}: use one of {', '.join(COMMANDS)} (see mlxport --help)",
            file=sys.stderr,
        )
        sys.exit(2)
    app = importlib.import_module(f"mlxport.cli.{name}").app
    try:
        app(args=rest, prog_name=f"mlxport {name}")
    except UserError as e:
        from rich.markup import escape

        from mlxport.cli.options import err

        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
