"""A real MCP client (the official `mcp` library) spawns `mlxport mcp` over stdio and ports a
kernel the way the graph's model would: the same tools, typed and described, the same system
prompt as instructions, prompts and resources, one session per resolved task and backend, a
question answered through elicitation, a task made from a .cu file, and finish writing the port."""

import json
import os
import re
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from small_tasks import small_task

from mlxport.tasks import SUITE_DIR
from mlxport.tools import schemas
from mlxport.tools.handlers import TOOLS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "mcp.md"
PORT = {
    k: v
    for k, v in tomllib.loads((SUITE_DIR / "vector_add" / "ports" / "msl.toml").read_text()).items()
    if k != "language"
}
KEY = "sk-live-0123456789abcdefghijklmn"
SCALE_CU = """// a user's kernel
__global__ void scale(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}
void launch(const float* x, float* y, float s, int n) { \
scale<<<(n + 255) / 256, 256>>>(x, y, s, n); }
"""


def text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def answer(context, params):
    import mcp_types

    return mcp_types.ElicitResult(
        action="accept", content={"answer": f"float32 is enough ({params.message})"}
    )


async def session_calls(tmp_path: Path) -> dict:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mlxport.cli", "mcp", "--backend", "sim"],
        env=dict(os.environ),
        cwd=str(tmp_path),
    )
    got: dict = {"calls": []}
    async with Client(server, read_timeout_seconds=300, elicitation_callback=answer) as client:
        got["instructions"] = client.instructions
        got["server"] = client.server_info
        got["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        got["prompt"] = await client.get_prompt("port_kernel", {"task": "vector_add"})
        got["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
        got["kb"] = await client.read_resource("mlxport://kb/msl")
        got["source"] = await client.read_resource("mlxport://task/vector_add/source")

        async def call(name, args, key=None):
            result = await client.call_tool(name, args)
            got["calls"].append((name, args, text(result)))
            got[key or name] = result
            return result.structured_content

        folder = str(SUITE_DIR / "vector_add")
        await call("read_cuda_source", {"task": "vector_add/", "show_source": False})
        leaky = tmp_path / "leaky.cu"
        leaky.write_text(f"// {KEY}\n__global__ void k(float* x) {{ x[threadIdx.x] = 1.0f; }}\n")
        await call("read_cuda_source", {"task": str(leaky)}, "read_leaky")
        await call("query_hardware_kb", {"query": "simd_shuffle_xor semantics"})
        await call("read_reference", {"task": "vector_add"})
        cid = (await call("compile_kernel", {"task": folder, **PORT, "name": "plain"}))[
            "candidate_id"
        ]
        await call(
            "run_correctness", {"task": "vector_add", "backend": "sim", "candidate_id": "plain"}
        )
        cid2 = (
            await call(
                "compile_kernel",
                {"task": "vector_add", "based_on": "plain", "threadgroup": [128, 1, 1]},
                "compile_second",
            )
        )["candidate_id"]
        await call("diff_candidates", {"task": "vector_add", "old": cid, "new": cid2})
        await call(
            "update_plan",
            {
                "task": "vector_add",
                "action": "add",
                "idea": "one element per thread",
                "candidate": cid,
            },
        )
        await call("benchmark", {"task": "vector_add", "candidate_id": cid})
        await call("show_candidate", {"task": "vector_add", "candidate_id": cid})
        await call("ask_user", {"question": "Which dtypes matter to you?"})
        await call("session", {"task": "vector_add"}, "session_vector_add")
        await text_held_port(call, tmp_path)
        await call("run_correctness", {"task": "vector_add", "candidate_id": "deadbeef"}, "bad_id")
        await call("compile_kernel", {"task": "no_such_task", **PORT}, "bad_task")
        await call(
            "create_task",
            {"source": SCALE_CU, "cases": ["s=2.5"], "folder": str(tmp_path / "tasks")},
            "bad_create",
        )
        await indexed_task(call, tmp_path)
        # a small vector_add: what this call shows is the port tool, not the suite's sizes
        await call(
            "port",
            {
                "task": str(small_task("vector_add", tmp_path / "small")),
                "out": str(tmp_path / "ported"),
                "budget": {"max_iterations": 10, "extra_seeds": 0},
            },
        )
    return got


async def text_held_port(call, tmp_path: Path) -> None:
    """A client that holds its kernel as text, and reads every verdict from fields."""
    await call("read_cuda_source", {"source": SCALE_CU, "show_source": False}, "read_text")
    made = await call(
        "create_task",
        {
            "source": SCALE_CU,
            "cases": ["n=1000,s=2.5", "n=4096,s=-1.0"],
            "folder": str(tmp_path / "tasks"),
        },
    )
    task = made["task_dir"]
    launch = {
        "task": task,
        "input_names": ["x", "s", "n"],
        "output_names": ["y"],
        "output_shapes": ["x.shape"],
        "output_dtypes": ["x.dtype"],
        "grid": ["n", 1, 1],
        "threadgroup": [256, 1, 1],
    }
    leftovers = (
        "int i = blockIdx.x * blockDim.x + threadIdx.x;\nif (i < n) y[i] = fmaxf(s * x[i], -1e30f);"
    )
    broken = await call(
        "compile_kernel",
        {**launch, "name": "cuda_leftovers", "source": leftovers},
        "compile_broken",
    )
    await call(
        "run_correctness", {"task": task, "candidate_id": broken["candidate_id"]}, "check_broken"
    )
    body = "uint i = thread_position_in_grid.x;\nif (i < uint(n)) y[i] = s * x[i];"
    cid = (
        await call(
            "compile_kernel", {**launch, "name": "scale_v1", "source": body}, "compile_scale"
        )
    )["candidate_id"]
    await call("run_correctness", {"task": task, "candidate_id": cid}, "check_scale")
    await call("verify", {"task": task, "candidate_id": cid})
    await call("session", {"task": task}, "session_open")
    await call("finish", {"task": task, "out": str(tmp_path / "out")})
    await call("run_correctness", {"task": task, "candidate_id": cid}, "after_finish")
    await call("session", {"task": task}, "session_closed")
    await call("session", {"task": task, "new": True}, "session_new")


EMBED_CU = """
__global__ void embed(float* out, const int* idx, const float* table, int C) {
    out[blockIdx.x * C + threadIdx.x] = table[idx[blockIdx.x] * C + threadIdx.x];
}
void run(float* out, const int* idx, const float* table, int N, int C) {
    embed<<<N, C>>>(out, idx, table, C);
}
"""


async def indexed_task(call, tmp_path: Path) -> None:
    """An index input whose values the host code does not bound: refused naming the arguments
    that give them, then made with them."""
    given = {"source": EMBED_CU, "folder": str(tmp_path / "tasks")}
    await call("create_task", {**given, "cases": ["N=8,C=32"]}, "embed_refused")
    await call(
        "create_task",
        {**given, "cases": ["N=8,C=32,V=16"], "inputs": "idx:int32[0,V)", "shapes": ["table=V*C"]},
        "embed_made",
    )


@pytest.fixture(scope="module")
def got(tmp_path_factory):
    # mcp is imported when these tests run, not at collection (where every worker would import it).
    pytest.importorskip("mcp.server.mcpserver", reason="needs mcp 2: pip install -e '.[mcp]'")
    return anyio.run(session_calls, tmp_path_factory.mktemp("mcp"))


def test_the_client_sees_the_graphs_tools_typed_and_described_and_its_system_prompt(got):
    tools = got["tools"]
    assert set(tools) == set(TOOLS) | {"list_tasks", "create_task", "port"}
    for name, tool in tools.items():
        for prop, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{name}.{prop} has no description"
    compile_props = tools["compile_kernel"].input_schema["properties"]
    assert compile_props["source"]["anyOf"][0] == {
        "maxLength": schemas.MAX_SOURCE_CHARS,
        "type": "string",
    }
    assert "task" in tools["compile_kernel"].input_schema["required"]
    assert "source" in tools["read_cuda_source"].input_schema["properties"]
    assert "task" not in tools["read_cuda_source"].input_schema.get("required", [])
    assert {"path", "source"} <= set(tools["create_task"].input_schema["properties"])
    assert tools["compile_kernel"].description == " ".join(schemas.compile_kernel.__doc__.split())
    assert "You write only the kernel body" in got["instructions"]
    assert (
        "`grid` counts THREADS" in got["instructions"]
        and "mx.fast.metal_kernel" in got["instructions"]
    )
    assert got["server"].name == "mlxport" and re.fullmatch(r"\d+\.\d+.*", got["server"].version)
    prompt = got["prompt"].messages[0].content.text
    assert "Port the CUDA kernel `vector_add_kernel`" in prompt and "read_cuda_source" in prompt
    assert "Target:" not in prompt  # the simulator does not time
    assert "mlxport://kb/msl" in got["resources"]
    assert "simd_shuffle_xor" in got["kb"].contents[0].text
    assert "__global__" in got["source"].contents[0].text


def props(tool) -> dict:
    """A tool's output schema's properties, with each array's item properties in place."""
    schema = tool.output_schema
    out = {}
    for name, p in schema["properties"].items():
        ref = p.get("items", {}).get("$ref", "")
        out[name] = set(schema["$defs"][ref.rsplit("/", 1)[-1]]["properties"]) if ref else p
    return out


def test_every_result_carries_its_outcome_as_typed_fields(got):
    tools = got["tools"]
    for name in TOOLS:
        assert "ok" in tools[name].output_schema["properties"], name
    assert {"case", "dtype", "mode", "verdict", "max_abs_err"} <= props(tools["run_correctness"])[
        "cases"
    ]
    assert {"line", "column", "message"} <= props(tools["compile_kernel"])["diagnostics"]
    assert props(tools["verify"])["budget_left"]["type"] == "integer"
    assert {"candidate_id", "correct", "verified"} <= props(tools["session"])["candidates"]
    for key in ("compile_kernel", "run_correctness", "benchmark", "session_vector_add"):
        assert got[key].structured_content["ok"] is True, key
    first = got["run_correctness"].structured_content
    assert first["candidate_id"] == got["compile_kernel"].structured_content["candidate_id"]
    assert [c["verdict"] for c in first["cases"]] == ["pass"] * 6
    assert got["benchmark"].structured_content["timed"] is False
    assert "ESTIMATE" in got["benchmark"].structured_content["estimate"]


def test_a_port_through_the_client_runs_in_one_session(got):
    for key in (
        "read_cuda_source",
        "read_leaky",
        "query_hardware_kb",
        "read_reference",
        "compile_kernel",
        "run_correctness",
        "compile_second",
        "diff_candidates",
        "update_plan",
        "benchmark",
        "show_candidate",
        "ask_user",
        "session_vector_add",
        "port",
    ):
        assert not got[key].is_error, (key, text(got[key]))
    assert "Entry kernel: vector_add_kernel" in text(got["read_cuda_source"])
    assert "__global__ void k" in text(got["read_leaky"]) and KEY not in text(got["read_leaky"])
    assert "simd_shuffle_xor" in text(got["query_hardware_kb"])
    assert "reference:reference" in text(got["read_reference"]) and "def reference" in text(
        got["read_reference"]
    )
    # the folder, the name with a trailing slash, and backend given or not: one session; the
    # candidate's name stands for its id
    assert "PASS" in text(got["run_correctness"])
    assert "+threadgroup = [128, 1, 1]" in text(got["diff_candidates"]).replace('"', "")
    plan = got["update_plan"].structured_content
    cid = got["compile_kernel"].structured_content["candidate_id"]
    assert plan["node_id"] == "p1" and plan["candidate"] == cid
    assert "plan:" not in text(got["update_plan"])  # the plan is not echoed
    state = got["session_vector_add"].structured_content
    assert [c["name"] for c in state["candidates"]] == ["plain", "plain"]
    assert state["candidates"][0]["plan_node"] == "p1" and state["best"] == cid
    assert (
        text(got["ask_user"])
        == "the person answers: float32 is enough (Which dtypes matter to you?)"
    )
    run = got["port"].structured_content
    assert (
        run["verified"]
        and run["model"] == "rules"
        and run["non_llm_baseline"]
        and run["speed"] == "not timed (sim)"
    )


def test_a_client_holding_its_kernel_as_text_ports_it_reading_every_verdict_from_fields(got):
    source = got["read_text"].structured_content
    assert source["kernels"] == ["scale"] and "global scale" in text(got["read_text"])
    made = got["create_task"].structured_content
    assert made["task"] == "scale" and made["cases"] == ["n=1000,s=2.5", "n=4096,s=-1.0"]
    broken = got["compile_broken"].structured_content
    assert broken["ok"] is False
    said = {1: "", 2: ""}
    for d in broken["diagnostics"]:
        said[d["line"]] += d["message"]
    assert "`blockIdx` is CUDA; Metal has threadgroup_position_in_grid" in said[1]
    assert "edge threadgroups can be smaller" in said[1] and "Metal has metal::max" in said[2]
    assert all(d["column"] for d in broken["diagnostics"])
    assert got["check_broken"].is_error and "did not compile" in text(got["check_broken"])
    check = got["check_scale"].structured_content
    assert check["ok"] and {(c["case"], c["verdict"]) for c in check["cases"]} == {
        ("n=1000,s=2.5", "pass"),
        ("n=4096,s=-1.0", "pass"),
    }
    assert all(c["max_abs_err"] == 0.0 for c in check["cases"])
    verified = got["verify"].structured_content
    assert verified["ok"] and verified["budget_left"] == 2
    assert {c["kind"] for c in verified["checks"]} >= {"held-out cases", "threads reversed"}
    state = got["session_open"].structured_content
    assert not state["closed"] and state["budget_left"] == 2
    rows = {c["name"]: c for c in state["candidates"]}
    assert rows["cuda_leftovers"]["compiled"] is False and rows["cuda_leftovers"]["correct"] is None
    assert rows["scale_v1"]["correct"] and rows["scale_v1"]["verified"]
    finished = got["finish"].structured_content
    cid = got["compile_scale"].structured_content["candidate_id"]
    assert finished["ok"] and finished["verified"] and finished["result"] == cid
    assert "passed verify" in finished["why"]
    out = Path(finished["folder"])
    assert (out / "kernel.py").is_file()
    run = json.loads((out / "run.json").read_text())
    assert run["result"]["verified"] and run["model"] == "mcp client"
    transcript = [json.loads(line) for line in (out / "transcript.jsonl").read_text().splitlines()]
    assert [c["name"] for m in transcript if m["tool_calls"] for c in m["tool_calls"]][
        -1
    ] == "finish"


def test_a_closed_session_says_so_and_a_new_one_starts_only_when_asked(got):
    after = text(got["after_finish"])
    assert got["after_finish"].is_error and "is closed" in after and "new=true" in after
    closed = got["session_closed"].structured_content
    assert closed["closed"] and len(closed["candidates"]) == 2
    fresh = got["session_new"].structured_content
    assert not fresh["closed"] and fresh["candidates"] == [] and fresh["budget_left"] == 3


def test_mistakes_come_back_naming_the_tool_and_argument_that_fix_them(got):
    bad_id = text(got["bad_id"])
    assert got["bad_id"].is_error and "unknown candidate 'deadbeef'" in bad_id
    assert got["bad_id"].structured_content == {"ok": False}
    bad_task = text(got["bad_task"])
    assert "no task named" in bad_task and "list_tasks" in bad_task and "mlxport" not in bad_task
    bad_create = text(got["bad_create"])
    assert got["bad_create"].is_error and "create_task's `cases`" in bad_create
    assert "--" not in bad_create
    refused = text(got["embed_refused"])
    assert got["embed_refused"].is_error and "create_task's `inputs`" in refused, refused
    assert "--" not in refused
    assert got["embed_made"].structured_content["cases"] == ["N=8,C=32,V=16"]


def test_docs_show_the_transcript_of_this_test(got, tmp_path_factory):
    """docs/mcp.md's transcript is this test's calls, in order. MLXPORT_MCP_TRANSCRIPT=1 writes the
    new transcript into it."""
    head, _, rest = DOC.read_text().partition("<!-- transcript -->\n")
    block, _, tail = rest.partition("<!-- /transcript -->")
    if os.environ.get("MLXPORT_MCP_TRANSCRIPT"):
        block = transcript(got["calls"], str(tmp_path_factory.getbasetemp()))
        DOC.write_text(f"{head}<!-- transcript -->\n{block}<!-- /transcript -->{tail}")
    assert re.findall(r"^→ (\w+)", block, re.MULTILINE) == [name for name, _, _ in got["calls"]]


def transcript(calls, tmp: str, lines: int = 6) -> str:
    out = ["```text"]
    for name, args, result in calls:
        shown = {k: ("..." if k == "source" else v) for k, v in args.items()}
        out.append(f"→ {name} {json.dumps(shown)}".replace(tmp, "/tmp").replace(str(ROOT), "."))
        body = result.replace(tmp, "/tmp").replace(str(ROOT), ".").splitlines()
        out += [f"  {line}" for line in body[:lines]] + (
            [f"  ... ({len(body) - lines} more lines)"] if len(body) > lines else []
        )
    return "\n".join(out) + "\n```\n"
