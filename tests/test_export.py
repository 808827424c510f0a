"""`mlxport export` turns a verified port into a package that pip installs and that imports and
runs outside mlxport's folders."""

import hashlib
import json
import subprocess
import sys
import tomllib

import pytest
from small_tasks import small_task

from mlxport.agent.models import ScriptedModel
from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig
from mlxport.tasks import expert_ports, load_task


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    """vector_add's expert port, verified on the simulator: the suite's kernel with small cases
    (what is exported is the op, its test and its task, at whatever sizes they were verified)."""
    task = load_task(small_task("vector_add", tmp_path_factory.mktemp("task")))
    expert = expert_ports(task)["msl"]
    out = tmp_path_factory.mktemp("port")
    args = {
        k: v
        for k, v in expert.model_dump(mode="json", exclude_defaults=True).items()
        if k != "language"
    }
    scripted = ScriptedModel(
        script=[
            {"tool_calls": [{"name": "compile_kernel", "args": args}]},
            {"tool_calls": [{"name": "run_correctness", "args": {"candidate_id": expert.id}}]},
            {"tool_calls": [{"name": "finish", "args": {}}]},
        ]
    )
    run_port(task, RunConfig(backend="sim", extra_seeds=0), out, model=scripted)
    return out / "vector_add"


CALL = (
    "import warnings, json, mlx.core as mx\n"
    "with warnings.catch_warnings(record=True) as w:\n"
    "    warnings.simplefilter('always')\n"
    "    out = op.vector_add(mx.ones(8), mx.ones(8))\n"
    "print(json.dumps({'backend': op.backend, 'sum': float(out.sum()), "
    "'warned': [str(x.message) for x in w],\n"
    "                  'doc': op.__doc__}))"
)


def test_an_exported_port_installs_in_a_fresh_venv_and_its_parity_test_passes(port, tmp_path, cli):
    """From the exported folder alone: a new venv, `pip install '.[test]'` (mlx[cpu] on Linux,
    numpy, pytest; no mlxport), the op imported and called, and its parity test run."""
    result = cli("export", str(port), "--out", str(tmp_path / "dist"))
    assert result.returncode == 0, result.stderr
    package = tmp_path / "dist" / "mlxport-vector-add"
    venv = tmp_path / "venv"
    # This venv's pip installs into the new one (ensurepip's own copy of pip takes as long as the
    # rest); bytecode is compiled on import, not for every file pip writes.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = str(venv / "bin" / "python")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile"]
        + [f"{package}[test]"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [python, "-c", "import vector_add as op\n" + CALL],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=clean,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    # no GPU here: the reference, and it says so
    assert got["sum"] == 16.0 and got["backend"] == "reference"
    assert any("runs its reference implementation" in w for w in got["warned"])
    assert "the CUDA kernel `vector_add_kernel` of kernel.cu" in got["doc"]
    assert "verified on sim" in got["doc"]
    assert (
        "license is not stated in kernel.cu" in got["doc"]
        or "License of the original" in got["doc"]
    )
    tests = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "--pyargs"]
        + ["vector_add.test_kernel"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=clean,
    )
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert "passed" in tests.stdout and "mlxport (the simulator) is not installed" in tests.stdout
    again = cli("export", str(port), "--out", str(tmp_path / "dist"))
    assert again.returncode == 2 and "exists" in again.stderr


def test_a_kernels_layout_export_loads_as_the_kernels_library_loads_a_variant(port, tmp_path, cli):
    result = cli("export", str(port), "--out", str(tmp_path), "--layout", "kernels")
    assert result.returncode == 0, result.stderr
    repo = tmp_path / "vector-add"
    build = tomllib.loads((repo / "build.toml").read_text())
    assert build["general"] | {"license": "x"} == {
        "name": "vector_add",
        "version": 1,
        "edition": 5,
        "license": "x",
        "backends": ["metal"],
    }
    assert "torch-noarch" in build and (repo / "torch-ext" / "vector_add" / "__init__.py").is_file()
    assert (repo / "CARD.md").read_text().startswith("---\nlibrary_name: kernels\n")
    variant = repo / "build" / "torch-metal"
    meta = json.loads((variant / "metadata.json").read_text())
    assert {"id", "name", "version", "license", "backend", "digest"} <= set(meta) and meta[
        "backend"
    ] == {"type": "metal"}
    for name, digest in meta["digest"]["files"].items():
        assert hashlib.sha256((variant / name).read_bytes()).hexdigest() == digest, name
    assert "vector_add/__init__.py" in meta["digest"]["files"]  # the folder named as the repository
    # As kernels' importer does: the variant's __init__.py imported as a package named by
    # metadata's id.
    load = (
        "import importlib.util, json, sys, pathlib\n"
        f"variant = pathlib.Path({str(variant)!r})\n"
        "name = json.loads((variant / 'metadata.json').read_text())['id']\n"
        "spec = importlib.util.spec_from_file_location(name, variant / '__init__.py', "
        "submodule_search_locations=[str(variant)])\n"
        "op = importlib.util.module_from_spec(spec); sys.modules[name] = op; "
        "spec.loader.exec_module(op)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", load + CALL],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert (
        got["sum"] == 16.0 and got["backend"] == "reference" and "vector_add_kernel" in got["doc"]
    )
    bad = cli("export", str(port), "--out", str(tmp_path), "--layout", "wheel")
    assert bad.returncode == 2 and "--layout pip or --layout kernels" in bad.stderr
