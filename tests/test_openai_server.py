"""The scripted OpenAI server, driven through the real ChatOpenAI client over local HTTP."""

import asyncio
import json
import urllib.error
import urllib.request

import openai
import pytest
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai_server import (
    HTTPError,
    OpenAIServer,
    Reply,
    ToolCall,
    malformed_tool_call,
    openai_server_fixture,  # noqa: F401  (registers the openai_server fixture)
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def chat(server: OpenAIServer, max_retries: int = 0) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=server.url,
        api_key="test",
        model="scripted",
        stream_usage=True,
        use_responses_api=False,
        max_retries=max_retries,
        timeout=10,
    )


def stream_sum(runnable, prompt: str) -> AIMessageChunk:
    chunks = list(runnable.stream(prompt))
    assert len(chunks) > 1, "expected a real token stream, not a single chunk"
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk
    return total


def test_url_and_models_endpoint(openai_server):
    server = openai_server([])
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
    models = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0).models.list()
    assert [m.id for m in models.data] == ["scripted"]


def test_invoke_returns_text_and_usage(openai_server):
    server = openai_server([Reply("hello there", usage=(11, 3))])
    msg = chat(server).invoke("hi")
    assert msg.content == "hello there"
    assert msg.usage_metadata["input_tokens"] == 11
    assert msg.usage_metadata["output_tokens"] == 3
    assert msg.usage_metadata["total_tokens"] == 14
    assert msg.response_metadata["finish_reason"] == "stop"
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert server.requests[0]["stream"] is False
    assert server.remaining == 0


def test_default_usage_is_estimated_from_text(openai_server):
    server = openai_server([Reply("x" * 40)])
    usage = chat(server).invoke("hi").usage_metadata
    assert usage["output_tokens"] == 10
    assert usage["input_tokens"] >= 1


def test_bind_tools_invoke_parses_tool_calls_and_sends_schema(openai_server):
    calls = [("add", {"a": 1, "b": 2}, "call_1"), ToolCall("add", '{"a": 3, "b": 4}')]
    server = openai_server([Reply(tool_calls=calls)])
    msg = chat(server).bind_tools([add]).invoke("add please")
    assert [(tc["name"], tc["args"]) for tc in msg.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("add", {"a": 3, "b": 4}),
    ]
    assert msg.tool_calls[0]["id"] == "call_1"
    assert msg.tool_calls[1]["id"].startswith("call_")
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    [tool_schema] = server.requests[0]["tools"]
    assert tool_schema["type"] == "function"
    assert tool_schema["function"]["name"] == "add"
    assert set(tool_schema["function"]["parameters"]["required"]) == {"a", "b"}


def test_stream_sums_to_text_tool_calls_and_usage(openai_server):
    server = openai_server(
        [Reply("Let me add.", tool_calls=[("add", {"a": 20, "b": 22}, "call_s")], usage=(30, 7))]
    )
    total = stream_sum(chat(server).bind_tools([add]), "add 20 and 22")
    assert total.content == "Let me add."
    assert total.tool_calls == [
        {"name": "add", "args": {"a": 20, "b": 22}, "id": "call_s", "type": "tool_call"}
    ]
    assert total.usage_metadata["input_tokens"] == 30
    assert total.usage_metadata["output_tokens"] == 7
    body = server.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"][0]["function"]["name"] == "add"


def test_stream_splits_tool_arguments_like_openai(openai_server):
    server = openai_server([Reply(tool_calls=[("add", {"a": 1, "b": 2}, "call_x")])])
    chunks = list(chat(server).bind_tools([add]).stream("go"))
    pieces = [tcc for c in chunks for tcc in c.tool_call_chunks]
    assert pieces[0]["id"] == "call_x" and pieces[0]["name"] == "add"
    assert all(p["id"] is None and p["name"] is None for p in pieces[1:])
    assert len(pieces) > 2
    assert "".join(p["args"] for p in pieces) == '{"a": 1, "b": 2}'


def test_stream_without_include_usage_sends_no_usage(openai_server):
    server = openai_server([Reply("plain")])
    llm = ChatOpenAI(
        base_url=server.url,
        api_key="test",
        model="scripted",
        use_responses_api=False,
        max_retries=0,
    )
    total = stream_sum(llm, "hi")  # stream_usage defaults off with a base_url
    assert total.content == "plain"
    assert total.usage_metadata is None
    assert "stream_options" not in server.requests[0]


def test_retry_after_ms_is_honoured_and_zero_falls_back_to_sdk_backoff(openai_server):
    """A 429 with retry-after-ms of 1 is retried at once; a 503 with "retry-after: 0" is not (an SDK
    quirk: only delays > 0 are honoured, so the client sleeps its default backoff of 0.5 s minus up
    to 25% jitter; hence HTTPError's default retry_after_ms=1). Compared side by side, as gaps
    between the requests' arrivals at the server."""
    fast = openai_server([HTTPError(429), Reply("after retry")])
    assert chat(fast, max_retries=2).invoke("hi").content == "after retry"
    assert [h["x-stainless-retry-count"] for h in fast.request_headers] == ["0", "1"]
    slow = openai_server([HTTPError(503, retry_after_ms=0), Reply("ok")])
    assert chat(slow, max_retries=1).invoke("hi").content == "ok"
    fast_gap = fast.request_times[1] - fast.request_times[0]
    slow_gap = slow.request_times[1] - slow.request_times[0]
    assert slow_gap >= 0.3, (
        f"retry-after: 0 should fall back to the SDK's ~0.5 s backoff, waited {slow_gap:.3f}s"
    )
    assert fast_gap < slow_gap / 3, (
        f"retry-after-ms=1 waited {fast_gap:.3f}s against the backoff's {slow_gap:.3f}s"
    )


@pytest.mark.parametrize("status", [500, 503])
def test_server_error_without_retries_raises(openai_server, status):
    server = openai_server([HTTPError(status, "boom"), Reply("never sent")])
    with pytest.raises(openai.InternalServerError) as info:
        chat(server, max_retries=0).invoke("hi")
    assert info.value.status_code == status
    assert info.value.body["message"] == "boom"
    assert server.remaining == 1


def test_rate_limit_without_retries_raises(openai_server):
    server = openai_server([HTTPError(429)])
    with pytest.raises(openai.RateLimitError):
        chat(server, max_retries=0).invoke("hi")


def test_malformed_tool_call_becomes_invalid_tool_call(openai_server):
    server = openai_server([malformed_tool_call("add", '{"x": 1', "call_bad")])
    msg = chat(server).bind_tools([add]).invoke("go")
    assert msg.tool_calls == []
    [bad] = msg.invalid_tool_calls
    assert (bad["name"], bad["args"], bad["id"]) == ("add", '{"x": 1', "call_bad")
    assert "are not valid JSON" in bad["error"]


def test_streamed_truncated_json_is_repaired_by_partial_parser(openai_server):
    # Surprise: when streaming, langchain-core parses tool args with parse_partial_json, which
    # closes the truncated object, so '{"x": 1' becomes a *valid* call; only unrepairable text is an
    # invalid call.
    server = openai_server(
        [malformed_tool_call("add", '{"x": 1'), malformed_tool_call("add", "not json")]
    )
    repaired = stream_sum(chat(server), "go")
    assert repaired.tool_calls[0]["args"] == {"x": 1} and repaired.invalid_tool_calls == []
    broken = stream_sum(chat(server), "go")
    assert broken.tool_calls == []
    assert broken.invalid_tool_calls[0]["args"] == "not json"
    assert broken.invalid_tool_calls[0]["error"] is None


def test_exhausted_script_is_a_clear_500(openai_server):
    server = openai_server([Reply("only one")])
    llm = chat(server)
    llm.invoke("first")
    with pytest.raises(openai.InternalServerError, match="script exhausted"):
        llm.invoke("second")
    assert len(server.requests) == 2


def test_tool_result_round_trip_is_recorded(openai_server):
    server = openai_server([Reply(tool_calls=[("add", {"a": 2, "b": 3}, "call_r")]), Reply("5")])
    llm = chat(server).bind_tools([add])
    messages = [("user", "2+3?")]
    ai = llm.invoke(messages)
    tool_msg = add.invoke(ai.tool_calls[0])
    assert llm.invoke([*messages, ai, tool_msg]).content == "5"
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == "call_r"
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert sent[2] == {"role": "tool", "content": "5", "tool_call_id": "call_r"}


def test_async_invoke(openai_server):
    server = openai_server([Reply("async hello", usage=(5, 2))])
    msg = asyncio.run(chat(server).ainvoke("hi"))
    assert msg.content == "async hello" and msg.usage_metadata["total_tokens"] == 7


def test_context_manager_stops_server():
    with OpenAIServer([]) as server:
        url = server.url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/models", timeout=1)


def test_unknown_route_is_404(openai_server):
    server = openai_server([])
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{server.url}/embeddings", data=b"{}", timeout=2)
    assert info.value.code == 404
    assert json.loads(info.value.read())["error"]["type"] == "not_found_error"
