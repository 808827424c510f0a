"""A real MCP client spawns the server over stdio, lists every tool and calls each one."""

import json
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="needs mcp 2: pip install -e '.[mcp]'")
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from mlxport.tasks import SUITE_DIR, expert_ports, load_task  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"list_tasks", "read_cuda_source", "query_hardware_kb", "compile_kernel", "check", "benchmark", "port"}
PORT_TOML = (SUITE_DIR / "vector_add" / "ports" / "msl.toml").read_text()
PORT_ID = expert_ports(load_task("vector_add"))["msl"].id
KEY = "sk-live-0123456789abcdefghijklmn"


def text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def session_calls(tmp_path: Path) -> dict:
    server = StdioServerParameters(command=sys.executable, args=["-m", "mlxport.mcp_server"], cwd=str(ROOT))
    got = {}
    async with Client(server, read_timeout_seconds=240) as client:
        got["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        call = client.call_tool
        got["list_tasks"] = await call("list_tasks", {})
        got["read_task"] = await call("read_cuda_source", {"path": "vector_add", "show_source": False})
        got["read_file"] = await call("read_cuda_source", {"path": str(SUITE_DIR / "softmax_rows" / "kernel.cu")})
        leaky = tmp_path / "leaky.cu"
        leaky.write_text(f"// {KEY}\n__global__ void k(float* x) {{ x[threadIdx.x] = 1.0f; }}\n")
        got["read_leaky"] = await call("read_cuda_source", {"path": str(leaky)})
        got["kb"] = await call("query_hardware_kb", {"query": "simd_shuffle_xor semantics"})
        got["compile"] = await call("compile_kernel", {"task": "vector_add", "candidate_toml": PORT_TOML,
                                                       "backend": "sim"})
        got["check"] = await call("check", {"task": "vector_add", "candidate_id": PORT_ID, "backend": "sim"})
        got["benchmark"] = await call("benchmark", {"task": "vector_add", "candidate_id": PORT_ID, "backend": "sim"})
        got["bad_id"] = await call("check", {"task": "vector_add", "candidate_id": "deadbeef", "backend": "sim"})
        got["bad_task"] = await call("compile_kernel", {"task": "no_such_task", "candidate_toml": PORT_TOML})
        got["port"] = await call("port", {"task": "vector_add", "backend": "sim", "out": str(tmp_path / "out"),
                                          "budget": {"max_iterations": 10, "extra_seeds": 0}})
    return got


def test_mcp_client_lists_and_calls_every_tool(tmp_path):
    got = anyio.run(session_calls, tmp_path)
    assert set(got["tools"]) == TOOLS
    assert "grid" in got["tools"]["compile_kernel"].description
    assert set(got["tools"]["port"].input_schema["properties"]) >= {"task", "model", "budget", "backend"}
    for key in ("list_tasks", "read_task", "read_file", "kb", "compile", "check", "benchmark", "port"):
        assert not got[key].is_error, (key, text(got[key]))
    assert "vector_add" in text(got["list_tasks"])
    assert "Entry kernel: vector_add" in text(got["read_task"])
    assert "softmax" in text(got["read_file"]) and "   1 " in text(got["read_file"])
    assert "simd_shuffle_xor" in text(got["kb"])
    assert "__global__ void k" in text(got["read_leaky"]) and KEY not in text(got["read_leaky"])
    assert f"candidate {PORT_ID}" in text(got["compile"])
    assert "PASS" in text(got["check"])
    assert "ESTIMATE" in text(got["benchmark"])
    assert got["bad_id"].is_error and "unknown candidate id" in text(got["bad_id"])
    assert got["bad_task"].is_error and "no task named" in text(got["bad_task"])
    run = got["port"].structured_content
    assert run["verified"] and run["model"] == "rules" and run["non_llm_baseline"] and run["speed"] == "not timed (sim)"
    record = json.loads((Path(run["folder"]) / "run.json").read_text())
    assert record["session"] == run["session"]
