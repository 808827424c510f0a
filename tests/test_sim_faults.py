"""Deliberately broken kernels: the simulator must give each the right diagnosis."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mlxport.backends.sim import SimBackend
from mlxport.spec import KernelCandidate


@pytest.fixture(scope="module")
def sim():
    backend = SimBackend()
    yield backend
    backend.close()


def kernel(source: str, grid: list, tg: list, **extra) -> KernelCandidate:
    fields = dict(
        name="k",
        input_names=["x"],
        output_names=["out"],
        output_shapes=["x.shape"],
        output_dtypes=["x.dtype"],
        grid=grid,
        threadgroup=tg,
    )
    fields.update(extra)
    return KernelCandidate(source=source, **fields)


X = np.arange(256, dtype=np.float32)


def test_out_of_bounds_write_names_buffer_index_and_thread(sim):
    c = kernel(
        "uint i = thread_position_in_grid.x;\nout[i + 1] = x[i];", ["x.size", 1, 1], [64, 1, 1]
    )
    r = sim.run(c, {"x": X})
    assert r.error is not None
    assert "out[256]" in r.error and "has 256 elements" in r.error and "at source line 2" in r.error
    assert (
        "thread_position_in_threadgroup (63,0,0)" in r.error
        and "threadgroup_position_in_grid (3,0,0)" in r.error
    )


def test_out_of_bounds_vector_read_keeps_checks(sim):
    c = kernel(
        "uint i = thread_position_in_grid.x;\nout[i] = ((const device float4*)x)[i].x;",
        ["x.size", 1, 1],
        [64, 1, 1],
    )
    r = sim.run(c, {"x": X})
    # which out-of-bounds thread reports first depends on the order threadgroups finish in
    found = re.search(
        r"out-of-bounds read of x\[(\d+)\] through a 16-byte element pointer", r.error or ""
    )
    assert found and 64 <= int(found[1]) < 256 and "64 such elements" in r.error, r.error


def test_threadgroup_out_of_bounds(sim):
    src = (
        "threadgroup float buf[32];\nuint t = thread_position_in_threadgroup.x;\nbuf[t] = x[t];\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\nout[t] = buf[t];"
    )
    r = sim.run(kernel(src, [64, 1, 1], [64, 1, 1]), {"x": X[:64]})
    assert r.error is not None and "buf[32]" in r.error and "threadgroup buffer buf" in r.error
    assert "at source line 3" in r.error


def test_missing_barrier_is_a_race_reported_with_both_threads_and_lines(sim):
    # Each thread reads a neighbour's slot with no barrier after the writes. The shadow sees a read
    # of what another thread wrote since the last barrier; a read before the neighbour's write
    # shows in the other order, which the final verification runs too.
    for read, order, pair in (
        ("t > 0 ? buf[t - 1] : 0.0f", "forward", "threads 0 and 1"),
        ("buf[(t + 1) % 64]", "reversed", "threads 63 and 62"),
    ):
        src = (
            "threadgroup float buf[64];\n"
            "uint t = thread_position_in_threadgroup.x;\n"
            "buf[t] = x[t];\n"
            f"out[t] = {read};"
        )
        r = sim.run(kernel(src, [64, 1, 1], [64, 1, 1]), {"x": X[:64]}, order=order)
        assert (
            r.error and f"{pair} of threadgroup (0,0,0) race on threadgroup memory buf[" in r.error
        ), r.error
        assert "wrote it (source line 3)" in r.error and "touched it (source line 4)" in r.error, (
            r.error
        )


def test_a_write_read_back_after_a_barrier_is_no_race(sim):
    src = (
        "threadgroup float buf[64];\nuint t = thread_position_in_threadgroup.x;\nbuf[t] = x[t];\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\nout[t] = buf[(t + 1) % 64] + buf[t];"
    )
    for order in ("forward", "reversed", "shuffled"):
        r = sim.run(kernel(src, [64, 1, 1], [64, 1, 1]), {"x": X[:64]}, order=order)
        assert r.error is None, r.error
        np.testing.assert_array_equal(r.outputs[0], np.roll(X[:64], -1) + X[:64])


def test_threadgroups_run_in_reverse_order_too(sim):
    # Each threadgroup takes a ticket from an atomic counter: the tickets record the order in which
    # threadgroups ran, which no GPU promises and the reversed schedule turns around.
    src = (
        "if (thread_position_in_threadgroup.x == 0) {\n"
        "  uint t = atomic_fetch_add_explicit(&count[0], 1u, memory_order_relaxed);\n"
        "  atomic_store_explicit(&tickets[threadgroup_position_in_grid.x], t, "
        "memory_order_relaxed);\n"
        "}"
    )
    c = kernel(
        src,
        [256, 1, 1],
        [64, 1, 1],
        output_names=["count", "tickets"],
        output_shapes=[[1], [4]],
        output_dtypes=["uint32", "uint32"],
        atomic_outputs=True,
        init_value=0,
    )
    threads, sim.threads = sim.threads, 1  # one OS thread: threadgroups run one after another
    try:
        forward, backward, shuffled, again = (
            sim.run(c, {"x": X}, order=r).outputs[1].tolist()
            for r in ("forward", "reversed", "shuffled", "shuffled")
        )
    finally:
        sim.threads = threads
    assert forward == [0, 1, 2, 3] and backward == [3, 2, 1, 0]
    assert sorted(shuffled) == forward and shuffled not in (forward, backward) and again == shuffled


def test_output_shared_by_threadgroups_without_atomics_is_a_race(sim):
    # A CUDA atomicAdd ported as a plain +=: exact here, where threads take turns, and a race on a
    # GPU. Any output element touched by two threadgroups without atomics is reported (here of
    # one thread each: threads of one threadgroup racing are named by its shadow first).
    c = kernel(
        "uint i = thread_position_in_grid.x;\nout[0] += x[i];",
        [256, 1, 1],
        [1, 1, 1],
        output_shapes=[[1]],
        init_value=0,
    )
    for order in ("forward", "reversed", "shuffled"):
        r = sim.run(c, {"x": X}, order=order)
        assert r.error and "both access output out[0] without atomics" in r.error, r.error


def test_barrier_in_divergent_code_is_reported(sim):
    src = (
        "uint t = thread_position_in_threadgroup.x;\nif (t < 16) {\n"
        "  threadgroup_barrier(mem_flags::mem_threadgroup);\n}\nout[t] = x[t];"
    )
    r = sim.run(kernel(src, [64, 1, 1], [64, 1, 1]), {"x": X[:64]})
    assert r.error is not None and "barrier divergence" in r.error and "source line 3" in r.error


def test_barriers_at_different_sites_are_reported(sim):
    src = (
        "uint t = thread_position_in_threadgroup.x;\n"
        "if (t % 2) threadgroup_barrier(mem_flags::mem_none);\n"
        "else threadgroup_barrier(mem_flags::mem_none);\nout[t] = x[t];"
    )
    r = sim.run(kernel(src, [64, 1, 1], [64, 1, 1]), {"x": X[:64]})
    assert r.error is not None and "another barrier" in r.error


def test_syntax_error_points_into_the_body(sim):
    c = kernel(
        "uint i = thread_position_in_grid.x;\nfloat y = x[i]\nout[i] = y;",
        ["x.size", 1, 1],
        [64, 1, 1],
    )
    result = sim.compile(c, {"x": X})
    assert not result.ok
    d = result.diagnostics[0]
    # clang points at the line missing its ';', GCC at the token after it
    assert (
        d.where == "source" and d.line in (2, 3) and "expected" in d.message and "';'" in d.message
    )


def test_error_in_header_points_into_the_header(sim):
    c = kernel(
        "uint i = thread_position_in_grid.x;\nout[i] = twice(x[i]);",
        ["x.size", 1, 1],
        [64, 1, 1],
        header="inline float twice(float v) {\n  return v * two;\n}\n",
    )
    result = sim.compile(c, {"x": X})
    assert not result.ok
    d = result.diagnostics[0]
    assert d.where == "header" and d.line == 2 and d.column == 14 and "two" in d.message


def test_column_maps_back_through_rewrites(sim):
    c = kernel(
        "uint i = thread_position_in_grid.x;\nconst device float* p = x; out[i] = p[i] + nope;",
        ["x.size", 1, 1],
        [64, 1, 1],
    )
    d = sim.compile(c, {"x": X}).diagnostics[0]
    assert (d.where, d.line, d.column) == ("source", 2, 44)


def test_endless_loop_times_out_and_next_candidate_runs(sim):
    c = kernel(
        "uint i = thread_position_in_grid.x;\nwhile (x[0] >= 0) { out[i] = x[i]; }",
        ["x.size", 1, 1],
        [64, 1, 1],
    )
    r = sim.run(c, {"x": X}, timeout=2)
    assert r.error == "timed out after 2 s (endless loop?)"
    ok = kernel(
        "uint i = thread_position_in_grid.x;\nout[i] = x[i] * 2;", ["x.size", 1, 1], [64, 1, 1]
    )
    r = sim.run(ok, {"x": X})
    assert r.error is None and np.array_equal(r.outputs[0], X * 2)


def test_grid_in_threadgroups_leaves_outputs_unwritten(sim):
    # A CUDA-style launch: grid given as the number of threadgroups instead of threads.
    c = kernel(
        "uint i = thread_position_in_grid.x;\nout[i] = x[i];",
        ["ceildiv(x.size, 64)", 1, 1],
        [64, 1, 1],
    )
    r = sim.run(c, {"x": X})
    assert r.error is None
    assert r.unwritten[0].sum() == 252 and not r.unwritten[0][:4].any()


def test_crash_is_contained(sim):
    # A thread-private pointer is not checked; a wild one kills only the worker.
    src = "thread float v = 0;\nthread float* p = &v;\nout[0] = p[-(1L << 40)];"
    r = sim.run(kernel(src, [1, 1, 1], [1, 1, 1]), {"x": X})
    assert r.error is not None and "crashed the worker" in r.error and "SIGSEGV" in r.error
    r = sim.run(
        kernel("out[thread_position_in_grid.x] = 1.0f;", ["x.size", 1, 1], [64, 1, 1]), {"x": X}
    )
    assert r.error is None


def test_threadgroup_too_large(sim):
    r = sim.run(kernel("out[0] = x[0];", [2048, 1, 1], [2048, 1, 1]), {"x": X})
    assert r.error is not None and "Thread group size (2048)" in r.error


def test_threadgroup_memory_limit(sim):
    src = (
        "threadgroup float big[9000];\nbig[thread_position_in_threadgroup.x] = 1;\nout[0] = big[0];"
    )
    r = sim.run(kernel(src, [1, 1, 1], [1, 1, 1]), {"x": X})
    assert r.error is not None and "32 KB" in r.error


def test_errors_that_differ_only_in_the_faulting_thread_are_one_line():
    """Threadgroups run side by side, so which thread faults first varies between cases and runs."""
    from mlxport.spec import CaseResult, CorrectnessReport

    def case(n, where):
        return CaseResult(
            case=f"N={n}",
            dtype="float32",
            verdict="error",
            error=f"out-of-bounds access to t[5] by thread_position_in_threadgroup {where}",
        )

    report = CorrectnessReport(
        backend="sim",
        candidate_id="c",
        task="t",
        seeds=[1],
        cases=[case(1, "(0,0,0)"), case(2, "(3,1,0)"), case(3, "(0, 2, 0)")],
    )
    lines = report.summary().splitlines()
    assert (
        len(lines) == 2
        and "(0,0,0)" in lines[1]
        and "(the same in 2 more cases: N=2 float32, N=3 float32)" in lines[1]
    )


def test_a_grid_counted_in_threadgroups_gets_its_hint_and_one_error_is_one_line(sim):
    from mlxport.tasks import expert_ports, load_task
    from mlxport.verify.correctness import run_correctness

    task = load_task("vector_add")
    port = expert_ports(task)["msl"]
    body = "\nuint i = thread_position_in_grid.x;\nout[i] = a[i] + b[i];\n"
    short = port.model_copy(update={"grid": ["ceildiv(a.size, 256)", 1, 1], "source": body})
    summary = run_correctness(task, short, sim, seed=1).summary()
    assert (
        "only 1/256 of the output was written: `grid` counts threads, not threadgroups" in summary
    )
    broken = port.model_copy(
        update={"source": body.replace("out[i]", "threadgroup float t[2];\nt[5] = 1.0f;\nout[i]")}
    )
    lines = run_correctness(task, broken, sim, seed=1).summary().splitlines()
    assert (
        len(lines) == 2
        and "at source line 4" in lines[1]
        and "(the same in 5 more cases: " in lines[1]
    ), lines
