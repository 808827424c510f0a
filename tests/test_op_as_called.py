"""Ports of bare .cu files judged by what the user runs: the written kernel.py, called the way the
original's caller calls it, at sizes and values nobody chose for the test."""

import importlib.util

import mlx.core as mx
import numpy as np

from tests.conftest import ROOT

EXAMPLES = ROOT / "tests" / "cuda_exec"


def _op(folder, name: str):
    spec = importlib.util.spec_from_file_location(f"op_{name}", folder / name / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.backend = "sim"
    return module


def test_a_histograms_bins_come_from_the_call_and_its_data_index_them(tmp_path, cli):
    result = cli("port", str(EXAMPLES / "histogram.cu"), "--case", "n=1000,nbins=10",
                 "--out", str(tmp_path))  # fmt: skip
    assert result.returncode == 0 and "verified on sim" in result.stdout, result.stdout[-2000:]
    report = (tmp_path / "histogram" / "report.md").read_text()
    assert "| data | int32 | [n] | integers in [0, nbins) |" in report  # never all zeros
    op = _op(tmp_path, "histogram")
    data = np.random.default_rng(0).integers(0, 37, 5000).astype(np.int32)
    bins = op.histogram(mx.array(data), nbins=37)  # the size no input's shape gives
    assert np.array_equal(np.array(bins), np.bincount(data, minlength=37))


def test_an_image_the_host_sizes_w_times_h_is_taken_as_rows_of_w(tmp_path, cli):
    result = cli("port", str(EXAMPLES / "box_blur.cu"), "--case", "w=40,h=30",
                 "--out", str(tmp_path))  # fmt: skip
    assert result.returncode == 0 and "verified on sim" in result.stdout, result.stdout[-2000:]
    op = _op(tmp_path, "box3")
    img = np.random.default_rng(1).integers(0, 256, (23, 51)).astype(np.uint8)
    out = np.array(op.box3(mx.array(img))).astype(np.int64)
    src, ref = img.astype(np.int64), np.zeros(img.shape, np.int64)
    for y in range(src.shape[0]):
        for x in range(src.shape[1]):
            window = src[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2]
            ref[y, x] = window.sum() // window.size
    assert np.array_equal(out, ref)


def test_a_product_is_split_with_the_row_stride_last():
    from mlxport.tasks.make.cases import dims, row_strides

    body = "out[y * w + x] = in[(yy * w) + xx]; t[r * cols + c] = 0;"
    assert row_strides(body, "in") == {"yy", "w"} and dims("w * h", {"yy", "w"}) == ["h", "w"]
    assert dims("rows * cols", row_strides(body, "t")) == ["rows", "cols"]
    assert dims("2 * n") == ["2 * n"]
    row = "const float* x = inp + bt * C; float* w = weight + oc * C;"  # llm.c's matmul
    assert dims("C * BT", row_strides(row, "inp")) == ["BT", "C"]
    assert dims("C * OC", row_strides(row, "weight")) == ["OC", "C"]
