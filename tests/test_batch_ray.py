"""A batch on a real local Ray cluster (`ray start --head` in a subprocess) whose node offers the
`sim` resource and two declared (fake) GPUs with the `cuda` resource: each port is a Ray task placed
by that resource, and a CUDA port holds one GPU of its own."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from small_tasks import small_task

from mlxport.batch import read_events, run_batch
from mlxport.errors import UserError
from mlxport.tasks import SUITE_DIR


@pytest.fixture(autouse=True, scope="module")
def _ray():
    """Imported when these tests run, not at collection (where every worker would import it)."""
    pytest.importorskip("ray", reason="needs Ray: pip install -e '.[ray]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    port, temp = free_port(), tempfile.mkdtemp(prefix="ray")
    cmd = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--num-cpus=2",
        "--num-gpus=2",
        '--resources={"sim": 2, "cuda": 2}',
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    ]
    head = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    address = f"127.0.0.1:{port}"
    try:
        lines = []
        for line in head.stdout:  # `--block` prints this once the node is up, then blocks
            lines.append(line)
            if "block forever" in line:
                break
        assert head.poll() is None, "the Ray head did not start:\n" + "".join(lines[-20:])
        threading.Thread(target=head.stdout.read, daemon=True).start()  # keep its pipe drained
        yield address
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def test_batch_runs_on_a_ray_cluster(cluster, tmp_path):
    manifest = tmp_path / "batch.toml"
    tasks = [small_task(t, tmp_path / "tasks") for t in ("vector_add", "softmax_rows")]
    manifest.write_text("".join(f'[[port]]\ntask = "{t}"\n' for t in tasks))
    out = tmp_path / "out"
    summary = json.loads(
        run_batch(
            manifest, out=out, ray_address=cluster, budget={"backend": "sim", "extra_seeds": 0}
        ).read_text()
    )
    assert summary["ray"] == cluster and summary["totals"]["verified"] == 2
    assert [r["status"] for r in summary["tasks"]] == ["done", "done"]
    events = read_events(out)
    assert {e["task"] for e in events if e["event"] == "submitted" and e["resource"] == "sim"} == {
        "vector_add",
        "softmax_rows",
    }
    workers = {e["pid"] for e in events if e["event"] == "start"}
    assert os.getpid() not in workers, "ports ran in Ray workers, not in the driver"
    # Run again: both are skipped, still through the cluster.
    again = json.loads(
        run_batch(manifest, out=out, ray_address=cluster, budget={"backend": "sim"}).read_text()
    )
    assert [r["status"] for r in again["tasks"]] == ["skipped", "skipped"]


def test_a_backend_no_node_offers_is_refused(cluster, tmp_path):
    with pytest.raises(UserError, match="offers the 'metal' resource"):
        run_batch(
            SUITE_DIR / "vector_add", out=tmp_path, ray_address=cluster, budget={"backend": "metal"}
        )


def test_each_cuda_port_holds_one_gpu_and_its_worker_sees_only_that_device(cluster, tmp_path):
    manifest = tmp_path / "batch.toml"
    manifest.write_text(
        "".join(f'[[port]]\ntask = "{t}"\n' for t in ("vector_add", "softmax_rows", "gelu_tanh"))
    )
    out = tmp_path / "out"
    run_batch(manifest, out=out, ray_address=cluster, budget={"backend": "cuda"})
    placed = [e for e in read_events(out) if e["event"] == "placed"]
    assert sorted(e["task"] for e in placed) == ["gelu_tanh", "softmax_rows", "vector_add"]
    # the node's GPUs are declared, not real: each port then fails on the missing device
    for e in placed:
        assert (
            len(e["gpus"]) == 1 and e["gpus"][0] in ("0", "1") and e["visible"] == e["gpus"][0]
        ), e


def test_cuda_ports_on_a_cluster_without_gpus_are_refused(cli, tmp_path):
    """A local cluster offering the 'cuda' resource but, on this machine, no GPU: one sentence and a
    non-zero exit, before any port is submitted (one would wait for a GPU forever)."""
    result = cli(
        "batch",
        str(SUITE_DIR / "vector_add"),
        "--ray",
        "local",
        "--backend",
        "cuda",
        "--out",
        str(tmp_path),
        timeout=120,
    )
    assert result.returncode != 0 and "offers 'cuda' but no GPU" in result.stderr, result.stderr[
        -2000:
    ]
    assert "Traceback" not in result.stderr and not (tmp_path / "vector_add").exists()
