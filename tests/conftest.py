import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
    """Run the real ``mlxport`` entry point in a subprocess."""
    return subprocess.run([sys.executable, "-m", "mlxport.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=timeout, env={**os.environ, **(env or {})}, input=input)


@pytest.fixture
def cli():
    return run_cli
