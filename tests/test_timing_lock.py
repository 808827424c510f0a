"""Timings of mlxport processes sharing a GPU take turns (backends.base.timing_lock): real
processes, a real lock file."""

import os
import subprocess
import sys
import time

# argv: seconds to hold; a file to wait for first while holding (or -); a file to make on asking
HOLD = """
import os, sys, time
from mlxport.backends.base import timing_lock
print("asking", time.time(), flush=True)
if len(sys.argv) > 3:
    open(sys.argv[3], "w").close()
with timing_lock("cuda"):
    print("in", time.time(), flush=True)
    while len(sys.argv) > 2 and sys.argv[2] != "-" and not os.path.exists(sys.argv[2]):
        time.sleep(0.05)
    time.sleep(float(sys.argv[1]))
    print("out", time.time(), flush=True)
"""


def stamps(text: str) -> dict[str, float]:
    return {word: float(t) for word, t in (line.split() for line in text.splitlines())}


def test_a_second_process_waits_for_the_first_to_finish_timing(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    asked = tmp_path / "asked"  # the first holds the lock until the second has asked for it
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, "0.5", str(asked)], env=env, stdout=subprocess.PIPE, text=True
    )
    first.stdout.readline()
    assert first.stdout.readline().startswith("in")  # the first holds the lock now
    second = stamps(
        subprocess.run(
            [sys.executable, "-c", HOLD, "0", "-", str(asked)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    first_out = stamps(first.stdout.read())["out"]
    first.wait(timeout=60)
    # it asked while the first held it
    assert second["asking"] < first_out <= second["in"], (second, first_out)
    assert any(tmp_path.glob("mlxport-*/cuda*.lock"))


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, "600"], env=env, stdout=subprocess.PIPE, text=True
    )
    holder.stdout.readline()
    assert holder.stdout.readline().startswith("in")
    holder.kill()
    holder.wait(timeout=60)
    t0 = time.time()
    after = subprocess.run(
        [sys.executable, "-c", HOLD, "0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert "in" in stamps(after.stdout) and time.time() - t0 < 30


def test_processes_on_other_gpus_do_not_wait(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, "600"],
        env={**env, "CUDA_VISIBLE_DEVICES": "0"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        holder.stdout.readline()
        assert holder.stdout.readline().startswith("in")
        other = subprocess.run(
            [sys.executable, "-c", HOLD, "0"],
            env={**env, "CUDA_VISIBLE_DEVICES": "1"},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert "out" in stamps(other.stdout)
    finally:
        holder.kill()
        holder.wait(timeout=60)
