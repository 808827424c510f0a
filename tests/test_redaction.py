"""One redaction for everything mlxport prints or writes: a provider that echoes the API key in
its error body, and a model that repeats a bearer token, leave no secret on the terminal or in
any file of the run (run.json, report.md, transcript, log, checkpoints, session files)."""

import json

from langchain_core.messages import AIMessage
from openai_server import HTTPError, OpenAIServer, Reply, ToolCall

from mlxport.redaction import REDACTED, redact, redact_text

KEY = "sk-proj-Zq8X1vLr7Tn2Wc5Yb0Ka9Ud3Ej6Hm4"
BEARER = "Bearer tok_9f8e7d6c5b4a39281706"


def test_shapes_labels_and_environment_values_are_redacted_but_counts_stay(monkeypatch):
    monkeypatch.setenv("MY_PROVIDER_TOKEN", "plain-looking-value-42")
    text = redact_text(
        f"key {KEY}; header Authorization: {BEARER}; url https://bob:hunter22@host/v1; "
        "api_key=abcd1234efgh; x-api-key: 'k9k9k9k9'; "
        "google AIzaSyA1234567890abcdefghijklmnopqrstu; "
        "env plain-looking-value-42; max_tokens=4096, tokens used 1200"
    )
    for secret in (
        KEY,
        "tok_9f8e7d6c5b4a39281706",
        "hunter22",
        "abcd1234efgh",
        "k9k9k9k9",
        "AIzaSyA1234567890",
        "plain-looking-value-42",
    ):
        assert secret not in text
    assert "max_tokens=4096, tokens used 1200" in text
    assert "Authorization: Bearer [redacted]" in text

    event = redact(
        {
            "max_tokens": 4096,
            "tokens": [10, 2],
            "input_tokens": 3,
            "api_key": "short",
            "access_token": "abc",
            "headers": {"Authorization": "x"},
            "note": [f"({KEY})"],
        }
    )
    assert event["max_tokens"] == 4096 and event["tokens"] == [10, 2] and event["input_tokens"] == 3
    assert (
        event["api_key"] == event["access_token"] == event["headers"]["Authorization"] == REDACTED
    )
    assert event["note"] == [f"({REDACTED})"]


def test_chat_messages_are_rebuilt_only_where_a_secret_was():
    clean = AIMessage(
        content="no secret here", tool_calls=[{"name": "finish", "args": {}, "id": "c1"}]
    )
    assert redact(clean) is clean
    dirty = AIMessage(
        content=f"the key is {KEY}",
        tool_calls=[{"name": "compile_kernel", "id": "c2", "args": {"note": BEARER}}],
    )
    scrubbed = redact(dirty)
    assert KEY not in scrubbed.content and BEARER not in str(scrubbed.tool_calls)
    # a copy, not a mutation
    assert scrubbed.tool_calls[0]["name"] == "compile_kernel" and KEY in dirty.content


def test_a_port_whose_provider_echoes_the_key_leaves_it_nowhere(tmp_path, cli):
    script = [
        Reply(
            content=f"I will send {BEARER} along.", tool_calls=[ToolCall("read_cuda_source", {})]
        ),
        HTTPError(
            status=400, message="bad request from client with Authorization: {authorization}"
        ),
    ]
    out = tmp_path / "out"
    with OpenAIServer(script) as server:
        result = cli(
            "port",
            "--task",
            "vector_add",
            "--model",
            "openai:scripted-model",
            "--base-url",
            server.url,
            "--backend",
            "sim",
            "--out",
            str(out),
            env={"OPENAI_API_KEY": KEY},
            cwd=tmp_path,
        )
        sent = [h.get("authorization", "") for h in server.request_headers]
    assert any(KEY in h for h in sent), "the key was not used: the test proves nothing"
    # 1: not verified
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    folder = out / "vector_add"
    run = json.loads((folder / "run.json").read_text())
    assert (
        run["stop_reason"].startswith("model_error")
        and "Authorization: Bearer [redacted]" in run["stop_reason"]
    )
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert {
        "run.json",
        "report.md",
        "transcript.jsonl",
        "log.jsonl",
        "checkpoints.sqlite",
        "session.json",
    } <= {p.name for p in files}
    for where, data in [
        ("stdout", result.stdout.encode()),
        ("stderr", result.stderr.encode()),
        *((str(p.relative_to(folder)), p.read_bytes()) for p in files),
    ]:
        assert KEY.encode() not in data, f"the API key reached {where}"
        assert b"tok_9f8e7d6c5b4a39281706" not in data, f"the bearer token reached {where}"
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    assert any("tokens" in e for e in log), "counts named tokens must survive redaction"
