"""The plugin's own classes against a real dataseer server (auth on, offline analyst).

The tool is built the way the SDK builds it (``Tool.from_credentials``) and
its messages are read exactly as Dify receives them.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from dify_plugin.entities.tool import ToolInvokeMessage
from dify_plugin.errors.tool import ToolProviderCredentialValidationError

from dataseer_dify.bridge import ask, client_for
from dataseer_dify.stream_adapter import DETAILS_FOLD
from dataseer_dify.threads import ThreadMap
from provider.dataseer import DataseerProvider
from tools.ask_dataseer import AskDataseerTool

INTERNAL = ("run_id", "thread_id", "langgraph_node", "checkpoint_ns", "assistant_id", "metadata")


def credentials(server: dict[str, Any], pg_url: str, user: str) -> dict[str, str]:
    return {
        "server_url": server["url"],
        "api_token": server["tokens"][user],
        "threads_database_url": pg_url,
    }


def invoke(creds: dict[str, str], conversation: str | None, **params: Any) -> list[Any]:
    tool = AskDataseerTool.from_credentials(creds, user_id="dify-user")
    tool.session.conversation_id = conversation
    return list(tool.invoke(params))


def text_of(messages: list[ToolInvokeMessage]) -> str:
    return "".join(m.message.text for m in messages if m.type == ToolInvokeMessage.MessageType.TEXT)


def test_denied_game_streams_the_polite_scope_answer_for_the_tokens_user(
    server: dict[str, Any], pg_url: str
) -> None:
    messages = invoke(credentials(server, pg_url, "analyst_1001"), None, query="幻境物语上个月流水")
    assert len(messages) > 3  # streamed in pieces, not one blob
    assert {m.type for m in messages} == {ToolInvokeMessage.MessageType.TEXT}
    text = text_of(messages)
    assert text.startswith(DETAILS_FOLD[0]) and DETAILS_FOLD[1] in text
    thinking, answer = text.split(DETAILS_FOLD[1], 1)
    assert "✗ **1." in thinking and "```sql" in thinking and "1002" in thinking
    assert "抱歉" in answer and "不在您的数据权限范围内" in answer
    leaked = [k for k in INTERNAL if k in text]
    assert leaked == []


def test_follow_up_in_the_same_conversation_continues_the_same_thread(
    server: dict[str, Any], pg_url: str
) -> None:
    creds = credentials(server, pg_url, "admin")
    conversation = f"dify-conv-{uuid.uuid4()}"
    first = text_of(invoke(creds, conversation, query="星海远征上个月流水多少？"))
    second = text_of(invoke(creds, conversation, query="按渠道拆开看看", show_thinking=False))
    assert "✓ **1." in first and "```sql" in first
    assert DETAILS_FOLD[0] not in second and "channel" in second
    thread_id = ThreadMap(pg_url).thread_for(conversation)
    state = client_for(server["url"], server["tokens"]["admin"]).threads.get_state(thread_id)
    humans = [m["content"] for m in state["values"]["messages"] if m["type"] == "human"]
    assert humans == ["星海远征上个月流水多少？", "按渠道拆开看看"]
    other = text_of(invoke(creds, f"dify-conv-{uuid.uuid4()}", query="按渠道拆开看看"))
    assert other != second


def test_clarification_is_asked_back_and_the_reply_resumes(
    server: dict[str, Any], pg_url: str
) -> None:
    creds = credentials(server, pg_url, "admin")
    conversation = f"dify-conv-{uuid.uuid4()}"
    asked = text_of(invoke(creds, conversation, query="王者荣耀上个月流水"))
    assert "❓" in asked and "王者荣耀" in asked
    answered = text_of(invoke(creds, conversation, query="星海远征"))
    assert "✓" in answered and "```sql" in answered


def test_provider_accepts_good_credentials_and_refuses_a_bad_token(
    server: dict[str, Any], pg_url: str
) -> None:
    DataseerProvider().validate_credentials(credentials(server, pg_url, "admin"))
    bad = {**credentials(server, pg_url, "admin"), "api_token": "not-a-jwt"}
    with pytest.raises(ToolProviderCredentialValidationError):
        DataseerProvider().validate_credentials(bad)


class RecordedClient:
    """Stands in for ``langgraph_sdk``'s client: replays recorded stream parts."""

    class _Part:
        def __init__(self, event: str, data: Any) -> None:
            self.event, self.data = event, data

    def __init__(self, parts: list[tuple[str, Any]]) -> None:
        self.parts = parts
        self.threads = self
        self.runs = self

    def create(self, **_: Any) -> dict[str, Any]:
        return {"thread_id": "t", "status": "idle"}

    def get(self, _: str) -> dict[str, Any]:
        return {"thread_id": "t", "status": "idle"}

    def stream(self, *_: Any, **__: Any) -> Any:
        return iter(self._Part(e, d) for e, d in self.parts)


def test_charts_leave_as_png_blobs_between_text_pieces() -> None:
    png = b"\x89PNG\r\n\x1a\nchart"
    parts = [
        ("metadata", {"run_id": "r1"}),
        ("custom|analysis:1", {"type": "phase", "phase": "execution"}),
        (
            "custom|analysis:1",
            {"type": "chart", "path": "/srv/x.png", "base64": base64.b64encode(png).decode()},
        ),
        ("messages", [{"type": "ai", "id": "a", "content": "答案"}, {"langgraph_node": "compose"}]),
    ]
    pieces = list(ask(RecordedClient(parts), "q", "t"))
    assert [p.png for p in pieces if p.png] == [png]
    text = "".join(p.text for p in pieces)
    assert text == f"{DETAILS_FOLD[0]}▸ 执行 / executing\n\n{DETAILS_FOLD[1]}答案"
    assert "r1" not in json.dumps(text) and "/srv/x.png" not in text
