import json
import shutil

import pytest

from mlxport.evals.check import check_task
from mlxport.evals.scaffold import scaffold
from mlxport.spec import KernelCandidate
from mlxport.tasks import SUITE_DIR, arg_infos, expert_ports, load_task, make_inputs, suite_names

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
