"""The timer itself, on a backend that times (MLX's CUDA backend or Metal); skipped elsewhere.
Run on a GPU machine: pytest -q tests/test_gpu_timing.py"""

import pytest

from mlxport.backends import availability, get_backend, timer
from mlxport.tasks import expert_ports, load_task
from mlxport.verify.benchmark import benchmark
from mlxport.verify.correctness import run_correctness

TIMED = [name for name in ("cuda", "metal") if availability()[name].ok]
pytestmark = pytest.mark.skipif(not TIMED, reason="no GPU backend with timing here (cuda or metal)")


@pytest.fixture(scope="module")
def setup():
    backend = get_backend(TIMED[0])
    task = load_task("vector_add")
    port = expert_ports(task)["cuda" if backend.name == "cuda" else "msl"]
    assert run_correctness(task, port, backend, seed=0).ok
    return task, port, backend


def median_us(setup, n: int, seed: int) -> float:
    task, port, backend = setup
    return benchmark(
        task, port, backend, case={"N": n}, dtype="float32", seed=seed, iters=60
    ).candidate.median_us


def test_same_kernel_twice_agrees_within_3_percent(setup):
    a, b = median_us(setup, 1 << 26, 1), median_us(setup, 1 << 26, 2)
    assert abs(a - b) / min(a, b) < 0.03, (a, b)


def test_twice_the_work_takes_about_twice_the_time(setup):
    one, two = median_us(setup, 1 << 26, 3), median_us(setup, 1 << 27, 4)
    assert 1.8 < two / one < 2.2, (one, two)


def test_reports_name_how_they_were_timed(setup):
    task, port, backend = setup
    report = benchmark(task, port, backend, case={"N": 1 << 20}, dtype="float32", seed=5, iters=6)
    expected = {"cuda": {timer.DEVICE, timer.WALL_IN_ORDER}, "metal": {timer.WALL}}[backend.name]
    assert report.timing_basis in expected
