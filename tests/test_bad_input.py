"""Bad input ends in one sentence and a non-zero exit: each hostile or careless task, candidate and
flag below through the real CLI, then property-based tests (hypothesis) over task.toml, candidate
files and flag values: a UserError or success, never another exception, never a hang."""

import contextlib
import os
import re
import shutil
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlxport.agent.config import parse_budget
from mlxport.errors import UserError
from mlxport.tasks import SUITE_DIR, arg_infos, load_candidate, load_task, make_inputs
from mlxport.tasks.request import parse_case

VECTOR_ADD = SUITE_DIR / "vector_add"
TOML = (VECTOR_ADD / "task.toml").read_text()
PORT = (VECTOR_ADD / "ports" / "msl.toml").read_text()
LOOP = (
    "def reference(a, b):\n    while True:\n        pass\n\n\ndef naive(a, b):\n    return a + b\n"
)


def task_copy(
    tmp_path: Path, toml: str | bytes | None = None, reference: str | None = None
) -> Path:
    folder = tmp_path / "task"
    shutil.copytree(VECTOR_ADD, folder, ignore=shutil.ignore_patterns("__pycache__", "ports"))
    if toml is not None:
        (folder / "task.toml").write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    if reference is not None:
        (folder / "reference.py").write_text(reference)
    return folder


CASES = [
    (
        "non-UTF-8 task.toml",
        TOML.encode() + b"\n# \xff\xfe\n",
        None,
        "is not UTF-8 text (byte 0xff",
    ),
    (
        "shape over 2^63",
        TOML.replace("{ N = 4096 }", "{ N = 18446744073709551617 }"),
        None,
        "more than a 64-bit index counts",
    ),
    (
        "10^12 elements",
        TOML.replace("{ N = 4096 }", "{ N = 1000000000000 }"),
        None,
        "of memory: make the case smaller",
    ),
    (
        "low above high",
        TOML.replace("low = 0.5, high = 2.0", "low = 2.0, high = 0.5"),
        None,
        "swap them",
    ),
    (
        "NaN tolerance",
        TOML.replace("atol = 1e-6", "atol = nan", 1),
        None,
        "atol is nan: give a finite number",
    ),
    (
        "negative tolerance",
        TOML.replace("rtol = 1e-6", "rtol = -1e-6", 1),
        None,
        "a tolerance is not negative",
    ),
    (
        "source outside the folder",
        TOML.replace(
            'kernel = "vector_add_kernel"',
            'kernel = "vector_add_kernel"\nsource = "../../../../etc/passwd"',
        ),
        None,
        "must be a path inside the task folder",
    ),
    (
        "reference module outside",
        TOML.replace('native = "reference:reference"', 'native = "../x:reference"'),
        None,
        "must look like module:function",
    ),
    (
        "reference returns None",
        None,
        "def reference(a, b):\n    return None\n\n\ndef naive(a, b):\n    return a + b\n",
        "returned NoneType, not mx.array",
    ),
    (
        "reference raises SystemExit",
        None,
        "import sys\n\n\ndef reference(a, b):\n    sys.exit(0)\n\n\n"
        "def naive(a, b):\n    return a + b\n",
        "raised SystemExit",
    ),
    ("endless loop in reference.py", None, LOOP, "did not return within 3 s: fix its endless loop"),
]


@pytest.mark.parametrize(
    ("label", "toml", "reference", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_a_bad_task_ends_in_one_sentence(tmp_path, cli, label, toml, reference, fragment):
    folder = task_copy(tmp_path, toml, reference)
    result = cli("tasks", "check", str(folder), env={"MLXPORT_REFERENCE_SECONDS": "3"}, timeout=120)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert fragment in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_non_utf8_candidate_ends_in_one_sentence(tmp_path, cli):
    bad = tmp_path / "cand.toml"
    bad.write_bytes(PORT.encode().replace(b"a[i] + b[i]", b"a[i] + b[i]; // \xc3\x28"))
    result = cli("check", str(bad), "--task", "vector_add", "--backend", "sim")
    assert (
        result.returncode == 2
        and "is not UTF-8 text" in result.stderr
        and "Traceback" not in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("command", ["check", "bench"])
def test_a_cuda_candidate_on_the_simulator_ends_in_one_sentence_naming_the_backend(cli, command):
    port = VECTOR_ADD / "ports" / "cuda.toml"
    result = cli(command, str(port), "--task", "vector_add", "--backend", "sim")
    assert (
        result.returncode == 2
        and "use --backend cuda" in result.stderr
        and "Traceback" not in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_an_endless_reference_is_killed_and_leaves_no_worker(tmp_path):
    folder = task_copy(tmp_path, reference=LOOP)
    env = {**os.environ, "MLXPORT_REFERENCE_SECONDS": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlxport.cli", "tasks", "check", str(folder)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "did not return within 2 s" in stderr, stderr
    workers = [
        p
        for p in Path("/proc").glob("[0-9]*")
        if _cmdline(p).endswith(f"references:serve 0 {proc.pid}")
    ]
    assert not workers, "the reference's worker outlived mlxport"


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


# ---------------------------------------------------------------- properties

NUMBERS = st.sampled_from(
    [
        "nan",
        "inf",
        "-inf",
        "-1",
        "0",
        "1e400",
        "18446744073709551617",
        "-0.0",
        "3.5",
        "1e-300",
        "99999999999",
        "true",
        '"x"',
        "[]",
        "{}",
    ]
)
WORDS = st.sampled_from(
    [
        "",
        "../../etc/passwd",
        "/etc/passwd",
        "T",
        "float64",
        "x.y:z",
        "a b",
        "é",
        "\\u0000",
        "reference:nope",
        "N * N * N * N * N",
        "2**64",
        "N / 0",
        "__import__('os')",
        "kernel.cu",
    ]
)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?(?![\w.])")
_STRING = re.compile(r'"[^"\n]*"')


@st.composite
def mutated(draw, text: str) -> bytes:
    """``text`` with a few numbers, strings or lines replaced, or bytes that are not UTF-8."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["number", "string", "drop", "dup", "bytes"]))
        if kind in ("number", "string"):
            spans = [m.span() for m in (_NUMBER if kind == "number" else _STRING).finditer(text)]
            if spans:
                a, b = draw(st.sampled_from(spans))
                value = draw(NUMBERS) if kind == "number" else f'"{draw(WORDS)}"'
                text = text[:a] + value + text[b:]
        else:
            lines = text.splitlines()
            i = draw(st.integers(0, len(lines) - 1))
            if kind == "drop":
                del lines[i]
            elif kind == "dup":
                lines.insert(i, lines[i])
            else:
                return ("\n".join(lines)).encode() + draw(st.binary(min_size=1, max_size=8))
            text = "\n".join(lines)
    return text.encode()


PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)


@PROPERTY
@given(data=mutated(TOML))
def test_any_task_toml_loads_or_raises_a_user_error(tmp_path, data):
    folder = tmp_path / "t"
    folder.mkdir(exist_ok=True)
    shutil.copy(VECTOR_ADD / "kernel.cu", folder / "kernel.cu")
    shutil.copy(VECTOR_ADD / "reference.py", folder / "reference.py")
    (folder / "task.toml").write_bytes(data)
    try:
        task = load_task(folder)
    except UserError:
        return
    for case in task.all_cases() + task.cases.bench:  # sizes and costs evaluate, or say why not
        for dtype in task.dtypes:
            with contextlib.suppress(UserError):
                task.shapes(case, dtype), task.cost_of(case, dtype)


_INPUTS = None


def _small_inputs():
    global _INPUTS
    if _INPUTS is None:
        task = load_task("vector_add")
        _INPUTS = task, arg_infos(task, make_inputs(task, {"N": 64}, "float32", 0), {"N": 64})
    return _INPUTS


@PROPERTY
@given(data=mutated(PORT))
def test_any_candidate_file_loads_and_launches_or_raises_a_user_error(tmp_path, data):
    path = tmp_path / "c.toml"
    path.write_bytes(data)
    try:
        candidate = load_candidate(path)
        candidate.launch(_small_inputs()[1])
    except UserError:
        pass


FLAG = st.text(alphabet=string.printable, max_size=40)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(budget=FLAG, case=FLAG)
def test_any_budget_or_case_flag_parses_or_raises_a_user_error(budget, case):
    for parse, text in ((parse_budget, budget), (parse_case, case)):
        with contextlib.suppress(UserError):
            parse(text)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    budget=st.lists(
        st.sampled_from(["iterations", "patience", "tokens", "cost", "wall", "errors", "target"]),
        min_size=1,
        max_size=3,
    ),
    values=st.lists(
        NUMBERS | st.sampled_from(["12", "4e5", "30m", "2h", "0.5", "1k"]), min_size=3, max_size=3
    ),
)
def test_budget_values_are_checked_before_a_run(budget, values):
    from mlxport.agent.config import RunConfig

    text = ",".join(f"{k}={v}" for k, v in zip(budget, values, strict=False))
    with contextlib.suppress(UserError):
        RunConfig(**parse_budget(text)).validate()


@pytest.mark.parametrize(
    "budget, fragment",
    [
        ("foo=1", "request_timeout"),  # every key the parser takes is listed
        ("wall=30x", "e.g. wall=30m"),
        ("tokens=4q", "e.g. tokens=400k"),
    ],
)
def test_a_bad_budget_item_names_the_form_that_works(budget, fragment):
    with pytest.raises(UserError, match=re.escape(fragment)):
        parse_budget(budget)
    assert parse_budget("request_timeout=30,wall=30m") == {
        "request_timeout": 30.0,
        "max_wall_seconds": 1800.0,
    }


@pytest.mark.parametrize("query", ["", "the of and"])
def test_a_knowledge_base_query_without_words_is_one_sentence(cli, query):
    result = cli("kb", "search", query)
    assert result.returncode == 2 and "has no words to search for" in result.stderr
    assert "Traceback" not in result.stderr
