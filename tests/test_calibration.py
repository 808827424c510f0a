"""Which bandwidth a benchmark reports a fraction of: this device's calibration, else the
datasheet figure of a known Apple chip, each labelled; never another machine's calibration."""

import json
import os
import subprocess
import sys

import pytest

from mlxport.backends import availability, calibration, get_backend
from mlxport.backends.gpu_worker import _bandwidth
from mlxport.knowledge import hardware_profile


def store(tmp_path, monkeypatch, data):
    monkeypatch.setenv("MLXPORT_CACHE", str(tmp_path))
    calibration.path().parent.mkdir(parents=True, exist_ok=True)
    calibration.path().write_text(json.dumps(data))


def test_calibration_is_kept_per_device(tmp_path, monkeypatch):
    store(
        tmp_path,
        monkeypatch,
        {"devices": {"NVIDIA H200": {"copy_gbs": 3700.0, "date": "2026-11-30"}}},
    )
    assert calibration.load("NVIDIA H200")["copy_gbs"] == 3700.0
    assert calibration.load("Apple M3 Max") is None
    got = _bandwidth("NVIDIA H200", None)
    assert got["bandwidth_gbs"] == 3700.0 and "calibrate" in got["bandwidth_basis"]


def test_the_older_single_device_file_still_loads(tmp_path, monkeypatch):
    store(tmp_path, monkeypatch, {"device_name": "NVIDIA H200", "copy_gbs": 2852.0})
    assert calibration.load("NVIDIA H200")["copy_gbs"] == 2852.0


def test_uncalibrated_apple_chip_falls_back_to_the_knowledge_base(tmp_path, monkeypatch):
    store(tmp_path, monkeypatch, {"devices": {}})
    got = _bandwidth("Apple M3 Max", hardware_profile("M3 Max").datasheet())
    assert got["bandwidth_gbs"] == 400.0 and "M3 Max datasheet" in got["bandwidth_basis"]
    # no datasheet figure: no fraction rather than a wrong one
    assert _bandwidth("NVIDIA H200", None) == {}


@pytest.mark.skipif(not availability()["cuda"].ok, reason="needs MLX's CUDA backend")
def test_the_cuda_copy_kernels_copy():
    """The calibration's copy kernel sets the bandwidth every CUDA fraction is of; its variants
    (benchmarks/port_variants.py) must copy too. Sizes cover a partial last block."""
    import numpy as np

    backend = get_backend("cuda")
    for cand in (
        calibration.copy_candidate("cuda"),
        calibration.copy_candidate(
            "cuda", load="__ldcs", store="__stcs(dst + i, v[k])", nvec=8, name="cp8"
        ),
    ):
        for n in (4, 4096 + 12, 1 << 20):
            x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
            run = backend.run(cand, {"x": x})
            assert run.ok and np.array_equal(run.outputs[0], x), run.error


def test_wall_clock_timer_interleaves_functions_in_rounds():
    """Without MLX's CUDA backend and torch (this machine) the timer reads the wall clock."""
    import mlx.core as mx

    from mlxport.backends import timer

    if mx.cuda.is_available():
        pytest.skip("the wall-clock path, where MLX has no CUDA backend")
    sets = [{"x": mx.ones((256, 256)) * (i + 1)} for i in range(3)]
    got = timer.samples(
        {"small": lambda s: s["x"] + 1, "matmul": lambda s: s["x"] @ s["x"]},
        sets,
        warmup=1,
        iters=6,
    )
    assert set(got) == {"small", "matmul"} and all(len(v) == 6 and min(v) > 0 for v in got.values())
    assert timer.basis() == timer.basis(calls_in_order=True) == timer.WALL


def test_profiler_trace_is_split_at_markers_into_calls():
    from mlxport.backends.timer import MARKER, split_at_markers

    def kernel(name, ts, dur=1.0, cat="kernel"):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}

    events = [
        kernel("warm_up_before_any_marker", 0),
        kernel(f"custom_kernel_{MARKER}", 10),
        kernel("fill", 11),
        kernel("port", 13, 5.0),
        kernel(f"custom_kernel_{MARKER}", 20),
        kernel(f"custom_kernel_{MARKER}", 21),
        kernel("native", 30, 2.0),
        kernel("memset", 33, cat="gpu_memset"),
        kernel(f"custom_kernel_{MARKER}", 40),
        kernel("after", 41),
    ]
    segments = split_at_markers(list(reversed(events)))  # start order comes from the timestamps
    # a function that launched nothing leaves an empty stretch, so the ones after it stay aligned
    assert [[e["name"] for e in s] for s in segments] == [
        ["fill", "port"],
        [],
        ["native", "memset"],
    ]


@pytest.mark.skipif(not availability()["cuda"].ok, reason="needs MLX's CUDA backend")
def test_cuda_timer_reads_device_time_with_calls_in_order():
    """In a process like the timing worker (CUDA graphs off), with torch's profiler present, the
    timer reads device time: one sample per round, a copy of 256 MiB slower than one of 64 MiB."""
    pytest.importorskip("torch")
    code = (
        "import mlx.core as mx, json\n"
        "from mlxport.backends import timer\n"
        "sets = [{'x': mx.ones((1 << 24,)) * i} for i in range(3)]\n"
        "big = [{'x': mx.ones((1 << 26,)) * i} for i in range(3)]\n"
        "got = timer.samples({'small': lambda s: s['x'] + 1, 'big': lambda s: big[0]['x'] + 1}, "
        "sets, warmup=2, iters=30)\n"
        "print(json.dumps({'basis': timer.basis(), 'got': got}))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MLX_USE_CUDA_GRAPHS": "0"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["basis"] == "device time (CUDA profiler), calls in order"
    assert all(len(v) == 10 for v in out["got"].values())
    assert min(out["got"]["big"]) > 2 * max(out["got"]["small"])
