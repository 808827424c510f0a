"""Which bandwidth a benchmark reports a fraction of: this device's calibration, else the
datasheet figure of a known Apple chip, each labelled; never another machine's calibration."""

import json

import pytest

from mlxport.backends import availability, calibration, get_backend
from mlxport.backends.gpu_worker import _bandwidth


def store(tmp_path, monkeypatch, data):
    monkeypatch.setenv("MLXPORT_CACHE", str(tmp_path))
    calibration.path().parent.mkdir(parents=True, exist_ok=True)
    calibration.path().write_text(json.dumps(data))


def test_calibration_is_kept_per_device(tmp_path, monkeypatch):
    store(tmp_path, monkeypatch, {"devices": {"NVIDIA H200": {"copy_gbs": 3700.0, "date": "2026-11-30"}}})
    assert calibration.load("NVIDIA H200")["copy_gbs"] == 3700.0
    assert calibration.load("Apple M3 Max") is None
    got = _bandwidth("NVIDIA H200")
    assert got["bandwidth_gbs"] == 3700.0 and "calibrate" in got["bandwidth_basis"]


def test_the_older_single_device_file_still_loads(tmp_path, monkeypatch):
    store(tmp_path, monkeypatch, {"device_name": "NVIDIA H200", "copy_gbs": 2852.0})
    assert calibration.load("NVIDIA H200")["copy_gbs"] == 2852.0


def test_uncalibrated_apple_chip_falls_back_to_the_knowledge_base(tmp_path, monkeypatch):
    store(tmp_path, monkeypatch, {"devices": {}})
    got = _bandwidth("Apple M3 Max")
    assert got["bandwidth_gbs"] == 400.0 and "datasheet" in got["bandwidth_basis"]
    assert _bandwidth("NVIDIA H200") == {}  # no datasheet figure: no fraction rather than a wrong one


@pytest.mark.skipif(not availability()["cuda"].ok, reason="needs MLX's CUDA backend")
def test_the_cuda_copy_kernels_copy():
    """The calibration's copy kernel sets the bandwidth every CUDA fraction is of; its variants
    (benchmarks/port_variants.py) must copy too. Sizes cover a partial last block."""
    import numpy as np

    backend = get_backend("cuda")
    for cand in (calibration.copy_candidate("cuda"),
                 calibration.copy_candidate("cuda", load="__ldcs", store="__stcs(dst + i, v[k])", nvec=8, name="cp8")):
        for n in (4, 4096 + 12, 1 << 20):
            x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
            run = backend.run(cand, {"x": x})
            assert run.ok and np.array_equal(run.outputs[0], x), run.error

