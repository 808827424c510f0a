"""The rooms of the house and which way imports may point (docs/architecture.md).

Every ``mlxport`` import in every module, at the top or inside a function, must point at the same
room or one below it; the lower rooms must load without LangGraph, so they run on a bare GPU
machine, inside the MCP server and in worker processes.
"""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mlxport"
# Lowest first. A module may import its own room and the rooms below.
ROOMS = [
    ("errors", "redaction", "expr", "spec", "cuda_syntax"),
    ("tasks",),
    ("backends",),
    ("verify",),
    ("op",),
    ("translate", "knowledge"),
    ("tasks.make",),
    ("tools", "prompts", "logs", "charts"),
    ("agent",),
    ("evals", "batch", "mcp_server", "export", "integrations"),
    ("cli",),
]
LEVEL = {room: level for level, rooms in enumerate(ROOMS) for room in rooms}
# translate/'s own rooms, lowest first: reading CUDA, evaluating host code, the kernel bound to a
# task, rendering, the translator, its tuning variants.
TRANSLATE = ["reading", "host", "bind", "render", "translator", "tuning"]


def room(module: str) -> str:
    """``tasks.make`` is a room of its own: making a task reads CUDA and runs the executor."""
    parts = module.split(".")
    return "tasks.make" if parts[1:3] == ["tasks", "make"] else parts[1]


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        if "evals/tasks" in path.as_posix():  # the suite's reference code, not part of the package
            continue
        name = ".".join(("mlxport", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        yield name, ast.parse(path.read_text())


def imported(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mlxport."):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("mlxport.")}
    return out


def test_every_room_is_placed():
    rooms = {room(name) for name, _ in modules() if name != "mlxport"}
    assert rooms <= set(LEVEL), (
        f"place {sorted(rooms - set(LEVEL))} in ROOMS and docs/architecture.md"
    )


def test_no_import_points_up():
    upward = [
        f"{name} imports {target}"
        for name, tree in modules()
        if name != "mlxport"
        for target in imported(tree)
        if LEVEL[room(target)] > LEVEL[room(name)]
    ]
    assert not upward, "\n".join(upward)


def test_translate_rooms_point_one_way():
    def inner(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "translate" else None

    found = {inner(name) for name, _ in modules()} - {None}
    assert found <= set(TRANSLATE), found
    upward = [
        f"{name} imports {target}"
        for name, tree in modules()
        if inner(name) in TRANSLATE
        for target in imported(tree)
        if inner(target) in TRANSLATE
        and TRANSLATE.index(inner(target)) > TRANSLATE.index(inner(name))
    ]
    assert not upward, "\n".join(upward)


def test_the_lower_rooms_load_without_the_agent_stack():
    code = (
        "import sys; import mlxport.tasks, mlxport.backends.sim, mlxport.backends.gpu, "
        "mlxport.verify.benchmark, mlxport.verify.correctness, mlxport.tools.handlers, "
        "mlxport.tools.final; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langgraph', 'langchain', 'langchain_core')); "
        "assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_simulators_worker_processes_never_load_mlx():
    """The simulator and CPU-executor workers run C++ only: MLX there would take GPU memory per
    process on a CUDA machine (seen on an H200: its memory pools failed with several workers)."""
    code = (
        "import sys; import mlxport.backends.sim.runner; "
        "assert 'mlx.core' not in sys.modules, "
        "sorted(m for m in sys.modules if m.startswith('mlx'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_rooms_modules_and_functions_stay_small():
    """No package folder but cli/ (one module per command) holds more than 15 modules, no module
    exceeds 650 lines and no function 80."""
    crowded = [
        str(d.relative_to(PACKAGE))
        for d in {p.parent for p in PACKAGE.rglob("*.py")}
        if d.name != "cli" and "evals/tasks" not in d.as_posix() and len(list(d.glob("*.py"))) > 15
    ]
    assert not crowded, crowded
    long_modules, long_functions = [], []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > 650:
            long_modules.append(str(path.relative_to(PACKAGE)))
        for node in ast.walk(ast.parse(text)):
            function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if function and node.end_lineno - node.lineno + 1 > 80:
                long_functions.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert not long_modules and not long_functions, (long_modules, long_functions)


def test_ruff_check_and_format_are_clean():
    root = PACKAGE.parent
    ruff = Path(sys.executable).with_name("ruff")
    for args in (["check", "-q"], ["format", "--check", "-q"]):
        done = subprocess.run(
            [str(ruff), *args, "mlxport", "tests", "benchmarks"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
