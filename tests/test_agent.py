"""The porting graph end to end on the real simulator, driven by scripted models."""

import json

import pytest
from langgraph.runtime import Runtime
from small_tasks import small_task

from mlxport.agent.graph import assess
from mlxport.agent.models import ScriptedModel
from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig, State
from mlxport.spec import BenchmarkReport, KernelCandidate, Timing
from mlxport.tasks import expert_ports, load_task
from mlxport.tools.session import Record

TASK = load_task("vector_add")
PORT = expert_ports(TASK)["msl"]
PORTED = TASK  # what the ports below run on: _ported_task makes it small


@pytest.fixture(scope="module", autouse=True)
def _ported_task(tmp_path_factory):
    """The ports run on vector_add with small cases: these tests are about the graph, not the
    suite's sizes."""
    global PORTED
    PORTED = load_task(small_task("vector_add", tmp_path_factory.mktemp("tasks")))


def compile_call(candidate: KernelCandidate = PORT, **overrides) -> dict:
    args = candidate.model_dump(mode="json", exclude_defaults=True)
    args.pop("language", None)
    return {"name": "compile_kernel", "args": {**args, **overrides}}


def model(*turns, repeat_last=False) -> ScriptedModel:
    return ScriptedModel(
        script=[
            t
            if "content" in t or "tool_calls" in t or "raw_tool_calls" in t
            else {"tool_calls": [t]}
            for t in turns
        ],
        repeat_last=repeat_last,
    )


def port(tmp_path, scripted, **config) -> dict:
    # No extra seeds in the final verification: these tests are about the graph, and every kernel
    # they finish with is the expert port or a one-line variant of it. The extra seeds themselves
    # (one verification table per seed) are test_scripted_expert_port_is_verified_and_written's,
    # which asks for the default count.
    cfg = RunConfig(backend="sim", **{"max_iterations": 12, "extra_seeds": 0, **config})
    return run_port(PORTED, cfg, tmp_path, model=scripted)


def test_scripted_expert_port_is_verified_and_written(tmp_path, written_tests):
    scripted = model(
        {"name": "read_cuda_source", "args": {}},
        {"name": "update_plan", "args": {"action": "add", "idea": "one thread per element"}},
        {"name": "update_plan", "args": {"action": "select", "node_id": "p1"}},
        compile_call(),
        {"name": "run_correctness", "args": {"candidate_id": PORT.id}},
        {"name": "benchmark", "args": {"candidate_id": PORT.id}},
        {"name": "finish", "args": {"summary": "expert port"}},
    )
    # the default: 2, one table per seed below
    run = port(tmp_path, scripted, extra_seeds=RunConfig().extra_seeds)
    assert run["stop_reason"] == "finish"
    assert run["result"] == {
        **run["result"],
        "candidate_id": PORT.id,
        "verified": True,
        "backend": "sim",
        "timed": False,
    }
    assert "ESTIMATE" in run["result"]["estimate"]
    folder = tmp_path / "vector_add"
    for name in (
        "kernel.py",
        "test_kernel.py",
        "report.md",
        "run.json",
        "transcript.jsonl",
        f"candidates/{PORT.id}.toml",
    ):
        assert (folder / name).is_file(), name
    report = (folder / "report.md").read_text()
    assert (
        "verified on sim" in report
        and "timed size N=65536 was not checked" in report
        and "Not timed" in report
    )
    # one table per seed, and one of the op as shipped
    assert report.count("| case | kind | dtype |") == 4 and "Seed " in report
    assert (
        "### The op as shipped" in report and "| held-out, kernel.py | float16 | pass |" in report
    )
    html = (folder / "report.html").read_text()
    # offline
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "") and "<script" not in html
    assert "Roofline on M3 Max (no measurements: the backend does not time)" in html
    assert "<b>p1</b> one thread per element" in html and f"<code>{PORT.id}</code>" in html
    assert "| held-out | float32 | pass |" in report and "| visible, threads reversed |" in report
    result = written_tests("-q", "-p", "no:cacheprovider", folder / "test_kernel.py", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize(
    ("turns", "config", "reason"),
    [
        ([{"name": "read_cuda_source", "args": {}}], {"max_iterations": 3}, "iterations"),
        (
            [
                {
                    "tool_calls": [{"name": "read_cuda_source", "args": {}}],
                    "usage": {"input_tokens": 6000, "output_tokens": 10},
                }
            ],
            {"max_tokens": 10_000},
            "tokens",
        ),
        (
            [
                {
                    "tool_calls": [{"name": "read_cuda_source", "args": {}}],
                    "usage": {"input_tokens": 400_000, "output_tokens": 0},
                }
            ],
            {"max_cost": 1.0, "prices": (3.0, 15.0), "max_tokens": 10**9},
            "cost",
        ),
        ([{"name": "read_cuda_source", "args": {}}], {"max_wall_seconds": 1e-6}, "wall_time"),
        (
            [{"name": "no_such_tool", "args": {}}],
            {"max_consecutive_errors": 3},
            "consecutive_errors",
        ),
        ([{"content": "I think I am done."}], {"max_consecutive_errors": 2}, "consecutive_errors"),
    ],
)
def test_budget_stop_rules(tmp_path, turns, config, reason):
    run = port(tmp_path, model(*turns, repeat_last=True), **config)
    assert run["stop_reason"] == reason
    assert run["result"]["verified"] is False
    assert (tmp_path / "vector_add" / "report.md").is_file()


def test_on_the_simulator_only_wrong_candidates_spend_patience(tmp_path):
    """The simulator does not time, so a second correct candidate is no worse than the first: it
    spends no patience; a wrong one does."""
    correct = PORT.model_copy(update={"threadgroup": [128, 1, 1]})
    wrong = PORT.model_copy(
        update={"source": "uint i = thread_position_in_grid.x;\nout[i] = a[i];\n"}
    )
    turns = []
    for v in [PORT, correct, wrong]:
        turns += [compile_call(v), {"name": "run_correctness", "args": {"candidate_id": v.id}}]
    run = port(tmp_path, model(*turns), patience=1)
    assert run["stop_reason"] == "patience"
    assert run["candidates"] == 3  # the second correct one spent nothing; the wrong one did
    assert run["result"]["candidate_id"] == PORT.id and run["result"]["verified"]


def test_names_stand_for_ids_hints_carry_ids_and_the_plan_credits_the_idea_the_model_names(
    tmp_path,
):
    named = compile_call(name="mine")
    scripted = model(
        {"name": "update_plan", "args": {"action": "add", "idea": "one thread per element"}},
        {"name": "update_plan", "args": {"action": "add", "idea": "vectorise"}},
        {"name": "update_plan", "args": {"action": "select", "node_id": "p2"}},
        named,
        {"name": "run_correctness", "args": {"candidate_id": "mine"}},
        {"name": "update_plan", "args": {"action": "close", "node_id": "p1", "candidate": "mine"}},
        {"name": "session", "args": {}},
        {"name": "finish", "args": {}},
    )
    run = port(tmp_path, scripted)
    cid = KernelCandidate.model_validate({**PORT.model_dump(), "name": "mine"}).id
    tools = [
        json.loads(x)["content"]
        for x in (tmp_path / "vector_add" / "transcript.jsonl").read_text().splitlines()
        if json.loads(x)["type"] == "tool"
    ]
    assert f"next: run_correctness(candidate_id='{cid}')" in tools[3]
    assert tools[4].startswith(f"candidate {cid}: PASS")
    assert tools[5] == f"closed p1 (done); {cid} tried under it"  # no plan echoed
    assert f"finish would choose {cid}" in tools[6] and "(mine): compile pass" in tools[6]
    assert tools[7].startswith(f"finishing with {cid}: it passed run_correctness")
    nodes = {n["id"]: n for n in run["plan"]}
    assert nodes["p1"]["candidates"] == [cid] and nodes["p1"]["outcome"] == f"{cid} correct"
    assert nodes["p2"]["candidates"] == []  # selected, but the model said p1
    assert run["result"]["candidate_id"] == cid and run["result"]["verified"]


def status_of(records: list[Record], **state) -> str:
    from mlxport.agent.graph import status_message

    values = {
        "task_dir": str(TASK.folder),
        "records": {r.candidate.id: r.model_dump(mode="json") for r in records},
        **state,
    }
    return status_message(State(**values), RunConfig(backend="sim", max_iterations=5)).content


def correct_record(candidate: KernelCandidate, **fields) -> Record:
    from mlxport.spec import CaseResult, CorrectnessReport

    report = CorrectnessReport(
        backend="sim",
        candidate_id=candidate.id,
        task="vector_add",
        seeds=[1],
        cases=[CaseResult(case="N=1", dtype="float32", verdict="pass")],
    )
    return Record(candidate=candidate, correctness=report, **fields)


def test_the_status_says_what_best_means_without_timing_which_passed_verify_and_the_last_turn():
    other = PORT.model_copy(update={"threadgroup": [64, 1, 1]})
    records = [
        correct_record(PORT, verified="FAIL on verification"),
        correct_record(other, iteration=1, verified="PASS on verification"),
    ]
    text = status_of(records, best_id=other.id, iterations=2)
    assert f"Best so far: {other.id} (correct, passed verify)" in text
    assert "this backend does not time, so the best is the earliest correct candidate" in text
    assert f"verify: {PORT.id} failed, {other.id} passed" in text
    assert "1 verifications" in text and "wrong ones only" in text
    assert "last iteration" not in text
    assert status_of(records, iterations=4).endswith("last iteration: call finish")


def test_finish_prefers_a_candidate_that_passed_verify_and_says_why():
    from mlxport.tools.handlers import run_tool
    from mlxport.tools.session import open_session

    timing = Timing(name="candidate", median_us=10.0, spread=0.01, samples=30)
    bench = BenchmarkReport(
        backend="metal",
        device="M3 Max",
        candidate_id=PORT.id,
        task="vector_add",
        case="N=1",
        dtype="float32",
        candidate=timing,
        baselines=[timing.model_copy(update={"name": "native", "median_us": 20.0})],
        speedups={"native": 2.0},
    )
    fast = correct_record(PORT, benchmark=bench)  # twice as fast, never verified
    checked = correct_record(
        PORT.model_copy(update={"threadgroup": [64, 1, 1]}),
        iteration=3,
        verified="PASS on verification",
    )
    failed = correct_record(
        PORT.model_copy(update={"threadgroup": [32, 1, 1]}), verified="FAIL on verification"
    )
    session = open_session(
        "vector_add", "sim", records={r.candidate.id: r for r in (fast, failed, checked)}
    )
    out = run_tool(session, "finish", {})
    assert out.data.candidate_id == checked.candidate.id
    assert (
        out.text
        == f"finishing with {checked.candidate.id}: it passed verify, the only candidate that did"
    )
    named = run_tool(session, "finish", {"candidate_id": fast.candidate.id})
    assert named.data.candidate_id == fast.candidate.id and "you named it" in named.data.why
    from mlxport.tools.session import rank

    assert [r.candidate.id for r in rank([fast, failed, checked])] == [
        checked.candidate.id,
        fast.candidate.id,
        failed.candidate.id,
    ]


def test_no_target_line_without_a_baseline_or_a_timing_backend():
    from types import SimpleNamespace

    from mlxport.prompts.render import task_prompt

    gpu = SimpleNamespace(name="metal", timing=True)
    assert "Target: 1.0x the native baseline" in task_prompt(TASK, gpu, target=None, budget="b")
    bare = TASK.model_copy(update={"baselines": None})
    assert "Target" not in task_prompt(bare, gpu, target=None, budget="b")
    sim = SimpleNamespace(name="sim", timing=False)
    assert "Target" not in task_prompt(TASK, sim, target=None, budget="b")


def test_target_speedup_stops_the_run():
    """The target rule needs a timed benchmark, which only a GPU gives; assess is pure logic."""
    from mlxport.spec import CaseResult, CorrectnessReport

    correctness = CorrectnessReport(
        backend="metal",
        candidate_id=PORT.id,
        task="vector_add",
        seeds=[1],
        cases=[CaseResult(case="N=1", dtype="float32", verdict="pass")],
    )
    timing = Timing(name="candidate", median_us=10.0, spread=0.01, samples=30)
    benchmark = BenchmarkReport(
        backend="metal",
        device="M3 Max",
        candidate_id=PORT.id,
        task="vector_add",
        case="N=1",
        dtype="float32",
        candidate=timing,
        baselines=[timing.model_copy(update={"name": "native", "median_us": 13.0})],
        speedups={"native": 1.3},
    )
    record = Record(candidate=PORT, correctness=correctness, benchmark=benchmark)
    records = {PORT.id: record.model_dump(mode="json")}
    state = State(task_dir=str(TASK.folder), records=records, iterations=4)
    update = assess(state, Runtime(context=RunConfig(target_speedup=1.2)))
    assert update["stop_reason"] == "target_speedup" and update["best_id"] == PORT.id


def test_tool_errors_go_back_to_the_model(tmp_path):
    oversized = compile_call(source="// pad\n" * 20_000)
    scripted = model(
        {"name": "no_such_tool", "args": {}},
        {"name": "run_correctness", "args": {"candidate_id": "deadbeef"}},
        {"name": "compile_kernel", "args": {"grid": "not a list"}},
        oversized,
        {"raw_tool_calls": [{"name": "compile_kernel", "args": '{"name": "x"'}]},
        compile_call(grid=["a.size + ", 1, 1]),
        compile_call(source="uint i = thread_position_in_grid.x;\nout[i] = a[i] + b[i]\n"),
        {"name": "finish", "args": {}},
    )
    run = port(tmp_path, scripted, max_consecutive_errors=10)
    assert run["stop_reason"] == "finish"
    assert run["tool_errors"] >= 6
    lines = [
        json.loads(x)
        for x in (tmp_path / "vector_add" / "transcript.jsonl").read_text().splitlines()
    ]
    tool_texts = [x["content"] for x in lines if x["type"] == "tool"]
    assert any("unknown tool 'no_such_tool'" in t for t in tool_texts)
    assert any("unknown candidate 'deadbeef'" in t for t in tool_texts)
    assert any("invalid arguments for compile_kernel" in t for t in tool_texts)
    assert any("not valid JSON" in t for t in tool_texts)
    assert any("compile failed" in t and "source line 2" in t for t in tool_texts)


def test_final_verification_rejects_a_kernel_that_fails_held_out_cases(tmp_path):
    # Right on the visible sizes (even N) only: the held-out odd sizes expose it.
    hack = PORT.model_copy(
        update={
            "source": "uint i = thread_position_in_grid.x;\n"
            "out[i] = (a_shape[0] % 2 == 0) ? a[i] + b[i] : a[i];\n"
        }
    )
    good = PORT.model_copy(update={"threadgroup": [128, 1, 1]})
    scripted = model(
        compile_call(hack),
        {"name": "run_correctness", "args": {"candidate_id": hack.id}},
        compile_call(good),
        {"name": "run_correctness", "args": {"candidate_id": good.id}},
        {"name": "finish", "args": {"candidate_id": hack.id}},
    )
    run = port(tmp_path, scripted)
    assert run["rejected_in_final_verification"] == [hack.id]
    assert run["result"]["candidate_id"] == good.id and run["result"]["verified"]


def test_history_is_trimmed_to_the_window_keeping_head_and_exchanges():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from mlxport.agent.history import count_tokens, trim

    head = [SystemMessage("system prompt"), HumanMessage("the task")]
    body = []
    for i in range(40):
        body.append(
            AIMessage("", tool_calls=[{"name": "read_cuda_source", "args": {}, "id": f"c{i}"}])
        )
        body.append(ToolMessage("result " + "x " * 400, tool_call_id=f"c{i}"))
    window = 8_000 + 5_000
    kept = trim(head + body, window)
    assert kept[:2] == head and "earlier messages were removed" in kept[2].content
    assert sum(map(count_tokens, kept)) <= window - min(8_000, window // 4) + count_tokens(kept[2])
    ids = [m.tool_call_id for m in kept if isinstance(m, ToolMessage)]
    calls = [c["id"] for m in kept if isinstance(m, AIMessage) for c in m.tool_calls]
    assert ids == calls and ids[-1] == "c39"  # the newest exchanges stay, each call with its result
    assert trim(head + body[:4], window) == head + body[:4]


def test_report_of_a_timed_port_names_what_its_bandwidth_fraction_is_of():
    from mlxport.agent.outputs import report_md
    from mlxport.spec import CorrectnessReport

    bench = BenchmarkReport(
        backend="cuda",
        device="NVIDIA H200",
        candidate_id=PORT.id,
        task="vector_add",
        case="N=16777216",
        dtype="float32",
        candidate=Timing(
            name="candidate",
            median_us=60.0,
            spread=0.05,
            samples=20,
            gbs=3300.0,
            roofline_fraction=0.88,
        ),
        baselines=[Timing(name="native", median_us=55.0, spread=0.04, samples=20)],
        speedups={"native": 55 / 60},
        bandwidth_basis="copy bandwidth measured by calibration",
        flags=["timings spread widely; the machine may be busy"],
    )
    run = {
        "model": "scripted",
        "non_llm_baseline": False,
        "stop_reason": "finish",
        "iterations": 3,
        "candidates": 1,
        "tokens": {"input": 0, "output": 0},
        "cost_usd": 0.0,
        "wall_seconds": 1.0,
    }
    verification = CorrectnessReport(
        backend="cuda", candidate_id=PORT.id, task="vector_add", seeds=[1], cases=[]
    )
    text = report_md(
        TASK,
        {**run, "result": {"label": "verified on cuda"}},
        {PORT.id: Record(candidate=PORT)},
        {
            "candidate_id": PORT.id,
            "backend": "cuda",
            "verification": verification.model_dump(),
            "benchmark": bench.model_dump(),
        },
    )
    assert "The candidate moves 88% of the copy bandwidth measured by calibration." in text
    assert "- timings spread widely; the machine may be busy" in text

    from mlxport.agent.report_html import render_port_html
    from mlxport.spec import Datasheet

    timed = bench.model_copy(
        update={
            "candidate": bench.candidate.model_copy(update={"gflops": 280.0}),
            "baselines": [bench.baselines[0].model_copy(update={"gflops": 305.0})],
        }
    )
    html = render_port_html(
        TASK,
        {**run, "result": {"label": "verified on cuda", "candidate_id": PORT.id, "verified": True}},
        {PORT.id: Record(candidate=PORT)},
        {"benchmark": timed.model_dump()},
        Datasheet(name="NVIDIA H200", memory_bandwidth_gbs=4800.0, fp32_tflops=67.0),
    )
    assert "Roofline on NVIDIA H200 (measured)" in html
    assert (
        "<title>port: 280 GFLOP/s</title>" in html and "<title>native: 305 GFLOP/s</title>" in html
    )
    assert "ceilings: 4800 GB/s, 67000 GFLOP/s" in html


def test_the_rules_policy_reads_outcomes_not_the_words_of_tool_summaries(tmp_path, monkeypatch):
    """Every tool summary reworded (the same words shuffled and a new lead, errors included): the
    rule policy makes the same calls and ships the same kernel, because it decides from tool
    outcomes as data and never from rendered text."""
    import random

    from mlxport.agent import graph

    def calls(run_dir):
        lines = [
            json.loads(line)
            for line in (run_dir / "vector_add" / "transcript.jsonl").read_text().splitlines()
        ]
        return [
            (c["name"], c["args"])
            for m in lines
            if m["type"] == "ai"
            for c in m["tool_calls"] or []
        ]

    plain = run_port(PORTED, RunConfig(backend="sim", extra_seeds=0), tmp_path / "plain")
    real = graph.run_tool

    def reworded(session, name, args):
        out = real(session, name, args)
        words = out.text.split()
        random.Random(len(words)).shuffle(words)
        return type(out)(
            **{**vars(out), "text": "Here is what happened, in other words: " + " ".join(words)}
        )

    monkeypatch.setattr(graph, "run_tool", reworded)
    other = run_port(PORTED, RunConfig(backend="sim", extra_seeds=0), tmp_path / "reworded")
    assert (
        "in other words" in (tmp_path / "reworded" / "vector_add" / "transcript.jsonl").read_text()
    )
    assert (
        calls(tmp_path / "reworded") == calls(tmp_path / "plain")
        and len(calls(tmp_path / "plain")) >= 7
    )
    assert other["result"] == plain["result"] and other["result"]["verified"]
    assert other["stop_reason"] == plain["stop_reason"] == "finish"


def test_a_compile_and_a_check_of_the_new_id_in_one_turn_run_in_order(tmp_path):
    """A model that compiles and checks the candidate in one turn: the check sees the candidate the
    compile just registered (device calls run in order, each seeing the ones before)."""
    scripted = model(
        {
            "tool_calls": [
                compile_call(),
                {"name": "run_correctness", "args": {"candidate_id": PORT.id}},
            ]
        },
        {"name": "finish", "args": {"summary": "one turn"}},
    )
    run = port(tmp_path, scripted)
    transcript = [
        json.loads(line)
        for line in (tmp_path / "vector_add" / "transcript.jsonl").read_text().splitlines()
    ]
    tools = [m["content"] for m in transcript if m["type"] == "tool"]
    assert (
        tools[0].startswith(f"candidate {PORT.id} (vector_add): compiled")
        and "PASS: 6/6" in tools[1]
    ), tools[:2]
    assert run["result"]["verified"] and run["tool_errors"] == 0


def test_ask_user_in_an_unattended_port_is_told_no_one_is_here_without_an_error(tmp_path):
    scripted = model(
        {"name": "ask_user", "args": {"question": "float16 too?"}}, {"name": "finish", "args": {}}
    )
    run = port(tmp_path, scripted)
    transcript = [
        json.loads(line)
        for line in (tmp_path / "vector_add" / "transcript.jsonl").read_text().splitlines()
    ]
    assert [m["content"] for m in transcript if m["type"] == "tool"][0].startswith("no one is here")
    assert run["tool_errors"] == 0


def test_ask_user_with_a_person_pauses_before_the_turns_tools_run_and_returns_the_answer():
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from mlxport.agent.graph import build_graph

    scripted = model(
        {
            "tool_calls": [
                compile_call(),
                {"name": "ask_user", "args": {"question": "float16 too?"}},
            ]
        },
        {"name": "finish", "args": {}},
    )
    graph = build_graph(model=scripted, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    context = RunConfig(backend="sim", approve=True)
    graph.invoke({"task_dir": str(PORTED.folder)}, cfg, context=context)
    snap = graph.get_state(cfg)
    assert [i.value for t in snap.tasks for i in t.interrupts] == [
        {"kind": "ask", "question": "float16 too?"}
    ]
    # nothing of the turn ran yet: it runs once, after the answer
    assert not snap.values.get("records")
    graph.invoke(Command(resume="only float32"), cfg, context=context)
    state = State.of(graph.get_state(cfg).values)
    tools = [m.content for m in state.messages if m.type == "tool"]
    assert (
        tools[0].startswith(f"candidate {PORT.id} (vector_add): compiled")
        and tools[1] == "the person answers: only float32"
    )
    assert state.stop_reason == "finish"


def test_tree_search_tries_the_best_rated_idea_marks_it_failed_and_keeps_the_better_branch(
    tmp_path,
):
    """Two ideas; the higher rated one (p1) yields only a wrong kernel, so its cycle ends after the
    stagnation window as failed and lowers its siblings' confidence; the next cycle on p2 finds a
    correct one, which is the result."""
    wrong = PORT.model_copy(
        update={"source": "uint i = thread_position_in_grid.x;\nout[i] = a[i];\n"}
    )
    ideas = {
        "tool_calls": [
            {
                "name": "update_plan",
                "args": {
                    "action": "add",
                    "idea": "vectorise",
                    "expected_gain": "2x",
                    "difficulty": 0.2,
                    "confidence": 0.8,
                },
            },
            {
                "name": "update_plan",
                "args": {
                    "action": "add",
                    "idea": "plain",
                    "expected_gain": "1.2x",
                    "difficulty": 0.3,
                    "confidence": 0.6,
                },
            },
            {
                "name": "update_plan",
                "args": {
                    "action": "add",
                    "idea": "too hard",
                    "expected_gain": "5x",
                    "difficulty": 0.95,
                    "confidence": 0.9,
                },
            },
        ]
    }
    scripted = model(
        ideas,
        compile_call(wrong),
        {"name": "run_correctness", "args": {"candidate_id": wrong.id}},
        compile_call(),
        {"name": "run_correctness", "args": {"candidate_id": PORT.id}},
        {"name": "finish", "args": {}},
    )
    run = port(tmp_path, scripted, search="tree", stagnation=1)
    assert run["result"]["candidate_id"] == PORT.id and run["result"]["verified"]
    assert [(c["node"], c["improved"]) for c in run["cycles"]] == [("p1", False), ("p2", True)]
    nodes = {n["id"]: n for n in run["plan"]}
    assert nodes["p1"]["status"] == "failed" and nodes["p2"]["status"] == "done"
    # each cycle's candidates are credited to its idea
    assert nodes["p1"]["candidates"] == [wrong.id] and nodes["p2"]["candidates"] == [PORT.id]
    assert nodes["p3"]["status"] == "open"  # rated above the difficulty limit: never tried
    transcript = (tmp_path / "vector_add" / "transcript.jsonl").read_text()
    assert (
        'Cycle 1: work on p1 \\"vectorise\\"' in transcript
        and 'Cycle 2: work on p2 \\"plain\\"' in transcript
    )


def test_plan_ratings_order_the_frontier_and_measurements_update_them():
    from mlxport.tools.plan import Plan

    plan = Plan()
    a = plan.add("a", expected_gain="2x", difficulty=0.5, confidence=0.5)
    b = plan.add("b", expected_gain="+30%", difficulty=0.1, confidence=0.9)
    child = plan.add("a.1", expected_gain="1.5x", parent=a.id)
    assert [n.id for n in plan.frontier()] == [b.id, a.id, child.id]
    plan.select(a.id)
    plan.measured(a.id, improved=False, outcome="no improvement")
    assert plan.get(a.id).status == "failed" and plan.get(b.id).confidence == pytest.approx(0.72)
    assert [n.id for n in plan.frontier()] == [b.id]  # under a failed idea: off the frontier
