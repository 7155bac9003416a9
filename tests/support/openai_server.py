"""A local, scripted OpenAI-compatible Chat Completions server for tests.

Tests of model plumbing (``ChatOpenAI(base_url=...)``, streaming adapters,
token accounting, failure handling) should cross a real HTTP boundary, not a
mocked client: this server is a ``ThreadingHTTPServer`` on 127.0.0.1 and a
free port, speaking enough of the API for ``langchain_openai``.

Each chat request is answered, in order of precedence, by a queued failure
(``fail_next``), the next item of the script, or the ``responder`` callable.
When all three are empty the request fails with HTTP 500 and a message that
says the script ran out, so a test that makes one call too many fails loudly.

Example::

    with OpenAICompatServer(script=[Reply.call("run_sql", {"sql": "select 1"}), "done"]) as srv:
        model = ChatOpenAI(model="m", base_url=srv.base_url, api_key="test", max_retries=0)
        ...
        assert srv.requests[0]["tools"][0]["function"]["name"] == "run_sql"

Remember ``max_retries=0`` on the client when a test injects failures: the
OpenAI client retries 429 and 5xx twice by default, which would consume the
next scripted replies.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["Failure", "OpenAICompatServer", "Reply", "ToolCall", "Usage"]


@dataclass(frozen=True)
class Usage:
    """Token counts reported for one reply."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        """The ``usage`` object of the API."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model makes; ``id`` defaults to ``call_<n>``."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One scripted assistant turn: text, tool calls, or both.

    Attributes:
        text: Assistant content.
        tool_calls: Calls to emit; ``finish_reason`` becomes ``tool_calls``.
        usage: Token counts; estimated from the sizes (chars / 4) when omitted.
        chunk_size: Characters per streamed content or argument fragment.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    chunk_size: int = 4

    @classmethod
    def say(cls, text: str, *, usage: Usage | None = None) -> Reply:
        """A plain text reply."""
        return cls(text=text, usage=usage)

    @classmethod
    def call(
        cls,
        name: str,
        args: dict[str, Any] | None = None,
        *,
        id: str | None = None,
        text: str = "",
        usage: Usage | None = None,
    ) -> Reply:
        """A reply with a single tool call."""
        return cls(text=text, tool_calls=(ToolCall(name, args or {}, id),), usage=usage)

    @classmethod
    def calls(cls, *calls: ToolCall, usage: Usage | None = None) -> Reply:
        """A reply with several (parallel) tool calls."""
        return cls(tool_calls=calls, usage=usage)


@dataclass(frozen=True)
class Failure:
    """An HTTP error to answer one request with, e.g. 500 or 429."""

    status: int = 500
    message: str = "scripted failure"
    retry_after: float | None = None

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            msg = f"a failure needs an HTTP error status (400-599), got {self.status}"
            raise ValueError(msg)


ScriptItem = Reply | Failure | str
Responder = Callable[[dict[str, Any]], ScriptItem]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        """Serve the model list."""
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            owner = self.server.owner
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": owner.model, "object": "model", "created": 0, "owned_by": "test"}
                    ],
                },
            )
        else:
            self._error(404, f"no route for GET {self.path}", "not_found")

    def do_POST(self) -> None:
        """Serve chat completions."""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route for POST {self.path}", "not_found")
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._error(400, f"request body is not JSON: {exc}", "invalid_request_error")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(400, "request needs a 'messages' list", "invalid_request_error")
            return
        owner = self.server.owner
        item = owner._record_and_next(body, dict(self.headers.items()))
        if isinstance(item, Failure):
            self._error(item.status, item.message, "scripted_failure", item.retry_after)
            return
        reply = Reply.say(item) if isinstance(item, str) else item
        model = str(body.get("model") or owner.model)
        usage = reply.usage or _estimate_usage(body, reply)
        calls = owner._number_calls(reply)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(model, reply, calls, usage if include_usage else None)
        else:
            self._json(200, _completion(model, reply, calls, usage))

    def _json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(
        self, status: int, message: str, kind: str, retry_after: float | None = None
    ) -> None:
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else None
        payload = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
        self._json(status, payload, headers)

    def _stream(self, model: str, reply: Reply, calls: list[ToolCall], usage: Usage | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for chunk in _chunks(model, reply, calls, usage):
            self.wfile.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
            self.wfile.flush()
            if self.server.owner.chunk_delay:
                time.sleep(self.server.owner.chunk_delay)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: OpenAICompatServer


def _estimate_usage(body: dict[str, Any], reply: Reply) -> Usage:
    prompt = json.dumps(body.get("messages"), ensure_ascii=False) + json.dumps(
        body.get("tools") or []
    )
    completion = reply.text + "".join(
        c.name + json.dumps(c.args, ensure_ascii=False) for c in reply.tool_calls
    )
    return Usage(max(1, len(prompt) // 4), max(1, len(completion) // 4))


def _finish_reason(calls: list[ToolCall]) -> str:
    return "tool_calls" if calls else "stop"


def _envelope(model: str, kind: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-dataseer-test",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }


def _completion(model: str, reply: Reply, calls: list[ToolCall], usage: Usage) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args, ensure_ascii=False)},
            }
            for c in calls
        ]
    return {
        **_envelope(model, "chat.completion"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(calls),
            }
        ],
        "usage": usage.as_json(),
    }


def _pieces(text: str, size: int) -> Iterator[str]:
    size = max(1, size)
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _chunks(
    model: str, reply: Reply, calls: list[ToolCall], usage: Usage | None
) -> Iterator[dict[str, Any]]:
    """The SSE payloads of one streamed reply, shaped like OpenAI's."""
    base = _envelope(model, "chat.completion.chunk")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        payload = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if usage is not None:
            payload["usage"] = None
        return payload

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.text, reply.chunk_size):
        yield chunk({"content": piece})
    for index, call in enumerate(calls):
        head = {"index": index, "id": call.id, "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        arguments = json.dumps(call.args, ensure_ascii=False)
        for piece in _pieces(arguments, reply.chunk_size):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(calls))
    if usage is not None:
        yield {**base, "choices": [], "usage": usage.as_json()}


class OpenAICompatServer:
    """A scripted OpenAI-compatible server on 127.0.0.1 and a free port.

    Args:
        script: Replies in order; a ``str`` is a text reply, a ``Failure`` an
            HTTP error.
        responder: Decides the reply from the request body once the script is
            used up (or when there is no script).
        model: The id listed by ``GET /v1/models`` and echoed when a request
            names none.
        chunk_delay: Seconds to sleep between streamed chunks, to make
            streaming observable in timing-sensitive tests.

    Attributes:
        requests: Every chat request body received, in order.
        request_headers: The headers of those requests (lower-case names), same order.
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        responder: Responder | None = None,
        model: str = "dataseer-test-model",
        chunk_delay: float = 0.0,
    ) -> None:
        if chunk_delay < 0:
            msg = f"chunk_delay must be >= 0, got {chunk_delay}"
            raise ValueError(msg)
        self.model = model
        self.chunk_delay = chunk_delay
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self._script: deque[ScriptItem] = deque(script)
        self._failures: deque[Failure] = deque()
        self._lock = threading.Lock()
        self._call_counter = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The URL to pass as ``base_url`` to OpenAI clients (ends in ``/v1``)."""
        if self._server is None:
            msg = "the server is not running; use it as a context manager or call start()"
            raise RuntimeError(msg)
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def remaining(self) -> int:
        """Scripted items not yet consumed."""
        with self._lock:
            return len(self._script)

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the script while the server runs."""
        with self._lock:
            self._script.extend(items)

    def fail_next(
        self,
        status: int = 500,
        message: str = "scripted failure",
        *,
        count: int = 1,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next ``count`` chat requests with an HTTP error, before the script."""
        if count < 1:
            msg = f"count must be >= 1, got {count}"
            raise ValueError(msg)
        failure = Failure(status, message, retry_after)
        with self._lock:
            self._failures.extend([failure] * count)

    def start(self) -> OpenAICompatServer:
        """Bind a free port and serve in a daemon thread."""
        if self._server is not None:
            msg = "the server is already running"
            raise RuntimeError(msg)
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="openai-compat-server",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> OpenAICompatServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _record_and_next(self, body: dict[str, Any], headers: dict[str, str]) -> ScriptItem:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append({k.lower(): v for k, v in headers.items()})
            if self._failures:
                return self._failures.popleft()
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Failure(
            500, f"OpenAICompatServer script exhausted after {len(self.requests) - 1} replies"
        )

    def _number_calls(self, reply: Reply) -> list[ToolCall]:
        numbered = []
        with self._lock:
            for call in reply.tool_calls:
                self._call_counter += 1
                numbered.append(
                    ToolCall(call.name, call.args, call.id or f"call_{self._call_counter}")
                )
        return numbered
