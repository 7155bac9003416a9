"""The scripted OpenAI-compatible server, driven by a real ``ChatOpenAI`` over HTTP."""

from __future__ import annotations

import asyncio
import functools
import json
import operator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from support.openai_server import Failure, OpenAICompatServer, Reply, ToolCall, Usage


@tool
def run_sql(sql: str, limit: int = 100) -> str:
    """Run a read-only SQL query against the warehouse."""
    return sql


def _model(srv: OpenAICompatServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="scripted", base_url=srv.base_url, api_key=SecretStr("test"), max_retries=0, **kwargs
    )


def test_invoke_text_records_request_and_reports_usage() -> None:
    usage = Usage(prompt_tokens=42, completion_tokens=7, cached_tokens=40)
    with OpenAICompatServer(script=[Reply.say("流水是 123 元", usage=usage)]) as srv:
        answer = _model(srv).invoke([HumanMessage("上个月流水多少？")])
    assert answer.content == "流水是 123 元"
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["input_tokens"] == 42
    assert answer.usage_metadata["output_tokens"] == 7
    assert answer.usage_metadata["total_tokens"] == 49
    assert answer.usage_metadata.get("input_token_details", {}).get("cache_read") == 40
    assert len(srv.requests) == 1
    assert srv.requests[0]["messages"] == [{"role": "user", "content": "上个月流水多少？"}]
    assert srv.requests[0]["model"] == "scripted"
    assert srv.request_headers[0]["authorization"] == "Bearer test"


def test_bind_tools_sends_schema_and_parses_tool_calls() -> None:
    script = [Reply.call("run_sql", {"sql": "select 1", "limit": 5}, id="call_a")]
    with OpenAICompatServer(script=script) as srv:
        answer = _model(srv).bind_tools([run_sql]).invoke("how many players?")
    assert answer.tool_calls == [
        {
            "name": "run_sql",
            "args": {"sql": "select 1", "limit": 5},
            "id": "call_a",
            "type": "tool_call",
        }
    ]
    (schema,) = srv.requests[0]["tools"]
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "run_sql"
    assert set(schema["function"]["parameters"]["properties"]) == {"sql", "limit"}
    assert schema["function"]["parameters"]["required"] == ["sql"]


def test_stream_text_in_several_chunks_with_final_usage() -> None:
    text = "DAU rose 12% in August, mostly from the new server."
    with OpenAICompatServer(script=[Reply(text=text, chunk_size=5)]) as srv:
        chunks = list(_model(srv, stream_usage=True).stream("why?"))
    assert len([c for c in chunks if c.content]) == -(-len(text) // 5)
    merged = functools.reduce(operator.add, chunks)
    assert isinstance(merged, AIMessageChunk)
    assert merged.content == text
    assert merged.usage_metadata is not None
    assert merged.usage_metadata["output_tokens"] == len(text) // 4
    body = srv.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_stream_without_usage_option_sends_no_usage_chunk() -> None:
    with OpenAICompatServer(script=["ok"]) as srv:
        chunks = list(_model(srv).stream("hi"))
    assert "stream_options" not in srv.requests[0]
    assert all(c.usage_metadata is None for c in chunks)


def test_stream_parallel_tool_calls_are_reassembled() -> None:
    reply = Reply.calls(
        ToolCall("run_sql", {"sql": "select count(*) from dau where dt = '2026-11-28'"}),
        ToolCall("run_sql", {"sql": "select 2", "limit": 1}),
        usage=Usage(100, 20),
    )
    with OpenAICompatServer(script=[reply]) as srv:
        chunks = list(_model(srv, stream_usage=True).bind_tools([run_sql]).stream("go"))
    merged = functools.reduce(operator.add, chunks)
    assert isinstance(merged, AIMessageChunk)
    assert [c["args"] for c in merged.tool_calls] == [
        {"sql": "select count(*) from dau where dt = '2026-11-28'"},
        {"sql": "select 2", "limit": 1},
    ]
    assert [c["id"] for c in merged.tool_calls] == ["call_1", "call_2"]
    assert len([c for c in chunks if isinstance(c, AIMessageChunk) and c.tool_call_chunks]) > 4
    assert merged.usage_metadata is not None
    assert merged.usage_metadata["input_tokens"] == 100


def test_http_500_raises_and_does_not_consume_the_script() -> None:
    with OpenAICompatServer(script=["after the failure"]) as srv:
        srv.fail_next(500, "model backend down")
        model = _model(srv)
        with pytest.raises(openai.InternalServerError, match="model backend down"):
            model.invoke("hi")
        assert model.invoke("hi").content == "after the failure"
        assert len(srv.requests) == 2


def test_scripted_429_is_a_rate_limit_error() -> None:
    with OpenAICompatServer(script=[Failure(429, "slow down", retry_after=1)]) as srv:
        with pytest.raises(openai.RateLimitError, match="slow down"):
            _model(srv).invoke("hi")
        response = httpx.post(
            f"{srv.base_url}/chat/completions", json={"model": "m", "messages": []}
        )
    assert response.status_code == 500
    assert "script exhausted" in response.json()["error"]["message"]


def test_client_retries_consume_queued_failures() -> None:
    with OpenAICompatServer(script=["third time lucky"]) as srv:
        srv.fail_next(503, count=2)
        model = ChatOpenAI(
            model="m", base_url=srv.base_url, api_key=SecretStr("test"), max_retries=2
        )
        assert model.invoke("hi").content == "third time lucky"
    assert len(srv.requests) == 3


def test_responder_decides_from_the_request() -> None:
    def responder(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return Reply.say(f"result was {last['content']}")
        return Reply.call("run_sql", {"sql": "select 7"})

    with OpenAICompatServer(responder=responder) as srv:
        model = _model(srv).bind_tools([run_sql])
        first = model.invoke("count")
        tool_message = run_sql.invoke(first.tool_calls[0])
        second = model.invoke([HumanMessage("count"), first, tool_message])
    assert second.content == "result was select 7"
    sent = srv.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"sql": "select 7"}
    assert sent[2]["tool_call_id"] == first.tool_calls[0]["id"]


def test_async_invoke_and_stream() -> None:
    async def run(srv: OpenAICompatServer) -> tuple[str, str]:
        model = _model(srv)
        first = await model.ainvoke("a")
        parts = [c.content async for c in model.astream("b")]
        return str(first.content), "".join(str(p) for p in parts)

    with OpenAICompatServer(script=["one", "two words"]) as srv:
        assert asyncio.run(run(srv)) == ("one", "two words")


def test_models_endpoint_and_unknown_route() -> None:
    with OpenAICompatServer(model="qwen-test") as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
        assert [m.id for m in client.models.list()] == ["qwen-test"]
        assert httpx.get(f"{srv.base_url}/nope").status_code == 404
        assert srv.requests == []


def test_port_is_released_and_base_url_needs_a_running_server() -> None:
    srv = OpenAICompatServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url
    with srv:
        url = srv.base_url
        assert ":2024/" not in url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models")
    with pytest.raises(ValueError, match="HTTP error status"):
        Failure(200)
