"""Middleware hooks called directly on hand-built state."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage

from dataseer.config import get_settings
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.understand import understand
from dataseer.lines.agents import build_line, middleware_stack
from dataseer.middleware import BaseAnalysisMiddleware, MessageCleanupMiddleware
from dataseer.middleware.base_analysis import BaseAnalysisError
from dataseer.middleware.message_cleanup import removable_ids
from dataseer.models.offline import OfflineAnalyst
from support.records import record


def _call(call_id: str, name: str = "run_sql") -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": name, "args": {}, "id": call_id, "type": "tool_call"}]
    )


def test_cleanup_removes_answered_calls_with_their_results() -> None:
    messages = [
        HumanMessage("q", id="h"),
        _call("c1"),
        ToolMessage("r1", tool_call_id="c1", id="t1"),
        _call("c2"),
        ToolMessage("r2", tool_call_id="c2", id="t2"),
        AIMessage("answer", id="a"),
    ]
    messages[1].id, messages[3].id = "m1", "m2"
    assert removable_ids(messages) == ["m1", "t1", "m2", "t2"]
    assert removable_ids(messages, keep_latest=True) == ["m1", "t1"]
    assert removable_ids(messages, only={"think"}) == []
    update = MessageCleanupMiddleware().after_agent({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    assert all(isinstance(m, RemoveMessage) for m in update["messages"])
    kept = {"h", "a"}
    assert {m.id for m in update["messages"]}.isdisjoint(kept)


def test_cleanup_never_orphans_an_unanswered_call() -> None:
    call = _call("c1")
    call.id = "m1"
    assert removable_ids([HumanMessage("q"), call]) == []
    assert MessageCleanupMiddleware().after_agent({"messages": [call]}, None) is None  # type: ignore[arg-type]


def test_steps_count_model_turns_with_tool_calls() -> None:
    from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse

    mw = BaseAnalysisMiddleware("analysis")
    assert mw.before_agent({"messages": []}, None) == {"steps": 0}  # type: ignore[arg-type]

    class Request:
        def __init__(self) -> None:
            self.state = {"steps": 2}

    counted = mw.counted(Request(), ModelResponse(result=[_call("a")]))  # type: ignore[arg-type]
    assert isinstance(counted, ExtendedModelResponse)
    assert counted.command is not None and counted.command.update == {"steps": 3}
    final = ModelResponse(result=[AIMessage("answer")])
    assert mw.counted(Request(), final) is final  # type: ignore[arg-type]


def test_budget_grows_with_open_todos_up_to_the_cap() -> None:
    mw = BaseAnalysisMiddleware("analysis", base_steps=4, per_todo=3, max_steps=12)
    todos = [{"id": str(i), "content": "x", "status": "pending"} for i in range(5)]
    assert mw.budget({}) == 4
    assert mw.budget({"todos": todos[:2]}) == 10
    assert mw.budget({"todos": todos}) == 12
    done = [{**t, "status": "completed"} for t in todos]
    assert mw.budget({"todos": done}) == 4


def test_invalid_budget_is_refused_with_a_named_message() -> None:
    with pytest.raises(BaseAnalysisError, match="invalid step budget"):
        BaseAnalysisMiddleware("analysis", base_steps=5, max_steps=2)


def test_prompt_partitions_from_state(sample_path: Path) -> None:
    settings = get_settings()
    spec = understand("为什么星海远征8月流水暴涨？", KnowledgePack.load(), settings.resolved_today)
    state = {
        "messages": [
            HumanMessage("星海远征上个月流水"),
            AIMessage("…"),
            HumanMessage("为什么8月暴涨"),
        ],
        "question": "为什么星海远征8月流水暴涨？",
        "spec": spec.to_dict(),
        "turn": 2,
        "todos": [{"id": "t1", "content": "确认变化", "status": "in_progress"}],
        "sql_history": [{**record(1), "turn": 1}, {**record(2), "turn": 2}],
        "reflection": "皮肤增长最多",
    }
    prompt = middleware_stack("analysis")[0].build_prompt(state, None)
    order = [
        "<question_context>",
        "<game_info>",
        "<metric_rules>",
        "<todo_state>",
        "<sql_history>",
        "<recent_reflection>",
    ]
    positions = [prompt.index(f"\n{tag}\n") for tag in order]
    assert positions == sorted(positions)
    assert prompt.startswith("你是 dataseer")
    assert "|1001|星海远征|" in prompt
    assert "- [in_progress] t1: 确认变化" in prompt
    assert "[task 2 · turn 2] ✓ purpose 2" in prompt and "[task 1 · turn 1]" in prompt
    assert "<recent_reflection>\n皮肤增长最多\n</recent_reflection>" in prompt
    assert "earlier questions: 星海远征上个月流水" in prompt


def test_onion_order_is_documented_and_asserted() -> None:
    names = [type(m).__name__ for m in middleware_stack("analysis")]
    assert names == [
        "BaseAnalysisMiddleware",
        "UsageMiddleware",
        "VerifyMiddleware",
        "TodoMiddleware",
        "SqlHistoryMiddleware",
        "TableInfoMiddleware",
        "ThinkMiddleware",
        "NotebookMiddleware",
        "SqlGuardMiddleware",
        "MessageCleanupMiddleware",
    ]
    lookup = [type(m).__name__ for m in middleware_stack("lookup")]
    assert lookup[0] == "BaseAnalysisMiddleware" and lookup[-1] == "MessageCleanupMiddleware"
    assert "TodoMiddleware" not in lookup and "ThinkMiddleware" not in lookup
    base = middleware_stack("analysis")[0]
    assert [p.partition for p in base.providers] == [
        "verification",
        "todo_state",
        "sql_history",
        "tables_info",
        "recent_reflection",
        "notebook",
    ]
    graph = build_line("analysis", OfflineAnalyst())
    nodes = set(graph.get_graph().nodes)
    assert {"model", "tools", "MessageCleanupMiddleware.after_agent"} <= nodes
