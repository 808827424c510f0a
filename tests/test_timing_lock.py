"""Timings of mlxport processes sharing a GPU take turns (backends.base.timing_lock): real
processes, a real lock file."""

import os
import subprocess
import sys
import time

HOLD = """
import sys, time
from mlxport.backends.base import timing_lock
with timing_lock("cuda"):
    print("in", time.time(), flush=True)
    time.sleep(float(sys.argv[1]))
    print("out", time.time(), flush=True)
"""


def test_a_second_process_waits_for_the_first_to_finish_timing(tmp_path):
    env = {**os.environ, "MLXPORT_CACHE": str(tmp_path)}
    first = subprocess.Popen([sys.executable, "-c", HOLD, "1.0"], env=env, stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().startswith("in")  # the first holds the lock now
    second = subprocess.run([sys.executable, "-c", HOLD, "0"], env=env, capture_output=True, text=True, timeout=60)
    first_out = float(first.stdout.readline().split()[1])
    first.wait(timeout=60)
    second_in = float(second.stdout.split()[1])
    assert second_in >= first_out, (first_out, second_in)
    assert (tmp_path / "locks" / "cuda-timing.lock").exists()


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    env = {**os.environ, "MLXPORT_CACHE": str(tmp_path)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, "600"], env=env, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().startswith("in")
    holder.kill()
    holder.wait(timeout=60)
    t0 = time.time()
    after = subprocess.run([sys.executable, "-c", HOLD, "0"], env=env, capture_output=True, text=True, timeout=60)
    assert after.stdout.startswith("in") and time.time() - t0 < 30
