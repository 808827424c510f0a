"""The simulator's compiler: the system's C++ compiler where one compiles its dialect, zig's only
where none does, and a first build that says what it is doing."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from mlxport.backends.sim.compiler import CompilerMissing, find_compiler

SYSTEM = next((shutil.which(n) for n in ("g++", "clang++") if shutil.which(n)), None)
needs_system = pytest.mark.skipif(
    SYSTEM is None, reason="no system C++ compiler (g++ or clang++) here"
)


def fake(bin_dir, name, *, compiles: bool):
    script = bin_dir / name
    script.write_text(
        f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{name} (Old) 9.1.0'; exit 0; fi\n"
        + ("exit 0\n" if compiles else "echo 'error: _Float16 is not supported' >&2; exit 1\n")
    )
    script.chmod(0o755)


@needs_system
def test_a_system_compiler_that_lacks_float16_is_passed_over_for_the_next(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake(bin_dir, "c++", compiles=False)
    os.symlink(SYSTEM, bin_dir / os.path.basename(SYSTEM))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    cc = find_compiler()
    assert cc.command == (os.path.basename(SYSTEM),)


@pytest.mark.skipif(
    importlib.util.find_spec("ziglang") is not None,
    reason="ziglang is installed: zig would be used",
)
def test_no_compiler_at_all_is_one_sentence_naming_the_fixes(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake(bin_dir, "c++", compiles=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(CompilerMissing) as e:
        find_compiler()
    assert "does not compile C++20 with _Float16" in str(
        e.value
    ) and "pip install 'mlxport[zig]'" in str(e.value)


@needs_system
def test_the_first_runtime_build_is_announced_and_later_ones_are_silent(tmp_path):
    code = "from mlxport.backends.sim.build import runtime_object; runtime_object()"
    env = {**os.environ, "MLXPORT_CACHE": str(tmp_path / "cache")}
    env.pop("CXX", None)
    first = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert first.returncode == 0, first.stderr
    assert "building the simulator runtime, once for this compiler (seconds)" in first.stderr
    assert "the simulator runtime is built" in first.stderr
    again = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert again.returncode == 0 and again.stderr == ""
