"""Verified means the op works: a port of a bare .cu file, written as the op a user takes home
(kernel.py) and called as the original's caller calls it, on shaped inputs at sizes no case drew,
compared with numpy."""

import inspect
import tomllib

import mlx.core as mx
import numpy as np
import pytest

from mlxport.backends.op_call import load
from mlxport.op import write_op
from mlxport.tasks import load_task
from mlxport.tasks.make import TaskRequest, from_cuda, write_task
from mlxport.translate.translator import translate_task
from tests.conftest import ROOT

TRANSPOSE = """
#define TILE 32
#define ROWS 8
__global__ void transpose(float* out, const float* in, int width, int height) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < width && y + j < height)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < height && y + j < width)
            out[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}
void run(float* out, const float* in, int width, int height) {
    dim3 grid((width + TILE - 1) / TILE, (height + TILE - 1) / TILE);
    transpose<<<grid, dim3(TILE, ROWS)>>>(out, in, width, height);
}
"""

ROW_NORM = """
__global__ void row_scale(const float* x, float* y, int cols) {
    int row = blockIdx.x;
    __shared__ float s[256];
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        acc += x[row * cols + c] * x[row * cols + c];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    float inv = rsqrtf(s[0] / cols + 1e-5f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[row * cols + c] = x[row * cols + c] * inv;
}
void launch(float* x, float* y, int rows, int cols) {
    row_scale<<<rows, 256>>>(x, y, cols);
}
"""


def ported(tmp_path, source: str | None, case: dict, path=None, **fields):
    """The task made from ``source``, its rule-based translation written as the op, and the op
    loaded to run on the simulator."""
    if path is None:
        path = tmp_path / "kernel_src.cu"
        path.write_text(source)
    built = from_cuda(TaskRequest(source=path, cases=[case], **fields), heldout=3)
    task = load_task(write_task(built, tmp_path / "task", path))
    candidate = translate_task(task, "msl").candidate
    folder = write_op(tmp_path / "op", task, candidate, label="verified", model="rules")
    return load(folder, "sim"), built


def test_a_transpose_made_at_a_square_case_transposes_a_non_square_array(tmp_path):
    op, built = ported(tmp_path, TRANSPOSE, {"width": 64, "height": 64})
    assert built.task["inputs"][0]["shape"] == ["height", "width"]  # in[(y + j) * width + x]
    # a held-out case that leaves width == height cannot tell [height, width] from [width, height]
    assert all(c["width"] != c["height"] for c in built.task["cases"]["heldout"][:2])
    a = np.random.default_rng(0).standard_normal((24, 70)).astype(np.float32)
    out = np.array(op.transpose(mx.array(a)))
    assert out.shape == (70, 24) and np.array_equal(out, a.T)


def test_a_raw_pointer_launcher_takes_its_sizes_from_the_arrays_shape(tmp_path):
    op, _ = ported(tmp_path, ROW_NORM, {"rows": 8, "cols": 100})
    assert str(op.SIGNATURE) == "(x, *, cols=None)"  # rows and cols from x; no n_y, no frozen 100
    x = np.random.default_rng(1).standard_normal((4, 300)).astype(np.float32)
    y = np.array(op.row_scale(mx.array(x)))
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    assert y.shape == (4, 300) and np.allclose(y, want, atol=1e-5)
    with pytest.raises(ValueError, match=r"got cols=7, but its inputs' shapes give cols = 300"):
        op.row_scale(mx.array(x), cols=7)


def test_host_constants_are_fixed_and_the_scalars_they_give_derived_by_value(tmp_path):
    source = ROOT / "examples" / "attention.cu"
    op, built = ported(
        tmp_path, None, {"B": 1, "nh": 2, "N": 64, "d": 32}, path=source, kernel="forward_kernel"
    )
    params = {p["name"]: p.get("expr") for p in built.task["params"]}
    assert params["Bc"] == params["Br"] == "32" and params["Tr"] == "ceildiv(N, 32)"
    assert list(inspect.signature(op.forward_kernel).parameters) == ["Q", "K", "V", "N", "d"]
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 1, 80, 16)).astype(np.float32) for _ in range(3))
    *_, o = op.forward_kernel(mx.array(q), mx.array(k), mx.array(v))
    s = q @ k.transpose(0, 1, 3, 2) / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    assert np.allclose(np.array(o), (p / p.sum(-1, keepdims=True)) @ v, atol=1e-4)


def _small_vector_add():
    from mlxport.tasks import expert_ports

    task = load_task("vector_add")
    cases = {"visible": [{"N": 4096}], "heldout": [{"N": 7}, {"N": 4099}]}
    task = task.model_copy(
        update={"cases": task.cases.model_copy(update=cases), "dtypes": ["float32"]}
    )
    return task, expert_ports(task)["msl"]


def test_a_path_only_large_sizes_take_is_drawn_and_run(tmp_path):
    """A grid capped at 64 blocks and no loop over the rest: right up to n = 16384, wrong past it.
    Sizes near the task's cases never get there; the op check moves them until they do."""
    from mlxport.backends import get_backend
    from mlxport.op.check import check_op, golden_cases
    from mlxport.tools.final import op_cases

    task, port = _small_vector_add()
    capped = port.model_copy(
        update={
            "grid": ["min(ceildiv(a.shape[0], 256), 64) * 256", 1, 1],
            "source": "uint i = thread_position_in_grid.x;\n"
            "if (i < a_shape[0]) out[i] = a[i] + b[i];\n",
        }
    )
    found = op_cases(task, capped, seed=3)
    large = [c for c in found.paths if c["N"] > 16384]
    assert large and not found.unreached, found.notes
    assert any("ceildiv(a.shape[0], 256) <= 64 is false" in n for n in found.notes)
    folder = write_op(tmp_path / "op", task, capped, label="t", model="t")
    (result,) = check_op(folder, task, get_backend("sim"), golden_cases(task, large[:1], seed=3))
    assert result.verdict == "fail"


def test_a_path_no_size_under_the_cap_takes_is_said_and_not_verified():
    from mlxport.tools.final import op_cases

    task, port = _small_vector_add()
    huge = port.model_copy(
        update={
            "source": "uint i = thread_position_in_grid.x;\n"
            "if (a_shape[0] > 100000000) return;\nout[i] = a[i] + b[i];\n"
        }
    )
    (unreached,) = op_cases(task, huge, seed=3).unreached
    assert "a.shape[0] > 100000000 is true" in unreached
    assert "runs only at sizes larger than the check draws" in unreached


def test_each_launch_the_hosts_branches_pick_runs_in_a_held_out_case(tmp_path):
    path = tmp_path / "branch.cu"
    path.write_text(
        "__global__ void scale_rows(const float* x, float* y, int cols, float s) {\n"
        "  for (int c = threadIdx.x; c < cols; c += blockDim.x)\n"
        "    y[blockIdx.x * cols + c] = s * x[blockIdx.x * cols + c];\n}\n"
        "void launch(const float* x, float* y, int rows, int cols, float s) {\n"
        "  int threads = cols > 200 ? 256 : 32;\n"
        "  scale_rows<<<rows, threads>>>(x, y, cols, s);\n}\n"
    )
    built = from_cuda(TaskRequest(source=path, cases=[{"rows": 8, "cols": 100, "s": 0.5}]))
    blocks = {tuple(x["block"]) for x in built.task["original"]["launches"]}
    assert blocks == {(32, 1, 1), (256, 1, 1)}, built.task["original"]["launches"]
    said = "block [256, 1, 1], a launch of its host code no other case takes"
    assert any(said in n for n in built.notes)


HISTOGRAM = """
#include <torch/extension.h>
__global__ void hist_kernel(const int* data, int* bins, int n, int nbins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int b = data[i];
        if (b >= 0 && b < nbins) atomicAdd(&bins[b], 1);
    }
}
torch::Tensor hist(torch::Tensor data, int nbins) {
    int n = data.size(0);
    auto bins = torch::zeros({nbins}, data.options());
    hist_kernel<<<(n + 255) / 256, 256>>>(data.data_ptr<int>(), bins.data_ptr<int>(), n, nbins);
    return bins;
}
"""


def test_an_integer_compared_with_a_size_is_drawn_below_it_and_bins_are_the_callers(tmp_path):
    op, built = ported(tmp_path, HISTOGRAM, {"n": 1000, "nbins": 10})
    data = built.task["inputs"][0]
    assert data["init"] == {"kind": "randint", "low": 0, "high": "nbins"}  # not [-1000, 1000)
    assert "data takes the values [0, nbins): the kernel compares them with nbins" in built.notes
    d = np.random.default_rng(3).integers(-3, 40, 3001).astype(np.int32)
    bins = np.array(op.hist_kernel(mx.array(d), nbins=37))  # no input's shape gives nbins
    assert np.array_equal(bins, np.bincount(d[(d >= 0) & (d < 37)], minlength=37))


def test_tasks_new_takes_inputs_and_refuses_case_names_that_bind_nothing(tmp_path, cli):
    path = tmp_path / "hist.cu"
    path.write_text(HISTOGRAM)
    made = cli("tasks", "new", "h", "--dir", str(tmp_path), "--from", str(path),
               "--case", "n=100,nbins=5", "--inputs", "data:int32[0,nbins)")  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert "data takes the values [0, nbins) given by --inputs" in made.stdout + made.stderr
    bad = cli("port", str(path), "--case", "n=4096,nbinz=8,foo=1", "--out", str(tmp_path / "o"))
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    said = (bad.stdout + bad.stderr).strip()
    assert said.endswith(
        "--case binds foo, nbinz, which nothing in hist.cu uses: bind names the kernel or its "
        "host code uses, such as n, nbins"
    ), said


def test_a_float_the_user_bound_varies_in_held_out_cases_within_a_range_said(tmp_path):
    from mlxport.backends import get_backend
    from mlxport.verify.correctness import run_correctness

    path = tmp_path / "scale.cu"
    path.write_text(
        "__global__ void scale(const float* x, float* y, int n, float s) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = s * x[i];\n}\n"
        "void launch(const float* x, float* y, int n, float s) {\n"
        "  scale<<<(n + 63) / 64, 64>>>(x, y, n, s);\n}\n"
    )
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 300, "s": 0.5}]), heldout=2)
    assert next(p for p in built.task["params"] if p["name"] == "s")["range"] == [0.05, 5.0]
    assert any(n.startswith("s varies in the held-out cases within [0.05, 5]") for n in built.notes)
    task = load_task(write_task(built, tmp_path / "task", path))
    candidate = translate_task(task, "msl").candidate
    frozen = candidate.model_copy(update={"source": candidate.source.replace("s * x", "0.5f * x")})
    assert frozen.source != candidate.source
    sim = get_backend("sim")
    assert run_correctness(task, candidate, sim, heldout=True, seed=1).ok
    assert not run_correctness(task, frozen, sim, heldout=True, seed=1, stop_after=1).ok


def test_a_user_kernels_parity_test_replays_small_goldens_and_says_how_to_get_mlxport(
    tmp_path, written_tests
):
    import subprocess
    import sys

    from mlxport.op import keep_small_golden
    from mlxport.op.check import golden_cases

    path = tmp_path / "hist.cu"
    path.write_text(HISTOGRAM)
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 300, "nbins": 10}]), heldout=2)
    task = load_task(write_task(built, tmp_path / "task", path))
    goldens = golden_cases(task, task.all_cases(), seed=5)
    candidate = translate_task(task, "msl").candidate
    op = write_op(tmp_path / "op", task, candidate, label="t", model="t", golden=goldens)
    keep_small_golden(op, budget=2000)  # the visible case alone: 1200 + 80 bytes
    kept = [g["case"] for g in tomllib.loads((op / "op.toml").read_text())["golden"]]
    assert kept == ["n=300,nbins=10"], kept
    sim = written_tests("-q", "-p", "no:cacheprovider", op / "test_kernel.py")
    # the golden case and the contract's refusal (the third is for ports with a reference)
    assert "2 passed, 1 skipped" in sim.stdout, sim.stdout[-2000:]
    args = ["-q", "-rs", "-p", "no:cacheprovider", str(op / "test_kernel.py")]
    hidden = f"import sys; sys.modules['mlxport'] = None; import pytest; pytest.main({args!r})"
    bare = subprocess.run(
        [sys.executable, "-c", hidden], capture_output=True, text=True, timeout=120
    )
    assert "install mlxport from a clone of its repository (pip install -e CLONE)" in bare.stdout


def test_a_scalar_the_host_computes_from_a_float_the_op_cannot_see_is_no_constant(tmp_path):
    path = tmp_path / "inv.cu"
    path.write_text(
        "__global__ void divide(const float* x, float* y, int n, float inv) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i] * inv;\n}\n"
        "void launch(const float* x, float* y, int n, float scale) {\n"
        "  float inv = 1.0f / scale;\n  divide<<<(n + 127) / 128, 128>>>(x, y, n, inv);\n}\n"
    )
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 300, "scale": 4.0}]), heldout=1)
    inv = next(p for p in built.task["params"] if p["name"] == "inv")
    assert "expr" not in inv  # not fixed at 0.25: scale is the caller's
    assert any(
        n.startswith("inv is what the host code computes, by no expression") for n in built.notes
    )


OFFSET = """
__global__ void shift(const float* x, float* y, int n, int offset) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + (float)offset;
}
void run(const float* x, float* y, int n, int offset) {
    shift<<<(n + 127) / 128, 128>>>(x, y, n, offset);
}
"""


def test_an_integer_bound_at_zero_is_kept_when_sizes_are_drawn(tmp_path):
    from mlxport.tasks.sizes import fresh_sizes

    path = tmp_path / "shift.cu"
    path.write_text(OFFSET)
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 300, "offset": 0}]), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    drawn = fresh_sizes(task, 3, np.random.default_rng(0))
    assert drawn and all(c["offset"] == 0 and c["n"] != 300 for c in drawn), drawn
