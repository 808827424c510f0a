import inspect
import json
import math
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlxport.errors import UserError
from mlxport.evals.check import check_task
from mlxport.spec import KernelCandidate
from mlxport.spec.toml import dumps
from mlxport.tasks import SUITE_DIR, arg_infos, expert_ports, load_task, make_inputs, suite_names
from mlxport.tasks.request import TaskRequest
from mlxport.tasks.scaffold import scaffold

CORE = [
    "vector_add",
    "gelu_tanh",
    "softmax_rows",
    "rmsnorm",
    "layernorm",
    "rope",
    "transpose_tiled",
    "reduce_sum_atomic",
    "matmul_tiled",
    "attention_fwd",
    "selective_scan",
    "cumsum",
]


def test_suite_lists_the_core_tasks(cli):
    result = cli("tasks", "list", "--json")
    assert result.returncode == 0, result.stderr
    names = {t["name"] for t in json.loads(result.stdout)}
    assert set(CORE) <= names


@pytest.mark.parametrize("name", suite_names())
def test_reference_and_baselines_agree_on_every_case(name):
    rows = check_task(load_task(name))
    bad = [
        (r.baseline, r.case, r.dtype, r.result.pattern or r.result.error)
        for r in rows
        if r.result.verdict != "pass"
    ]
    assert rows and not bad


def test_softmax_golden_is_within_1e_minus_7_of_exact_at_the_timed_width():
    """The float32 tolerance (rtol 1e-5) is only meaningful if the golden is much closer than that:
    a float32 golden from MLX's CPU ops was 1.4e-5 off at C = 4096."""
    import mlx.core as mx
    import numpy as np

    from mlxport.tasks import resolve

    task = load_task("softmax_rows")
    x = make_inputs(task, {"R": 64, "C": 4096}, "float32", 424253)["x"]
    with mx.stream(mx.cpu):
        golden = np.array(resolve(task, task.reference)(x))
    v = np.array(x).astype(np.float64)
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    exact = e / e.sum(axis=-1, keepdims=True)
    assert float(np.max(np.abs(golden - exact) / exact)) < 1e-7


@pytest.mark.parametrize("name", suite_names())
def test_task_has_expert_ports_whose_launch_resolves(name):
    task = load_task(name)
    ports = expert_ports(task)
    assert set(ports) == {"msl", "cuda"}
    for case in task.all_cases():
        for dtype in task.dtypes:
            infos = arg_infos(task, make_inputs(task, case, dtype, seed=0), case)
            for port in ports.values():
                launch = port.launch(infos)
                shapes = task.shapes(case, dtype)
                # every task output, plus any scratch
                assert {t.name for t in task.outputs} <= set(port.output_names)
                for out_name, shape in zip(port.output_names, launch.output_shapes, strict=True):
                    if out_name in shapes:
                        assert shape == shapes[out_name]


def test_show_json_names_the_ports(cli):
    result = cli("tasks", "show", "vector_add", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kernel"] == "vector_add_kernel" and data["ports"] == ["cuda", "msl"]


def test_scaffolded_task_checks(tmp_path, cli):
    result = cli("tasks", "new", "my_op", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    result = cli("tasks", "check", str(tmp_path / "my_op"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "checks passed" in result.stdout
    again = cli("tasks", "new", "my_op", "--dir", str(tmp_path))
    assert again.returncode == 2 and "already exists" in again.stderr


def _broken_task(tmp_path, edit):
    folder = tmp_path / "vector_add"
    shutil.copytree(SUITE_DIR / "vector_add", folder)
    edit(folder)
    return folder


def _replace(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


BROKEN = {
    "missing file": (lambda f: (f / "reference.py").unlink(), "has no reference.py"),
    "bad toml": (
        lambda f: _replace(f / "task.toml", 'name = "vector_add"', "name = vector_add ="),
        "is not valid TOML",
    ),
    "unknown dtype": (
        lambda f: _replace(f / "task.toml", '"float32", "float16"', '"float32", "float17"'),
        "unknown dtype 'float17'",
    ),
    "unknown dimension": (
        lambda f: _replace(
            f / "task.toml",
            'shape = ["N"]\ninit = { kind = "uniform", low = 0.5',
            'shape = ["M"]\ninit = { kind = "uniform", low = 0.5',
        ),
        "unknown dimension(s) M",
    ),
    "reference does not import": (
        lambda f: (f / "reference.py").write_text("import not_a_module_xyz\n"),
        "does not import",
    ),
    "reference raises": (
        lambda f: (f / "reference.py").write_text(
            "def reference(a, b):\n"
            "    raise RuntimeError('boom')\n"
            "\n"
            "def naive(a, b):\n"
            "    return a + b\n"
        ),
        "raised RuntimeError: boom",
    ),
    "empty dtypes": (
        lambda f: _replace(
            f / "task.toml", 'dtypes = ["float32", "float16", "bfloat16"]', "dtypes = []"
        ),
        "dtypes is empty",
    ),
    "name not an identifier": (
        lambda f: _replace(f / "task.toml", 'name = "vector_add"', 'name = "vector-add"'),
        "must be a Python identifier",
    ),
    "missing tolerance": (
        lambda f: _replace(f / "task.toml", "[tolerance.bfloat16]\natol = 1e-2\nrtol = 1e-2\n", ""),
        "no tolerance for dtype bfloat16",
    ),
}


@pytest.mark.parametrize("kind", BROKEN)
def test_invalid_task_folder_is_rejected_in_one_sentence(kind, tmp_path, cli):
    edit, fragment = BROKEN[kind]
    folder = _broken_task(tmp_path, edit)
    result = cli("tasks", "check", str(folder))
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_candidate_toml_round_trips(tmp_path):
    port = expert_ports(load_task("vector_add"))["msl"]
    path = tmp_path / "c.toml"
    path.write_text(port.to_toml())
    again = KernelCandidate.from_toml(path)
    assert again == port and again.id == port.id


def test_candidate_rejects_unknown_fields(tmp_path, cli):
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "k"\nsource = "x"\ninput_names = []\noutput_names = ["o"]\noutput_shapes = [[1]]\n'
        'output_dtypes = ["float32"]\ngrid = [1, 1, 1]\nthreadgroup = [1, 1, 1]\ngirth = 3\n'
    )
    from mlxport.tasks import TaskError, load_candidate

    with pytest.raises(TaskError, match="girth"):
        load_candidate(path)


def test_scaffold_refuses_bad_names(tmp_path):
    from mlxport.tasks import TaskError

    with pytest.raises(TaskError, match="valid identifier"):
        scaffold("my-op", tmp_path)


# ---------------------------------------------------------------- the one TOML writer

_key = st.text(min_size=1, max_size=8)
_scalar = (
    st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=True)
    | st.booleans()
    | st.text(max_size=20)
    | st.text(alphabet='ab"\\\n\t\r\x7f\x01', max_size=12)
)
_value = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_key, inner, max_size=3),
    max_leaves=12,
)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_key, _value, max_size=5))
def test_the_toml_writer_round_trips_what_tomllib_reads(data):
    assert _same(tomllib.loads(dumps(data)), data), dumps(data)


def test_a_candidate_file_reads_as_settings_then_code():
    port = expert_ports(load_task("softmax_rows"))["msl"]
    text = port.to_toml()
    assert text.rstrip().endswith('"""') and text.index("grid") < text.index("source")
    assert KernelCandidate.model_validate(tomllib.loads(text)) == port


# ---------------------------------------------------------------- one request, every entry point


def _cli_options(module: str, command: str) -> set[str]:
    import importlib

    from typer.main import get_command

    cmd = get_command(importlib.import_module(f"mlxport.cli.{module}").app)
    cmd = cmd.commands.get(command, cmd) if hasattr(cmd, "commands") else cmd
    return {p.name for p in cmd.params}


REFERENCE_ONLY = {"reference", "inputs", "outputs", "heldout"}
CUDA_FIELDS = set(TaskRequest.model_fields) - {"source"} - REFERENCE_ONLY


def test_every_entry_point_takes_every_field_of_the_request():
    """`port FILE.cu`, `tasks new --from`, a manifest's [[port]] and MCP's create_task all make the
    same request, so none drops a field (as create_task once dropped shared_bytes)."""
    from mlxport.batch.jobs import KERNEL_KEYS, REQUEST_KEYS
    from mlxport.mcp_server import create_task

    cli_name = {"kernel": "kernel_name", "cases": "case", "shapes": "shape", "includes": "include"}
    port = {f for f in TaskRequest.model_fields if f not in ("source", "name")}
    assert {cli_name.get(f, f) for f in port} <= _cli_options("port", "port")
    # --inputs gives a bare .cu file's integer domains too (the refusal without one names it)
    new = {cli_name.get(f, f) for f in CUDA_FIELDS - {"name", "kernel"}} | {"kernel", "inputs"}
    assert new <= _cli_options("tasks", "new")
    manifest = {REQUEST_KEYS.get(k, k) for k in KERNEL_KEYS} | {"name"}
    assert set(TaskRequest.model_fields) == manifest
    assert set(inspect.signature(create_task).parameters) >= CUDA_FIELDS


def test_a_manifest_ports_a_bare_cu_file_as_the_cli_does(tmp_path):
    """No reference: the original kernel is the golden, as for `mlxport port FILE.cu --case`."""
    from mlxport.batch import load_jobs

    shutil.copy(SUITE_DIR / "vector_add" / "kernel.cu", tmp_path / "add.cu")
    m = tmp_path / "batch.toml"
    m.write_text('[[port]]\nkernel = "add.cu"\ncases = ["n=1000"]\n')
    (job,) = load_jobs(m, out=tmp_path / "out")
    task = load_task(job.task_dir)
    assert task.reference is None and task.original is not None and task.cases.heldout


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ({"cases": ["N=x"]}, "'x' is not a number"),
        ({"cases": ["N"]}, "is not NAME=VALUE"),
        ({"cases": ["N=4"], "shapes": ["K"]}, "--shape 'K' is not NAME=VALUE"),
        ({"cases": ["N=4"], "block": 3}, "block: Input should be a valid string"),
    ],
)
def test_a_bad_request_is_one_sentence(flags, words):
    with pytest.raises(UserError, match=None) as e:
        TaskRequest.of(source=Path("k.cu"), **flags)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_request_without_a_case_runs_at_the_sizes_the_file_sets():
    """A file whose sizes are #defines has nothing for --case to bind (binding them is refused)."""
    assert TaskRequest.of(source=Path("k.cu")).cases == [{}]
