"""Each analysis middleware's hooks, called directly on hand-built state."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from dataseer.middleware.message_cleanup import MessageCleanupMiddleware
from dataseer.middleware.notebook import NotebookMiddleware, namespace, notebook
from dataseer.middleware.sql_history import (
    SqlHistoryError,
    SqlHistoryMiddleware,
    compress_sql,
    render_tiers,
    sql_task_detail,
)
from dataseer.middleware.table_info import TableInfoMiddleware
from dataseer.middleware.think import ThinkMiddleware
from dataseer.middleware.todo import TodoMiddleware
from dataseer.middleware.usage import summarize_usage
from dataseer.middleware.verify import VerifyMiddleware, stated_numbers, ungrounded
from support.records import record


class _Request:
    """The two attributes of a ToolCallRequest the wrap hooks read."""

    def __init__(self, name: str, args: dict[str, Any], state: dict[str, Any]) -> None:
        self.tool_call = {"name": name, "args": args, "id": "call-1", "type": "tool_call"}
        self.state = state


class _Runtime:
    def __init__(self, state: dict[str, Any], store: Any = None, config: Any = None) -> None:
        self.state = state
        self.store = store
        self.config = config or {"configurable": {"user_id": "u1", "thread_id": "t1"}}
        self.tool_call_id = "call-1"


# --- SQL history --------------------------------------------------------------------------


def test_tiers_full_then_summaries_then_one_line() -> None:
    records = [record(i, summary=f"sum {i}", one_line=f"line {i}") for i in range(1, 13)]
    text = render_tiers(records, full=3, summarized=10)
    blocks = text.split("\n\n")
    assert blocks[0] == "[task 1 · turn 1] ✓ purpose 1 · line 1"  # older than 10: one line
    assert blocks[1] == "[task 2 · turn 1] ✓ purpose 2 · line 2"
    assert blocks[2] == "[task 3 · turn 1] ✓ purpose 3 · sum 3"  # middle tier: the summary
    assert "```sql\nSELECT 10 AS x" in text and "```sql\nSELECT 9 AS x" not in text
    assert text.count("|x|") == 3


def test_compress_sql_drops_layout_and_comments() -> None:
    assert (
        compress_sql("SELECT a -- note\n,  b\nFROM t  WHERE x = 1")
        == "SELECT a, b FROM t WHERE x = 1"
    )


def test_identical_query_is_served_from_state() -> None:
    mw = SqlHistoryMiddleware()
    state = {"turn": 1, "sql_history": [record(1)]}
    calls: list[Any] = []
    result = mw.wrap_tool_call(
        _Request("run_sql", {"sql": "select 1   as x;"}, state),  # type: ignore[arg-type]
        lambda r: calls.append(r) or ToolMessage("ran", tool_call_id="call-1"),
    )
    assert not calls
    assert isinstance(result, ToolMessage) and "served from state" in str(result.content)
    assert result.artifact["task_id"] == 1


def test_retry_limit_and_non_retryable_failures() -> None:
    mw = SqlHistoryMiddleware(max_retries=2)
    failed = [record(i, ok=False, purpose="月流水") for i in (1, 2)]
    request = _Request(
        "run_sql", {"sql": "SELECT 9", "purpose": "月流水"}, {"turn": 1, "sql_history": failed}
    )
    result = mw.wrap_tool_call(request, lambda r: pytest.fail("must not run"))  # type: ignore[arg-type]
    assert (
        isinstance(result, ToolMessage)
        and result.status == "error"
        and "retry limit" in str(result.content)
    )
    denied = [record(1, ok=False, purpose="月流水", retryable=False)]
    state = {"turn": 1, "sql_history": denied}
    request = _Request("run_sql", {"sql": "select 1  as x", "purpose": "月流水"}, state)
    result = mw.wrap_tool_call(request, lambda r: pytest.fail("must not run"))  # type: ignore[arg-type]
    assert "non-retryable" in str(result.content)
    rewrite = _Request("run_sql", {"sql": "SELECT 1 AS x WHERE 1 = 1", "purpose": "月流水"}, state)
    ran = mw.wrap_tool_call(rewrite, lambda r: ToolMessage("ran", tool_call_id="call-1"))  # type: ignore[arg-type]
    assert str(ran.content) == "ran"  # a rewrite inside the scope may run


def test_new_records_are_enriched_with_summaries() -> None:
    mw = SqlHistoryMiddleware()
    fresh = record(3)
    message = ToolMessage("ok", tool_call_id="call-1", artifact=fresh)
    result = mw.wrap_tool_call(
        _Request("run_sql", {"sql": "SELECT 3 AS x"}, {"turn": 1}),  # type: ignore[arg-type]
        lambda r: Command(update={"sql_history": [fresh], "messages": [message]}),
    )
    assert isinstance(result, Command)
    stored = result.update["sql_history"][0]
    assert (
        stored["summary"] == "x=3"
        and stored["sql_compact"] == "SELECT 3 AS x"
        and stored["retryable"]
    )
    timeout = record(4, ok=False) | {"error": "查询超时 / query timed out after 1s"}
    result = mw.wrap_tool_call(
        _Request("run_sql", {"sql": "SELECT 4"}, {"turn": 1}),  # type: ignore[arg-type]
        lambda r: Command(update={"sql_history": [timeout], "messages": []}),
    )
    assert result.update["sql_history"][0]["retryable"] is False


def test_sql_task_detail_returns_full_record_or_names_known_tasks() -> None:
    state = {"sql_history": [record(1), record(2)]}
    found = sql_task_detail.func(task_id=2, runtime=_Runtime(state))  # type: ignore[attr-defined]
    assert found.artifact["task_id"] == 2 and "SELECT 2 AS x" in found.content
    missing = sql_task_detail.func(task_id=7, runtime=_Runtime(state))  # type: ignore[attr-defined]
    assert missing.status == "error" and "known tasks: 1, 2" in missing.content


def test_invalid_tiers_rejected() -> None:
    with pytest.raises(SqlHistoryError):
        SqlHistoryMiddleware(full=5, summarized=2)


# --- table info, think, todo, notebook ------------------------------------------------------


def test_table_info_is_fetched_once() -> None:
    mw = TableInfoMiddleware()
    schema = "## dim_game\n|column|type|comment|"
    first = mw.wrap_tool_call(
        _Request("table_info", {"table": "DIM_GAME"}, {}),  # type: ignore[arg-type]
        lambda r: ToolMessage(schema, tool_call_id="call-1"),
    )
    assert isinstance(first, Command) and first.update["tables_info"] == {"dim_game": schema}
    second = mw.wrap_tool_call(
        _Request("table_info", {"table": "dim_game"}, {"tables_info": {"dim_game": schema}}),  # type: ignore[arg-type]
        lambda r: pytest.fail("fetched twice"),
    )
    assert isinstance(second, ToolMessage) and "cached" in str(second.content)
    assert mw.render({"tables_info": {"dim_game": schema}}) == schema


def test_reflection_is_shown_once_then_cleared() -> None:
    from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse

    mw = ThinkMiddleware()
    assert mw.render({"reflection": "皮肤贡献最大"}) == "皮肤贡献最大"

    class Request:
        def __init__(self, state: dict[str, Any]) -> None:
            self.state = state

    response = ModelResponse(result=[AIMessage("ok")])
    cleared = mw.wrap_model_call(Request({"reflection": "x"}), lambda r: response)  # type: ignore[arg-type]
    assert isinstance(cleared, ExtendedModelResponse)
    assert cleared.command is not None and cleared.command.update == {"reflection": None}
    assert mw.wrap_model_call(Request({}), lambda r: response) is response  # type: ignore[arg-type]


def test_todo_partition() -> None:
    todos = [
        {"id": "t1", "content": "确认变化", "status": "completed"},
        {"id": "t2", "content": "拆解", "status": "pending"},
    ]
    assert (
        TodoMiddleware().render({"todos": todos})
        == "- [completed] t1: 确认变化\n- [pending] t2: 拆解"
    )


def test_notebook_on_the_store_is_namespaced_by_user_and_thread() -> None:
    store = InMemoryStore()
    mine = _Runtime({}, store)
    added = notebook.func(action="add", content="皮肤是主因", runtime=mine)  # type: ignore[attr-defined]
    note_id = added.split()[-1]
    assert "皮肤是主因" in notebook.func(action="list", runtime=mine)  # type: ignore[attr-defined]
    other = _Runtime({}, store, {"configurable": {"user_id": "u2", "thread_id": "t1"}})
    assert "no notes" in notebook.func(action="list", runtime=other)  # type: ignore[attr-defined]
    notebook.func(action="update", note_id=note_id, content="皮肤+夏日祭", runtime=mine)  # type: ignore[attr-defined]
    assert store.get(namespace(mine.config), note_id).value == {"content": "皮肤+夏日祭"}
    assert "deleted" in notebook.func(action="delete", note_id=note_id, runtime=mine)  # type: ignore[attr-defined]
    assert "no note" in notebook.func(action="delete", note_id=note_id, runtime=mine)  # type: ignore[attr-defined]
    assert NotebookMiddleware().render({"notes": [{"id": "a", "content": "x"}]}) == "- a: x"


# --- usage, verify, cleanup -------------------------------------------------------------------


def test_usage_totals_per_node_tool_and_skill() -> None:
    loops = [
        {
            "id": "1",
            "kind": "model",
            "node": "analysis",
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "cached_tokens": 40,
            "seconds": 0.5,
        },
        {"id": "2", "kind": "sql", "tool": "run_sql", "result_tokens": 30, "seconds": 0.1},
        {
            "id": "3",
            "kind": "tool",
            "tool": "load_skill",
            "skill": "funnel-analysis",
            "result_tokens": 200,
            "seconds": 0.01,
        },
        {
            "id": "4",
            "kind": "model",
            "node": "analysis",
            "prompt_tokens": 120,
            "completion_tokens": 5,
            "cached_tokens": 0,
            "seconds": 0.25,
        },
    ]
    usage = summarize_usage(loops)
    assert usage["nodes"]["analysis"] == {
        "prompt": 220,
        "completion": 15,
        "cached": 40,
        "calls": 2,
        "seconds": 0.75,
    }
    assert usage["tools"]["run_sql"]["calls"] == 1
    assert usage["skills"]["funnel-analysis"]["result_tokens"] == 200


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("流水为 72,519.42，环比 +166.86%", []),
        ("流水约 7.25万", []),
        ("差额 +45,344.53，皮肤占变化的 99.42%", []),
        ("流水为 80,000.00", ["80,000.00"]),
        ("2026-08-05 到 2026-08-20 有 3 个渠道", []),
        ("转化率 54.89%", []),
    ],
)
def test_numbers_are_checked_against_results(text: str, bad: list[str]) -> None:
    records = [
        {
            "ok": True,
            "columns": ["current_value", "previous_value"],
            "rows": [[72519.42, 27174.89]],
        },
        {"ok": True, "columns": ["cat", "delta", "share"], "rows": [["皮肤", 45080.41, 0.9942]]},
        {"ok": True, "columns": ["conv"], "rows": [[0.5489]]},
    ]
    assert ungrounded(text, records) == bad


def test_numbers_from_a_refusal_and_the_resolved_games_are_grounded() -> None:
    refused = [
        {"ok": False, "error": "⛔ permission denied: game_id IN (1002) not in scope (1001)"}
    ]
    assert ungrounded("1002 不在范围内，您可以查看 1001", refused) == []
    assert ungrounded("1003 也不行", refused) == ["1003"]


def test_stated_numbers_skip_dates_and_versions() -> None:
    assert [raw for raw, _ in stated_numbers("2026-08-05 SDK 3.2.0 流水 1,234.5万 task 3")] == [
        "1,234.5万"
    ]


def test_verify_sends_back_once_then_warns() -> None:
    mw = VerifyMiddleware()
    answer = AIMessage("流水为 99,999.99", id="a1")
    state: dict[str, Any] = {
        "messages": [HumanMessage("q"), answer],
        "turn": 1,
        "sql_history": [record(1) | {"rows": [[72519.42]]}],
    }
    first = mw.after_model(state, None)  # type: ignore[arg-type]
    assert first is not None and first["jump_to"] == "model" and "99,999.99" in first["verify_note"]
    state["verify_attempts"] = 1
    second = mw.after_model(state, None)  # type: ignore[arg-type]
    assert second is not None and "jump_to" not in second
    assert "未能在查询结果中核实" in second["messages"][0].content
    state["messages"][-1] = AIMessage("流水为 72,519.42", id="a2")
    assert mw.after_model(state, None) is None  # type: ignore[arg-type]


def test_cleanup_before_model_keeps_latest_and_non_state_backed_groups() -> None:
    def group(call_id: str, name: str) -> list[Any]:
        call = AIMessage(
            "",
            tool_calls=[{"name": name, "args": {}, "id": call_id, "type": "tool_call"}],
            id=f"a-{call_id}",
        )
        return [call, ToolMessage("r", tool_call_id=call_id, id=f"t-{call_id}")]

    messages = [
        HumanMessage("q", id="h"),
        *group("1", "run_sql"),
        *group("2", "search_tables"),
        *group("3", "think"),
        *group("4", "run_sql"),
    ]
    update = MessageCleanupMiddleware().before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    assert {m.id for m in update["messages"]} == {"a-1", "t-1", "a-3", "t-3"}
