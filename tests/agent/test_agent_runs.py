"""Whole runs of the router graph with a scripted tool-calling model.

The scripted model plays the LLM's side only; everything else (router,
tools, middlewares, DuckDB) is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from dataseer.config import Settings
from dataseer.errors import ModelError
from dataseer.graph import build_graph
from dataseer.middleware.base_analysis import BUDGET_TAG
from dataseer.prompt import format_cell
from support.scripted import ScriptedChatModel, text, tool_call

REFERENCE = (
    "SELECT ROUND(SUM(revenue), 2) FROM dws_game_pay_di "
    "WHERE game_id = 1001 AND ds BETWEEN DATE '2026-10-01' AND DATE '2026-10-31'"
)


@pytest.fixture
def reference_revenue(sample_path: Path) -> float:
    with duckdb.connect(str(sample_path), read_only=True) as con:
        row = con.execute(REFERENCE).fetchone()
    assert row is not None
    return float(row[0])


def _run(graph: Any, payload: Any, thread: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    graph.invoke(payload, config)
    return dict(graph.get_state(config).values)


def _system(request: list[BaseMessage]) -> str:
    return next(str(m.content) for m in request if isinstance(m, SystemMessage))


def test_failed_sql_is_corrected_from_the_observation(
    sample_path: Path, reference_revenue: float
) -> None:
    bad = "SELECT SUM(revenu) AS revenue FROM dws_game_pay_di WHERE game_id = 1001"
    good = REFERENCE.replace("ROUND(SUM(revenue), 2)", "ROUND(SUM(revenue), 2) AS revenue")
    model = ScriptedChatModel(
        script=[
            tool_call("search_tables", query="星海远征 流水"),
            tool_call("run_sql", sql=bad, purpose="上个月流水"),
            tool_call("run_sql", sql=good, purpose="上个月流水", chart="kpi"),
            text(f"星海远征 2026-10 流水为 {reference_revenue:,.2f}。"),
        ]
    )
    graph = build_graph(model=model, settings=Settings(), checkpointer=InMemorySaver())
    state = _run(graph, {"messages": [HumanMessage("星海远征上个月流水多少？")]}, "fix-1")

    assert state["route"] == "lookup"
    history = state["sql_history"]
    assert [r["ok"] for r in history] == [False, True]
    assert "revenu" in (history[0]["error"] or "")
    assert history[1]["rows"] == [[reference_revenue]]
    # the model saw the failure in the tool result and in the rebuilt prompt
    third = model.requests[2]
    failure = [m for m in third if isinstance(m, ToolMessage) and m.status == "error"]
    assert failure and "revenu" in str(failure[0].content)
    assert "\n<sql_history>\n" in _system(third) and "✗" in _system(third)
    # the answer carries both queries, the exact rows and then the summary
    answer = state["messages"][-1].content
    assert answer.index("```sql\n" + bad) < answer.index("```sql\n" + good) < answer.index("结论")
    assert f"|{format_cell(reference_revenue)}|" in answer
    # cleanup: only the question and the answer remain, no orphaned tool traffic
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == ["HumanMessage", "AIMessage"]


def test_prompt_is_rebuilt_from_state_every_loop(sample_path: Path) -> None:
    model = ScriptedChatModel(
        script=[
            tool_call("run_sql", sql="SELECT COUNT(*) AS n FROM dim_game", purpose="games"),
            tool_call("run_sql", sql="SELECT COUNT(*) AS n FROM dim_channel", purpose="channels"),
            text("done"),
        ]
    )
    graph = build_graph(model=model, settings=Settings(), checkpointer=InMemorySaver())
    _run(graph, {"messages": [HumanMessage("幻境物语上个月DAU")]}, "rebuild")
    prompts = [_system(r) for r in model.requests]
    assert len(prompts) == 3
    assert all("<question_context>" in p and "<resolved_question>" in p for p in prompts)
    assert all('"games":[1002]' in p and '"metrics":["dau"]' in p for p in prompts)
    assert "\n<sql_history>\n" not in prompts[0]
    assert "[task 1 · turn 1]" in prompts[1] and "[task 2 · turn 1]" not in prompts[1]
    assert "[task 1 · turn 1]" in prompts[2] and "[task 2 · turn 1]" in prompts[2]
    # every request keeps each tool call paired with its result
    for request in model.requests:
        calls = {c["id"] for m in request if isinstance(m, AIMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in request if isinstance(m, ToolMessage)}
        assert calls == results


def test_step_budget_forces_an_answer_without_tools(sample_path: Path) -> None:
    def runaway(messages: list[BaseMessage]) -> AIMessage:
        if BUDGET_TAG in _system(messages):
            return text("预算用尽，基于已有结果作答。")
        return tool_call("think", reflection="keep thinking")

    model = ScriptedChatModel(script=[runaway], repeat_last=True)
    graph = build_graph(model=model, settings=Settings(), checkpointer=InMemorySaver())
    state = _run(graph, {"messages": [HumanMessage("为什么星海远征8月流水暴涨？")]}, "budget")
    assert state["route"] == "analysis"
    assert state["messages"][-1].content.endswith("预算用尽，基于已有结果作答。")
    # base budget of the analysis line is 10 steps with no open todos
    assert len(model.requests) == 11
    assert BUDGET_TAG in _system(model.requests[-1])
    assert all(BUDGET_TAG not in _system(r) for r in model.requests[:-1])


def test_clarification_interrupts_and_resumes(sample_path: Path, reference_revenue: float) -> None:
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "clarify"}}
    graph.invoke({"messages": [HumanMessage("王者荣耀上个月流水多少？")]}, config)
    snapshot = graph.get_state(config)
    interrupts = [i for t in snapshot.tasks for i in t.interrupts]
    assert interrupts and "王者荣耀" in interrupts[0].value["question"]
    graph.invoke(Command(resume="星海远征"), config)
    state = graph.get_state(config).values
    assert state["spec"]["games"][0]["id"] == 1001
    assert f"{reference_revenue:,.2f}" in state["messages"][-1].content


def test_follow_up_inherits_the_previous_question(sample_path: Path) -> None:
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    first = _run(graph, {"messages": [HumanMessage("星海远征上个月流水多少？")]}, "follow")
    total = first["sql_history"][-1]["rows"][0][0]
    second = _run(graph, {"messages": [HumanMessage("按渠道拆开看看")]}, "follow")
    last = second["sql_history"][-1]
    assert last["turn"] == 2 and "channel_name" in last["columns"]
    by_channel = [row[last["columns"].index("revenue")] for row in last["rows"]]
    assert round(sum(by_channel), 2) == pytest.approx(total)
    assert [type(m).__name__ for m in second["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
    ]


def test_model_failure_leaves_the_thread_intact(sample_path: Path) -> None:
    class Broken(ScriptedChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("provider down")

    saver = InMemorySaver()
    ok = build_graph(settings=Settings(), checkpointer=saver)
    _run(ok, {"messages": [HumanMessage("星海远征上个月流水多少？")]}, "broken")
    broken = build_graph(model=Broken(), settings=Settings(), checkpointer=saver)
    with pytest.raises(
        ModelError, match="analyst model 'Broken' failed: RuntimeError: provider down"
    ):
        _run(broken, {"messages": [HumanMessage("那幻境物语呢")]}, "broken")
    values = ok.get_state({"configurable": {"thread_id": "broken"}}).values
    assert len(values["sql_history"]) == 1
    assert "```sql" in values["messages"][1].content
