"""A scriptable OpenAI-compatible chat-completions server for tests (stdlib only, no network).

Each request to ``POST /v1/chat/completions`` consumes the next turn of a script::

    script = [HTTPError(429), Reply("hi", usage=(12, 3)),
              Reply(tool_calls=[("add", {"a": 1}, "call_1")])]
    with OpenAIServer(script) as server:
        llm = ChatOpenAI(base_url=server.url, api_key="test", model="scripted",
                         stream_usage=True, use_responses_api=False, max_retries=2)
        ...
        assert server.requests[0]["messages"][-1]["content"] == "..."

In pytest, import the fixture once
(``from openai_server import openai_server_fixture  # noqa: F401``) and take ``openai_server`` as
an argument: it is a factory ``openai_server(script) -> OpenAIServer`` whose servers are stopped
after the test.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# OpenAI sends tool-call arguments in several deltas; clients must concatenate them.
STREAM_ARG_PIECES = 3


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str  # a str is sent verbatim, so it may be invalid JSON
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")

    @property
    def raw_arguments(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    """A successful completion. ``tool_calls`` items may be ToolCall or
    (name, arguments[, id]) tuples."""

    content: str = ""
    tool_calls: list[ToolCall | tuple] = field(default_factory=list)
    # (prompt_tokens, completion_tokens); None: estimated from text
    usage: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.tool_calls = [
            tc if isinstance(tc, ToolCall) else ToolCall(*tc) for tc in self.tool_calls
        ]


@dataclass
class HTTPError:
    """An OpenAI-style error response.

    ``retry_after_ms`` is sent as ``retry-after-ms`` and (floored to seconds) ``retry-after``. The
    openai SDK prefers ``retry-after-ms`` and ignores a delay of 0, falling back to its own ~0.5 s
    backoff, so the default of 1 ms is what keeps client retries fast. None sends neither header.
    ``{authorization}`` in ``message`` is replaced by the request's Authorization header, as a
    careless proxy echoes it.
    """

    status: int = 500
    message: str | None = None
    retry_after_ms: int | None = 1


@dataclass
class Hang:
    """A server that stops answering: the request waits ``seconds`` (default: the test's whole
    length) before the connection closes without a reply."""

    seconds: float = 3600.0


def malformed_tool_call(
    name: str = "tool", arguments: str = '{"x": 1', id: str = "call_malformed"
) -> Reply:
    """A reply whose only tool call has arguments that are not valid JSON."""
    return Reply(tool_calls=[ToolCall(name, arguments, id)])


Turn = Reply | HTTPError | Hang

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "service_unavailable",
}


class OpenAIServer:
    """Serves ``script`` turns in order on 127.0.0.1; ``url`` ends with ``/v1``."""

    def __init__(self, script: list[Turn], model: str = "scripted") -> None:
        self.script = list(script)
        self.model = model
        # parsed JSON bodies of chat-completion requests, in order
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []  # lower-cased headers of the same requests
        self.request_times: list[float] = []  # time.monotonic() at each request's arrival
        self._lock = threading.Lock()
        self.hung = threading.Event()  # set on stop: hung requests end
        self._next = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def remaining(self) -> int:
        return len(self.script) - self._next

    def start(self) -> OpenAIServer:
        self._httpd = _Server(("127.0.0.1", 0), _make_handler(self))
        # A short poll interval makes stop() return in ~10 ms, not serve_forever's default 0.5 s.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.hung.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _take_turn(self, body: dict[str, Any], headers: dict[str, str]) -> Turn | None:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
            self.request_times.append(time.monotonic())
            if self._next >= len(self.script):
                return None
            self._next += 1
            return self.script[self._next - 1]


class _Server(ThreadingHTTPServer):
    # The client keeps connections alive; don't make shutdown wait for it to hang up.
    block_on_close = False
    daemon_threads = True


def _make_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, delayed ACKs add ~40 ms a request.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            return self._send_error(404, f"no route GET {self.path}")
        model = {"id": self.owner.model, "object": "model", "created": 0, "owned_by": "tests"}
        self._send_json(200, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        raw = self.rfile.read(length)
        if self.path != "/v1/chat/completions":
            return self._send_error(404, f"no route POST {self.path}")
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as e:
            return self._send_error(400, f"request body is not JSON: {e}")
        turn = self.owner._take_turn(body, {k.lower(): v for k, v in self.headers.items()})
        if turn is None:
            n = len(self.owner.script)
            return self._send_error(
                500, f"script exhausted: request #{len(self.owner.requests)} but only {n} turns"
            )
        if isinstance(turn, Hang):
            self.owner.hung.wait(turn.seconds)
            self.close_connection = True
            return None
        if isinstance(turn, HTTPError):
            message = (turn.message or "").replace(
                "{authorization}", self.headers.get("authorization", "")
            )
            return self._send_error(turn.status, message or None, turn.retry_after_ms)
        if body.get("stream"):
            return self._send_stream(turn, body)
        self._send_json(200, _completion(turn, body, self.owner.model))

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(
        self, status: int, message: str | None = None, retry_after_ms: int | None = None
    ) -> None:
        kind = _ERROR_TYPES.get(status, "api_error")
        error = {
            "message": message or f"scripted {status} error",
            "type": kind,
            "param": None,
            "code": kind,
        }
        headers = {}
        if retry_after_ms is not None:
            headers = {
                "retry-after-ms": str(retry_after_ms),
                "retry-after": str(retry_after_ms // 1000),
            }
        self._send_json(status, {"error": error}, headers)

    def _send_stream(self, turn: Reply, body: dict[str, Any]) -> None:
        # No content-length: the end of the stream is marked by closing the connection.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in _stream_events(turn, body, self.owner.model):
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _usage(turn: Reply, body: dict[str, Any]) -> dict[str, int]:
    if turn.usage is not None:
        prompt, completion = turn.usage
    else:  # ~4 characters per token, like OpenAI's rule of thumb
        prompt = max(1, len(json.dumps(body.get("messages", []))) // 4)
        completion = max(
            1, (len(turn.content) + sum(len(tc.raw_arguments) for tc in turn.tool_calls)) // 4
        )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _finish_reason(turn: Reply) -> str:
    return "tool_calls" if turn.tool_calls else "stop"


def _envelope(
    obj: str, model: str, body: dict[str, Any], choices: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": obj,
        "created": int(time.time()),
        "model": body.get("model") or model,
        "system_fingerprint": "fp_scripted",
        "choices": choices,
    }


def _completion(turn: Reply, body: dict[str, Any], model: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": turn.content or None,
        "refusal": None,
    }
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": tc.id,
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.raw_arguments},
            }
            for tc in turn.tool_calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": _finish_reason(turn),
    }
    return {**_envelope("chat.completion", model, body, [choice]), "usage": _usage(turn, body)}


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _deltas(turn: Reply) -> Iterator[tuple[dict[str, Any], str | None]]:
    """(delta, finish_reason) pairs in the order OpenAI streams them."""
    yield (
        {"role": "assistant", "content": "" if turn.content or not turn.tool_calls else None},
        None,
    )
    for piece in _split(turn.content, STREAM_ARG_PIECES) if turn.content else []:
        yield {"content": piece}, None
    for i, tc in enumerate(turn.tool_calls):
        head = {
            "index": i,
            "id": tc.id,
            "type": "function",
            "function": {"name": tc.name, "arguments": ""},
        }
        yield {"tool_calls": [head]}, None
        for piece in _split(tc.raw_arguments, STREAM_ARG_PIECES):
            yield {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}, None
    yield {}, _finish_reason(turn)


def _stream_events(turn: Reply, body: dict[str, Any], model: str) -> Iterator[dict[str, Any]]:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = _envelope("chat.completion.chunk", model, body, [])
    for delta, finish in _deltas(turn):
        event = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            event["usage"] = None  # OpenAI sends usage: null on every chunk but the last
        yield event
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(turn, body)}


@pytest.fixture(name="openai_server")
def openai_server_fixture() -> Iterator[Callable[..., OpenAIServer]]:
    """Factory fixture: ``openai_server(script)`` returns a started server,
    stopped after the test."""
    servers: list[OpenAIServer] = []

    def start(script: list[Turn], **kwargs: Any) -> OpenAIServer:
        servers.append(OpenAIServer(script, **kwargs).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
