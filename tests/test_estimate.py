"""The simulator's cost estimate (verify/estimate.py): it orders known pairs of kernels as an Apple
GPU would, is labelled an estimate everywhere, and a candidate wrong at the bench case gets none."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mlxport.backends.sim import SimBackend
from mlxport.backends.sim.counters import count_request
from mlxport.expr import ArrayInfo, Dtype
from mlxport.knowledge import hardware_profile
from mlxport.spec import KernelCandidate
from mlxport.tasks import SUITE_DIR, expert_ports, load_task
from mlxport.tools.handlers import run_tool
from mlxport.tools.session import open_session
from mlxport.verify import reverify
from mlxport.verify.benchmark import benchmark
from mlxport.verify.estimate import LABEL, cost
from mlxport.verify.reverify import WrongAtBenchSize

CHIPS = ("M1", "M3 Max")
REQUEST = count_request(128, 32, 4)


@pytest.fixture(scope="module")
def sim():
    backend = SimBackend()
    yield backend
    backend.close()


def kernel(source: str, grid: list, threadgroup: list) -> KernelCandidate:
    return KernelCandidate(
        name="k",
        source=source,
        input_names=["x"],
        output_names=["out"],
        output_shapes=["x.shape"],
        output_dtypes=["x.dtype"],
        grid=grid,
        threadgroup=threadgroup,
    )


DOUBLE = "out[i] = x[i] * 2.0f;"
STRIDE_LOOP = "uint t = thread_position_in_grid.x, T = threads_per_grid.x;\n"
TILE = """threadgroup float tile[32][{width}];
const uint n = uint(x_shape[1]);
const uint tx = thread_position_in_threadgroup.x, ty = thread_position_in_threadgroup.y;
const uint bx = threadgroup_position_in_grid.x * 32, by = threadgroup_position_in_grid.y * 32;
tile[ty][tx] = x[(by + ty) * n + bx + tx];
threadgroup_barrier(mem_flags::mem_threadgroup);
out[(bx + ty) * n + by + tx] = tile[tx][ty];"""
STAGED = """threadgroup float buf[{size}];
uint i = thread_position_in_grid.x, t = thread_position_in_threadgroup.x;
buf[t] = x[i];
out[i] = buf[t] * 2.0f;"""
# (faster, slower): the same work and launch, one thing changed
PAIRS = {
    "coalesced over each thread on its own chunk": (
        kernel(
            STRIDE_LOOP + "for (uint j = 0; j < 16; ++j) { uint i = j * T + t; " + DOUBLE + " }",
            ["x.size // 16", 1, 1],
            [256, 1, 1],
        ),
        kernel(
            STRIDE_LOOP + "for (uint j = 0; j < 16; ++j) { uint i = t * 16 + j; " + DOUBLE + " }",
            ["x.size // 16", 1, 1],
            [256, 1, 1],
        ),
    ),
    "a float4 load over four scalar loads": (
        kernel(
            "uint t = thread_position_in_grid.x;\n"
            "((device float4*)out)[t] = ((const device float4*)x)[t] * 2.0f;",
            ["x.size // 4", 1, 1],
            [256, 1, 1],
        ),
        kernel(
            "uint t = thread_position_in_grid.x;\n"
            "for (uint j = 0; j < 4; ++j) { uint i = t * 4 + j; " + DOUBLE + " }",
            ["x.size // 4", 1, 1],
            [256, 1, 1],
        ),
    ),
    "1 KB of threadgroup memory over 32 KB (occupancy)": (
        kernel(STAGED.format(size=256), ["x.size", 1, 1], [256, 1, 1]),
        kernel(STAGED.format(size=8192), ["x.size", 1, 1], [256, 1, 1]),
    ),
    "a padded tile over a bank-conflicting one": (
        kernel(TILE.format(width=33), ["x.shape[1]", "x.shape[0]", 1], [32, 32, 1]),
        kernel(TILE.format(width=32), ["x.shape[1]", "x.shape[0]", 1], [32, 32, 1]),
    ),
}


def estimated(sim, candidate: KernelCandidate, x: np.ndarray, expected: np.ndarray) -> list:
    run = sim.run(candidate, {"x": x}, count=REQUEST)
    assert run.error is None and np.allclose(run.outputs[0], expected)
    launch = candidate.launch({"x": ArrayInfo(x.shape, Dtype("float32"))})
    return [cost(run.counts, launch, 0, hardware_profile(c).datasheet()) for c in CHIPS]


@pytest.mark.parametrize("pair", PAIRS)
def test_the_estimate_orders_known_pairs(sim, pair):
    rng = np.random.default_rng(0)
    x = rng.random((256, 256) if "tile" in pair else 1 << 16, dtype=np.float32)
    expected = x.T if "tile" in pair else x * 2
    fast, slow = (estimated(sim, c, x, expected) for c in PAIRS[pair])
    for chip, f, s in zip(CHIPS, fast, slow, strict=True):
        assert f.us < s.us, f"{chip}: {pair}: {f} vs {s}"


def test_counts_see_lines_lanes_and_banks(sim):
    x = np.random.default_rng(1).random(1 << 12, dtype=np.float32)
    coalesced, chunked = PAIRS["coalesced over each thread on its own chunk"]
    a = sim.run(coalesced, {"x": x}, count=REQUEST).counts
    b = sim.run(chunked, {"x": x}, count=REQUEST).counts
    # 8 SIMD-groups, each a load and a store per step: 1 line each when coalesced, 16 when each lane
    # walks its own 64 bytes; the same 64 distinct lines either way (two 16 KB buffers)
    assert a["device_instructions"] == b["device_instructions"] == 8 * 16 * 2
    assert (a["device_lines"], b["device_lines"]) == (256, 16 * 256)
    assert a["device_unique_lines"] == b["device_unique_lines"] == 2 * (1 << 12) * 4 // 128
    assert a["device_lane_accesses"] == 32 * 256
    assert sim.run(coalesced, {"x": x}).counts is None  # a run that does not count
    padded, conflicting = PAIRS["a padded tile over a bank-conflicting one"]
    y = np.random.default_rng(2).random((32, 32), dtype=np.float32)
    p = sim.run(padded, {"x": y}, count=REQUEST).counts
    c = sim.run(conflicting, {"x": y}, count=REQUEST).counts
    # 32 SIMD-groups, a write and a read each; the conflicting read hits one bank 32 times
    assert p["tg_instructions"] == c["tg_instructions"] == 64
    assert (p["tg_wavefronts"], c["tg_wavefronts"]) == (64, 32 + 32 * 32)
    assert p["barrier_rounds"] == 1 and p["tg_memory_bytes"] == 32 * 33 * 4


@pytest.fixture
def small_task(tmp_path, monkeypatch):
    """vector_add with a bench case the simulator runs in a moment, and a budget for it."""
    folder = tmp_path / "vector_add"
    shutil.copytree(SUITE_DIR / "vector_add", folder)
    toml = (folder / "task.toml").read_text()
    toml = toml.replace("visible = [{ N = 1048576 }, { N = 4096 }]", "visible = [{ N = 4096 }]")
    toml = toml.replace("bench = [{ N = 16777216 }]", "bench = [{ N = 65536 }]")
    (folder / "task.toml").write_text(toml[: toml.index("# [original]")])
    monkeypatch.setattr(reverify, "TIMED_SIZE_SECONDS", 60.0)
    return folder


# right at the visible case, but skips the work at the bench case
SKIPS = (
    "uint i = thread_position_in_grid.x;\nif (a_shape[0] > 10000) return;\nout[i] = a[i] + b[i];\n"
)


def test_benchmark_on_the_simulator_estimates_the_honest_and_refuses_the_wrong(small_task):
    session = open_session(small_task, "sim", chip="M1")
    port = expert_ports(load_task("vector_add"))["msl"]
    report = benchmark(session.task, port, session.backend, chip=session.chip)
    assert report.candidate is None and not report.baselines  # no timing on the simulator
    assert report.estimate.startswith(LABEL) and report.estimated_us > 0
    assert "N=65536 bfloat16" in report.estimate and "on M1" in report.estimate
    skips = port.model_copy(update={"source": SKIPS})
    with pytest.raises(WrongAtBenchSize, match="wrong at N=65536 bfloat16.*gets no estimate"):
        benchmark(session.task, skips, session.backend, chip=session.chip)


def test_the_benchmark_tool_hands_the_model_the_labelled_estimate(small_task):
    session = open_session(small_task, "sim", chip="M1")
    port = expert_ports(load_task("vector_add"))["msl"]
    fields = port.model_dump(mode="json", exclude_defaults=True)
    fields.pop("language", None)
    for tool, args in (
        ("compile_kernel", fields),
        ("run_correctness", {"candidate_id": port.id}),
    ):
        session.apply(run_tool(session, tool, args))
    out = run_tool(session, "benchmark", {"candidate_id": port.id})
    session.apply(out)
    assert not out.data.timed and out.data.us is None and out.data.estimated_us > 0
    assert LABEL in out.text and LABEL in out.data.estimate
    assert session.record(port.id).estimated_us == out.data.estimated_us


def test_without_a_budget_there_is_no_estimate_only_the_task_floor(small_task, monkeypatch):
    monkeypatch.setattr(reverify, "TIMED_SIZE_SECONDS", 0.0)
    session = open_session(small_task, "sim", chip="M1")
    port = expert_ports(load_task("vector_add"))["msl"]
    report = benchmark(session.task, port, session.backend, chip=session.chip)
    assert report.estimated_us is None and report.estimate.startswith("no estimate")
    assert "the task's floor rather than this candidate's" in report.estimate
