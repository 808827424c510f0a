"""The README's own-kernel example, run as printed in a folder of its own: the port of
examples/attention.cu verifies, its kernel.py runs at a size no case had (N=128) and matches
attention, its test_kernel.py passes, and the task folder form checks."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def readme_block(after: str, lang: str) -> str:
    start = README.index(f"```{lang}\n", README.index(after)) + len(lang) + 4
    return README[start : README.index("```", start)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clone")
    shutil.copytree(ROOT / "examples", folder / "examples")
    return folder


def test_the_readme_port_of_attention_works_as_a_user_calls_it(clone, cli, written_tests):
    commands = readme_block("## Your own kernel", "bash").splitlines()
    port = next(c for c in commands if c.startswith("mlxport port"))
    args = [a.strip("'") for a in port.split()[1:]]
    result = cli(*args, cwd=clone, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "verified on sim" in result.stdout
    use = readme_block("The op it writes takes", "python")
    check = (
        use
        + "ref = mx.fast.scaled_dot_product_attention(Q, K, V, scale=32 ** -0.5)\n"
        + "assert float(mx.abs(O - ref).max()) < 1e-4, float(mx.abs(O - ref).max())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MLXPORT_KERNEL_BACKEND"}  # as printed
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    tests = written_tests("-q", "-p", "no:cacheprovider", clone / "mlxport-out/forward_kernel")
    assert tests.returncode == 0 and "passed" in tests.stdout, tests.stdout[-2000:]


def test_the_readme_task_folder_of_attention_checks(clone, cli):
    commands = readme_block("## Your own kernel", "bash").splitlines()
    for line in commands[1:]:
        args = [a.strip("'") for a in line.split("#")[0].split()[1:]]
        result = cli(*args, cwd=clone, timeout=600)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "checks passed" in result.stdout
