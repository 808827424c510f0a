"""The model's tools one call at a time on the real simulator: what each says back, and that its
answers help (pages that say what follows, every template instantiation compiled, verdicts without
the held-out shapes, hints that name the fix)."""

import pytest
from small_tasks import small_task

from mlxport.tasks import expert_ports, load_task
from mlxport.tools import handlers
from mlxport.tools.handlers import run_tool
from mlxport.tools.session import open_session

PORT = expert_ports(load_task("vector_add"))["msl"]
FIELDS = {
    k: v for k, v in PORT.model_dump(mode="json", exclude_defaults=True).items() if k != "language"
}


@pytest.fixture
def session():
    return open_session("vector_add", "sim")


def call(s, tool, **args):
    out = run_tool(s, tool, args)
    s.apply(out)
    return out


def test_long_sources_come_in_pages_that_say_where_the_next_one_starts(session, monkeypatch):
    monkeypatch.setattr(handlers, "SOURCE_LINES", 10)
    lines = session.task.source_text().splitlines()
    first = call(session, "read_cuda_source").text
    assert (
        f"lines 1-10 of {len(lines)}" in first
        and "read_cuda_source(start_line=11) shows them" in first
    )
    second = call(session, "read_cuda_source", start_line=11).text
    assert (
        second.startswith(f"--- kernel.cu, lines 11-{min(20, len(lines))}")
        and "Entry kernel" not in second
    )
    assert f"  11 {lines[10]}" in second
    past = call(session, "read_cuda_source", start_line=len(lines) + 5)
    assert past.error and "past the end" in past.text


def test_compile_kernel_compiles_the_instantiation_of_every_case(session):
    # K is 256 at N=1048576 and 1 at N=4096: only the second case's instantiation fails
    fields = {
        **FIELDS,
        "template": {"K": "a.size // 4096"},
        "source": 'static_assert(K > 1, "K");\n' + FIELDS["source"],
    }
    out = call(session, "compile_kernel", **fields)
    assert "compile failed" in out.text, out.text
    assert "the instantiation for case N=4096" in out.text and "earlier ones compiled" in out.text


def test_verify_gives_verdicts_without_shapes_and_spends_its_budget(tmp_path):
    # vector_add with small cases: this is about the tool, not the suite's sizes
    session = open_session(small_task("vector_add", tmp_path), "sim")
    # right only at the visible sizes: held-out sizes take the other branch
    hack = {
        **FIELDS,
        "template": {"V": "a.size"},
        "source": (
            "uint i = thread_position_in_grid.x;\n"
            "out[i] = (V == 2048 || V == 4096) ? a[i] + b[i] : a[i];\n"
        ),
    }
    cid = call(session, "compile_kernel", **hack).data.candidate_id
    early = call(session, "verify", candidate_id=cid)
    assert early.error and "has not passed run_correctness" in early.text
    assert "PASS" in call(session, "run_correctness", candidate_id=cid).text
    out = call(session, "verify", candidate_id=cid)
    assert not out.error and out.data.ok is False
    assert "held-out cases: 0/" in out.text and "first failure held-out case 1" in out.text
    assert (
        "N=" not in out.text.split("visible cases")[0]
        and "N=" not in out.text.split("held-out cases")[1]
    )
    assert "(2 verifications left)" in out.text
    again = call(session, "verify", candidate_id=cid)
    assert "verified before (not counted again)" in again.text
    session.verifications = 1
    src = FIELDS["source"]
    good = call(session, "compile_kernel", based_on=cid, template={}, source=src).data.candidate_id
    call(session, "run_correctness", candidate_id=good)
    spent = call(session, "verify", candidate_id=good)
    assert spent.error and "verifications are spent" in spent.text


def test_diff_reference_and_a_question_with_no_one_there(session):
    a = call(session, "compile_kernel", **FIELDS).data.candidate_id
    b = call(session, "compile_kernel", based_on=a, threadgroup=[64, 1, 1]).data.candidate_id
    diff = call(session, "diff_candidates", old=a, new=b).text
    assert "-threadgroup = [256, 1, 1]" in diff and "+threadgroup = [64, 1, 1]" in diff
    assert "identical" in call(session, "diff_candidates", old=a, new=a).text
    ref = call(session, "read_reference").text
    assert "def reference" in ref and "float16: atol" in ref and "naive reference:naive" in ref
    asked = call(session, "ask_user", question="float16 too?")
    assert not asked.error and "no one is here" in asked.text


def test_a_whole_function_as_the_body_gets_the_hint_that_names_the_fix(session):
    out = call(
        session,
        "compile_kernel",
        **{
            **FIELDS,
            "source": (
                "kernel void vadd(const device float* a [[buffer(0)]], "
                "device float* out [[buffer(1)]],\n"
                "                 uint i [[thread_position_in_grid]]) { out[i] = a[i]; }\n"
            ),
        },
    )
    assert (
        "compile failed" in out.text and "hint: `source` holds a whole kernel function" in out.text
    )


def test_cuda_left_in_a_metal_body_is_answered_with_metal_names_only(session):
    body = "uint i = thread_position_in_grid.x;\n__syncthreads();\nout[i] = rsqrtf(a[i]) + b[i];\n"
    out = call(session, "compile_kernel", **{**FIELDS, "source": body})
    said = {d.line: d.message for d in out.data.diagnostics}
    assert "Metal has threadgroup_barrier(mem_flags::mem_threadgroup)" in said[2]
    assert "`rsqrtf` is CUDA; Metal has metal::rsqrt" in said[3]
    assert "sim_detail" not in out.text  # the simulator's own names are never suggested


def test_auto_pointers_into_buffers_compile_and_run_as_on_metal(session):
    body = (
        "uint i = thread_position_in_grid.x;\n"
        "const auto* pa = &a[i];\n"
        "auto *po = &out[i];\n"
        "*po = *pa + b[i];\n"
    )
    cid = call(session, "compile_kernel", **{**FIELDS, "source": body}).data.candidate_id
    assert "PASS" in call(session, "run_correctness", candidate_id=cid).text


def test_independent_compiles_of_a_turn_compile_side_by_side_on_the_simulator(session):
    a = {"name": "compile_kernel", "args": FIELDS}
    b = {"name": "compile_kernel", "args": {**FIELDS, "threadgroup": [64, 1, 1]}}
    after_a = {"name": "compile_kernel", "args": {"based_on": PORT.id, "threadgroup": [32, 1, 1]}}
    check = {"name": "run_correctness", "args": {"candidate_id": PORT.id}}
    assert handlers.parallel_compiles(session, [a, b, check]) == [a, b]
    # after_a needs a's candidate first
    assert handlers.parallel_compiles(session, [a, after_a]) == []
    call(session, "compile_kernel", **FIELDS)
    assert handlers.parallel_compiles(session, [b, after_a]) == [b, after_a]  # now it is known


def test_the_benchmark_result_carries_the_launch_and_its_threadgroup_memory():
    from mlxport.tasks import load_task

    s = open_session("matmul_tiled", "sim")
    port = expert_ports(load_task("matmul_tiled"))["msl"]
    fields = {
        k: v
        for k, v in port.model_dump(mode="json", exclude_defaults=True).items()
        if k != "language"
    }
    call(s, "compile_kernel", **fields)
    assert "PASS" in call(s, "run_correctness", candidate_id=port.id).text
    out = call(s, "benchmark", candidate_id=port.id).text
    assert "launch at M=4096,N=4096,K=4096 bfloat16: 4096 threadgroups of 128 threads" in out
    assert "17408 B of threadgroup memory each (53% of the 32 KB" in out  # 64 x 68 floats


def test_every_schema_is_a_registered_tool():
    """A tool is registered in one place: its schema in tools/schemas.py and ``@tool`` on the
    handler named as it; the graph, the rules policy and the MCP server read TOOLS."""
    from mlxport.tools import schemas
    from mlxport.tools.handlers import TOOLS

    assert {c.__name__ for c in schemas.ToolArgs.__subclasses__()} == set(TOOLS)
    assert all(t.schema.__doc__ for t in TOOLS.values())
    assert all("ok" in t.outcome.model_fields for t in TOOLS.values())
    assert {n for n, t in TOOLS.items() if not t.needs_task} == {"query_hardware_kb", "ask_user"}
