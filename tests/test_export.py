"""`mlxport export` turns a verified port into a package that pip installs and that imports and
runs outside mlxport's folders."""

import json
import subprocess
import sys

from mlxport.agent.models import ScriptedModel
from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig
from mlxport.tasks import expert_ports, load_task

TASK = load_task("vector_add")
PORT = expert_ports(TASK)["msl"]


def test_an_exported_port_pip_installs_imports_and_names_its_origin(tmp_path, cli):
    args = {k: v for k, v in PORT.model_dump(mode="json", exclude_defaults=True).items() if k != "language"}
    scripted = ScriptedModel(script=[{"tool_calls": [{"name": "compile_kernel", "args": args}]},
                                     {"tool_calls": [{"name": "run_correctness", "args": {"candidate_id": PORT.id}}]},
                                     {"tool_calls": [{"name": "finish", "args": {}}]}])
    run_port(TASK, RunConfig(backend="sim", extra_seeds=0), tmp_path / "out", model=scripted)
    result = cli("export", str(tmp_path / "out" / "vector_add"), "--out", str(tmp_path / "dist"))
    assert result.returncode == 0, result.stderr
    package = tmp_path / "dist" / "mlxport-vector-add"
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(site), str(package)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-2000:]
    code = ("import warnings, json, mlx.core as mx, vector_add as op\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    out = op.vector_add(mx.ones(8), mx.ones(8))\n"
            "print(json.dumps({'backend': op.backend, 'sum': float(out.sum()), 'warned': [str(x.message) for x in w],\n"
            "                  'doc': op.__doc__}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["sum"] == 16.0 and got["backend"] == "reference"  # no GPU here: the reference, and it says so
    assert any("runs its reference implementation" in w for w in got["warned"])
    assert "the CUDA kernel `vector_add_kernel` of kernel.cu" in got["doc"] and "verified on sim" in got["doc"]
    assert "license is not stated in kernel.cu" in got["doc"] or "License of the original" in got["doc"]
    again = cli("export", str(tmp_path / "out" / "vector_add"), "--out", str(tmp_path / "dist"))
    assert again.returncode == 2 and "exists" in again.stderr
