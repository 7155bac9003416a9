"""Run dataseer for one Dify question and turn its stream into Dify messages.

The dataseer server is reached through ``langgraph_sdk`` with the provider's
bearer token, so the server authenticates the workspace's dataseer user and
the SQL guard applies that user's permissions. The stream is classified by
the vendored :mod:`dataseer_dify.stream_adapter` (a byte-identical copy of
``dataseer.server.stream_adapter``) and folded into markdown: thinking in a
``<details>`` block, then the answer; charts leave as PNG blobs. Nothing but
message content is emitted.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from langgraph_sdk import get_sync_client

from .stream_adapter import DETAILS_FOLD, STREAM_MODES, MarkdownFolder, StreamAdapter

ASSISTANT = "dataseer"


@dataclass(frozen=True)
class Piece:
    """What the tool yields: markdown text to append, or a PNG chart."""

    text: str = ""
    png: bytes = b""


def client_for(server_url: str, api_token: str, timeout: float = 300.0) -> Any:
    """A synchronous LangGraph client that sends the bearer token."""
    return get_sync_client(
        url=server_url.rstrip("/"),
        headers={"Authorization": f"Bearer {api_token}"},
        timeout=timeout,
    )


def check_server(client: Any) -> None:
    """Raise unless the server knows the dataseer assistant for this token."""
    found = client.assistants.search(graph_id=ASSISTANT, limit=1)
    if not found:
        msg = "the server has no dataseer assistant"
        raise ValueError(msg)


def ask(
    client: Any,
    question: str,
    thread_id: str | None = None,
    *,
    thinking: bool = True,
    metadata: dict[str, Any] | None = None,
) -> Iterator[Piece]:
    """Stream the answer to ``question`` on ``thread_id`` (a new thread when ``None``).

    A thread waiting on a clarification is resumed with the question as the reply.
    """
    meta = {"source": "dify", **(metadata or {})}
    if thread_id is None:
        thread = client.threads.create(metadata=meta)
    else:
        client.threads.create(thread_id=thread_id, if_exists="do_nothing", metadata=meta)
        thread = client.threads.get(thread_id)
    payload: dict[str, Any] = {"input": {"messages": [{"role": "user", "content": question}]}}
    if thread.get("status") == "interrupted":
        payload = {"command": {"resume": question}}
    adapter = StreamAdapter()
    folder = MarkdownFolder(fold=DETAILS_FOLD, thinking=thinking)
    for part in client.runs.stream(
        thread["thread_id"],
        ASSISTANT,
        **payload,
        stream_mode=STREAM_MODES,
        stream_subgraphs=True,
        multitask_strategy="enqueue",
    ):
        for chunk in adapter.feed(part.event, part.data):
            delta = folder.push(chunk)
            if delta:
                yield Piece(text=delta)
            elif chunk.kind == "image":
                yield Piece(png=base64.b64decode(chunk.image))
    tail = folder.finish()
    if tail:
        yield Piece(text=tail)
