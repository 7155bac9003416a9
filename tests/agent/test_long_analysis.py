"""A scripted 25-step analysis through the whole graph: context stays small and valid.

The scripted model plays a diligent analyst: plan, search, read a schema
(twice), a failing query and its correction, a repeated query, reflections
and a long series of queries, then an answer. Everything else is real.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from dataseer.config import Settings
from dataseer.graph import build_graph
from support.scripted import ScriptedChatModel, text, tool_call

DAY = (
    "SELECT ROUND(SUM(revenue), 2) AS revenue FROM dws_game_pay_di "
    "WHERE game_id IN (1001) AND ds = DATE '2026-08-{d:02d}'"
)


def _system(messages: list[BaseMessage]) -> str:
    return next(str(m.content) for m in messages if isinstance(m, SystemMessage))


def _script() -> list[Any]:
    todos = [{"id": f"t{i}", "content": f"step {i}", "status": "pending"} for i in range(1, 9)]
    steps: list[Any] = [
        tool_call("write_todos", todos=todos),
        tool_call("search_tables", query="星海远征 流水 皮肤"),
        tool_call("table_info", table="dws_game_pay_di"),
        tool_call("table_info", table="dws_game_pay_di"),
        tool_call(
            "run_sql",
            sql="SELECT SUM(revenu) FROM dws_game_pay_di WHERE game_id IN (1001)",
            purpose="8月流水",
        ),
        tool_call("run_sql", sql=DAY.format(d=1), purpose="8月流水"),
        tool_call("run_sql", sql=DAY.format(d=1), purpose="8月流水（重复）"),
        tool_call("think", reflection="第一天的流水已确认，继续逐日查看"),
    ]
    steps += [
        tool_call("run_sql", sql=DAY.format(d=d), purpose=f"8月{d}日流水") for d in range(2, 16)
    ]
    steps.append(tool_call("sql_task_detail", task_id=2))
    steps.append(tool_call("think", reflection="8月5日起流水明显上升"))
    steps.append(lambda messages: text("8月每日流水见上表，8月5日起明显上升。"))
    return steps


@pytest.fixture(scope="module")
def run(sample_path: Path) -> tuple[ScriptedChatModel, dict[str, Any]]:
    model = ScriptedChatModel(script=_script())
    graph = build_graph(model=model, settings=Settings(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "long"}, "recursion_limit": 200}
    graph.invoke({"messages": [HumanMessage("为什么星海远征8月流水暴涨？")]}, config)
    return model, dict(graph.get_state(config).values)


def test_all_25_loops_ran_and_answered(run: tuple[ScriptedChatModel, dict[str, Any]]) -> None:
    model, state = run
    assert len(model.requests) == 25
    assert state["route"] == "analysis"
    assert "8月5日起明显上升" in state["messages"][-1].content


def test_prompt_is_rebuilt_with_tiers(run: tuple[ScriptedChatModel, dict[str, Any]]) -> None:
    model, state = run
    last = _system(model.requests[-1])
    history = last.split("\n<sql_history>\n")[1].split("\n</sql_history>")[0]
    records = state["sql_history"]
    assert len(records) == 16  # the failure, its fix and 14 more; the repeat was not re-run
    first, newest = records[0], records[-1]
    assert f"[task {first['task_id']} · turn 1] ✗ 8月流水 · failed" in history
    assert history.count("```sql") == 3  # only the three newest with full tables
    assert re.search(r"✓ 8月10日流水 → df_\w+ · revenue=", history)  # middle tier: summaries
    assert f"[task {newest['task_id']} · turn 1] ✓" in history
    # the reflection is shown once: in the prompt right after think, not later
    after_think = [i for i, r in enumerate(model.requests) if "<recent_reflection>" in _system(r)]
    assert after_think == [8, 24]


def test_message_list_stays_short_and_valid(run: tuple[ScriptedChatModel, dict[str, Any]]) -> None:
    model, state = run
    sizes = [len([m for m in r if not isinstance(m, SystemMessage)]) for r in model.requests]
    assert max(sizes) <= 7, sizes  # question + search group + latest group, never the transcript
    for request in model.requests:
        calls = {c["id"] for m in request if isinstance(m, AIMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in request if isinstance(m, ToolMessage)}
        assert calls == results, "every tool call keeps its result and nothing else"
    assert [type(m).__name__ for m in state["messages"]] == ["HumanMessage", "AIMessage"]


def test_repeats_are_served_from_state(run: tuple[ScriptedChatModel, dict[str, Any]]) -> None:
    model, _ = run
    cached = model.requests[4][-1]
    assert isinstance(cached, ToolMessage) and "cached" in str(cached.content)
    repeat = model.requests[7][-1]
    assert isinstance(repeat, ToolMessage) and "served from state" in str(repeat.content)


def test_failed_query_observation_and_correction(
    run: tuple[ScriptedChatModel, dict[str, Any]],
) -> None:
    model, state = run
    failure = model.requests[5][-1]
    assert isinstance(failure, ToolMessage) and failure.status == "error"
    assert "revenu" in str(failure.content)
    assert state["sql_history"][1]["ok"] and state["sql_history"][1]["purpose"] == "8月流水"


def test_usage_is_returned_with_the_run(run: tuple[ScriptedChatModel, dict[str, Any]]) -> None:
    _, state = run
    usage = state["usage"]
    assert usage["nodes"]["analysis"]["calls"] == 25
    assert usage["tools"]["run_sql"]["calls"] == 17
    assert usage["tools"]["table_info"]["calls"] == 2
