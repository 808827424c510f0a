"""The provider path end to end: the real ChatOpenAI client against a local HTTP server that
speaks the OpenAI chat-completions API, driving the real graph on the simulator."""

import json

from openai_server import Hang, HTTPError, OpenAIServer, Reply, ToolCall, malformed_tool_call

from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig
from mlxport.tasks import expert_ports, load_task

TASK = load_task("vector_add")
PORT = expert_ports(TASK)["msl"]


def port_args():
    args = PORT.model_dump(mode="json", exclude_defaults=True)
    args.pop("language", None)
    return args


def run(tmp_path, script, tokens=None):
    # No extra seeds in the final verification: the kernel is the expert port, and these tests are
    # about the provider path (tests/test_agent.py shows the extra seeds).
    with OpenAIServer(script) as server:
        config = RunConfig(
            model="openai:scripted-model",
            base_url=server.url,
            backend="sim",
            max_iterations=8,
            extra_seeds=0,
        )
        record = run_port(TASK, config, tmp_path, on_token=tokens)
        return record, server.requests


def test_rate_limit_then_success_and_a_malformed_call_recovered(tmp_path):
    script = [
        HTTPError(status=429),
        Reply(tool_calls=[ToolCall("read_cuda_source", {})], usage=(1200, 30)),
        malformed_tool_call("compile_kernel", '{"name": "vector_add", "source": "uint i'),
        Reply(tool_calls=[ToolCall("compile_kernel", port_args())], usage=(2000, 200)),
        Reply(
            tool_calls=[ToolCall("run_correctness", {"candidate_id": PORT.id})], usage=(2500, 20)
        ),
        Reply(tool_calls=[ToolCall("finish", {"summary": "done"})], usage=(2600, 20)),
    ]
    record, requests = run(tmp_path, script)
    assert record["stop_reason"] == "finish"
    assert record["result"]["verified"] and record["result"]["candidate_id"] == PORT.id
    assert record["tool_errors"] == 1
    # the 429 was retried by the client: the script's first two turns both reached the server
    assert len(requests) == 6
    # after the malformed call the model was told, in a tool message answering that call
    tool_msgs = [m for m in requests[3]["messages"] if m["role"] == "tool"]
    assert any("not valid JSON" in m["content"] for m in tool_msgs)
    assert {t["function"]["name"] for t in requests[1]["tools"]} >= {
        "compile_kernel",
        "run_correctness",
        "finish",
    }
    assert record["tokens"]["input"] > 0


def test_server_error_ends_the_run_cleanly(tmp_path):
    script = [Reply(tool_calls=[ToolCall("read_cuda_source", {})])] + [HTTPError(status=500)] * 8
    record, _ = run(tmp_path, script)
    assert record["stop_reason"].startswith("model_error:") and "500" in record["stop_reason"]
    assert record["result"]["verified"] is False
    assert (tmp_path / "vector_add" / "report.md").is_file()


def test_streamed_tokens_and_usage(tmp_path):
    script = [
        Reply(
            content="Let me read the source first.",
            tool_calls=[ToolCall("read_cuda_source", {})],
            usage=(900, 17),
        ),
        Reply(content="Done.", tool_calls=[ToolCall("finish", {})], usage=(1500, 5)),
    ]
    tokens = []
    record, requests = run(tmp_path, script, tokens=tokens.append)
    assert "".join(tokens).startswith("Let me read the source first.")
    assert all(r.get("stream") for r in requests)
    assert requests[0]["stream_options"] == {"include_usage": True}
    assert record["tokens"] == {"input": 2400, "output": 22}
    assert json.loads((tmp_path / "vector_add" / "run.json").read_text())["tokens"]["output"] == 22


def test_run_log_is_json_lines_without_secrets(tmp_path, monkeypatch):
    secret = "sk-test-0123456789abcdefSECRET"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    script = [
        Reply(tool_calls=[ToolCall("read_cuda_source", {})]),
        Reply(tool_calls=[ToolCall("finish", {})]),
    ]
    with OpenAIServer(script) as server:
        config = RunConfig(
            model="openai:scripted-model", base_url=server.url, backend="sim", max_iterations=4
        )
        run_port(TASK, config, tmp_path)
        sent = [h.get("authorization", "") for h in server.request_headers]
    assert all(secret in h for h in sent)  # the key really was used...
    text = (tmp_path / "vector_add" / "log.jsonl").read_text()
    events = [json.loads(line) for line in text.splitlines()]
    assert [e["event"] for e in events][0] == "port_started" and events[-1][
        "event"
    ] == "port_finished"
    assert any(e.get("tool_calls") == ["read_cuda_source"] for e in events)
    # ...and never logged (tests/test_redaction.py covers every other output)
    assert secret not in text


def test_a_hung_server_ends_the_run_with_a_clear_stop_reason(tmp_path):
    with OpenAIServer(
        [Reply(tool_calls=[ToolCall("read_cuda_source", {})])] + [Hang()] * 8
    ) as server:
        config = RunConfig(
            model="openai:scripted-model",
            base_url=server.url,
            backend="sim",
            max_iterations=8,
            request_timeout=0.5,
        )
        record = run_port(TASK, config, tmp_path)
    assert record["stop_reason"].startswith("model_error: OpenAITimeoutError: Request timed out"), (
        record["stop_reason"]
    )
    assert len(server.requests) == 1 + 5  # the first reply, then the request and its 4 retries
    assert (tmp_path / "vector_add" / "report.md").is_file()


def test_meaningless_calls_and_text_only_replies_end_in_consecutive_errors(tmp_path):
    """What a tiny model does: well-formed calls with nonsense arguments, calls of unknown tools,
    and chatter without a call."""
    script = [
        Reply(tool_calls=[ToolCall("compile_kernel", {"kernel": "hello"})]),
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]),
        Reply("I think the answer is 42."),
        Reply(tool_calls=[ToolCall("run_correctness", {"candidate_id": 7})]),
    ]
    record, _ = run(tmp_path, script)
    assert record["stop_reason"] == "consecutive_errors"
    assert record["result"]["verified"] is False and record["tool_errors"] == 3
