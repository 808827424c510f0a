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


def test_binding_a_define_is_refused_where_it_would_change_nothing(tmp_path, cli):
    """The preprocessor replaces `N` before a case applies: `--case N=512` used to run the
    original at the file's 4096 elements and port it there, saying nothing."""
    path = tmp_path / "twice.cu"
    path.write_text(
        "#define N 4096\n"
        "__global__ void twice(const int n, const float* x, float* y) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 2.f * x[i];\n}\n"
        "int main() {\n  float *x, *y;\n  cudaMalloc((void**)&x, N * sizeof(float));\n"
        "  cudaMalloc((void**)&y, N * sizeof(float));\n  twice<<<N / 256, 256>>>(N, x, y);\n}\n"
    )
    bad = cli("port", str(path), "--case", "N=512", "--out", str(tmp_path / "o"))
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    said = (bad.stdout + bad.stderr).strip()
    assert said.endswith(
        "--case binds N, a #define of twice.cu (line 1), which the preprocessor replaces before "
        "any case applies: change its value in the file, or bind a name the kernel or its host "
        "code computes, such as n"
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


def test_drawn_sizes_reach_past_every_value_a_case_had():
    """A loop over tiles of a size runs further in the op check than in any case: the first drawn
    case takes the largest size above every value seen, the others drawn small enough to stay
    within the largest case."""
    from mlxport.tasks.sizes import fresh_sizes

    task = load_task("attention_fwd")
    for seed in range(3):
        first = fresh_sizes(task, 3, np.random.default_rng(seed))[0]
        seen = task.all_cases()
        assert any(first[n] > max(s[n] for s in seen) for n in ("Tq", "Tk")), first


def test_a_path_is_looked_for_first_with_one_size_moved():
    """Sizes the cases tie together (a row's bytes and its elements) stay valid where one size
    moves alone, so those probes come before ones moving several, smallest first within each."""
    from mlxport.tasks.sizes import probe_sizes, size_names

    task = load_task("layernorm")
    base = task.cases.visible[0]
    probes = probe_sizes(task, base)
    moved = [sum(case[n] != base[n] for n in size_names(task)) for _, case in probes]
    assert moved == sorted(moved) and 1 in moved and max(moved) > 1, moved
    singles = [size for (size, _), m in zip(probes, moved, strict=True) if m == 1]
    assert singles == sorted(singles)


TILES = """
#define TILE 16
__global__ void copy_tiles(float* out, const float* in, int width, int height) {
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    out[x * height + y] = in[y * width + x];
}
void run(float* out, const float* in, int width, int height) {
    copy_tiles<<<dim3(width / TILE, height / TILE), dim3(TILE, TILE)>>>(out, in, width, height);
}
"""


def test_the_op_is_called_at_fresh_sizes_the_original_runs_whole_at(tmp_path):
    """No bounds checks, whole tiles only: at 67 columns the original writes 64 of them. Such a
    size is no test of the port; the op check draws in multiples until the original runs whole,
    says so, and the op it ships refuses other sizes in one sentence."""
    from mlxport.tasks.make.at_sizes import original_at
    from mlxport.tools.final import op_cases
    from mlxport.verify.golden import shared_executor

    path = tmp_path / "tiles.cu"
    path.write_text(TILES)
    built = from_cuda(TaskRequest(source=path, cases=[{"width": 64, "height": 64}]), heldout=2)
    # held out: twice the sizes, and odd sizes in other ratios rounded up to whole tiles
    assert built.task["cases"]["heldout"] == [
        {"width": 128, "height": 192},
        {"width": 80, "height": 96},
    ]
    task = load_task(write_task(built, tmp_path / "task", path))
    _, cases, (why,) = original_at(task, [{"width": 67, "height": 64}], shared_executor())
    assert not cases and "writes 4096 of the 4288 elements of out" in why, why
    found = op_cases(task, translate_task(task, "msl").candidate, seed=5)
    assert len(found.fresh) == 3, found.notes
    assert all(c["width"] % 16 == 0 == c["height"] % 16 for c in found.fresh), found.fresh
    assert (
        found.notes[-1]
        == "so the op was called at sizes height in multiples of 16, width in multiples of 16"
    )
    assert found.task.cases.multiples == {"height": 16, "width": 16}
    candidate = translate_task(task, "msl").candidate
    op = load(write_op(tmp_path / "op", found.task, candidate, label="t", model="t"), "sim")
    x = mx.array(np.arange(32 * 48, dtype=np.float32).reshape(32, 48))
    assert np.array_equal(np.array(op.copy_tiles(x)).reshape(48, 32), np.array(x).T)
    with pytest.raises(ValueError, match=r"verified where width % 16 == 0, and here width=40"):
        op.copy_tiles(mx.zeros((32, 40)))


HEAD_SUM = """
__global__ void head_sum(const float* a, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.f;
    for (int k = 0; k < 64; ++k) acc += a[r * cols + k];
    y[r] = acc;
}
void run(int rows, int cols) {
    float *a, *y;
    cudaMalloc(&a, rows * cols * sizeof(float));
    cudaMalloc(&y, rows * sizeof(float));
    head_sum<<<(rows + 63) / 64, 64>>>(a, y, rows, cols);
}
"""


def test_the_op_refuses_sizes_below_the_smallest_the_original_runs_at(tmp_path):
    """Each row's first 64 values: below 64 columns the last row reads past the array. Sizes
    drawn near the case's never go there; the op check looks for the floor and the op refuses
    what lies under it."""
    from mlxport.tools.final import op_cases

    path = tmp_path / "head.cu"
    path.write_text(HEAD_SUM)
    built = from_cuda(TaskRequest(source=path, cases=[{"rows": 100, "cols": 256}]), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    candidate = translate_task(task, "msl").candidate
    found = op_cases(task, candidate, seed=3)
    assert "cols >= 64" in found.task.cases.requires and not any(
        r.startswith("rows") for r in found.task.cases.requires
    ), found.task.cases.requires
    assert "the original does not run at cols=32: the op refuses cols < 64" in found.notes
    op = load(write_op(tmp_path / "op", found.task, candidate, label="t", model="t"), "sim")
    a = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    assert np.allclose(np.array(op.head_sum(mx.array(a))), a.sum(axis=1), atol=1e-5)
    with pytest.raises(ValueError, match=r"verified where cols >= 64, and here cols=40"):
        op.head_sum(mx.zeros((5, 40)))


RMS_STEP = """
__global__ void rms_step(float* p, const float* g, float* v, int n, float beta) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float vi = beta * v[i] + (1.0f - beta) * g[i] * g[i];
    v[i] = vi;
    p[i] -= 0.01f * g[i] / sqrtf(vi);
}
void step(float* p, const float* g, float* v, int n, float beta) {
    rms_step<<<(n + 127) / 128, 128>>>(p, g, v, n, beta);
}
"""


def test_a_nan_the_kernel_writes_to_an_in_out_buffer_is_kept(tmp_path):
    """An in-out output starts as NaN in MLX and the op took every NaN left for the input's: but
    an output the original writes whole holds only what the kernel wrote, NaN included."""
    op, built = ported(tmp_path, RMS_STEP, {"n": 300, "beta": 0.9})
    rng = np.random.default_rng(4)
    p, g, v = (rng.standard_normal(500).astype(np.float32) for _ in range(3))
    new_p, new_v = op.rms_step(mx.array(p), mx.array(g), mx.array(v), beta=0.9)
    vi = 0.9 * v + 0.1 * g * g
    with np.errstate(invalid="ignore"):
        want = p - 0.01 * g / np.sqrt(vi)
    assert np.isnan(want).any() and not np.isnan(want).all()
    assert np.allclose(np.array(new_v), vi, atol=1e-6)
    assert np.allclose(np.array(new_p), want, atol=1e-5, equal_nan=True)


OUTER = """
__global__ void outer(const float* a, const float* b, float* out, int n, int m) {
    int i = blockIdx.x * 16 + threadIdx.x;
    int j = blockIdx.y * 16 + threadIdx.y;
    if (i < m && j < n) out[j * m + i] = a[j] * b[i];
}
void run(const float* a, const float* b, float* out, int n, int m) {
    outer<<<dim3((m + 15) / 16, (n + 15) / 16), dim3(16, 16)>>>(a, b, out, n, m);
}
"""


def test_held_out_sizes_change_the_ratios_of_the_visible_ones(tmp_path):
    """At m = 2 n, a grid of ceildiv(n, 8) blocks is the host's ceildiv(m, 16): sizes doubled or
    made odd alike keep that, so the held-out case of odd sizes moves each by its own factor."""
    from mlxport.backends import get_backend
    from mlxport.verify.correctness import run_correctness

    path = tmp_path / "outer.cu"
    path.write_text(OUTER)
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 64, "m": 128}]), heldout=2)
    task = load_task(write_task(built, tmp_path / "task", path))
    odd = task.cases.heldout[1]
    assert odd["n"] % 2 == odd["m"] % 2 == 1 and odd["m"] > 2 * odd["n"], task.cases.heldout
    candidate = translate_task(task, "msl").candidate
    grid = ["ceildiv(a.shape[0], 8) * 16", *candidate.grid[1:]]
    assert candidate.grid[0] != grid[0], candidate.grid
    wrong = candidate.model_copy(update={"grid": grid})
    sim = get_backend("sim")
    assert run_correctness(task, candidate, sim, heldout=True, seed=1).ok
    assert run_correctness(task, wrong, sim, seed=1).ok  # right at the visible case
    assert not run_correctness(task, wrong, sim, heldout=True, seed=1, stop_after=1).ok


BITS = """
template <int bits>
__global__ void scale_bits(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * bits;
}
void run(const float* x, float* y, int n, int bits) {
    if (bits == 2) scale_bits<2><<<(n + 127) / 128, 128>>>(x, y, n);
    if (bits == 4) scale_bits<4><<<(n + 127) / 128, 128>>>(x, y, n);
}
"""


def test_a_template_argument_the_case_binds_is_no_size_the_op_check_draws(tmp_path):
    """The op is the kernel at bits = 4 and takes no bits: the original at bits = 2 is no golden
    for it, and held-out cases keep bits too."""
    from mlxport.tools.final import op_cases

    path = tmp_path / "bits.cu"
    path.write_text(BITS)
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 300, "bits": 4}]), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    found = op_cases(task, translate_task(task, "msl").candidate, seed=2)
    assert len(found.fresh) == 3 and all(c["bits"] == 4 for c in found.fresh), found.fresh
    assert len({c["n"] for c in found.fresh}) == 3


FLIP = """
__global__ void flip(float* out, const float* in, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < width) out[y * width + (width - 1 - x)] = in[y * width + x];
}
void run(int size_x, int size_y) {
    float *d_in, *d_out;
    cudaMalloc(&d_in, size_x * size_y * sizeof(float));
    cudaMalloc(&d_out, size_x * size_y * sizeof(float));
    flip<<<dim3((size_x + 63) / 64, size_y), 64>>>(d_out, d_in, size_x, size_y);
}
"""


def test_a_row_stride_passed_under_another_name_is_the_last_dimension(tmp_path):
    """The kernel's rows are ``width`` long, the host passes size_x as width and sizes the buffer
    ``size_x * size_y``: the op takes [size_y, size_x]."""
    path = tmp_path / "flip.cu"
    path.write_text(FLIP)
    built = from_cuda(TaskRequest(source=path, cases=[{"size_x": 100, "size_y": 30}]), heldout=0)
    shapes = {t["name"]: t["shape"] for t in built.task["inputs"] + built.task["outputs"]}
    assert shapes == {"in_": ["size_y", "size_x"], "out": ["size_y", "size_x"]}, shapes


def test_a_case_binds_a_field_of_a_struct_the_host_takes(tmp_path):
    """cuda-samples' matrixMul takes ``const dim3 &dimsA``: --case binds dimsA.x by that name."""
    path = tmp_path / "dims.cu"
    path.write_text(
        "__global__ void twice(float* out, const float* x, int w) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < w) out[i] = 2 * x[i];\n}\n"
        "void run(float* out, const float* x, const dim3 &dims) {\n"
        "  twice<<<(dims.x + 63) / 64, 64>>>(out, x, dims.x);\n}\n"
    )
    built = from_cuda(TaskRequest.of(source=path, cases=["dims.x=100"]), heldout=0)
    assert built.task["cases"]["visible"] == [{"dims.x": 100, "w": 100}]
    with pytest.raises(ValueError, match="--case binds dimz.x, which nothing in dims.cu uses"):
        from_cuda(TaskRequest.of(source=path, cases=["dimz.x=100"]), heldout=0)


def test_sizes_equal_at_every_case_are_kept_equal_where_the_original_needs_it(tmp_path):
    """The host sizes out by m and the kernel writes n elements: only n = m runs whole (as a
    matmul's inner dimensions must agree), so the op check draws them as one."""
    from mlxport.tools.final import op_cases

    path = tmp_path / "pair.cu"
    path.write_text(
        "__global__ void add(float* out, const float* a, const float* b, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = a[i] + b[i];\n}\n"
        "void run(int n, int m) {\n  float *a, *b, *out;\n  cudaMalloc(&a, n * sizeof(float));\n"
        "  cudaMalloc(&b, m * sizeof(float));\n  cudaMalloc(&out, m * sizeof(float));\n"
        "  add<<<(n + 63) / 64, 64>>>(out, a, b, n);\n}\n"
    )
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 100, "m": 100}]), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    found = op_cases(task, translate_task(task, "msl").candidate, seed=3)
    assert found.fresh and all(c["n"] == c["m"] != 100 for c in found.fresh), found.fresh
    assert found.notes[-1] == "so the op was called at sizes m = n", found.notes
    assert found.task.cases.requires == ["m == n"] or found.task.cases.requires == ["n == m"]


EMBED = """
__global__ void embed(float* out, const int* idx, const float* table, int C) {
    int i = blockIdx.x, c = threadIdx.x;
    out[i * C + c] = table[idx[i] * C + c];
}
void run(float* out, const int* idx, const float* table, int N, int C) {
    embed<<<N, C>>>(out, idx, table, C);
}
"""


def test_an_index_into_a_table_no_host_code_sizes_is_never_drawn_all_zero(tmp_path):
    """Measured with indices of zero, the table is one row long, and [0, 1) held every index
    (llm.c's encoder verified on zeros): refused, and given with the flags it names."""
    path = tmp_path / "embed.cu"
    path.write_text(EMBED)
    with pytest.raises(ValueError, match=r"give them with --inputs 'idx:int32\[0,N\)' \(and"):
        from_cuda(TaskRequest.of(source=path, cases=["N=8,C=32"]), heldout=0)
    given = dict(cases=["N=8,C=32,V=16"], inputs="idx:int32[0,V)", shapes=["table=V*C"])
    built = from_cuda(TaskRequest.of(source=path, **given), heldout=0)
    idx, table = built.task["inputs"]
    assert idx["init"]["high"] == "V" and table["shape"] == ["V", "C"]


def test_held_out_cases_are_distinct(tmp_path):
    """With one size, "every size odd" and "n odd alone" are the same case: it is held out once."""
    path = tmp_path / "step.cu"
    path.write_text(RMS_STEP)
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 100, "beta": 0.9}]), heldout=3)
    held = [tuple(sorted(c.items())) for c in built.task["cases"]["heldout"]]
    assert len(held) >= 2 and len(set(held)) == len(held), held


def test_the_timed_size_is_checked_at_sizes_drawn_below_it():
    """A kernel keyed to the sizes it was shown, or to the timed one, passes at both: the size
    checked at the timed size's scale is drawn between half of it and it, above every case."""
    from mlxport.tasks.sizes import near

    task = load_task("vector_add")
    timed = task.bench_cases()[0]
    drawn = [near(task, timed, np.random.default_rng(s))["N"] for s in range(8)]
    largest = max(c["N"] for c in task.all_cases())
    assert all(max(largest, timed["N"] // 2) <= n <= timed["N"] for n in drawn), drawn
    assert len(set(drawn)) == len(drawn)


FILE_CONST_REDUCE = """
const int N = 100000000;
const int M = sizeof(float) * N;
__global__ void partial(const float* d_x, float* d_y) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    d_y[n] = n < N ? 2.f * d_x[n] : 0.f;  // the file's N, in device code
}
int main() {
    float *d_x, *d_y;
    cudaMalloc(&d_x, M);
    cudaMalloc(&d_y, M);
    partial<<<(N + 127) / 128, 128>>>(d_x, d_y);
}
"""


def test_a_file_constant_the_case_binds_sizes_buffers_at_the_case(tmp_path):
    """brucefan1983's reductions: `const int N = 100000000;` bound by the case. A buffer shaped
    `(N)` took the file's 10^8 when the op check ran the original at other sizes, so a size it
    reads past at (N=95, the kernel's own N being the file's) passed as one it runs at."""
    from mlxport.tasks.make.at_sizes import runner_for
    from mlxport.tasks.make.kernel import CudaTaskError
    from mlxport.verify.golden import shared_executor

    path = tmp_path / "partial.cu"
    path.write_text(FILE_CONST_REDUCE)
    built = from_cuda(TaskRequest(source=path, cases=[{"N": 4096}]), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    runner = runner_for(task, shared_executor())
    case, _ = runner.case({"N": 256}, heldout=True)
    assert [a.shape for a in runner.args(case, {})][0] == (256,)
    with pytest.raises(CudaTaskError, match=r"out-of-bounds read of d_x\[95\]"):
        runner.case({"N": 95}, heldout=True)
