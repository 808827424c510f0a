"""Candidates that game a weak correctness check are rejected, one test per known hack, and the
expert ports of the suite pass every visible and held-out case on the simulator."""

import contextlib
import os
import re

import numpy as np
import pytest

from mlxport.backends import availability, get_backend
from mlxport.tasks import expert_ports, load_task, suite_names
from mlxport.verify.correctness import run_correctness

SIM = get_backend("sim")
GELU = load_task("gelu_tanh")
GELU_PORT = expert_ports(GELU)["msl"]

GELU_BODY = """
uint i = thread_position_in_grid.x;
if (i >= x_shape[0]) return;
float v = float(x[i]);
float y = 0.5f * v * (1.0f + metal::precise::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
{store}
"""


def gelu(store: str):
    """A simple one-element-per-thread GELU whose store line is the hack under test."""
    return GELU_PORT.model_copy(
        update={
            "source": GELU_BODY.format(store=store),
            "name": "gelu_hack",
            "grid": ["x.size", 1, 1],
            "threadgroup": [256, 1, 1],
            "template": {},
            "header": "",
        }
    )


def verdict(task, candidate, **kw):
    return run_correctness(task, candidate, SIM, seed=3, **kw)


@pytest.fixture(scope="module")
def small_vector_add(tmp_path_factory):
    """vector_add with thousands of elements (timed at N=65536, checked up to N=4096), for tests
    about the timed size (a kernel wrong only above every checked size) and calls run together:
    none of them is about millions of elements."""
    # imported here: tests/test_sandbox.py imports this module as tests.test_adversarial, where
    # tests/ is not on the path
    from small_tasks import small_task

    task = load_task(small_task("vector_add", tmp_path_factory.mktemp("small")))
    assert task.bench_cases() == [{"N": 65536}]
    assert max(max(c.values()) for c in task.all_cases()) == 4096
    return task


def test_honest_baseline_of_these_hacks_passes():
    report = verdict(GELU, gelu("out[i] = y;"), heldout=True)
    assert report.ok, report.summary()


@pytest.mark.hack("constant output (all zeros)")
def test_all_zeros():
    report = verdict(GELU, gelu("out[i] = 0;"))
    assert not report.ok


@pytest.mark.hack("an input returned as the output (identity)")
def test_copy_of_an_input():
    report = verdict(GELU, gelu("out[i] = x[i];"))
    assert not report.ok


@pytest.mark.hack("part of the output computed (sampling)")
def test_writes_only_part_of_the_output():
    report = verdict(GELU, gelu("if (i % 64 != 63) out[i] = y;"))
    assert not report.ok
    assert all(c.unwritten > 0 for c in report.cases)
    assert "every 64th N starting at 63" in report.cases[0].pattern


@pytest.mark.hack("special-cased to the visible shapes")
def test_right_only_on_the_visible_shapes():
    sizes = " || ".join(f"x_shape[0] == {c['N']}" for c in GELU.cases.visible)
    hack = gelu(f"if ({sizes}) out[i] = y; else out[i] = x[i];")
    assert verdict(GELU, hack).ok  # the model would see a pass...
    report = verdict(GELU, hack, heldout=True)  # ...the final verification does not
    assert not report.ok


@pytest.mark.hack("right in one dtype only")
def test_right_in_float32_but_wrong_in_half_precision():
    report = verdict(GELU, gelu("out[i] = sizeof(x[0]) == 4 ? y : float(x[i]) * 0.5f;"))
    failed = {c.dtype for c in report.cases if c.verdict != "pass"}
    assert not report.ok and failed == {"float16", "bfloat16"}


@pytest.mark.hack("NaN in the output")
def test_nan_output():
    report = verdict(GELU, gelu("out[i] = (i == 17) ? NAN : y;"))
    assert not report.ok and all(c.nan == 1 for c in report.cases)


@pytest.mark.hack("outputs cached across calls")
def test_output_reused_from_a_previous_call():
    task = load_task("reduce_sum_atomic")
    honest = expert_ports(task)["msl"]
    first = run_correctness(task, honest, SIM, seed=1)
    assert first.ok
    # A kernel that replays the answer it saw for the first case: fresh inputs expose it.
    from mlxport.tasks import make_inputs
    from mlxport.verify.golden import golden

    case = task.cases.visible[0]
    seen = float(golden(task, make_inputs(task, case, "float32", 1), case)[0].ravel()[0])
    replay = honest.model_copy(
        update={
            "name": "replay",
            "atomic_outputs": False,
            "init_value": None,
            "source": f"if (thread_position_in_grid.x == 0) out[0] = {seen!r}f;\n",
            "header": "",
            "template": {},
            "grid": [1, 1, 1],
            "threadgroup": [1, 1, 1],
        }
    )
    report = run_correctness(task, replay, SIM, seed=2)
    assert not report.ok


@pytest.mark.hack("right on one input distribution only")
def test_right_only_for_inputs_of_one_sign():
    report = verdict(GELU, gelu("out[i] = v > 0 ? y : 0;"))
    assert not report.ok
    assert all(c.mismatches > c.total // 10 for c in report.cases if c.verdict == "fail")


@pytest.mark.hack("output in another dtype than the task's")
def test_returns_another_dtype_than_the_task():
    hack = gelu("out[i] = y;").model_copy(update={"output_dtypes": ["float32"]})
    report = verdict(GELU, hack)
    failed = {c.dtype for c in report.cases if c.verdict != "pass"}
    assert failed == {"float16", "bfloat16"}
    assert "output out is float32 but the task's is float16" in report.summary()


@pytest.mark.hack("less work at the timed size")
def test_right_on_every_checked_case_but_not_at_the_timed_size(small_vector_add):
    """A grid capped below the timed size computes part of the output there: benchmark() checks
    the timed case before timing it, so such a kernel is never timed."""
    from mlxport.verify.reverify import WrongAtBenchSize, check_bench_case

    task = small_vector_add
    capped = expert_ports(task)["msl"].model_copy(update={"grid": ["min(a.size, 4096)", 1, 1]})
    assert run_correctness(task, capped, SIM, seed=4, heldout=True).ok
    with pytest.raises(WrongAtBenchSize, match="wrong at the timed size N=65536"):
        check_bench_case(task, capped, SIM, task.bench_cases()[0], "float32", seed=4)


# Tasks whose every input distribution (tests/test_distributions.py) is drawn and checked.
EVERY_DISTRIBUTION = ("rmsnorm", "softmax_rows", "layernorm")


@pytest.mark.parametrize("name", suite_names())
def test_expert_msl_port_passes_every_case_on_the_simulator(name):
    task = load_task(name)
    report = run_correctness(task, expert_ports(task)["msl"], SIM, seed=11, heldout=True)
    assert report.ok, report.summary()
    if name in EVERY_DISTRIBUTION:
        assert {c.inputs for c in report.cases} == {"task", "wide", "rows", "positive", "negative"}


class SyntheticTiming:
    """The real simulator for every check, with made-up timings: the simulator never times, and
    these tests are about what benchmark() does with a suspicious speedup, not about clocks."""

    name, timing = "sim", True

    def __init__(self, candidate_seconds: float):
        self.candidate_seconds = candidate_seconds
        self.measured = 0
        self.runs = 0

    def __getattr__(self, attr):
        return getattr(SIM, attr)

    def run(self, candidate, inputs, **kw):
        self.runs += 1
        return SIM.run(candidate, inputs, **kw)

    def device_info(self, datasheet=None):
        return {"device_name": "simulator with synthetic timings"}

    def measure(self, task, candidate, case, dtype, *, seed, warmup, iters, baselines=True):
        self.measured += 1
        return {
            "candidate": [self.candidate_seconds] * iters,
            "native": [50e-6] * iters,
            "naive": [80e-6] * iters,
        }


def test_a_suspicious_speedup_is_reverified_and_retimed_before_it_is_reported():
    from mlxport.verify.benchmark import benchmark

    task = load_task("vector_add")
    backend = SyntheticTiming(candidate_seconds=2e-6)  # 25x the strongest baseline
    report = benchmark(
        task, expert_ports(task)["msl"], backend, case={"N": 5000}, dtype="float32", seed=1
    )
    assert backend.measured == 2
    assert any("re-verified" in f and "25.0x" in f for f in report.flags), report.flags


def test_reverification_checks_the_visible_cases_once_per_candidate():
    """Timed at two sizes, a suspiciously fast port is re-verified at each timed size, but its
    visible cases (the same seeds both times) run once."""
    from mlxport.verify.benchmark import benchmark

    task = load_task("vector_add")
    port = expert_ports(task)["msl"].model_copy(update={"name": "vector_add_twice_timed"})
    backend = SyntheticTiming(candidate_seconds=2e-6)
    benchmark(task, port, backend, case={"N": 5000}, dtype="float32", seed=1)
    first = backend.runs
    benchmark(task, port, backend, case={"N": 6000}, dtype="float32", seed=1)
    visible = len(task.cases.visible) * len(task.dtypes)
    assert first == 2 + visible  # timed-size check, its re-check on fresh seeds, the visible cases
    assert backend.runs - first == 2  # the second size: the two timed-size checks only


@pytest.mark.hack("special-cased to the timed size")
def test_a_kernel_specialised_to_the_timed_size_fails_reverification():
    """Right only at the size it is timed at (here N=5000), so it passes the timed-size check
    and posts a huge speedup; re-verification on the visible cases catches it."""
    from mlxport.verify.benchmark import benchmark
    from mlxport.verify.reverify import FailedReverification

    task = load_task("vector_add")
    special = expert_ports(task)["msl"].model_copy(
        update={
            "name": "vector_add_special",
            "source": """
uint i = thread_position_in_grid.x;
out[i] = a_shape[0] == 5000 ? a[i] + b[i] : a[i];
""",
        }
    )
    backend = SyntheticTiming(candidate_seconds=1e-6)
    with pytest.raises(FailedReverification, match="failed re-verification"):
        benchmark(task, special, backend, case={"N": 5000}, dtype="float32", seed=1)
    assert backend.measured == 1


def test_an_ordinary_speedup_is_reported_without_reverification():
    from mlxport.verify.benchmark import benchmark

    task = load_task("vector_add")
    backend = SyntheticTiming(candidate_seconds=25e-6)  # 2x
    report = benchmark(
        task, expert_ports(task)["msl"], backend, case={"N": 5000}, dtype="float32", seed=1
    )
    assert backend.measured == 1 and not report.flags
    assert report.speedups == {"native": pytest.approx(2.0), "naive": pytest.approx(3.2)}


@pytest.mark.hack("missing barrier (thread order)")
def test_a_missing_barrier_is_reported_with_both_threads_the_element_and_the_lines():
    """Each thread writes its sum to threadgroup memory and stores the one its predecessor wrote,
    with no barrier between: right whenever threads happen to run in order, as the simulator runs
    them, and a race on a GPU. The threadgroup memory's shadow sees thread 1 read what thread 0
    wrote since the last barrier."""
    task = load_task("vector_add")
    racy = expert_ports(task)["msl"].model_copy(
        update={
            "name": "vector_add_racy",
            "source": """
threadgroup float buf[256];
uint i = thread_position_in_grid.x;
uint t = thread_position_in_threadgroup.x;
buf[t] = a[i] + b[i];
if (t > 0) out[i - 1] = buf[t - 1];
if (t + 1 == threads_per_threadgroup.x || i + 1 == a_shape[0]) out[i] = buf[t];
""",
        }
    )
    report = run_correctness(task, racy, SIM, seed=5)
    assert not report.ok
    # Which threadgroup is caught first varies: threadgroups run side by side.
    assert re.search(
        r"threads 0 and 1 of threadgroup \(\d+,0,0\) race on threadgroup memory buf\[0\]: thread 0 "
        r"wrote it \(source line 5\) and thread 1 touched it \(source line 6\)",
        report.summary(),
    )
    fixed = racy.model_copy(
        update={
            "source": racy.source.replace(
                "buf[t] = a[i] + b[i];\n",
                "buf[t] = a[i] + b[i];\nthreadgroup_barrier(mem_flags::mem_threadgroup);\n",
            )
        }
    )
    assert run_correctness(task, fixed, SIM, seed=5, heldout=True).ok


def test_a_kernel_wrong_in_thread_order_is_not_blamed_on_thread_order():
    report = verdict(GELU, gelu("out[i] = 0;"), heldout=True)
    assert not report.ok
    assert not any("threads reversed" in c.label for c in report.cases)
    assert "unsynchronised" not in report.summary()


class OverlappingSim(type(SIM)):
    """The simulator, declaring that calls submitted together may overlap (as MLX on a GPU), so the
    final verification adds its together-runs; the simulator still runs them one by one."""

    overlaps = True


def test_final_verification_runs_visible_cases_together_where_calls_may_overlap(small_vector_add):
    task = small_vector_add
    report = run_correctness(
        task, expert_ports(task)["msl"], OverlappingSim(), seed=5, heldout=True
    )
    assert report.ok, report.summary()
    together = [c for c in report.cases if "calls at once" in c.label]
    assert len(together) == len(task.cases.visible) * len(task.dtypes)
    assert not any(
        "calls at once" in c.label
        for c in run_correctness(task, expert_ports(task)["msl"], SIM, seed=5, heldout=True).cases
    )


class MixingSim(OverlappingSim):
    """Calls that share state outside their buffers, as a CUDA kernel keeping partials in module
    globals does when MLX runs calls at once: here the second call of a batch returns the first
    call's result. Alone, every call is the real simulator's."""

    def run_together(self, candidate, input_sets, *, timeout=60.0):
        results = super().run_together(candidate, input_sets, timeout=timeout)
        return [results[0], results[0], *results[2:]] if len(results) > 1 else results


@pytest.mark.hack("state shared by calls run at once")
def test_calls_that_mix_when_run_together_fail_with_the_shared_state_hint(small_vector_add):
    task = small_vector_add
    report = run_correctness(task, expert_ports(task)["msl"], MixingSim(), seed=5, heldout=True)
    failed = [c for c in report.cases if c.verdict != "pass"]
    assert failed and all("calls at once" in c.label for c in failed)
    assert "module-scope __device__" in report.summary()


def test_a_kernel_wrong_on_fresh_inputs_is_not_blamed_on_calls_running_together(small_vector_add):
    """Wrong only when its first input element is large: right on the inputs checked alone, wrong
    on some of the fresh inputs of the together-run, and wrong on them alone too."""
    task = small_vector_add
    picky = expert_ports(task)["msl"].model_copy(
        update={
            "name": "vector_add_picky",
            "source": """
uint i = thread_position_in_grid.x;
out[i] = (i == 0 && float(a[0]) > 1.9f) ? a[i] : a[i] + b[i];
""",
        }
    )
    report = run_correctness(task, picky, OverlappingSim(), seed=2, heldout=True)
    failed = [c for c in report.cases if c.verdict != "pass"]
    assert failed and all("fresh inputs" in c.label for c in failed), report.summary()
    assert "module-scope" not in report.summary()


@pytest.mark.hack("state kept in module globals across calls")
def test_state_kept_in_module_globals_across_calls_is_refused():
    """reduce_sum's earlier CUDA port kept its block partials and ticket in __device__ globals:
    right alone, wrong when calls MLX runs at once share them, and a kernel keeping state could
    replay an earlier answer when the timer's inputs come back. CUDA candidates keep no state
    between calls, as Metal's rule has it for MSL; the port now uses a per-call scratch output."""
    from pathlib import Path

    from mlxport.backends.sim.source_checks import cuda_state_problem
    from mlxport.spec import KernelCandidate

    task = load_task("reduce_sum_atomic")
    shared = KernelCandidate.from_toml(
        Path(__file__).parents[1] / "benchmarks/variants/reduce_sum_v2.toml"
    )
    assert cuda_state_problem(shared.header, shared.source).startswith(
        "not a stateless kernel: "
        "`mlxp_rs_partials` at line 59 of the header is a mutable __device__ variable"
    )
    assert "`calls` at line 1 of the source is a static local" in cuda_state_problem(
        "", "static int calls = 0; calls++; out[0] = calls;"
    )
    assert (
        cuda_state_problem("__constant__ float c[2] = {1, 2};\nextern __shared__ float s[];\n", "")
        is None
    )
    honest = expert_ports(task)["cuda"]
    assert cuda_state_problem(honest.header, honest.source) is None
    if availability()["cuda"].ok:
        cuda = get_backend("cuda")
        report = run_correctness(task, shared, cuda, seed=5)
        assert not report.ok and "not a stateless kernel" in report.summary()
        assert run_correctness(task, honest, cuda, seed=5, heldout=True).ok


@pytest.mark.hack("wrong where the benchmark runs it")
def test_a_candidate_refuted_by_the_benchmark_tool_stops_counting_as_correct():
    """Right on every visible case, wrong at the size the benchmark tool times (16M): the record is
    refuted, so the candidate can no longer be chosen as the best, timed again, or shipped."""
    from mlxport.tools.handlers import run_tool
    from mlxport.tools.session import Record, Session

    task = load_task("vector_add")
    special = expert_ports(task)["msl"].model_copy(
        update={
            "name": "vector_add_small_only",
            "source": """
uint i = thread_position_in_grid.x;
out[i] = a_shape[0] > 2000000 ? a[i] : a[i] + b[i];
""",
        }
    )
    session = Session(task=task, backend=SyntheticTiming(candidate_seconds=1e-7), seed=1)
    record = Record(candidate=special, correctness=run_correctness(task, special, SIM, seed=1))
    assert record.correct
    session.records[special.id] = record
    out = run_tool(session, "benchmark", {"candidate_id": special.id})
    assert (
        out.error
        and "wrong at the timed size" in out.text
        and "no longer counts as correct" in out.text
    )
    assert record.correct, "a tool returns new records and never changes the session's"
    session.apply(out)
    assert not out.records[special.id].correct and session.best() is None
    again = run_tool(session, "benchmark", {"candidate_id": special.id})
    assert again.error and "found wrong by an earlier benchmark" in again.text
    refuted = session.records[special.id]
    assert Record.model_validate(refuted.model_dump(mode="json")) == refuted


# ---------------------------------------------------------------- only kernel code compiles


def gelu_inputs():
    from mlxport.tasks import make_inputs

    return make_inputs(GELU, GELU.cases.visible[0], "float32", 1)


def refused(candidate, sentence: str, *, check: bool = False):
    """``candidate`` is refused by the simulator's compile and run (and, with ``check``, by the
    correctness check) with ``sentence``; nothing of it is published into the library cache."""
    from mlxport.backends.sim import build

    published = []
    publish = build.publish
    build.publish = lambda tmp, final: (published.append(final), publish(tmp, final))
    try:
        inputs = gelu_inputs()
        compiled = SIM.compile(candidate, inputs)
        assert not compiled.ok and compiled.diagnostics[0].message == sentence, compiled.diagnostics
        run = SIM.run(candidate, inputs)
        assert run.error == sentence
        if check:
            report = verdict(GELU, candidate)
            assert not report.ok and sentence in report.summary()
    finally:
        build.publish = publish
    # a refused library is never published
    assert not [p for p in published if p.name.startswith("k-")]


@pytest.mark.hack("shell command from a static initializer")
def test_a_static_initializer_calling_system_is_refused_and_never_runs(tmp_path):
    header = f"""#include <metal_stdlib>
using namespace metal;
extern "C" int system(const char*);
static int pwned = system("touch {tmp_path / "pwned"}");
"""
    refused(
        gelu("out[i] = y;").model_copy(update={"header": header}),
        "not a Metal kernel: calls `system` (line 4 of the header)",
        check=True,
    )
    assert not (tmp_path / "pwned").exists()


@pytest.mark.hack("reading files")
def test_reading_a_file_with_fopen_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("7")
    header = f"""extern "C" void* fopen(const char*, const char*);
extern "C" int fgetc(void*);
inline float peek() {{ void* f = fopen("{secret}", "r"); return f ? float(fgetc(f) - '0') : 0.0f; }}
"""
    refused(
        gelu("out[i] = y + 0.0f * peek();").model_copy(update={"header": header}),
        "not a Metal kernel: calls `fopen` (line 3 of the header), and also `fgetc`",
    )


@pytest.mark.hack("reading secrets from the environment")
def test_an_api_key_read_with_getenv_and_written_to_disk_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    leak = tmp_path / "leak.txt"
    header = f"""extern "C" char* getenv(const char*);
extern "C" void* fopen(const char*, const char*);
extern "C" int fputs(const char*, void*);
inline void leak() {{ fputs(getenv("OPENAI_API_KEY"), fopen("{leak}", "w")); }}
"""
    refused(
        gelu("leak(); out[i] = y;").model_copy(update={"header": header}),
        "not a Metal kernel: calls `fputs` (line 4 of the header), and also `getenv`, `fopen`",
    )
    assert not leak.exists()


@pytest.mark.hack("a process outliving the run")
def test_a_child_process_outliving_the_run_is_refused_before_it_starts(tmp_path):
    header = f"""extern "C" int fork();
extern "C" int setsid();
extern "C" unsigned sleep(unsigned);
extern "C" int system(const char*);
inline void linger() {{ if (fork() == 0) {{ setsid(); sleep(1); \
system("touch {tmp_path / "later"}"); }} }}
"""
    refused(
        gelu("if (i == 0) linger();\nout[i] = y;").model_copy(update={"header": header}),
        "not a Metal kernel: "
        "calls `fork` (line 5 of the header), and also `setsid`, `sleep`, `system`",
    )
    assert not (tmp_path / "later").exists()


@pytest.mark.hack("static state across calls")
def test_a_static_local_counter_is_refused():
    header = "inline uint bump() {\n  static uint counter = 0;\n  return counter++;\n}\n"
    refused(
        gelu("out[i] = y + 0.0f * float(bump());").model_copy(update={"header": header}),
        "not a Metal kernel: `counter` at line 2 of the header is a static local variable; "
        "Metal allows static and program-scope data only in the constant address space",
    )


@pytest.mark.hack("mutable program-scope memory")
def test_a_64_mb_mutable_global_is_refused():
    header = "float scratch[16 * 1024 * 1024];\n"
    refused(
        gelu("scratch[i] = y;\nout[i] = scratch[i];").model_copy(update={"header": header}),
        "not a Metal kernel: `scratch` at line 1 of the header is a mutable program-scope "
        "variable; Metal allows program-scope data only in the constant address space",
    )
    # declared by a macro, out of sight of the text: the object still holds it
    header = "#define SCRATCH(n) float n##_buf[16 * 1024 * 1024];\nSCRATCH(big)\n"
    refused(
        gelu("big_buf[i] = y;\nout[i] = big_buf[i];").model_copy(update={"header": header}),
        "not a Metal kernel: `big_buf` at line 6 of the source is a mutable program-scope "
        "variable; Metal allows program-scope data only in the constant address space",
    )


@pytest.mark.hack("system headers and inline assembly")
def test_system_headers_and_inline_assembly_are_refused():
    refused(
        gelu("out[i] = y;").model_copy(
            update={"header": "#include <metal_stdlib>\n%:include <stdlib.h>\n"}
        ),
        "not a Metal kernel: includes <stdlib.h> (line 2 of the header); "
        "a Metal kernel includes only the <metal_*> headers",
    )
    refused(
        gelu('__asm__ volatile("nop");\nout[i] = y;'),
        "not a Metal kernel: inline assembly (`__asm__`, line 6 of the source); Metal has none",
    )
    pasted = gelu('PASTE(__as, m__) volatile("nop");\nout[i] = y;').model_copy(
        update={"header": "#define PASTE(a, b) a##b\n"}
    )
    compiled = SIM.compile(pasted, gelu_inputs())  # spelled through a macro: still not compiled
    assert not compiled.ok and compiled.diagnostics[0].message == (
        "not a Metal kernel: inline assembly (spelled through a macro, line 6 of the source); "
        "Metal has none"
    )


def test_constant_program_scope_data_still_compiles():
    header = (
        "constant float scale[2] = {1.0f, 0.5f};\nconstexpr constant int K = 2;\n"
        "inline float pick(uint i) "
        "{ constexpr constant float t[2] = {1.0f, 1.0f}; return t[i % K]; }\n"
    )
    ok = gelu("out[i] = y * scale[0] * pick(i);").model_copy(update={"header": header})
    assert verdict(GELU, ok).ok


@pytest.mark.hack("C++ text injected through template keys")
def test_a_template_key_carrying_cpp_text_is_refused():
    from pydantic import ValidationError

    from mlxport.spec import KernelCandidate

    data = gelu("out[i] = y;").model_dump()
    data["template"] = {'N = 1> void f() { system("id"); } template <int M': 4}
    with pytest.raises(ValidationError, match="template key .* must be an identifier"):
        KernelCandidate.model_validate(data)
    data["template"] = {"N": 'x.size; system("id")'}
    with pytest.raises(ValidationError, match="template value N .* must be an int, bool or dtype"):
        KernelCandidate.model_validate(data)
    # model_copy(update=...) skips validation: the launch refuses it all the same
    sneaky = gelu("out[i] = y;").model_copy(update={"template": {"int; int": 1}})
    compiled = SIM.compile(sneaky, gelu_inputs())
    assert not compiled.ok and "must be an identifier" in compiled.diagnostics[0].message


@pytest.mark.hack("reading files from CUDA device code")
def test_a_cuda_device_function_calling_fopen_is_refused_by_the_cpu_executor(tmp_path):
    from mlxport.backends.cuda_cpu import CudaExecutor, ExecError

    path = tmp_path / "peek.cu"
    path.write_text(
        'extern "C" __device__ long fopen(const char*, const char*);\n'
        "__device__ long peek(const char* name) {\n"
        '  return fopen(name, "r");\n'
        "}\n"
        '__global__ void leak(long* out) { out[threadIdx.x] = peek("/etc/hostname"); }\n'
    )
    (tmp_path / "raw.cu").write_text(
        "__device__ long raw(long n) {\n"
        '  long r; __asm__ volatile("syscall" : "=a"(r) : "a"(n) : "rcx", "r11", "memory");\n'
        "  return r;\n"
        "}\n"
        "__global__ void pid(long* out) { out[0] = raw(39); }\n"
    )
    executor = CudaExecutor()
    try:
        source = executor.source(path)
        with pytest.raises(
            ExecError, match=r"not device code: calls `fopen` \(line 3 of peek\.cu\)"
        ):
            executor.compile(source, "leak")
        # a system call needs no symbol: assembly outside the executor's PTX subset never
        # reaches the compiler, and stops the thread that would run it, naming it
        import numpy as np

        from mlxport.backends.cuda_cpu import Launch

        compiled = executor.compile(executor.source(tmp_path / "raw.cu"), "pid")
        r = executor.run(compiled, Launch((1, 1, 1), (1, 1, 1)), [np.zeros(1, np.int64)])
        assert r.error.startswith(
            'inline PTX `syscall` (line 2 of raw.cu), whose operand %0 has the constraint "=a", '
            "is outside what the CPU executor interprets"
        ), r.error
        assert not r.buffers["out"].any()
    finally:
        executor.close()


@pytest.mark.hack("writes around the checks through a raw address")
@pytest.mark.parametrize(
    "reach",
    [
        "out.p_[i] = y;",
        "*(x.p_ + i) = 0; out[i] = y;",
        "device float* o = out; o.buf_ = nullptr; out[i] = y;",
    ],
)
def test_the_raw_address_inside_a_buffer_view_is_out_of_reach(reach):
    """Buffer views keep their raw address and buffer private: no write escapes the bounds,
    written-mask and race checks."""
    compiled = SIM.compile(gelu(reach), gelu_inputs())
    assert not compiled.ok and "private" in compiled.diagnostics[0].message, compiled.diagnostics


@pytest.mark.hack("writes around the checks through a raw address")
@pytest.mark.parametrize(
    ("reach", "fault"),
    [
        ("auto o = &out[0];\no[i] = y;\no[i + x_shape[0]] = 0.0f;", "out-of-bounds access to out["),
        ("*(&out[0] + x_shape[0] + i) = y;\nout[i] = y;", "out-of-bounds access to out["),
        ("out[i] = y;\n(&out[0])[0] += 1.0f;", "race on device memory out[0]"),
    ],
)
def test_an_elements_address_is_a_checked_pointer_too(reach, fault):
    """`&out[i]` is a checked pointer in the simulator, as a declared `device float*` is: what is
    written through it is bounds-checked, marked written and watched for races."""
    report = verdict(GELU, gelu(reach))
    assert not report.ok and fault in report.summary(), report.summary()


@pytest.mark.hack("an atomic updated through its raw value")
def test_an_atomics_value_is_out_of_reach():
    task = load_task("reduce_sum_atomic")
    port = expert_ports(task)["msl"]
    hack = port.model_copy(
        update={
            "source": port.source.replace(
                "atomic_fetch_add_explicit(out, p, memory_order_relaxed);", "out[0].value_ += p;"
            )
        }
    )
    from mlxport.tasks import make_inputs

    compiled = SIM.compile(hack, make_inputs(task, task.cases.visible[0], "float32", 1))
    assert not compiled.ok and "private" in compiled.diagnostics[0].message, compiled.diagnostics


@pytest.mark.hack("load-then-store update of an atomic")
def test_a_load_then_store_update_of_an_atomic_is_a_race_in_any_run():
    """Two atomic operations are not one: threadgroups that load an atomic and store what they
    computed lose updates on a GPU, even when the simulator's order happened to give the sum."""
    task = load_task("reduce_sum_atomic")
    port = expert_ports(task)["msl"]
    hack = port.model_copy(
        update={
            "source": port.source.replace(
                "atomic_fetch_add_explicit(out, p, memory_order_relaxed);",
                "float old = atomic_load_explicit(out, memory_order_relaxed);\n"
                "        atomic_store_explicit(out, old + p, memory_order_relaxed);",
            )
        }
    )
    for seed in range(3):
        report = run_correctness(task, hack, SIM, seed=seed)
        assert not report.ok
        assert "both update out[0] with an atomic load and then an atomic store" in report.summary()
    assert run_correctness(task, port, SIM, seed=0).ok


@pytest.mark.hack("less work at the timed size")
def test_a_kernel_that_does_nothing_at_the_timed_size_never_verifies_on_the_simulator(
    small_vector_add,
):
    """Right at every visible and held-out size, idle from 8192 elements up: the final
    verification runs the timed size on the simulator too, when it fits the budget."""
    from mlxport.verify.reverify import WrongAtBenchSize, check_timed_size

    task = small_vector_add
    port = expert_ports(task)["msl"]
    idle = port.model_copy(update={"source": "if (a_shape[0] >= 8192) return;\n" + port.source})
    assert all(max(c.values()) < 8192 for c in task.all_cases())  # no checked case is that large
    assert run_correctness(task, idle, SIM, seed=4, heldout=True).ok
    with pytest.raises(WrongAtBenchSize, match="wrong at the timed size N=65536"):
        check_timed_size(task, idle, SIM, task.bench_cases()[0], "float32", seed=4, budget=600)
    assert check_timed_size(task, port, SIM, task.bench_cases()[0], "float32", seed=4, budget=600)[
        "checked"
    ]


@pytest.mark.hack("slow at the timed size to escape its check")
def test_a_timed_size_over_the_budget_is_labelled_never_plain_verified(small_vector_add):
    from mlxport.verify.reverify import check_timed_size, verdict_label

    task = small_vector_add
    timed = check_timed_size(
        task, expert_ports(task)["msl"], SIM, task.bench_cases()[0], "float32", seed=4, budget=0.01
    )
    assert not timed["checked"] and "over the 0.01 s budget" in timed["why"]
    label = verdict_label({"verified": True, "backend": "sim", "timed_size": timed})
    assert (
        label.startswith("verified on sim at the held-out sizes")
        and "N=65536 was not checked" in label
    )


@pytest.mark.hack("missing barrier between tiles")
def test_a_scan_missing_its_end_of_tile_barrier_fails_on_a_case_of_several_tiles():
    """The visible cases of cumsum are one tile per row; the held-out ones bring rows of two
    tiles, where the next tile's write of a SIMD-group total comes after another thread's read of
    it with no barrier between: named from the threadgroup memory's shadow in the forward order,
    with both threads and lines."""
    task = load_task("cumsum")
    port = expert_ports(task)["msl"]
    racy = port.model_copy(
        update={
            "source": port.source.replace(
                "    threadgroup_barrier(mem_flags::mem_threadgroup);  "
                "// sg_total is rewritten by the next tile\n",
                "",
            )
        }
    )
    assert racy.source != port.source
    assert run_correctness(task, racy, SIM, seed=5).ok
    final = run_correctness(task, racy, SIM, seed=5, heldout=True)
    failed = [c for c in final.cases if c.verdict != "pass"]
    assert failed and all(c.case.startswith("R=7,C=4097") for c in failed), final.summary()
    assert re.search(
        r"race on threadgroup memory sg_total\[\d+\]: thread \d+ read it \(source line \d+\) "
        r"and thread \d+ wrote it \(source line \d+\)",
        final.summary(),
    ), final.summary()


def test_a_case_with_several_threadgroups_is_generated_where_the_task_has_none():
    from mlxport.verify.correctness import _groups, generated_case

    task = load_task("vector_add")
    one = task.model_copy(
        update={
            "cases": task.cases.model_copy(
                update={"visible": [{"N": 200}], "heldout": [{"N": 7}, {"N": 100}]}
            )
        }
    )
    port = expert_ports(task)["msl"]
    case = generated_case(one, port)
    assert case == {"N": 400} and _groups(one, port, case)[0] == 2
    report = run_correctness(one, port, SIM, seed=1, heldout=True)
    assert report.ok and any(c.label == "N=400 (threads shuffled)" for c in report.cases), (
        report.cases
    )


@pytest.mark.hack("no-op kernel where a previous run left the answer (ghost replay)")
def test_a_kernel_that_does_nothing_fails_right_after_a_right_run_on_the_same_inputs():
    """Memory reused from the previous launch holds the right answer; every launch starts from
    freshly poisoned outputs, so a kernel that writes nothing is found out."""
    honest = gelu("out[i] = y;")
    assert verdict(GELU, honest).ok
    report = verdict(GELU, gelu("if (i == 0xFFFFFFFFu) out[i] = y;"))
    assert not report.ok and all(c.unwritten == c.total for c in report.cases), report.summary()


@pytest.mark.hack("computed in lower precision than the task's dtype")
def test_a_float32_output_computed_in_half_precision_fails():
    report = verdict(GELU, gelu("out[i] = float(half(y));"))
    failed = {c.dtype for c in report.cases if c.verdict != "pass"}
    assert "float32" in failed, report.summary()


@pytest.mark.hack("reads outside its buffers (where a golden might lie)")
def test_reading_past_an_input_faults():
    report = verdict(GELU, gelu("out[i] = x[i + x_shape[0]];"))
    assert not report.ok and "out-of-bounds read of x" in report.summary(), report.summary()


@pytest.mark.hack("reads its output before writing it (uninitialised memory)")
def test_a_kernel_reading_its_output_before_writing_it_fails_under_a_second_poison():
    """max(NaN, y) is y, so NaN-poisoned outputs hide a kernel that folds what the output held
    into its result; the final verification runs the visible cases again on outputs holding
    another, finite, poison."""
    hack = gelu("out[i] = metal::max(float(out[i]), y);")
    assert verdict(GELU, hack).ok  # NaN poison: right by luck
    report = verdict(GELU, hack, heldout=True)
    failed = [c for c in report.cases if c.verdict != "pass"]
    assert failed and all("second poison" in c.label for c in failed), report.summary()
    assert "reads an output before writing it" in report.summary()


@pytest.mark.hack("right only where the output memory is not zeroed")
def test_a_kernel_telling_zeroed_output_memory_apart_fails_under_the_second_poison():
    """Fresh GPU memory is often zeros: the second poison holds zeros among its numbers, so a
    kernel right only where its output did not start at zero is found out."""
    hack = gelu("out[i] = float(out[i]) == 0.0f ? -y : y;")
    # (float32: a float16 poison can round a small number to zero by itself)
    report = verdict(GELU.model_copy(update={"dtypes": ["float32"]}), hack, heldout=True)
    failed = [c for c in report.cases if c.verdict != "pass"]
    assert failed and all("second poison" in c.label for c in failed), report.summary()


@pytest.mark.hack("stale outputs while timed (output memory reused between calls)")
def test_outputs_made_as_they_are_timed_are_checked_against_the_reference():
    """A kernel that keeps what a reused output buffer holds is right on poisoned outputs and
    fast while timed, returning the previous call's answer: the GPU worker checks the outputs of
    calls made as the timed ones are (here a function serving the previous input set's answer)."""
    from mlxport.backends.gpu_worker import timed_outputs
    from mlxport.tasks import call, make_inputs

    task = load_task("vector_add")
    case, dtype = {"N": 4096}, "bfloat16"
    sets = [make_inputs(task, case, dtype, seed) for seed in range(3)]
    answers = [call(task.reference, task, s, case)[0] for s in sets]
    served = []

    def stale(inputs):
        k = next(j for j, s in enumerate(sets) if s is inputs)
        served.append(k)
        return answers[(k - 1) % 3] if len(served) > 1 else answers[k]

    port = expert_ports(task)["msl"]
    refs = [[answer] for answer in answers]
    assert (
        timed_outputs(
            task, port, lambda inputs: call(task.reference, task, inputs, case), sets, refs, dtype
        )
        is None
    )
    why = timed_outputs(task, port, stale, sets, refs, dtype)
    assert why and "of out is wrong in the calls made as they are timed" in why


# ---------------------------------------------------------------- what the audit of issue 41 found


VECTOR_ADD = load_task("vector_add")
VECTOR_PORT = expert_ports(VECTOR_ADD)["msl"]


def vector_add(source: str, header: str = ""):
    return VECTOR_PORT.model_copy(update={"source": source, "header": header, "name": "va_hack"})


def vector_inputs(dtype: str = "float32"):
    from mlxport.tasks import make_inputs

    return make_inputs(VECTOR_ADD, VECTOR_ADD.cases.visible[0], dtype, 1)


@contextlib.contextmanager
def stdin_holding(text: str):
    """mlxport's stdin (file descriptor 0) is a pipe holding ``text`` meanwhile, as an MCP
    server's JSON-RPC stream is."""
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read)


@pytest.mark.hack("a .cu file reading host files, probing them, or reading mlxport's stdin")
def test_the_preprocessor_of_a_cu_file_sees_only_its_folder_and_no_stdin(tmp_path):
    from mlxport.backends.cuda_cpu import CudaExecutor, SourceError

    secret = tmp_path / "elsewhere" / "dbsecret.txt"
    secret.parent.mkdir()
    secret.write_text("hunter2_db_password\n")
    folder = tmp_path / "port"
    folder.mkdir()
    kernel = "__global__ void k(float* o) { o[threadIdx.x] = V; }\n"
    (folder / "leak.cu").write_text(f'#define hunter2_db_password int leak\n#include "{secret}"\n')
    (folder / "probe.cu").write_text(
        f'#if __has_include("{secret}")\n#define V 1\n#else\n#define V 0\n#endif\n' + kernel
    )
    (folder / "stdin.cu").write_text('#include "/dev/stdin"\n#define V 0\n' + kernel)
    (folder / "escape.cu").write_text('#include "../elsewhere/missing/x.h"\n#define V 0\n' + kernel)
    executor = CudaExecutor()
    try:
        with pytest.raises(SourceError, match="outside its folder and the include folders") as e:
            executor.source(folder / "leak.cu")
        assert "hunter2" not in str(e.value)
        probed = executor.source(folder / "probe.cu").preprocessed
        assert "= 0;" in probed and "= 1;" not in probed  # the sandbox shows no such file
        with stdin_holding("MCP_JSON_RPC_STREAM = 1;\n"):
            read = executor.source(folder / "stdin.cu").preprocessed
        assert "MCP_JSON_RPC_STREAM" not in read
        with pytest.raises(SourceError, match="outside its folder"):
            executor.source(folder / "escape.cu")
        assert not (tmp_path / "elsewhere" / "missing").exists()  # never stood in for
    finally:
        executor.close()


@pytest.mark.hack("a macro bomb in a .cu file")
def test_a_macro_bomb_in_a_cu_file_stops_at_the_preprocessors_output_limit(tmp_path):
    from mlxport.backends.cuda_cpu import CudaExecutor, SourceError

    levels = ["#define A0 x x x x x x x x x x"] + [
        f"#define A{k} " + " ".join([f"A{k - 1}"] * 10) for k in range(1, 8)
    ]
    path = tmp_path / "bomb.cu"
    path.write_text("\n".join(levels) + "\nint v = 0 A7;\n__global__ void k(float* o) {}\n")
    executor = CudaExecutor()
    try:
        with pytest.raises(SourceError, match=r"printed over 16 MiB .*; stopped"):
            executor.source(path)
    finally:
        executor.close()


@pytest.mark.hack("right only off Metal (the simulator told apart by its macros)")
def test_the_simulator_predefines_what_metals_compiler_does():
    """`#ifndef __METAL_VERSION__` (or `#ifdef __x86_64__`) picks the right branch only where the
    simulator compiles it: the simulator defines Metal's macros and none of the host's."""
    for tell in ("#ifndef __METAL_VERSION__", "#ifdef __x86_64__", "#if __cplusplus > 201703L"):
        hack = gelu(f"{tell}\nout[i] = y;\n#else\nout[i] = x[i];\n#endif")
        assert not verdict(GELU, hack).ok, tell
    told = gelu(
        "#if __METAL_VERSION__ >= 310 && defined(__HAVE_BFLOAT__) && !defined(__linux__) "
        "&& !defined(__GLIBC__)\nout[i] = y;\n#endif"
    )
    assert verdict(GELU, told).ok


@pytest.mark.hack("writes only where the output holds the verifier's poison")
def test_poison_is_drawn_for_every_run_and_every_dtype():
    """A kernel writing only where the output holds the poison's bytes (0xFF or 0x3F) writes
    nothing; the NaN and the finite poison differ from run to run, and the finite-poison runs
    cover every dtype."""
    from mlxport.verify.correctness import Run, _dtypes

    hack = gelu(
        "uint bits = as_type<uint>(float(out[i]));\n"
        "if (bits == 0xFFFFFFFFu || bits == 0x3F3F3F3Fu || (bits & 0xFFFFu) == 0xFFFFu) "
        "out[i] = y;"
    )
    report = verdict(GELU, hack)
    assert not report.ok and all(c.verdict == "fail" for c in report.cases)
    seen = vector_add("uint i = thread_position_in_grid.x;\nout[i] = out[i];")  # what it held
    for dtype in ("float32", "float16", "bfloat16"):
        inputs = vector_inputs(dtype)
        for poison in ("nan", "finite"):
            first, second = (SIM.run(seen, inputs, poison=poison).outputs[0] for _ in range(2))
            assert np.isnan(first).all() == (poison == "nan"), (dtype, poison)
            bits = first.view(f"u{first.itemsize}")
            assert first.tobytes() != second.tobytes(), (dtype, poison)  # drawn for each run
            assert len(np.unique(bits)) > 100, (dtype, poison)  # and each element
    assert _dtypes(VECTOR_ADD, Run(1, 0, {"N": 7}, "poisoned")) == VECTOR_ADD.dtypes


@pytest.mark.hack("a racy read done only in the forward order (told apart by a ticket)")
def test_a_read_before_another_threads_write_is_a_race_in_the_forward_order():
    """Thread t reads buf[t + 1] before thread t + 1 overwrites it, with no barrier between:
    right in the simulator's forward order, a race on a GPU. A kernel that tells the reordered
    runs apart (a ticket from a threadgroup atomic) and only then adds the barrier is caught in
    the forward order itself."""
    source = """
threadgroup float buf[256];
threadgroup atomic_uint ticket;
uint i = thread_position_in_grid.x;
uint t = thread_position_in_threadgroup.x;
uint n = threads_per_threadgroup.x;
if (t == 0) atomic_store_explicit(&ticket, 0u, memory_order_relaxed);
buf[t] = a[i];
threadgroup_barrier(mem_flags::mem_threadgroup);
bool forward = atomic_fetch_add_explicit(&ticket, 1u, memory_order_relaxed) == t;
float next = buf[(t + 1) % n];
if (!forward) next = 0.0f;
buf[t] = b[i];
out[i] = a[i] + buf[t] + 0.0f * next;
"""
    run = SIM.run(vector_add(source), vector_inputs())
    assert run.error and re.search(
        r"threads \d+ and \d+ of threadgroup \(\d+,0,0\) race on threadgroup memory buf\[\d+\]: "
        r"thread \d+ read it \(source line 11\) and thread \d+ wrote it \(source line 13\)",
        run.error,
    ), run.error
    fixed = source.replace(
        "buf[t] = b[i];", "threadgroup_barrier(mem_flags::mem_threadgroup);\nbuf[t] = b[i];"
    )
    assert SIM.run(vector_add(fixed), vector_inputs()).error is None


@pytest.mark.hack("state kept between calls in a global named like a guard variable")
def test_writable_data_of_any_name_is_refused():
    refused(
        gelu("out[i] = y + 0.0f * float(_ZGVcalls++);").model_copy(
            update={"header": "#define DECL(n) int n = 0;\nDECL(_ZGVcalls)\n"}
        ),
        "not a Metal kernel: `_ZGVcalls` at line 2 of the header is a mutable program-scope "
        "variable; Metal allows program-scope data only in the constant address space",
    )


SYSCALL_STUB = (
    '__attribute__((section(".text"))) const unsigned char stub[] = '
    "{0x48, 0x89, 0xf8, 0x0f, 0x05, 0xc3};\n"
)


@pytest.mark.hack("machine code kept as data in .text and called through a cast")
def test_data_in_executable_code_is_refused(tmp_path):
    from mlxport.backends.cuda_cpu import CudaExecutor, ExecError

    refused(
        gelu("out[i] = y + 0.0f * float(((long (*)(long))(const void*)stub)(39));").model_copy(
            update={"header": SYSCALL_STUB}
        ),
        "not a Metal kernel: `stub` (line 1 of the header) is data placed in executable code "
        "(machine code kept as an array?); only compiled code goes there",
    )
    path = tmp_path / "stub.cu"
    path.write_text(
        SYSCALL_STUB + "__global__ void pid(long* out) { out[0] = ((long (*)(long))stub)(39); }\n"
    )
    executor = CudaExecutor()
    try:
        with pytest.raises(ExecError, match=r"`stub` \(line 1 of stub\.cu\) is data placed in "):
            executor.compile(executor.source(path), "pid")
    finally:
        executor.close()


@pytest.mark.hack("code run when the library is loaded, or replacing the runtime's own")
def test_constructors_initialisers_and_runtime_replacements_are_refused():
    header = "inline void hidden() { volatile int n = 39; (void)n; }\n"
    header += "__attribute__((constructor)) void boot() { hidden(); }\n"
    refused(
        gelu("out[i] = y;").model_copy(update={"header": header}),
        "not a Metal kernel: `boot` (line 2 of the header) runs when the library is loaded (a "
        "constructor); kernel code runs only when it is launched",
    )
    dynamic = "inline float opaque(float v) { volatile float k = v; return k; }\n"
    dynamic += "constant float scale = opaque(2.0f);\n"
    compiled = SIM.compile(
        gelu("out[i] = y * scale;").model_copy(update={"header": dynamic}), gelu_inputs()
    )
    assert "initialised at run time" in compiled.diagnostics[0].message, compiled.diagnostics
    # the runtime's own messages (a fault's) would go through the kernel's snprintf
    quiet = 'extern "C" int snprintf(char*, unsigned long, const char*, ...) { return 0; }\n'
    refused(
        gelu("out[i] = x[i + x_shape[0]];").model_copy(update={"header": quiet}),
        "not a Metal kernel: `snprintf` (line 1 of the header) replaces a function or variable "
        "of the simulator runtime's own",
    )


@pytest.mark.hack("a pointer turned into an integer and back, around the checks")
@pytest.mark.parametrize(
    "reach",
    [
        "thread const float* p = (thread const float*)(ulong)(&a[0]);",
        "ulong u; auto pa = &a[0]; __builtin_memcpy(&u, &pa, 8);\n"
        "thread const float* p = (thread const float*)u;",
        "ulong u; auto pa = &a[0]; PASTE(mem, cpy)(&u, &pa, 8);\n"
        "thread const float* p = (thread const float*)u;",
        "ulong2 u = as_type<ulong2>(&a[0]);\nthread const float* p = (thread const float*)u.x;",
        "auto pa = a;\nthread const ulong* raw = (thread const ulong*)&pa;\n"
        "thread const float* p = (thread const float*)raw[0];",
    ],
)
def test_a_pointers_integer_form_never_comes_back_as_a_pointer(reach):
    """(A pointer's integer form is its place in its buffer, not an address: see
    test_an_alignment_test_on_a_pointers_integer_form.)"""
    hack = vector_add(
        f"uint i = thread_position_in_grid.x;\n{reach}\nout[i] = p[i] + b[i] + 0.0f * p[i + 3000];",
        "#define PASTE(a, b) a##b\n",
    )
    compiled = SIM.compile(hack, vector_inputs())
    assert not compiled.ok, reach
    message = compiled.diagnostics[0].message
    assert any(
        why in message
        for why in (
            "is not Metal's",
            "invalid cast",
            "as_type of a pointer",
            "pointer's own storage",
            "an integer cast to a pointer",
        )
    ), message


@pytest.mark.hack("an element's address taken in another spelling, read past the end")
@pytest.mark.parametrize("address", ["&(a[0])", "&((a[0]))", "&*a", "&(*a)", "&r", "&(r)"])
def test_every_spelling_of_an_elements_address_is_a_checked_pointer(address):
    """``&r`` of a reference into a buffer (``device const float& r``) too."""
    hack = vector_add(
        "uint i = thread_position_in_grid.x;\ndevice const float& r = a[0];\n"
        f"auto p = {address};\nout[i] = p[i + 1] + b[i];"
    )
    run = SIM.run(hack, vector_inputs())
    assert run.error and "out-of-bounds read of a[" in run.error, run.error


def test_the_address_of_a_member_of_a_reference_into_a_buffer_is_a_checked_pointer():
    """``&v.x`` of ``device const float4& v``: reading past the buffer through it is out of
    bounds, as through ``&r``."""
    hack = vector_add(
        "uint i = thread_position_in_grid.x;\n"
        "device const float4& v = ((device const float4*)a)[0];\n"
        "auto p = &v.x;\nout[i] = p[i + 1] + b[i];"
    )
    run = SIM.run(hack, vector_inputs())
    assert run.error and "out-of-bounds read of a[" in run.error, run.error


@pytest.mark.hack("directives and file probes hidden from a check on the raw text")
@pytest.mark.parametrize(
    ("header", "sentence"),
    [
        ("/**/#include <stdlib.h>\n", "includes <stdlib.h> (line 1 of the header)"),
        ("#inc\\\nlude <stdlib.h>\n", "includes <stdlib.h> (line 1 of the header)"),
        ("#define SYS <stdlib.h>\n#include SYS\n", "includes SYS (line 2 of the header)"),
        (
            '#if __has_include("/etc/shadow")\n#endif\n',
            "`__has_include` (line 1 of the header) asks the host's file system",
        ),
        (
            '#pragma GCC dependency "/etc/shadow"\n',
            "#pragma GCC dependency (line 1 of the header) reads another file",
        ),
        ("/**/#undef __asm__\n", "#undef __asm__ (line 1 of the header)"),
    ],
)
def test_directives_are_read_as_the_preprocessor_reads_them(header, sentence):
    compiled = SIM.compile(gelu("out[i] = y;").model_copy(update={"header": header}), gelu_inputs())
    assert not compiled.ok and sentence in compiled.diagnostics[0].message, compiled.diagnostics


@pytest.mark.hack("text the checks and the compiler lex differently")
@pytest.mark.parametrize(
    ("header", "sentence"),
    [
        # 1'0 read as a character literal '0; ... "' hid a comment from /* to a // */ the
        # compiler ignores, and the #line and #undef between
        (
            "constant int a = 1'0; constant char s[] = \"'/*\";\n#undef __asm__\n// */\n",
            "a digit separator (1') at line 1 of the header",
        ),
        ("constant int a = 0xFF'FF;\n", "a digit separator (0xFF') at line 1"),
        ("constant int a = 0b1'0;\n", "a digit separator (0b1') at line 1"),
        ("constant float a = 1e+'0';\n", "a digit separator (1e+') at line 1"),
        ('constant char s[] = R"x(")x"; union Pun { float f; uint u; };\n', "a raw string"),
        ('constant char s[] = u8R"(")";\n', "a raw string literal at line 1"),
        ('constant char s[] = R\\\n"(")";\n', "a raw string literal at line 2"),
        ("constant char c = 'a;\n", "a literal left open at line 1"),
        ("// a comment \\  \n#undef __asm__\n", "a backslash followed by spaces"),
        ("// a comment\r#undef __asm__\n", "a carriage return that ends no line"),
        ("int \\u0041 = 1;\n", "a backslash in code at line 1"),
    ],
)
def test_text_read_two_ways_is_refused_before_any_check_reads_it(header, sentence):
    compiled = SIM.compile(gelu("out[i] = y;").model_copy(update={"header": header}), gelu_inputs())
    assert not compiled.ok and sentence in compiled.diagnostics[0].message, compiled.diagnostics


def test_quotes_prefixes_and_splices_kernels_write_still_compile():
    header = (
        "constant char q = '\\'', d = '\"', u = u8'a';\nconstant int w = L'a' + u'b' + U'c';\n"
        "#define TWICE(x) \\\n  (2.0f * (x))\n// a comment: it's é\n"
        "constant float e = 1.5e+3f + 0x1p-3f + .5f;\n"
    )
    ok = gelu("out[i] = TWICE(y) * 0.5f;").model_copy(update={"header": header})
    assert verdict(GELU, ok).ok


@pytest.mark.hack("a line marker made by a macro")
@pytest.mark.parametrize("mark", ["#", "%:"])
def test_a_macro_expanding_to_a_line_marker_is_no_line_marker(mark):
    """The preprocessor prints a `#` a macro made with a space before it: the check after it
    does not take it for one of its own line markers, and still reads what follows."""
    header = f'#define MARK {mark} 1 "generated"\nMARK\nunion Pun {{ float f; uint u; }};\n'
    compiled = SIM.compile(gelu("out[i] = y;").model_copy(update={"header": header}), gelu_inputs())
    assert not compiled.ok and "`union` at line 3 of the header" in compiled.diagnostics[0].message


@pytest.mark.hack("a file probe through the _Pragma operator")
@pytest.mark.parametrize(
    ("header", "sentence"),
    [
        ('_Pragma("GCC dependency \\"/etc/hostname\\"")\n', "reads another file"),
        ('#define P(x) _Pragma(#x)\nP(GCC dependency "/etc/hostname")\n', "one plain string"),
    ],
)
def test_the_pragma_operator_is_held_to_the_rules_of_pragma(header, sentence):
    compiled = SIM.compile(gelu("out[i] = y;").model_copy(update={"header": header}), gelu_inputs())
    assert not compiled.ok and sentence in compiled.diagnostics[0].message, compiled.diagnostics
    unrolled = gelu('_Pragma("unroll") for (int k = 0; k < 1; k++) out[i] = y;')
    assert SIM.compile(unrolled, gelu_inputs()).ok


@pytest.mark.hack("a forged reply on the worker's protocol pipe")
@pytest.mark.parametrize(
    ("target", "sentence"),
    [
        ("object_dtype", "the worker's reply is malformed: an array's dtype is 'O', not a number"),
        ("too_few_arrays", "the worker's reply is malformed: 0 arrays for 1 outputs"),
    ],
)
def test_a_forged_worker_reply_fails_the_run_in_one_sentence(target, sentence):
    from mlxport.backends.sim import SimBackend
    from mlxport.backends.worker import Worker

    sim = SimBackend()
    sim._worker.close()
    sim._worker = Worker(f"tests.workers.forge:{target}")
    try:
        run = sim.run(gelu("out[i] = y;"), gelu_inputs())
    finally:
        sim.close()
    assert run.error and run.error.startswith(sentence), run.error


def test_a_workers_text_reaches_the_user_without_control_characters():
    from mlxport.backends.sim import SimBackend
    from mlxport.backends.worker import Worker

    sim = SimBackend()
    sim._worker.close()
    sim._worker = Worker("tests.workers.forge:terminal_escapes")
    try:
        run = sim.run(gelu("out[i] = y;"), gelu_inputs())
    finally:
        sim.close()
    assert run.error == "]0;pwned-title[2J[32mPASS"


@pytest.mark.hack("outputs sized to take the worker's memory")
def test_outputs_over_the_simulators_budget_are_refused_before_they_are_allocated():
    huge = vector_add("uint i = thread_position_in_grid.x;\nout[i] = a[i] + b[i];").model_copy(
        update={"output_shapes": [["a.size * 1000000"]]}
    )
    run = SIM.run(huge, vector_inputs())
    assert run.error and "over the 1,073,741,824 bytes a launch's outputs may take" in run.error
    assert not run.outputs


@pytest.mark.hack("outputs far larger than the task's, under the simulator's own ceiling")
def test_outputs_over_a_multiple_of_the_goldens_are_refused_in_verification():
    from mlxport.backends.base import OUTPUT_FLOOR, output_budget
    from mlxport.verify.correctness import run_judged

    n = VECTOR_ADD.cases.visible[0]["N"]  # 4 MiB of float32 output: the floor is the budget
    assert output_budget([np.zeros(n, np.float32)]) == OUTPUT_FLOOR
    assert output_budget([np.zeros(16 * n, np.float32)]) == 8 * 64 * n
    source = "uint i = thread_position_in_grid.x;\nout[i] = a[i] + b[i];"
    wide = vector_add(source).model_copy(update={"output_shapes": [["a.size * 64"]]})
    case = VECTOR_ADD.cases.visible[0]
    result, run = run_judged(VECTOR_ADD, wide, SIM, case, "float32", seed=1)
    assert run is not None and not run.outputs  # 256 MiB: never allocated
    assert f"over the {OUTPUT_FLOOR:,} bytes a launch's outputs may take" in run.error
    honest, _ = run_judged(VECTOR_ADD, vector_add(source), SIM, case, "float32", seed=1)
    assert honest.verdict == "pass", honest


@pytest.mark.hack("a secret under a name of mlxport's own prefix")
def test_only_the_listed_names_of_the_environment_reach_a_worker(monkeypatch):
    from mlxport.backends.worker import Worker

    canaries = ["MLXPORT_OPENAI_PASS", "MLX_PROVIDER", "CUDA_X", "LC_PWD", "ZIG_NOTE", "ANY_NAME"]
    for name in canaries:
        monkeypatch.setenv(name, "canary")
    monkeypatch.setenv("MLXPORT_SIM_THREADS", "2")
    worker = Worker("tests.workers.probe:handle", memory_bytes=0)
    try:
        reply, _ = worker.call({"op": "env"})
    finally:
        worker.close()
    assert not set(canaries) & set(reply["env"]) and "MLXPORT_SIM_THREADS" in reply["env"]


@pytest.mark.hack("a template-instantiation bomb")
def test_a_template_bomb_stops_at_the_cpu_limit_and_is_not_compiled_again(monkeypatch):
    """Each level doubles the instantiations: the compiler stops at its CPU limit (here 2 s), and
    the other dtypes of the same candidate are not compiled again."""
    from mlxport.backends.sim import build, compiler

    monkeypatch.setattr(compiler, "COMPILER_CPU_SECONDS", 2)
    header = (
        "template <int N, int M> struct Bomb {\n"
        "  static constexpr int v = Bomb<N - 1, 2 * M>::v + Bomb<N - 1, 2 * M + 1>::v;\n"
        "};\n"
        "template <int M> struct Bomb<0, M> { static constexpr int v = M & 1; };\n"
    )
    bomb = gelu("out[i] = y + float(Bomb<40, 1>::v);").model_copy(update={"header": header})
    compiles = []
    real = build.compile_library
    monkeypatch.setattr(
        build, "compile_library", lambda *a, **k: (compiles.append(1), real(*a, **k))[1]
    )
    backend = type(SIM)()
    try:
        report = run_correctness(GELU, bomb, backend, seed=1)
    finally:
        backend.close()
    assert not report.ok and "used over 2 s of CPU, the compiler's limit" in report.summary()
    assert len(compiles) == 1, "the other dtypes are not compiled again"


@pytest.mark.hack("isnan of a half value falsely refused")
def test_isnan_of_half_values_is_kernel_code():
    honest = gelu("half h = half(x[i]);\nout[i] = (isnan(h) || isnan(float(h))) ? 0.0f : y;")
    assert verdict(GELU, honest).ok


@pytest.mark.hack("the header-data record edited to exempt a mutable global")
def test_the_header_data_record_is_used_only_while_its_hash_matches():
    from mlxport.backends.sim import object_checks

    object_checks._header_data()  # written on first use
    record = object_checks.header_data_record()
    kept = record.read_text()
    try:
        record.write_text(kept + "scratch\n")
        object_checks._header_data.cache_clear()
        assert "scratch" not in object_checks._header_data()
        refused(
            gelu("scratch[i] = y;\nout[i] = scratch[i];").model_copy(
                update={"header": "#define SCRATCH(n) float n[1 << 20];\nSCRATCH(scratch)\n"}
            ),
            "not a Metal kernel: `scratch` at line 2 of the header is a mutable program-scope "
            "variable; Metal allows program-scope data only in the constant address space",
        )
    finally:
        object_checks._header_data.cache_clear()


PAST_THE_END = "out[i] = p[i] + b[i] + 0.0f * p[i + 16];"


@pytest.mark.hack("a pointer's bits read or made through a reference, union, alias or struct")
@pytest.mark.parametrize(
    ("reach", "why"),
    [
        (
            "auto pa = a;\nthread const float* p = nullptr;\n(thread ulong&)p = (thread ulong&)pa;",
            "a cast to a reference type",
        ),
        (
            "auto pa = a;\nthread const float* p = nullptr;\n"
            "reinterpret_cast<ulong2&>(p) = reinterpret_cast<ulong2&>(pa);",
            "reinterpret_cast to a type in no address space",
        ),
        (
            "union U { U() {} ulong2 u; device const float* q; };\n"
            "U x; x.q = a; x.u.y = 0;\ndevice const float* p = x.q;",
            "a union holds one value as another type",
        ),
        (
            "typedef thread const float* fp;\nthread float z = 0;\nfp p = (fp)(ulong(1) << 40);",
            "an alias of a pointer or reference type",
        ),
        (
            "struct S { device const float* q; };\nS s{a};\n((thread ulong*)&s)[1] = 0;\n"
            "device const float* p = s.q;",
            "a thread pointer cast from a pointer to anything but a plain value",
        ),
        (
            "thread float z = 0;\nthread const float* p = &z;\n"
            "thread ulong* bits = (thread ulong*)&p;\nbits[0] += 4;",
            "a thread pointer cast from a pointer to anything but a plain value",
        ),
        ("auto p = a.operator->();", "an explicit operator call"),
        ("auto p = metal::sim_detail::raw(a);", "names the simulator's own code"),
        (
            "PASTE(mlx, sim)::Ptr<const float, 1> p(&a[0], nullptr);",
            "names the simulator's own code",
        ),
        (
            "thread float z = 0;\nthread void* v = &z;\n"
            "thread const float* p = static_cast<thread const float*>(v);",
            "static_cast to a thread pointer or reference",
        ),
        (
            "auto pa = a;\nthread ulong* u = (ulong*)&pa;\nu[0] -= 64;\n"
            "device const float* p = pa;",
            "a cast to a pointer in no address space",
        ),
        (
            "ulong2 cell = ulong2(0);\nauto pp = new (&cell) (device const float*)(a);\n"
            "cell.y = 0;\ndevice const float* p = *pp;",
            "placement new makes any storage hold a pointer",
        ),
    ],
)
def test_a_pointers_bits_are_never_read_or_made_as_numbers(reach, why):
    """Every way a kernel could read a checked pointer's address as numbers, or make a pointer of
    numbers, and then read past a buffer's end unchecked, is refused before it compiles."""
    hack = vector_add(
        f"uint i = thread_position_in_grid.x;\n{reach}\n{PAST_THE_END}",
        "#define PASTE(a, b) a##b\n",
    )
    compiled = SIM.compile(hack, vector_inputs())
    assert not compiled.ok and why in compiled.diagnostics[0].message, compiled.diagnostics
    honest = vector_add(
        "uint i = thread_position_in_grid.x;\nthread float pair[2] = {a[i], b[i]};\n"
        "thread float2* v = (thread float2*)pair;\nout[i] = (*v).x + (*v).y;"
    )
    assert SIM.run(honest, vector_inputs()).error is None


TABLE = "constant float TABLE[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};"


def test_a_pointer_into_a_program_scope_constant_array_is_checked():
    """A lookup table at program scope is read through a constant pointer as in Metal: within the
    array it runs, past its end it faults naming it, and it cannot be written."""
    read = "uint i = thread_position_in_grid.x;\nconstant float* t = {start};\n"
    read += "out[i] = a[i] + b[i] + 0.0f * t[i % {n}];"
    for start in ("TABLE[0]", "&TABLE[1][0]"):
        run = SIM.run(vector_add(read.format(start=start, n=4), TABLE), vector_inputs())
        assert run.error is None, run.error
    run = SIM.run(vector_add(read.format(start="&TABLE[1][2]", n=4), TABLE), vector_inputs())
    assert run.error and "constant buffer TABLE has 8 elements" in run.error, run.error
    write = "uint i = thread_position_in_grid.x;\nconstant float* t = TABLE[0];\nt[0] = a[i];\n"
    compiled = SIM.compile(vector_add(write + "out[i] = b[i];", TABLE), vector_inputs())
    assert not compiled.ok and "read-only" in compiled.diagnostics[0].message


@pytest.mark.parametrize(
    "cast",
    [
        "device float* t = (device float*)TABLE;",
        "threadgroup float* t = (threadgroup float*)&TABLE[1][0];",
        "thread float* t = (thread float*)TABLE[1];",
        "device float* t = (device float*)(constant float*)TABLE[0];",
    ],
)
def test_a_program_scope_constant_array_never_becomes_a_writable_pointer(cast):
    """Metal converts no pointer between address spaces: casting the read-only table's address to
    a device, threadgroup or thread pointer is refused with a sentence (a write through it would
    otherwise kill the worker), at compile time where the types show it."""
    src = vector_add(
        f"uint i = thread_position_in_grid.x;\n{cast}\nt[1] = a[i];\nout[i] = b[i];", TABLE
    )
    compiled = SIM.compile(src, vector_inputs())
    if not compiled.ok:
        assert "Metal converts no pointer" in compiled.diagnostics[0].message
        return
    run = SIM.run(src, vector_inputs())
    assert run.error and "Metal converts no pointer between address spaces" in run.error, run.error


PLAIN = "struct Q { float x; float y[1]; };"
POINTER_MEMBER = "struct Q { float x; device float* p; };"
NESTED_POINTER = "struct P { device float* p; };\nstruct Q { float x; P inner; };"
# A struct of plain members declares itself plain inside (the rewrite's member alias, naming the
# struct): one deriving from it holds what it adds, and its declaration is not the runtime's.
DERIVED = "struct G { float x; float y; };\nstruct Q : G { device float* p; };"
FORGED = (
    "struct G { float x; float y; };\n"
    "struct Q { float x; device float* p; using mlxsim_plain = G::mlxsim_plain; };"
)


@pytest.mark.parametrize(
    ("where", "decl", "refused"),
    [
        ("header", PLAIN, False),
        ("header", POINTER_MEMBER, True),
        ("header", NESTED_POINTER, True),
        (
            "header",
            "template <class T> struct B { T v; };\nstruct Q { float x; B<device float*> b; };",
            True,
        ),
        (
            "header",
            "template <class T> struct B { T v; };\nstruct Q { float x; B<float> b; };",
            True,
        ),
        ("body", PLAIN, False),
        ("body", "struct P { float v; };\nstruct Q { float x; P inner; };", False),
        ("body", POINTER_MEMBER, True),
        ("body", NESTED_POINTER, True),
        ("body", DERIVED, True),
        ("body", FORGED, True),
    ],
)
def test_a_structs_bits_read_as_numbers_only_where_no_member_can_hold_an_address(
    where, decl, refused
):
    """``*(thread uint2*)&q`` of a struct of plain values is an honest bit copy, the struct
    declared in the header or in the kernel body as honest ports do; of one with a pointer member,
    at any depth, or derived from a plain one, or claiming the rewrite's mark of a plain struct, it
    would read an address as numbers and is refused."""
    src = "uint i = thread_position_in_grid.x;\nQ q; q.x = a[i];\n"
    src += "uint2 u = *(thread uint2*)&q;\nout[i] = as_type<float>(u.x) + b[i];"
    header = decl if where == "header" else ""
    src = src if where == "header" else f"{decl}\n{src}"
    compiled = SIM.compile(vector_add(src, header), vector_inputs())
    assert compiled.ok is not refused, compiled.diagnostics
    if refused:
        message = compiled.diagnostics[0].message
        assert "may hold an address" in message or "the simulator's own code" in message, message
    else:
        inputs = vector_inputs()
        run = SIM.run(vector_add(src, header), inputs)
        assert run.error is None, run.error
        np.testing.assert_array_equal(
            np.asarray(run.outputs[0]), np.asarray(inputs["a"] + inputs["b"])
        )


@pytest.mark.hack("a device pointer made of a thread variable's address")
@pytest.mark.parametrize(
    "reach",
    ["*(device int*)&z = 1;", "((device float*)&z)[4096] = 1.0f;", "device float* q;\nq[3];"],
)
def test_a_device_pointer_into_no_buffer_faults(reach):
    """A device pointer holding an address no buffer holds (a thread variable's, or none) has no
    bounds to check against: any access through it fails the run."""
    src = f"uint i = thread_position_in_grid.x;\nthread float z = 0;\n{reach}\n"
    src += "out[i] = a[i] + b[i] + z;"
    run = SIM.run(vector_add(src), vector_inputs())
    assert run.error and "pointer that points into no buffer" in run.error, run.error


@pytest.mark.hack("a write through an address made around the checks")
@pytest.mark.parametrize(
    ("write", "sentence"),
    [
        (
            "if (i != 0) return;\ndevice float4& v = ((device float4*)out)[0];\n"
            "(&v.x)[a_shape[0]] = 1.0f;",  # &v.x is a checked pointer: past the end is caught
            "out-of-bounds access to out[1048576]",
        ),
        (
            "device const float4& v = ((device const float4*)a)[0];\n"
            "*(thread float*)&v.x = 0.0f;\nout[i] = a[i] + b[i];",
            "the kernel changed its read-only buffer a",
        ),
    ],
)
def test_a_write_no_checked_pointer_made_fails_the_run(write, sentence):
    """A write through a raw address (of a member of a reference into a buffer, say) marks
    nothing: an output element it changed that no checked access touched, or a changed input,
    fails the run."""
    run = SIM.run(vector_add(f"uint i = thread_position_in_grid.x;\n{write}"), vector_inputs())
    assert run.error and run.error.startswith(sentence), run.error


@pytest.mark.hack("threads of one threadgroup racing on an output element")
def test_a_race_in_device_memory_within_a_threadgroup_is_named():
    """A non-atomic += to one output element by two threads of one threadgroup, or a read of an
    element another thread of it writes, with no barrier between (or one ordering threadgroup
    memory only), races on a GPU; with a device barrier between, and for outputs written once per
    element, nothing is named."""
    add = "uint i = thread_position_in_grid.x;\nout[i] = a[i] + b[i];\n"
    racy = add + "if (i % 2 == 1) out[i - 1] += 1.0f;"
    run = SIM.run(vector_add(racy), vector_inputs())
    assert run.error and re.search(
        r"threads 0 and 1 of threadgroup \(0,0,0\) race on device memory out\[0\]: thread 0 "
        r"wrote it \(source line 2\) and thread 1 touched it \(source line 3\)",
        run.error,
    ), run.error
    read = add + "float next = out[i ^ 1];\nout[i] = a[i] + b[i] + 0.0f * next;"
    run = SIM.run(vector_add(read), vector_inputs())
    assert run.error and "race on device memory out[" in run.error, run.error
    fenced = racy.replace("if (i % 2", "threadgroup_barrier(mem_flags::mem_device);\nif (i % 2")
    assert SIM.run(vector_add(fenced), vector_inputs()).error is None
    # a barrier orders only the memory its flags name, as on a GPU
    wrong_flag = fenced.replace("mem_device", "mem_threadgroup")
    run = SIM.run(vector_add(wrong_flag), vector_inputs())
    assert run.error and "add threadgroup_barrier(mem_flags::mem_device)" in run.error, run.error


@pytest.mark.hack("writes only where the output holds the GPU backends' poison")
def test_the_gpu_backends_draw_their_poison_for_every_run_in_every_dtype():
    """On Metal and CUDA MLX fills every output with one value: it is drawn for each run (finite,
    or NaN where every output is a float), an integer every output dtype holds otherwise."""
    from mlxport.backends.mlx_kernel import drawn_poison

    assert drawn_poison(None, ["float32"]) is None  # a user's call: nothing filled
    assert np.isnan(drawn_poison("nan", ["float16", "bfloat16"]))
    for dtypes in (["float32"], ["float16", "bfloat16"]):  # zeros, as fresh memory, or numbers
        drawn = [drawn_poison("finite", dtypes) for _ in range(60)]
        assert 0.0 in drawn and len(set(drawn)) > 10 and all(np.isfinite(v) for v in drawn)
    for dtypes, low, high in ((["float32", "uint8"], 0, 255), (["int8"], -128, 127)):
        for poison in ("nan", "finite"):
            drawn = {drawn_poison(poison, dtypes) for _ in range(60)}
            assert len(drawn) > 5 and all(v == int(v) and low <= v <= high for v in drawn)
    assert {drawn_poison("finite", ["bool"]) for _ in range(40)} == {0.0, 1.0}


def test_a_kernel_wrong_only_where_one_input_alone_is_zero_fails(small_vector_add):
    """`a == 0 ? -b : a + b`: the zero rows of every input fell at the same places, where -b is
    b; scattered zeros land where the other inputs have none."""
    from mlxport.spec.candidate import KernelCandidate

    backdoor = KernelCandidate(
        language="msl",
        name="add_unless_zero",
        input_names=["a", "b"],
        output_names=["out"],
        output_shapes=["a.shape"],
        output_dtypes=["a.dtype"],
        grid=["a.size", 1, 1],
        threadgroup=[256, 1, 1],
        source="uint i = thread_position_in_grid.x;\nout[i] = a[i] == 0 ? -b[i] : a[i] + b[i];\n",
    )
    report = verdict(small_vector_add, backdoor, heldout=True)
    failed = [c.label for c in report.cases if c.verdict != "pass"]
    assert failed and all("rows inputs" in label for label in failed), report.summary()


def test_a_cu_file_reads_no_header_outside_its_project(tmp_path):
    """mlxport inlines a .cu file's local headers itself, outside the sandboxed preprocessor: an
    include of a host path, of a hidden file or of a non-source file is refused, even in #if 0."""
    from mlxport.errors import UserError
    from mlxport.translate.reading.includes import amalgamate

    (tmp_path / "proj" / ".config").mkdir(parents=True)
    (tmp_path / "secret.h").write_text("SECRET_OUTSIDE\n")
    (tmp_path / "proj" / ".config" / "key.h").write_text("SECRET_HIDDEN\n")
    (tmp_path / "proj" / "notes.txt").write_text("SECRET_TEXT\n")
    (tmp_path / "proj" / "ok.cuh").write_text("#define WIDTH 4\n")
    kernel = "__global__ void k(float* a) { a[threadIdx.x] = WIDTH; }\n"
    cases = {
        f'#if 0\n#include "{tmp_path / "secret.h"}"\n#endif\n': "is outside the file's folder",
        '#include "../secret.h"\n': "is outside the file's folder",
        '#include ".config/key.h"\n': "is hidden",
        '#include "notes.txt"\n': "is not a C, C\\+\\+ or CUDA source file",
    }
    for include, why in cases.items():
        (tmp_path / "proj" / "k.cu").write_text(include + '#include "ok.cuh"\n' + kernel)
        with pytest.raises(UserError, match=why):
            amalgamate(tmp_path / "proj" / "k.cu")
    (tmp_path / "proj" / "k.cu").write_text('#include "ok.cuh"\n' + kernel)
    text, inlined, _ = amalgamate(tmp_path / "proj" / "k.cu")
    assert inlined == ["ok.cuh"] and "#define WIDTH 4" in text


def test_host_code_arithmetic_past_64_bits_is_refused_not_computed():
    """Squaring 64 times in host code grew a Python integer without bound in mlxport's own
    process."""
    from mlxport.translate.host.evaluate import evaluate_launch
    from mlxport.translate.host.values import HostEvalError

    source = """
    __global__ void k(float* a, int n) { a[threadIdx.x] = 1.f; }
    int threads_for(int n) {
        long long x = 3;
        for (int i = 0; i < 64; i++) x = x * x;
        return 256 + (int)(x % 2) * 0;
    }
    void launch(float* a, int n) { k<<<(n + 255) / 256, threads_for(n)>>>(a, n); }
    """
    with pytest.raises(HostEvalError, match=r"passes 64 bits"):
        launch = evaluate_launch(source, "k", {"n": 1000})
        [a.value for a in launch.args]  # noqa: B018 - the block size is what is evaluated
