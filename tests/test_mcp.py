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
        got["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        got["prompt"] = await client.get_prompt("port_kernel", {"task": "vector_add"})
        got["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
        got["kb"] = await client.read_resource("mlxport://kb/msl")
        got["source"] = await client.read_resource("mlxport://task/vector_add/source")

        async def call(name, args, key=None):
            result = await client.call_tool(name, args)
            got["calls"].append((name, args, text(result)))
            got[key or name] = result
            return text(result)

        folder = str(SUITE_DIR / "vector_add")
        await call("read_cuda_source", {"task": "vector_add/", "show_source": False})
        leaky = tmp_path / "leaky.cu"
        leaky.write_text(f"// {KEY}\n__global__ void k(float* x) {{ x[threadIdx.x] = 1.0f; }}\n")
        await call("read_cuda_source", {"task": str(leaky)}, "read_leaky")
        await call("query_hardware_kb", {"query": "simd_shuffle_xor semantics"})
        await call("read_reference", {"task": "vector_add"})
        first = json.loads(json.dumps(PORT))
        compiled = await call("compile_kernel", {"task": folder, **first})
        cid = re.search(r"candidate (\w+)", compiled)[1]
        await call("run_correctness", {"task": "vector_add", "backend": "sim", "candidate_id": cid})
        second = await call(
            "compile_kernel",
            {"task": "vector_add", "based_on": cid, "threadgroup": [128, 1, 1]},
            "compile_second",
        )
        cid2 = re.search(r"candidate (\w+)", second)[1]
        await call("diff_candidates", {"task": "vector_add", "old": cid, "new": cid2})
        await call(
            "update_plan", {"task": "vector_add", "action": "add", "idea": "one element per thread"}
        )
        await call("verify", {"task": "vector_add", "candidate_id": cid})
        await call("benchmark", {"task": "vector_add", "candidate_id": cid})
        await call("show_candidate", {"task": "vector_add", "candidate_id": cid})
        await call("ask_user", {"question": "Which dtypes matter to you?"})
        await call(
            "finish", {"task": "vector_add", "candidate_id": cid, "out": str(tmp_path / "out")}
        )
        await call("run_correctness", {"task": "vector_add", "candidate_id": cid}, "after_finish")

        cu = tmp_path / "scale.cu"
        cu.write_text(SCALE_CU)
        await call(
            "create_task",
            {
                "path": str(cu),
                "cases": ["n=1000,s=2.5", "n=4096,s=-1.0"],
                "folder": str(tmp_path / "tasks"),
            },
        )
        made = str(tmp_path / "tasks" / "scale")
        broken = await call(
            "compile_kernel",
            {
                "task": made,
                "name": "scale",
                "input_names": ["x", "s", "n"],
                "output_names": ["y"],
                "output_shapes": ["x.shape"],
                "output_dtypes": ["x.dtype"],
                "grid": ["n", 1, 1],
                "threadgroup": [256, 1, 1],
                "source": "y[i] = s * x[i];",
            },
            "compile_broken",
        )
        await call(
            "run_correctness",
            {"task": made, "candidate_id": re.search(r"candidate (\w+)", broken)[1]},
            "check_broken",
        )
        await call("run_correctness", {"task": "vector_add", "candidate_id": "deadbeef"}, "bad_id")
        await call("compile_kernel", {"task": "no_such_task", **PORT}, "bad_task")
        await call(
            "port",
            {
                "task": "vector_add",
                "out": str(tmp_path / "ported"),
                "budget": {"max_iterations": 10, "extra_seeds": 0},
            },
        )
    return got


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
    assert tools["compile_kernel"].description == " ".join(schemas.compile_kernel.__doc__.split())
    assert "You write only the kernel body" in got["instructions"]
    assert (
        "`grid` counts THREADS" in got["instructions"]
        and "mx.fast.metal_kernel" in got["instructions"]
    )
    prompt = got["prompt"].messages[0].content.text
    assert "Port the CUDA kernel `vector_add_kernel`" in prompt and "read_cuda_source" in prompt
    assert "mlxport://kb/msl" in got["resources"]
    assert "simd_shuffle_xor" in got["kb"].contents[0].text
    assert "__global__" in got["source"].contents[0].text


def test_a_port_through_the_client_runs_in_one_session_and_finish_writes_it(got, tmp_path_factory):
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
        "verify",
        "benchmark",
        "show_candidate",
        "ask_user",
        "finish",
        "create_task",
        "port",
    ):
        assert not got[key].is_error, (key, text(got[key]))
    assert "Entry kernel: vector_add_kernel" in text(got["read_cuda_source"])
    assert "__global__ void k" in text(got["read_leaky"]) and KEY not in text(got["read_leaky"])
    assert "simd_shuffle_xor" in text(got["query_hardware_kb"])
    assert "reference:reference" in text(got["read_reference"]) and "def reference" in text(
        got["read_reference"]
    )
    # the folder, the name with a trailing slash, and backend given or not: one session
    assert "PASS" in text(got["run_correctness"])
    assert "+threadgroup = [128, 1, 1]" in text(got["diff_candidates"]).replace('"', "")
    assert "held-out cases: " in text(got["verify"]) and "N=" not in text(got["verify"])
    assert "ESTIMATE" in text(got["benchmark"])
    assert "verification: PASS" in text(got["show_candidate"])
    assert (
        text(got["ask_user"])
        == "the person answers: float32 is enough (Which dtypes matter to you?)"
    )
    assert "verified on sim" in text(got["finish"])
    out = Path(re.search(r"to (\S+); this session is closed", text(got["finish"]))[1])
    assert (out / "kernel.py").is_file()
    run = json.loads((out / "run.json").read_text())
    assert run["result"]["verified"] and run["model"] == "mcp client"
    transcript = [json.loads(line) for line in (out / "transcript.jsonl").read_text().splitlines()]
    assert [c["name"] for m in transcript if m["tool_calls"] for c in m["tool_calls"]][
        -1
    ] == "finish"
    assert got["after_finish"].is_error and "unknown candidate id" in text(got["after_finish"])


def test_a_task_made_from_a_cu_file_checks_ports_and_mistakes_come_back_with_their_fix(got):
    assert "created task scale" in text(got["create_task"]) and "n=1000" in text(got["create_task"])
    assert "compile failed" in text(got["compile_broken"]) and "'i'" in text(got["compile_broken"])
    check = text(got["check_broken"])
    assert got["check_broken"].is_error and "did not compile" in check and "source line 1" in check
    assert got["bad_id"].is_error and "unknown candidate id" in text(got["bad_id"])
    assert got["bad_task"].is_error and "no task named" in text(got["bad_task"])
    run = got["port"].structured_content
    assert (
        run["verified"]
        and run["model"] == "rules"
        and run["non_llm_baseline"]
        and run["speed"] == "not timed (sim)"
    )


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
