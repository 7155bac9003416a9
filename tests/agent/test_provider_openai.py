"""The router graph against an OpenAI-compatible provider, over real HTTP.

``DATASEER_MODEL`` / ``DATASEER_BASE_URL`` / ``DATASEER_API_KEY`` point the
model tiers at a local scripted server, so the real ``ChatOpenAI`` client,
``with_structured_output`` and the agent lines run unchanged; only the LLM's
replies are scripted. Expected rows come from the warehouse file directly.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from dataseer.config import Settings
from dataseer.errors import DataseerError
from dataseer.graph import build_graph
from support.openai_server import Failure, OpenAICompatServer, Reply, ScriptItem, Usage

QUESTION = "星海远征上个月流水多少？"
TOTAL_SQL = (
    "SELECT ROUND(SUM(revenue), 2) AS revenue FROM dws_game_pay_di "
    "WHERE game_id = 1001 AND ds BETWEEN DATE '2026-10-01' AND DATE '2026-10-31'"
)
CHANNEL_SQL = (
    "SELECT channel_id, ROUND(SUM(revenue), 2) AS revenue FROM dws_game_pay_di "
    "WHERE game_id = 1001 AND ds BETWEEN DATE '2026-10-01' AND DATE '2026-10-31' "
    "GROUP BY channel_id ORDER BY channel_id"
)
LOOKUP_TOOLS = {"search_tables", "table_info", "run_sql"}
ROUTE_LOOKUP = Reply.call(
    "RouteDecision",
    {"route": "lookup", "clarification": "", "reason": "one figure, one query"},
    usage=Usage(50, 5),
)
FAST_500 = Failure(500, "provider is down", retry_after=0.01)
"""``retry_after`` keeps the OpenAI client's own retries (two by default) quick."""


def lookup_script(sql: str, summary: str) -> list[ScriptItem]:
    return [
        Reply.call("search_tables", {"query": "星海远征 流水"}, usage=Usage(100, 10)),
        Reply.call("run_sql", {"sql": sql, "purpose": "星海远征 10 月流水"}, usage=Usage(200, 20)),
        Reply(text=summary, usage=Usage(300, 30), chunk_size=3),
    ]


def reference_rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def answer_rows(answer: str) -> list[list[str]]:
    """Data rows of the first markdown table of an answer."""
    lines = [ln for ln in answer.splitlines() if ln.startswith("|") and ln.endswith("|")]
    return [[c.strip() for c in ln[1:-1].split("|")] for ln in lines[2:]]


def as_decimals(rows: list[Any]) -> list[tuple[Decimal, ...]]:
    return [tuple(Decimal(str(v)) for v in row) for row in rows]


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def system_prompt(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def resolved_question(prompt: str) -> dict[str, Any]:
    start = prompt.index("<resolved_question>") + len("<resolved_question>")
    return dict(json.loads(prompt[start : prompt.index("</resolved_question>")]))


class Provider:
    """Routes each request to the router's or the analyst's script by its tools."""

    def __init__(self) -> None:
        self.router: list[ScriptItem] = []
        self.analyst: list[ScriptItem] = []
        self.router_default: ScriptItem | None = None
        self.analyst_default: ScriptItem | None = None

    def __call__(self, body: dict[str, Any]) -> ScriptItem:
        is_router = "RouteDecision" in tool_names(body)
        queue = self.router if is_router else self.analyst
        if queue:
            return queue.pop(0)
        default = self.router_default if is_router else self.analyst_default
        return default or Failure(500, f"no scripted {'router' if is_router else 'analyst'} reply")


@pytest.fixture
def provider_server(
    monkeypatch: pytest.MonkeyPatch, sample_path: Path
) -> Iterator[OpenAICompatServer]:
    """A scripted provider with the model env vars pointing at it."""
    with OpenAICompatServer() as srv:
        monkeypatch.setenv("DATASEER_MODEL", "test-model")
        monkeypatch.setenv("DATASEER_BASE_URL", srv.base_url)
        monkeypatch.setenv("DATASEER_API_KEY", "test")
        monkeypatch.setenv("DATASEER_WAREHOUSE", str(sample_path))
        yield srv


def new_graph() -> CompiledStateGraph:
    return build_graph(settings=Settings(), checkpointer=InMemorySaver())


def ask(graph: CompiledStateGraph, thread: str, text: str | None) -> list[Any]:
    """Stream one turn (or resume with ``text=None``); returns (namespace, mode, data) parts."""
    payload = None if text is None else {"messages": [{"role": "user", "content": text}]}
    return list(
        graph.stream(
            payload,
            {"configurable": {"thread_id": thread}},
            stream_mode=["messages", "updates", "custom"],
            subgraphs=True,
        )
    )


def last_answer(graph: CompiledStateGraph, thread: str) -> str:
    state = graph.get_state({"configurable": {"thread_id": thread}})
    return str(state.values["messages"][-1].content)


def test_scripted_provider_drives_router_and_lookup_over_http(
    provider_server: OpenAICompatServer, sample_path: Path
) -> None:
    provider_server.add(
        ROUTE_LOOKUP, *lookup_script(CHANNEL_SQL, "星海远征 10 月各渠道流水见上表。")
    )
    graph = new_graph()

    parts = ask(graph, "t-happy", QUESTION)
    answer = last_answer(graph, "t-happy")

    assert provider_server.remaining == 0
    assert len(provider_server.requests) == 4
    router, *analyst = provider_server.requests

    assert router["model"] == "test-model"
    assert provider_server.request_headers[0]["authorization"] == "Bearer test"
    assert tool_names(router) == {"RouteDecision"}
    assert router["tool_choice"] == {"type": "function", "function": {"name": "RouteDecision"}}
    schema = router["tools"][0]["function"]["parameters"]
    assert schema["properties"]["route"]["enum"] == ["quick", "clarify", "lookup", "analysis"]
    assert '"games": [{"id": 1001' in system_prompt(router)
    assert router["messages"][-1] == {"role": "user", "content": QUESTION}

    for body in analyst:
        assert tool_names(body) >= LOOKUP_TOOLS
        (run_sql,) = [t["function"] for t in body["tools"] if t["function"]["name"] == "run_sql"]
        assert run_sql["parameters"]["required"] == ["sql"]
        prompt = system_prompt(body)
        assert "<question_context>" in prompt
        assert f"question: {QUESTION}" in prompt
        resolved = resolved_question(prompt)
        assert resolved["games"] == [1001]
        assert resolved["metrics"] == ["revenue"]
        assert (resolved["period"]["start"], resolved["period"]["end"]) == (
            "2026-10-01",
            "2026-10-31",
        )
        assert [m["role"] for m in body["messages"]].count("system") == 1
    assert "<sql_history>" not in system_prompt(analyst[1])
    assert CHANNEL_SQL in system_prompt(analyst[2]).split("<sql_history>", 1)[1]

    expected = as_decimals(reference_rows(sample_path, CHANNEL_SQL))
    assert len(expected) > 1
    assert f"```sql\n{CHANNEL_SQL}\n```" in answer
    assert as_decimals(answer_rows(answer)) == expected
    assert answer.rstrip().endswith("星海远征 10 月各渠道流水见上表。")

    sql_events = [d for _, mode, d in parts if mode == "custom" and d.get("type") == "sql"]
    assert [(e["sql"], e["ok"]) for e in sql_events] == [(CHANNEL_SQL, True)]

    chunks = [d[0] for _, mode, d in parts if mode == "messages"]
    texts = [c.content for c in chunks if isinstance(c, AIMessageChunk) and c.content]
    assert "".join(texts).startswith("星海远征 10 月各渠道流水见上表。")
    assert len(texts) > 1
    streamed_usage = [c.usage_metadata for c in chunks if isinstance(c, AIMessageChunk)]
    assert [u["input_tokens"] for u in streamed_usage if u] == [50, 100, 200, 300]
    model_turns = [
        m
        for ns, mode, d in parts
        if mode == "updates" and ns and "model" in d
        for m in d["model"]["messages"]
        if isinstance(m, AIMessage)
    ]
    assert [m.usage_metadata and m.usage_metadata["total_tokens"] for m in model_turns] == [
        110,
        220,
        330,
    ]


def test_current_question_is_not_listed_as_an_earlier_question(
    provider_server: OpenAICompatServer,
) -> None:
    provider_server.add(ROUTE_LOOKUP, *lookup_script(TOTAL_SQL, "见上表。"))
    ask(new_graph(), "t-earlier", QUESTION)
    analyst = provider_server.requests[1:]
    assert len(analyst) == 3
    assert all("earlier questions" not in system_prompt(body) for body in analyst)


def test_router_http_500_falls_back_to_rules_and_still_answers(
    provider_server: OpenAICompatServer, sample_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = Provider()
    provider.router_default = FAST_500
    provider.analyst = lookup_script(TOTAL_SQL, "星海远征 10 月流水见上表。")
    provider_server.responder = provider
    graph = new_graph()

    with caplog.at_level(logging.WARNING, logger="dataseer.router"):
        parts = ask(graph, "t-router-down", QUESTION)
    answer = last_answer(graph, "t-router-down")

    routed = [d["route"]["route"] for ns, mode, d in parts if mode == "updates" and "route" in d]
    assert routed == ["lookup"]
    router_calls = [b for b in provider_server.requests if "RouteDecision" in tool_names(b)]
    assert len(router_calls) >= 1
    assert len(provider_server.requests) - len(router_calls) == 3
    assert any("router model failed" in r.getMessage() for r in caplog.records)
    ((total,),) = reference_rows(sample_path, TOTAL_SQL)
    assert f"```sql\n{TOTAL_SQL}\n```" in answer
    assert as_decimals(answer_rows(answer)) == [(Decimal(total),)]


def test_analyst_http_500_raises_and_keeps_the_thread_resumable(
    provider_server: OpenAICompatServer, sample_path: Path
) -> None:
    provider = Provider()
    provider.router_default = ROUTE_LOOKUP
    provider.analyst = lookup_script(TOTAL_SQL, "星海远征 10 月流水见上表。")
    provider_server.responder = provider
    graph = new_graph()
    config = {"configurable": {"thread_id": "t-analyst-down"}}
    ask(graph, "t-analyst-down", QUESTION)
    first_answer = last_answer(graph, "t-analyst-down")
    before = graph.get_state(config).values

    provider.analyst_default = FAST_500
    with pytest.raises(Exception) as failure:
        ask(graph, "t-analyst-down", "按渠道拆开看看")
    assert "500" in str(failure.value)
    assert "provider is down" in str(failure.value)

    after = graph.get_state(config)
    assert after.next == ("lookup",)
    assert after.values["messages"][:2] == before["messages"]
    assert after.values["messages"][1].content == first_answer
    assert after.values["messages"][2].content == "按渠道拆开看看"
    assert after.values["sql_history"] == before["sql_history"]
    assert [r["turn"] for r in after.values["sql_history"]] == [1]

    provider.analyst_default = None
    provider.analyst = lookup_script(CHANNEL_SQL, "各渠道流水见上表。")
    ask(graph, "t-analyst-down", None)
    resumed = graph.get_state(config).values
    answer = str(resumed["messages"][-1].content)
    assert f"```sql\n{CHANNEL_SQL}\n```" in answer
    assert as_decimals(answer_rows(answer)) == as_decimals(reference_rows(sample_path, CHANNEL_SQL))
    assert [r["turn"] for r in resumed["sql_history"]] == [1, 2]
    assert resumed["messages"][1].content == first_answer


def test_analyst_failure_is_a_dataseer_error_naming_the_tier(
    provider_server: OpenAICompatServer,
) -> None:
    provider = Provider()
    provider.router_default = ROUTE_LOOKUP
    provider.analyst_default = FAST_500
    provider_server.responder = provider
    with pytest.raises(DataseerError) as failure:
        ask(new_graph(), "t-clear-error", QUESTION)
    message = str(failure.value)
    assert "analyst" in message
    assert "test-model" in message
