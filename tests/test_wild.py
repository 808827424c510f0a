"""benchmarks/wild.py, the corpus measure, on a snapshot made here: a bare git repository holding
one of this project's own example kernels (the corpus's real snapshots are fetched,
never committed)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "tests" / "cuda_exec" / "softmax_readback.cu"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_wild_script_reads_runs_ports_and_calls_the_op_of_a_kernel_from_a_snapshot(tmp_path):
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "softmax.cu").write_text(KERNEL.read_text())
    git("init", "-q", cwd=work)
    git("add", ".", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "k", cwd=work)
    commit = git("rev-parse", "HEAD", cwd=work)
    mirror = tmp_path / "mirror"
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(mirror / "me+kernels" / "repo")], check=True
    )
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(
        f'[[kernel]]\nid = "mine/softmax_rows"\nrepo = "me/kernels"\ncommit = "{commit}"\n'
        f'path = "src/softmax.cu"\nkernel = "softmax_rows"\ncase = "N=64,C=40"\n'
        f'[[kernel]]\nid = "mine/missing"\nrepo = "me/kernels"\ncommit = "{commit}"\n'
        f'path = "src/softmax.cu"\nkernel = "no_such_kernel"\ncase = "N=64"\n'
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "wild.py"),
            str(mirror),
            "--manifest",
            str(manifest),
            "--out",
            str(out),
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    listed = json.loads((out / "wild.json").read_text())
    assert [r["id"] for r in listed] == ["mine/softmax_rows", "mine/missing"]  # manifest order
    rows = {r["id"]: r for r in listed}
    assert rows["mine/softmax_rows"] | {"seconds": 0} == {
        "id": "mine/softmax_rows",
        "parsed": True,
        "executed": True,
        "translated": True,
        "verified": True,
        "op_correct": True,  # its kernel.py at sizes drawn afresh, against the original
        "reason": "",
        "seconds": 0,
    }
    assert not rows["mine/missing"]["parsed"] and "no_such_kernel" in rows["mine/missing"]["reason"]
    assert "| mine | 2 | 1 | 1 | 1 | 1 | 1 |" in (out / "wild.md").read_text()
