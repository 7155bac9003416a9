"""Whole runs through the router graph with the SQL guard in place.

The offline analyst and a scripted model play the LLM; the router, tools,
middlewares, permission store, guard, audit and DuckDB are real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from dataseer.config import Settings
from dataseer.graph import build_graph
from dataseer.models.narrate import fmt
from dataseer.prompt import format_cell
from dataseer.sql.audit import read_audit
from dataseer.sql.execute import DENIED_MARK
from support.scripted import ScriptedChatModel, text, tool_call

OCTOBER = "ds BETWEEN DATE '2026-10-01' AND DATE '2026-10-31'"


def _revenue(sample_path: Path, game_id: int) -> float:
    sql = (
        "SELECT ROUND(SUM(revenue), 2) FROM dws_game_pay_di "
        f"WHERE game_id = {game_id} AND {OCTOBER}"
    )
    with duckdb.connect(str(sample_path), read_only=True) as con:
        row = con.execute(sql).fetchone()
    assert row is not None and row[0] is not None
    return float(row[0])


def _ask(graph: Any, question: str, thread: str, **configurable: Any) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread, **configurable}}
    graph.invoke({"messages": [HumanMessage(question)]}, config)
    return dict(graph.get_state(config).values)


def test_analyst_1001_is_told_politely_what_they_may_see(sample_path: Path) -> None:
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    state = _ask(graph, "幻境物语上个月流水", "e2e-denied", user_id="analyst_1001")

    assert state["route"] == "lookup"
    [record] = [r for r in state["sql_history"] if r["turn"] == state["turn"]]
    assert record["ok"] is False and record["error"].startswith(DENIED_MARK)
    assert "1002" in record["sql"]
    summary = state["summary"]
    assert "抱歉" in summary
    assert "「幻境物语」（game_id 1002）不在您的数据权限范围内" in summary
    assert "星海远征（1001）" in summary and "申请权限" in summary
    answer = state["messages"][-1].content
    hidden = _revenue(sample_path, 1002)
    assert fmt(hidden) not in answer and format_cell(hidden) not in answer
    audit = [a for a in read_audit(Settings()) if a["user_id"] == "analyst_1001"]
    assert any(a["sql"] == record["sql"] and not a["allowed"] for a in audit)


def test_analyst_1001_still_gets_their_own_game(sample_path: Path) -> None:
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    state = _ask(graph, "星海远征上个月流水", "e2e-allowed", user_id="analyst_1001")
    [record] = [r for r in state["sql_history"] if r["turn"] == state["turn"]]
    assert record["ok"], record.get("error")
    assert record["rows"] == [[_revenue(sample_path, 1001)]]
    assert "权限" not in state["summary"]


def test_a_run_without_identity_reads_nothing(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATASEER_DEV_USER")
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    state = _ask(graph, "星海远征上个月流水", "e2e-anonymous")
    [record] = [r for r in state["sql_history"] if r["turn"] == state["turn"]]
    assert record["ok"] is False and record["rows"] == []
    assert "身份" in state["summary"] and "申请权限" in state["summary"]


def test_model_rewrites_a_denied_query_within_scope(sample_path: Path) -> None:
    unfiltered = f"SELECT ROUND(SUM(revenue), 2) AS revenue FROM dws_game_pay_di WHERE {OCTOBER}"
    filtered = unfiltered.replace("WHERE ", "WHERE game_id IN (1001) AND ")
    revenue = _revenue(sample_path, 1001)
    model = ScriptedChatModel(
        script=[
            tool_call("run_sql", sql=unfiltered, purpose="上个月总流水"),
            tool_call("run_sql", sql=filtered, purpose="星海远征上个月流水", chart="kpi"),
            text(f"您有权限的星海远征 2026-10 流水为 {format_cell(revenue)}。"),
        ]
    )
    graph = build_graph(model=model, settings=Settings(), checkpointer=InMemorySaver())
    state = _ask(graph, "上个月流水多少？", "e2e-rewrite", user_id="analyst_1001")

    history = [r for r in state["sql_history"] if r["turn"] == state["turn"]]
    assert [r["ok"] for r in history] == [False, True]
    assert history[1]["sql"] == filtered and history[1]["rows"] == [[revenue]]
    # the model saw why, and the scope it may rewrite into
    second = model.requests[1]
    [denial] = [m for m in second if isinstance(m, ToolMessage) and m.status == "error"]
    seen = str(denial.content)
    assert DENIED_MARK in seen and "game_id IN (1001)" in seen and "1001 星海远征" in seen
    answer = state["messages"][-1].content
    assert answer.index("```sql\n" + unfiltered) < answer.index("```sql\n" + filtered)
    audit = [a for a in read_audit(Settings()) if a["sql"] in {unfiltered, filtered}]
    assert [(a["sql"] == filtered, a["layer"], a["allowed"]) for a in audit] == [
        (False, "middleware", False),
        (True, "middleware", True),
        (True, "execute", True),
    ]
