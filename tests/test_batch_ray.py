"""A batch on a real local Ray cluster (`ray start --head` in a subprocess) whose node offers the
`sim` resource: each port is a Ray task placed by that resource."""

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

ray = pytest.importorskip("ray", reason="needs Ray: pip install -e '.[ray]'")

from mlxport.batch import read_events, run_batch  # noqa: E402
from mlxport.errors import UserError  # noqa: E402
from mlxport.tasks import SUITE_DIR  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    port, temp = free_port(), tempfile.mkdtemp(prefix="ray")
    cmd = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
           '--resources={"sim": 2}', "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"]
    head = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
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
    manifest.write_text('[[port]]\ntask = "vector_add"\n\n[[port]]\ntask = "softmax_rows"\n')
    out = tmp_path / "out"
    summary = json.loads(run_batch(manifest, out=out, ray_address=cluster,
                                   budget={"backend": "sim", "extra_seeds": 0}).read_text())
    assert summary["ray"] == cluster and summary["totals"]["verified"] == 2
    assert [r["status"] for r in summary["tasks"]] == ["done", "done"]
    events = read_events(out)
    assert {e["task"] for e in events if e["event"] == "submitted" and e["resource"] == "sim"} == {"vector_add",
                                                                                                   "softmax_rows"}
    workers = {e["pid"] for e in events if e["event"] == "start"}
    assert os.getpid() not in workers, "ports ran in Ray workers, not in the driver"
    # Run again: both are skipped, still through the cluster.
    again = json.loads(run_batch(manifest, out=out, ray_address=cluster, budget={"backend": "sim"}).read_text())
    assert [r["status"] for r in again["tasks"]] == ["skipped", "skipped"]


def test_a_backend_no_node_offers_is_refused(cluster, tmp_path):
    with pytest.raises(UserError, match="offers the 'metal' resource"):
        run_batch(SUITE_DIR / "vector_add",
                  out=tmp_path, ray_address=cluster, budget={"backend": "metal"})
