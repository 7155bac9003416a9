"""dataseer's own HTTP app, merged into the LangGraph server (``langgraph.json`` ``http.app``).

The LangGraph server makes this Starlette app the outer application: its
middleware wraps every route (the LangGraph API included) and its exception
handlers win. dataseer uses that for three things:

- **one error shape**: every HTTP error leaves as
  ``{"error": {"code": ..., "message": ...}}`` with the status carried by the
  exception class (``HttpError`` subclasses here; LangGraph's own
  ``{"detail": ...}`` errors and the 401s of the auth layer are rewritten);
- **input hygiene** before anything parses a body: a size limit
  (``DATASEER_MAX_REQUEST_BYTES``), strict UTF-8, well-formed JSON, a length
  limit on run input messages, and the default ``multitask_strategy`` for a
  second run on a busy thread (``DATASEER_MULTITASK_STRATEGY``);
- **runtime tuning** the server exposes no setting for: the per-run timeout
  (``DATASEER_RUN_TIMEOUT``), the SSE keepalive interval
  (``DATASEER_KEEPALIVE_SECONDS``) and, in the dev runtime, how often thread
  records reach disk.

To add routes (chat bots, plugins, pages), append to ``ROUTES`` below.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dataseer.config import Settings, env_settings
from dataseer.errors import DataseerError

__all__ = [
    "ROUTES",
    "BadRequestError",
    "ConflictError",
    "ForbiddenError",
    "HttpError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RequestGuard",
    "UnauthorizedError",
    "UnprocessableEntityError",
    "app",
    "build_app",
    "error_body",
]

logger = logging.getLogger("dataseer.server")


class HttpError(DataseerError):
    """An error with an HTTP status; raise a subclass from any dataseer route."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"


class BadRequestError(HttpError):
    """Malformed input: not JSON, not UTF-8, wrong shape (400)."""

    status = 400
    code = "bad_request"


class UnauthorizedError(HttpError):
    """No or bad credentials (401)."""

    status = 401
    code = "unauthorized"


class ForbiddenError(HttpError):
    """Authenticated, but not allowed (403)."""

    status = 403
    code = "forbidden"


class NotFoundError(HttpError):
    """No such thing, or not yours (404)."""

    status = 404
    code = "not_found"


class ConflictError(HttpError):
    """The thing is busy or already exists (409)."""

    status = 409
    code = "conflict"


class PayloadTooLargeError(HttpError):
    """The request or one of its messages is over the configured limit (413)."""

    status = 413
    code = "payload_too_large"


class UnprocessableEntityError(HttpError):
    """Well-formed JSON that does not validate (422)."""

    status = 422
    code = "invalid_request"


_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
}


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """The one JSON error shape of dataseer."""
    return {"error": {"code": code or _CODES.get(status, f"http_{status}"), "message": message}}


def _error_response(status: int, message: str, code: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, code), status_code=status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return _error_response(exc.status, str(exc), exc.code)


async def _starlette_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    response = _error_response(exc.status_code, str(exc.detail))
    for key, value in (exc.headers or {}).items():
        response.headers[key] = value
    return response


# --- input hygiene and the error shape, for every route -------------------------------

_BODY_METHODS = {"POST", "PUT", "PATCH"}
_RUN_CREATE = re.compile(r"^(?:/threads/[^/]+)?/runs(?:/stream|/wait)?$")
_THREAD_RUN = re.compile(r"^/threads/[^/]+/runs(?:/stream|/wait)?$")


def _message_chars(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            _message_chars(part if isinstance(part, str) else part.get("text", ""))
            for part in content
            if isinstance(part, str | dict)
        )
    return 0


class RequestGuard:
    """ASGI middleware: body limits and validation in, one error shape out.

    Bodies are read once, checked, and replayed to the app; responses with a
    status of 400 or more and a JSON body are rewritten into the one shape.
    Streaming responses (status 200) pass through untouched.
    """

    def __init__(self, app: ASGIApp, settings: Settings | None = None) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the body, replay it, and shape any error response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.settings or env_settings()
        send = _shaping_send(send)
        if scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read_body(scope, receive, settings.max_request_bytes)
            body = self._check(scope, body, settings)
        except HttpError as exc:
            await _error_response(exc.status, str(exc), exc.code)(scope, receive, send)
            return
        scope = _with_length(scope, len(body))
        await self.app(scope, _replay(body, receive), send)

    @staticmethod
    async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            msg = f"request body of {int(declared)} bytes is over the limit of {limit} bytes"
            raise PayloadTooLargeError(msg)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                msg = f"request body is over the limit of {limit} bytes"
                raise PayloadTooLargeError(msg)
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(chunks)

    @staticmethod
    def _check(scope: Scope, body: bytes, settings: Settings) -> bytes:
        headers = dict(scope.get("headers") or [])
        content_type = headers.get(b"content-type", b"").decode("latin-1").lower()
        if not body or ("json" not in content_type and content_type):
            return body
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"request body is not valid UTF-8 (byte {exc.start})"
            raise BadRequestError(msg) from exc
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            msg = (
                f"request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            )
            raise BadRequestError(msg) from exc
        path = scope.get("path", "")
        if not (isinstance(payload, dict) and _RUN_CREATE.match(path)):
            return body
        changed = False
        messages = (
            (payload.get("input") or {}).get("messages")
            if isinstance(payload.get("input"), dict)
            else None
        )
        if isinstance(messages, list):
            for message in messages:
                chars = _message_chars(message)
                if chars > settings.max_message_chars:
                    msg = (
                        f"an input message has {chars} characters; the limit is "
                        f"{settings.max_message_chars} (DATASEER_MAX_MESSAGE_CHARS)"
                    )
                    raise PayloadTooLargeError(
                        msg,
                    )
        if _THREAD_RUN.match(path) and not payload.get("multitask_strategy"):
            payload["multitask_strategy"] = settings.multitask_strategy
            changed = True
        return json.dumps(payload).encode() if changed else body


def _with_length(scope: Scope, length: int) -> Scope:
    headers = [(k, v) for k, v in scope.get("headers") or [] if k != b"content-length"]
    headers.append((b"content-length", str(length).encode()))
    return {**scope, "headers": headers}


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _shaping_send(send: Send) -> Send:
    """Rewrite JSON error responses (status >= 400) into the one error shape."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def shaping(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            content_type = dict(message.get("headers") or []).get(b"content-type", b"")
            is_json = b"json" in content_type
            if message["status"] >= 400 and is_json:
                start = message
                return
            await send(message)
            return
        if message["type"] == "http.response.body" and start is not None:
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            status = int(start["status"])
            body = _reshape(status, b"".join(chunks))
            kept = [(k, v) for k, v in start.get("headers") or [] if k != b"content-length"]
            kept.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": kept})
            await send({"type": "http.response.body", "body": body, "more_body": False})
            start = None
            return
        await send(message)

    return shaping


def _reshape(status: int, body: bytes) -> bytes:
    try:
        data = json.loads(body or b"null")
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return body
    message: Any = data.get("detail", data.get("message")) if isinstance(data, dict) else data
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False) if message is not None else "error"
    return json.dumps(error_body(status, message), ensure_ascii=False).encode()


# --- runtime tuning ---------------------------------------------------------------------


def _heartbeat(interval: float) -> Callable[[Send], Awaitable[None]]:
    async def heartbeat(send: Send) -> None:
        payload = b": heartbeat\r\n\r\n"
        while True:
            await asyncio.sleep(interval)
            await send({"type": "http.response.body", "body": payload, "more_body": True})

    return heartbeat


def tune_runtime(settings: Settings) -> list[str]:
    """Apply the run timeout, keepalive and dev flush interval to the LangGraph server.

    The server reads these as module constants (``BG_JOB_TIMEOUT_SECS``, a
    5-second heartbeat, a 10-second flush), looked up on every use, so
    setting them here takes effect for every later run and stream. Returns
    what was applied, for the start-up log.
    """
    import sys

    applied: list[str] = []
    if "langgraph_api.config" not in sys.modules:  # not inside a LangGraph server
        return applied
    try:
        from langgraph_api import sse, worker

        worker.BG_JOB_TIMEOUT_SECS = settings.run_timeout
        sse.sse_heartbeat = _heartbeat(settings.keepalive_seconds)
        applied += [
            f"run_timeout={settings.run_timeout:g}s",
            f"keepalive={settings.keepalive_seconds:g}s",
        ]
    except ImportError:  # pragma: no cover - the app outside a LangGraph server
        return applied
    try:
        from langgraph_runtime_inmem import _persistence

        _persistence._flush_interval = settings.state_flush_seconds
        applied.append(f"state_flush={settings.state_flush_seconds:g}s")
    except ImportError:  # pragma: no cover - the licensed runtime has no flush loop
        pass
    return applied


# --- routes -----------------------------------------------------------------------------


async def health(request: Request) -> JSONResponse:
    """Liveness plus what this server is configured for (no secrets)."""
    settings = env_settings()
    storage = "postgres" if (settings.database_url or "").startswith("postgres") else "sqlite"
    if settings.auth_dev:
        auth_mode = "dev"
    elif settings.auth_secret or settings.auth_jwks_file:
        auth_mode = "jwt"
    else:
        auth_mode = "closed"
    return JSONResponse(
        {
            "ok": True,
            "auth": auth_mode,
            "storage": storage,
            "limits": {
                "max_request_bytes": settings.max_request_bytes,
                "max_message_chars": settings.max_message_chars,
                "run_timeout": settings.run_timeout,
                "keepalive_seconds": settings.keepalive_seconds,
                "multitask_strategy": settings.multitask_strategy,
            },
        }
    )


from dataseer.server.wecom.routes import wecom_routes  # noqa: E402  # mounted just below

ROUTES: list[BaseRoute] = [
    Route("/dataseer/health", health, methods=["GET"]),
    *wecom_routes(),  # /wecom/callback: the WeCom intelligent bot (DATASEER_WECOM_*)
]
"""dataseer's own routes. Mount more here (chat bots, plugins); they share the error shape."""


def build_app(routes: list[BaseRoute] | None = None, settings: Settings | None = None) -> Starlette:
    """The Starlette app: ``routes`` (default ``ROUTES``), the guard, the error handlers."""
    from starlette.middleware import Middleware

    return Starlette(
        routes=list(ROUTES if routes is None else routes),
        middleware=[Middleware(RequestGuard, settings=settings)],
        exception_handlers={HttpError: _http_error, HTTPException: _starlette_http_error},
    )


_applied = tune_runtime(env_settings())
if _applied:
    logger.info("dataseer server tuning: %s", ", ".join(_applied))

app = build_app()
