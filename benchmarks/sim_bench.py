"""Metal simulator timings: compile (cold and cached) and run times of reference kernels.

    .venv/bin/python benchmarks/sim_bench.py            # -O1, the default
    MLXPORT_SIM_OPT=-O2 .venv/bin/python benchmarks/sim_bench.py

Cold compiles use a fresh cache directory (the runtime object is built first and reported
apart). Run times are the best of three warm runs, worker round trip included.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.backends.sim import SimBackend  # noqa: E402
from mlxport.backends.sim.build import runtime_object  # noqa: E402
from mlxport.backends.sim.compiler import OPT_LEVEL  # noqa: E402
from mlxport.spec import KernelCandidate  # noqa: E402

MSL = Path(__file__).resolve().parents[1] / "tests" / "msl"

ELEMENTWISE = KernelCandidate(
    name="bench_axpb",
    input_names=["x", "y"],
    output_names=["out"],
    output_shapes=["x.shape"],
    output_dtypes=["x.dtype"],
    grid=["x.size", 1, 1],
    threadgroup=[256, 1, 1],
    source="uint i = thread_position_in_grid.x;\nout[i] = 2.0f * x[i] + y[i];",
)


def softmax_256() -> KernelCandidate:
    c = KernelCandidate.from_toml(MSL / "softmax_rows.toml")
    src = c.source.replace("64", "256").replace("s = 32", "s = 128")
    return c.model_copy(
        update={
            "name": "bench_softmax",
            "source": src,
            "grid": ["x.shape[0] * 256", 1, 1],
            "threadgroup": [256, 1, 1],
        }
    )


def simd_rows() -> KernelCandidate:
    return KernelCandidate.from_toml(MSL / "simd_sum_rows.toml").model_copy(
        update={"name": "bench_simd_sum"}
    )


def best_run(sim: SimBackend, c: KernelCandidate, inputs: dict, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = sim.run(c, inputs)
        times.append(time.perf_counter() - t0)
        assert r.error is None, r.error
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    x1m = rng.normal(size=1 << 20).astype(np.float32)
    mat = rng.normal(size=(1024, 1024)).astype(np.float32)
    cases = [
        ("elementwise, 1M threads", ELEMENTWISE, {"x": x1m, "y": x1m}),
        ("softmax 1024x1024 f32 (256-thread groups, barriers)", softmax_256(), {"x": mat}),
        ("row sums 1024x1024 f32 (simd_sum, 128-thread groups)", simd_rows(), {"x": mat}),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MLXPORT_CACHE"] = tmp
        t0 = time.perf_counter()
        runtime_object()
        rows.append(
            (
                "runtime object, cold compile (once per compiler)",
                f"{time.perf_counter() - t0:.2f} s",
            )
        )
        sim = SimBackend()
        for label, c, inputs in cases:
            res = sim.compile(c, inputs)
            assert res.ok, res.summary()
            rows.append((f"{label}: cold compile", f"{res.seconds:.2f} s"))
        fresh = SimBackend()  # a new process would see the same: the disk cache only
        for label, c, inputs in cases:
            res = fresh.compile(c, inputs)
            rows.append((f"{label}: cached compile", f"{res.seconds * 1000:.1f} ms"))
        for label, c, inputs in cases:
            rows.append((f"{label}: run", f"{best_run(sim, c, inputs):.3f} s"))
        info = sim.device_info()
        sim.close()
        fresh.close()
    print(
        f"Metal simulator, {OPT_LEVEL}, {info['threads']} threads, {info.get('compiler_version')}"
    )
    print(f"| {'measure':<70} | {'time':>9} |\n|{'-' * 72}|{'-' * 11}|")
    for label, value in rows:
        print(f"| {label:<70} | {value:>9} |")


if __name__ == "__main__":
    main()
