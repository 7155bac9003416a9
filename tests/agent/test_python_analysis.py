"""An analysis run that goes beyond SQL: two queries, then a correlation in Python.

The scripted model plays the LLM: it reads the frame names from the run_sql
observations (as a real model would) and writes pandas code over them. The
router, tools, datalayer, sandbox and DuckDB are real; the answer must equal
pandas' own computation on the same query results.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from dataseer.config import Settings
from dataseer.data.datalayer import Datalayer
from dataseer.graph import build_graph
from support.scripted import ScriptedChatModel, text, tool_call

REVENUE = (
    "SELECT ds, SUM(revenue) AS revenue FROM dws_game_pay_di "
    "WHERE game_id = 1001 AND ds BETWEEN DATE '2026-08-01' AND DATE '2026-08-31' "
    "GROUP BY ds ORDER BY ds"
)
DAU = (
    "SELECT ds, SUM(dau) AS dau FROM dws_game_active_di "
    "WHERE game_id = 1001 AND ds BETWEEN DATE '2026-08-01' AND DATE '2026-08-31' "
    "GROUP BY ds ORDER BY ds"
)


def _frame_names(messages: list[BaseMessage]) -> list[str]:
    """The variable names as the model sees them in <sql_history> (``→ df_...``)."""
    system = next(str(m.content) for m in messages if isinstance(m, SystemMessage))
    listing = system.split("\n<sql_history>\n", 1)[1].split("\n</sql_history>", 1)[0]
    return re.findall(r"^\[task \d+ · turn \d+\] ✓ .*? → (\w+)", listing, flags=re.MULTILINE)


def _correlate(messages: list[BaseMessage]) -> AIMessage:
    revenue, dau = _frame_names(messages)
    code = (
        f"both = {revenue}.merge({dau}, on='ds')\n"
        "fig, ax = plt.subplots()\n"
        "ax.scatter(both['dau'], both['revenue'])\n"
        "round(float(both['revenue'].corr(both['dau'])), 12)"
    )
    return tool_call("run_python", code=code)


@pytest.fixture
def expected_corr(sample_path: Path) -> float:
    with duckdb.connect(str(sample_path), read_only=True) as con:
        revenue = con.execute(REVENUE).df()
        dau = con.execute(DAU).df()
    both = revenue.merge(dau, on="ds")
    assert len(both) == 31
    return round(float(both["revenue"].corr(both["dau"])), 12)


def test_correlation_over_two_sql_results(sample_path: Path, expected_corr: float) -> None:
    model = ScriptedChatModel(
        script=[
            tool_call("run_sql", sql=REVENUE, purpose="daily revenue", chart="line"),
            tool_call("run_sql", sql=DAU, purpose="daily DAU", chart="line"),
            _correlate,
            lambda messages: text(f"8月日流水与DAU的相关系数为 {_last_value(messages)}。"),
        ],
        repeat_last=True,
    )
    settings = Settings()
    graph = build_graph(model=model, settings=settings, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "corr-thread"}}
    events = []
    for _namespace, mode, data in graph.stream(
        {"messages": [HumanMessage("为什么星海远征8月流水暴涨？")], "deep": True},
        config,
        stream_mode=["custom", "updates"],
        subgraphs=True,
    ):
        if mode == "custom":
            events.append(data)
    state = graph.get_state(config).values

    assert state["route"] == "analysis"
    assert "run_python" in model.bound_tools
    # the model was told the variable names, and the frames are in the thread's datalayer
    names = [r.get("frame") for r in state["sql_history"]]
    assert names == ["df_1_daily_revenue", "df_2_daily_dau"]
    layer = Datalayer.from_settings(settings)
    assert [f.name for f in layer.frames("corr-thread")][:2] == names
    assert state["sql_history"][0]["frame_path"] == str(layer.path("corr-thread", names[0]))
    # the Python result equals pandas' own computation
    python_result = [
        m
        for m in model.requests[-1]
        if isinstance(m, ToolMessage) and "python ran" in str(m.content)
    ]
    assert python_result, "run_python did not succeed"
    value = float(re.search(r"value:\n(\S+)", str(python_result[0].content)).group(1))  # type: ignore[union-attr]
    assert value == expected_corr
    assert python_result[0].artifact["ok"] and python_result[0].artifact["figures"]
    # the stream carried the python run and the chart as a PNG
    kinds = [e["type"] for e in events]
    assert kinds.count("sql") == 2 and "python" in kinds and "chart" in kinds
    chart = next(e for e in events if e["type"] == "chart")
    assert chart["format"] == "png" and Path(chart["path"]).read_bytes()[:4] == b"\x89PNG"
    # the Python guidance is part of the analysis line's prompt
    system = next(str(m.content) for m in model.requests[0] if isinstance(m, SystemMessage))
    assert "run_python" in system and "when SQL is the wrong tool" in system
    assert str(expected_corr) in str(state["messages"][-1].content)
    # the first observation named the variable too
    second = model.requests[1]
    observed = [m for m in second if isinstance(m, ToolMessage)]
    assert "run_python variable: df_1_daily_revenue (31 rows × 2 cols)" in str(observed[-1].content)


def _last_value(messages: list[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and "value:" in str(message.content):
            return str(message.content).split("value:\n", 1)[1].split()[0]
    return "?"
