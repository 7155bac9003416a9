"""The shared stream adapter on real runs of the graph and on hand-built parts.

Real runs: the router graph with the offline analyst on the sample warehouse,
streamed in-process and turned into the parts the LangGraph server sends
(``event`` = mode plus ``|namespace``; messages as ``[message dict, metadata]``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from dataseer.config import Settings
from dataseer.graph import build_graph
from dataseer.server.stream_adapter import (
    DETAILS_FOLD,
    THINK_FOLD,
    Chunk,
    MarkdownFolder,
    StreamAdapter,
    markdown_table,
)

INTERNAL_KEYS = ("langgraph_node", "checkpoint_ns", "run_id", "thread_id", "usage_metadata")


def record(graph: Any, payload: Any, thread: str, **configurable: Any) -> list[tuple[str, Any]]:
    """One run's stream as server-shaped (event, data) parts."""
    config = {"configurable": {"thread_id": thread, **configurable}}
    parts: list[tuple[str, Any]] = []
    for namespace, mode, data in graph.stream(
        payload, config, stream_mode=["messages", "updates", "custom"], subgraphs=True
    ):
        event = mode + "".join(f"|{n}" for n in namespace)
        if mode == "messages":
            message, meta = data
            data = [message.model_dump(), dict(meta)]
        elif mode == "updates":
            data = json.loads(json.dumps(data, default=lambda o: getattr(o, "__dict__", str(o))))
        parts.append((event, data))
    return parts


def render(chunks: list[Chunk], fold: tuple[str, str] = DETAILS_FOLD) -> MarkdownFolder:
    folder = MarkdownFolder(fold=fold)
    for chunk in chunks:
        folder.push(chunk)
    folder.finish()
    return folder


@pytest.fixture(scope="module")
def graph() -> Any:
    return build_graph(settings=Settings(), checkpointer=InMemorySaver())


def test_lookup_run_folds_sql_into_thinking_and_streams_the_composed_answer(
    graph: Any, sample_path: Path
) -> None:
    with duckdb.connect(str(sample_path), read_only=True) as con:
        (total,) = con.execute(
            "SELECT ROUND(SUM(revenue), 2) FROM dws_game_pay_di WHERE game_id = 1001 "
            "AND ds BETWEEN DATE '2026-10-01' AND DATE '2026-10-31'"
        ).fetchone() or (None,)
    parts = record(graph, {"messages": [HumanMessage("星海远征上个月流水多少？")]}, "sa-1")
    chunks = StreamAdapter().feed_all(parts)
    kinds = [c.kind for c in chunks]
    assert kinds[0] == "thinking" and "answer" in kinds
    assert kinds.index("answer") > max(i for i, k in enumerate(kinds) if k == "thinking")
    thinking = "".join(c.text for c in chunks if c.kind == "thinking")
    assert "route: **lookup**" in thinking
    assert "✓ **1." in thinking and "```sql\nSELECT" in thinking
    assert "dws_game_pay_di" in thinking and "1001" in thinking
    assert "→ `search_tables`" in thinking and "`run_sql`" not in thinking
    text = render(chunks).text
    assert text.startswith(DETAILS_FOLD[0]) and text.count(DETAILS_FOLD[1]) == 1
    answer = text.split(DETAILS_FOLD[1], 1)[1]
    state = graph.get_state({"configurable": {"thread_id": "sa-1"}}).values
    assert answer == state["messages"][-1].content
    assert f"{total}" in answer.replace(",", "") or f"{total:,.2f}" in answer


def test_denied_game_gets_the_polite_scope_answer_and_a_failed_sql_mark(graph: Any) -> None:
    parts = record(
        graph, {"messages": [HumanMessage("幻境物语上个月流水")]}, "sa-2", user_id="analyst_1001"
    )
    chunks = StreamAdapter().feed_all(parts)
    thinking = "".join(c.text for c in chunks if c.kind == "thinking")
    answer = "".join(c.text for c in chunks if c.kind == "answer")
    assert "✗ **1." in thinking and "```sql" in thinking
    assert "抱歉" in answer and "不在您的数据权限范围内" in answer


def test_ambiguous_game_becomes_a_question_back(graph: Any) -> None:
    parts = record(graph, {"messages": [HumanMessage("王者荣耀上个月流水")]}, "sa-3")
    chunks = StreamAdapter().feed_all(parts)
    (clarify,) = [c for c in chunks if c.kind == "clarify"]
    assert clarify.text.startswith("❓") and "王者荣耀" in clarify.text
    assert not [c for c in chunks if c.kind == "answer"]


def test_only_message_content_leaves(graph: Any) -> None:
    parts = record(graph, {"messages": [HumanMessage("星海远征上个月流水多少？")]}, "sa-4")
    text = render(StreamAdapter().feed_all(parts)).text
    raw = json.dumps([d for _, d in parts], ensure_ascii=False, default=str)
    leaked = [k for k in INTERNAL_KEYS if k in raw and k in text]
    assert any(k in raw for k in INTERNAL_KEYS)  # the input carried metadata…
    assert leaked == []  # …and none of it reached the markdown
    assert "sa-4" not in text


def ai_chunk(text: str, mid: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"type": "AIMessageChunk", "id": mid, "content": text, **extra}


def test_streamed_tokens_append_and_a_repeat_of_the_whole_message_is_dropped() -> None:
    adapter = StreamAdapter()
    meta = {"langgraph_node": "compose"}
    out = []
    for token in ["星海", "远征", "流水"]:
        out += adapter.feed("messages", [ai_chunk(token), meta])
    out += adapter.feed("messages", [{"type": "ai", "id": "m1", "content": "星海远征流水"}, meta])
    assert [c.text for c in out] == ["星海", "远征", "流水"]


def test_root_messages_outside_answer_nodes_are_not_answers() -> None:
    adapter = StreamAdapter()
    routed = adapter.feed(
        "messages", [ai_chunk('{"route": "lookup"}'), {"langgraph_node": "route"}]
    )
    assert routed == []


def test_subgraph_tool_calls_and_text_are_thinking_with_brief_args() -> None:
    adapter = StreamAdapter()
    message = {
        "type": "ai",
        "id": "x",
        "content": [{"type": "text", "text": "先找表"}],
        "tool_calls": [
            {"name": "search_tables", "args": {"query": "付费" * 60}, "id": "c1"},
            {"name": "run_sql", "args": {"sql": "SELECT 1"}, "id": "c2"},
        ],
    }
    chunks = adapter.feed("messages|lookup:abc", [message, {"langgraph_node": "model"}])
    assert [c.kind for c in chunks] == ["thinking", "thinking"]
    assert chunks[0].text.startswith("先找表")
    assert chunks[1].text.startswith("→ `search_tables`(query=") and "…" in chunks[1].text


def test_phase_is_announced_once_until_it_changes() -> None:
    adapter = StreamAdapter()
    events = ["planning", "execution", "execution", "reporting", "done"]
    chunks = [c for p in events for c in adapter.feed("custom|a:1", {"type": "phase", "phase": p})]
    assert [c.text.strip() for c in chunks] == [
        "▸ 规划 / planning",
        "▸ 执行 / executing",
        "▸ 汇总 / reporting",
    ]


def test_sql_event_renders_rows_capped_and_failures_with_the_reason() -> None:
    adapter = StreamAdapter(table_rows=2)
    ok = {
        "type": "sql",
        "task_id": 3,
        "purpose": "按渠道",
        "sql": "SELECT a FROM t",
        "ok": True,
        "columns": ["channel", "revenue"],
        "rows": [["a", 1.5], ["b", 12345.678], ["c|d", None]],
        "row_count": 40,
        "elapsed": 0.01,
    }
    (chunk,) = adapter.feed("custom", ok)
    assert "✓ **3. 按渠道** (40 rows, 0.010s)" in chunk.text
    assert "|channel|revenue|\n|-|-|\n|a|1.5|\n|b|12,345.68|" in chunk.text
    assert "c\\|d" not in chunk.text and "1 more rows" in chunk.text
    bad = {**ok, "ok": False, "error": "⛔ 权限拒绝 / permission denied\n原因: x", "rows": []}
    (chunk,) = adapter.feed("custom", bad)
    assert (
        chunk.text.startswith("✗ **3. 按渠道**")
        and "> ⛔ 权限拒绝 / permission denied 原因: x" in chunk.text
    )


def test_chart_is_an_image_kept_aside_and_error_is_a_sentence() -> None:
    png = base64.b64encode(b"\x89PNG fake").decode()
    adapter = StreamAdapter()
    (image,) = adapter.feed("custom|analysis:1", {"type": "chart", "path": "/x.png", "base64": png})
    (error,) = adapter.feed("error", {"error": "GraphRecursionError", "message": "too deep"})
    folder = render([Chunk("thinking", "t"), image, error], THINK_FOLD)
    assert folder.images == [png]
    assert folder.text == "<think>\nt\n</think>\n\n⚠️ 运行出错 / the run failed: too deep\n"
    assert "/x.png" not in folder.text


def test_folder_reopens_thinking_after_an_answer_and_drops_it_when_asked() -> None:
    chunks = [Chunk("thinking", "a"), Chunk("answer", "A"), Chunk("thinking", "b")]
    folder = MarkdownFolder(fold=("[", "]"))
    deltas = [folder.push(c) for c in chunks]
    assert deltas == ["[a", "]A", "[b"]
    assert folder.snapshot() == "[a]A[b]"
    assert folder.finish() == "]" and folder.text == "[a]A[b]"
    plain = MarkdownFolder(thinking=False)
    assert [plain.push(c) for c in chunks] == ["", "A", ""]


def test_markdown_table_without_columns_is_empty() -> None:
    assert markdown_table([], [[1]], 5) == ""
