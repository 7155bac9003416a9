"""The WeCom intelligent bot (企业微信智能机器人) callback on dataseer's http app.

``GET /wecom/callback`` is URL verification: WeCom sends ``msg_signature``,
``timestamp``, ``nonce`` and an encrypted ``echostr``; we answer with the
decrypted echo. ``POST /wecom/callback`` carries ``{"encrypt": ...}``; the
decrypted JSON is a user message (``msgtype`` text, voice, mixed), a stream
refresh (``msgtype: stream``) or an event.

Every callback is checked, in this order, and rejected with a 4xx in the
server's one error shape, logged with its reason, before anything runs:
timestamp within ``window`` seconds of our clock (stale), ``msg_signature``
(forged), the (timestamp, nonce) pair not seen before within the window
(replayed; remembered only after the signature verified, so forgeries cannot
fill the cache), then decryption and the receive-id (wrong corp / bot id).

A message runs the dataseer graph through the LangGraph server's own client
(``langgraph_sdk.get_client()`` with no URL is the in-process server), so
threads live in the server's checkpointer like any API thread, owned by the
mapped dataseer user (``metadata.owner``), and the run carries that user's
identity in ``configurable`` and so their data permissions. WeCom user ids map
to dataseer users through :mod:`dataseer.server.wecom.mapping`; an unmapped
user is told so and nothing runs. Leading @mentions are stripped.

Replies:

* ``stream`` (default): the first reply is a ``msgtype: stream`` message with
  a new ``stream.id`` and ``finish: false``; WeCom then polls with refresh
  callbacks and each gets the answer so far (thinking folded in ``<think>``),
  until ``finish: true``, which also carries the charts as ``msg_item`` images;
* ``markdown``: the whole answer (without the thinking) as one ``markdown``
  message — posted to the callback's ``response_url`` when it has one (the
  callback itself is acknowledged at once), else as the passive reply.

Stream state is kept in this process (one server process; a restart loses
in-flight streams, and WeCom's next refresh is answered "expired").
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from dataseer.server.stream_adapter import (
    STREAM_MODES,
    THINK_FOLD,
    MarkdownFolder,
    StreamAdapter,
)
from dataseer.server.wecom.crypto import WeComCrypto, WeComCryptoError
from dataseer.server.wecom.mapping import DataseerUser, WeComSettings, thread_id_for

__all__ = ["CALLBACK_PATH", "MAX_CONTENT_BYTES", "ReplayGuard", "WeComBot", "wecom_routes"]

logger = logging.getLogger("dataseer.server.wecom")

CALLBACK_PATH = "/wecom/callback"
MAX_CONTENT_BYTES = 20480
"""WeCom's limit on a stream or markdown message's content (UTF-8 bytes)."""
MAX_STREAMS = 2000
MENTION = re.compile(r"^\s*(?:@\S+\s+)+")

NOT_MAPPED = (
    "抱歉，您的企业微信账号尚未开通 dataseer，请联系数据管理员。\n"
    "Sorry, your WeCom account is not linked to a dataseer user; ask your data admin."
)
TEXT_ONLY = "目前只能回答文字问题 / Only text questions are supported for now."
EXPIRED = "这次回答已过期，请重新提问 / This answer has expired; please ask again."


class RejectedError(Exception):
    """A callback that fails a check: HTTP ``status``, logged ``reason``."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def _reject_response(exc: RejectedError) -> JSONResponse:
    from dataseer.server.app import error_body  # the app imports this module

    code = "bad_request" if exc.status == 400 else f"wecom_{exc.reason}"
    return JSONResponse(error_body(exc.status, str(exc), code), status_code=exc.status)


@dataclass
class ReplayGuard:
    """Timestamp window plus a cache of (timestamp, nonce) seen inside it."""

    window: float = 300.0
    clock: Callable[[], float] = time.time
    _seen: dict[tuple[str, str], float] = field(default_factory=dict)

    def check_fresh(self, timestamp: str) -> None:
        """Reject a timestamp outside ``window`` seconds of now (either way)."""
        try:
            sent = float(timestamp)
        except ValueError as exc:
            raise RejectedError(400, "timestamp", "timestamp is not a number") from exc
        if abs(self.clock() - sent) > self.window:
            raise RejectedError(403, "stale", "timestamp outside the accepted window")

    def remember(self, timestamp: str, nonce: str) -> None:
        """Reject a (timestamp, nonce) already used; remember this one."""
        now = self.clock()
        if len(self._seen) > 10000:
            self._seen = {k: t for k, t in self._seen.items() if t >= now - 2 * self.window}
        key = (timestamp, nonce)
        if key in self._seen:
            raise RejectedError(403, "replay", "this timestamp and nonce were already used")
        self._seen[key] = now


@dataclass
class _Stream:
    """One answer being produced: markdown so far, images, whether it is done."""

    folder: MarkdownFolder
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def finished(self) -> bool:
        return self.done.is_set()


def _fit(text: str, limit: int = MAX_CONTENT_BYTES) -> str:
    """Keep a message under WeCom's byte limit, cutting from the middle of thinking first."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    marker = "\n\n…\n\n"
    keep = limit - len(marker.encode("utf-8"))
    head = data[: keep // 3].decode("utf-8", "ignore")
    tail = data[-(keep - keep // 3) :].decode("utf-8", "ignore")
    return head + marker + tail


def _question(message: dict[str, Any]) -> str | None:
    kind = message.get("msgtype")
    if kind == "text":
        text = str((message.get("text") or {}).get("content") or "")
    elif kind == "voice":
        text = str((message.get("voice") or {}).get("content") or "")
    elif kind == "mixed":
        items = (message.get("mixed") or {}).get("msg_item") or []
        text = " ".join(
            str((i.get("text") or {}).get("content") or "")
            for i in items
            if isinstance(i, dict) and i.get("msgtype") == "text"
        )
    else:
        return None
    return MENTION.sub("", text).strip()


class WeComBot:
    """The callback handlers of one configured bot."""

    def __init__(
        self,
        settings: WeComSettings,
        *,
        client_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.settings = settings
        self.crypto = WeComCrypto(settings.token, settings.aes_key, settings.receive_id)
        self.replay = ReplayGuard(settings.window)
        self.streams: OrderedDict[str, _Stream] = OrderedDict()
        self.by_msgid: dict[str, str] = {}
        self._client_factory = client_factory or _in_process_client

    # --- checks ------------------------------------------------------------------------

    def _open(self, params: Any, encrypt: str | None) -> str:
        names = ("msg_signature", "timestamp", "nonce")
        missing = [n for n in names if not params.get(n)]
        if missing or not encrypt:
            missing += [] if encrypt else ["encrypt"]
            raise RejectedError(400, "missing", f"missing {', '.join(missing)}")
        timestamp, nonce = str(params["timestamp"]), str(params["nonce"])
        self.replay.check_fresh(timestamp)
        try:
            self.crypto.verify(str(params["msg_signature"]), timestamp, nonce, encrypt)
            self.replay.remember(timestamp, nonce)
            return self.crypto.decrypt(encrypt)
        except WeComCryptoError as exc:
            raise RejectedError(403, exc.reason, str(exc)) from exc

    def _reply(self, payload: dict[str, Any], nonce: str) -> JSONResponse:
        sealed = self.crypto.seal(
            json.dumps(payload, ensure_ascii=False), str(int(time.time())), nonce
        )
        return JSONResponse(sealed)

    # --- handlers ----------------------------------------------------------------------

    async def verify_url(self, request: Request) -> Response:
        """URL verification: the decrypted ``echostr`` as plain text."""
        try:
            echo = self._open(request.query_params, request.query_params.get("echostr"))
        except RejectedError as exc:
            self._log(request, exc)
            return _reject_response(exc)
        return PlainTextResponse(echo)

    async def receive(self, request: Request) -> Response:
        """A message, a stream refresh or an event."""
        try:
            body = await request.body()
            try:
                envelope = json.loads(body or b"{}")
            except ValueError as exc:
                raise RejectedError(400, "missing", "the body must be JSON {encrypt: ...}") from exc
            encrypt = envelope.get("encrypt") if isinstance(envelope, dict) else None
            plain = self._open(request.query_params, encrypt)
            try:
                message = json.loads(plain)
            except ValueError as exc:
                raise RejectedError(400, "payload", "the decrypted message is not JSON") from exc
            if not isinstance(message, dict):
                raise RejectedError(400, "payload", "the decrypted message is not an object")
        except RejectedError as exc:
            self._log(request, exc)
            return _reject_response(exc)
        nonce = str(request.query_params["nonce"])
        kind = message.get("msgtype")
        if kind == "stream":
            return self._refresh(message, nonce)
        if kind == "event":
            return Response(status_code=200)
        return await self._message(message, nonce)

    def _log(self, request: Request, exc: RejectedError) -> None:
        client = request.client.host if request.client else "?"
        logger.warning(
            "wecom callback rejected: %s (%s) from %s %s",
            exc.reason,
            exc,
            client,
            request.method,
        )

    async def _message(self, message: dict[str, Any], nonce: str) -> Response:
        sender = str((message.get("from") or {}).get("userid") or "")
        msgid = str(message.get("msgid") or "")
        if msgid and msgid in self.by_msgid and self.by_msgid[msgid] in self.streams:
            return self._stream_reply(self.by_msgid[msgid], nonce)
        user = self.settings.users.resolve(sender)
        question = _question(message)
        if user is None or not question:
            text = NOT_MAPPED if user is None else TEXT_ONLY
            logger.info("wecom message from %r not run: %s", sender, text.split("\n")[0])
            return self._reply({"msgtype": "markdown", "markdown": {"content": text}}, nonce)
        chat = str(message.get("chatid") or "") if message.get("chattype") == "group" else ""
        thread_id = thread_id_for(self.settings.receive_id, chat, sender, self.settings.threads)
        streaming = self.settings.reply == "stream"
        stream_id = uuid.uuid4().hex
        state = _Stream(MarkdownFolder(fold=THINK_FOLD, thinking=streaming))
        self._keep(stream_id, state)
        if msgid:
            self.by_msgid[msgid] = stream_id
        state.task = asyncio.create_task(self._run(state, user, thread_id, question))
        if streaming:
            return self._stream_reply(stream_id, nonce)
        response_url = str(message.get("response_url") or "")
        if response_url:
            state.task.add_done_callback(
                lambda _: asyncio.ensure_future(self._post_markdown(response_url, state))
            )
            return Response(status_code=200)
        await state.done.wait()
        return self._reply(self._markdown(state), nonce)

    def _keep(self, stream_id: str, state: _Stream) -> None:
        self.streams[stream_id] = state
        while len(self.streams) > MAX_STREAMS:
            self.streams.popitem(last=False)

    def _refresh(self, message: dict[str, Any], nonce: str) -> Response:
        stream_id = str((message.get("stream") or {}).get("id") or "")
        if stream_id not in self.streams:
            stream = {"id": stream_id, "finish": True, "content": EXPIRED}
            return self._reply({"msgtype": "stream", "stream": stream}, nonce)
        return self._stream_reply(stream_id, nonce)

    def _stream_reply(self, stream_id: str, nonce: str) -> JSONResponse:
        state = self.streams[stream_id]
        finished = state.finished
        content = state.folder.snapshot()
        stream: dict[str, Any] = {"id": stream_id, "finish": finished, "content": _fit(content)}
        if finished and state.folder.images:
            stream["msg_item"] = [_image_item(b64) for b64 in state.folder.images[:10]]
        return self._reply({"msgtype": "stream", "stream": stream}, nonce)

    def _markdown(self, state: _Stream) -> dict[str, Any]:
        return {"msgtype": "markdown", "markdown": {"content": _fit(state.folder.text.strip())}}

    async def _post_markdown(self, url: str, state: _Stream) -> None:
        try:
            async with httpx.AsyncClient(timeout=30.0) as client:
                response = await client.post(url, json=self._markdown(state))
                response.raise_for_status()
        except httpx.HTTPError as exc:
            logger.warning("wecom response_url post failed: %s", type(exc).__name__)

    async def _run(self, state: _Stream, user: DataseerUser, thread_id: str, text: str) -> None:
        """Run the graph for ``user`` on ``thread_id`` and fold its stream into ``state``."""
        adapter = StreamAdapter()
        try:
            client = self._client_factory()
            await client.threads.create(
                thread_id=thread_id,
                if_exists="do_nothing",
                metadata={"owner": user.user_id, "source": "wecom"},
            )
            thread = await client.threads.get(thread_id)
            payload: dict[str, Any] = {"input": {"messages": [{"role": "user", "content": text}]}}
            if thread.get("status") == "interrupted":
                payload = {"command": {"resume": text}}
            async for part in client.runs.stream(
                thread_id,
                self.settings.assistant,
                **payload,
                config={"configurable": user.configurable()},
                stream_mode=STREAM_MODES,
                stream_subgraphs=True,
                multitask_strategy="enqueue",
            ):
                for chunk in adapter.feed(part.event, part.data):
                    state.folder.push(chunk)
        except Exception as exc:  # a failed run still ends the stream with a sentence
            logger.exception("wecom run failed on thread %s", thread_id)
            state.folder.push(
                adapter.feed("error", {"message": type(exc).__name__})[0],
            )
        finally:
            state.folder.finish()
            state.done.set()


def _image_item(b64: str) -> dict[str, Any]:
    raw = base64.b64decode(b64)
    return {
        "msgtype": "image",
        "image": {"base64": b64, "md5": hashlib.md5(raw).hexdigest()},
    }


def _in_process_client() -> Any:
    from langgraph_sdk import get_client

    return get_client()


class _LazyBot:
    """Builds the bot from the environment on first use (after the server set it)."""

    def __init__(self, settings: WeComSettings | None, client_factory: Any) -> None:
        self._settings = settings
        self._client_factory = client_factory
        self._bot: WeComBot | None = None

    def bot(self) -> WeComBot | None:
        if self._bot is None:
            settings = self._settings or WeComSettings.from_env()
            if settings is not None:
                self._bot = WeComBot(settings, client_factory=self._client_factory)
        return self._bot

    async def get(self, request: Request) -> Response:
        bot = self.bot()
        return await bot.verify_url(request) if bot else _not_configured()

    async def post(self, request: Request) -> Response:
        bot = self.bot()
        return await bot.receive(request) if bot else _not_configured()


def _not_configured() -> Response:
    return _reject_response(
        RejectedError(503, "unconfigured", "the WeCom bot is not configured (DATASEER_WECOM_TOKEN)")
    )


def wecom_routes(
    settings: WeComSettings | None = None,
    *,
    client_factory: Callable[[], Any] | None = None,
    path: str = CALLBACK_PATH,
) -> list[BaseRoute]:
    """The callback routes; ``settings`` default to ``DATASEER_WECOM_*`` read on first use."""
    lazy = _LazyBot(settings, client_factory)
    return [
        Route(path, lazy.get, methods=["GET"]),
        Route(path, lazy.post, methods=["POST"]),
    ]
