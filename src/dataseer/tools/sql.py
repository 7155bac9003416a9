"""``run_sql``: execute one query and turn its result into state and an observation."""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from dataseer.data.protocol import QueryResult
from dataseer.observe.track import track_tool
from dataseer.prompt import markdown_table
from dataseer.services import services_for
from dataseer.sql.execute import DENIED_MARK, frame_rows, run_query
from dataseer.sql.permission_store import permissions_for_config
from dataseer.state import SqlRecord
from dataseer.tools.python import store_query_frame

OBSERVATION_ROWS = 20
"""Rows shown to the model in the tool result; all stored rows stay in state."""

CHARTS = ("table", "line", "bar", "pie", "funnel", "scatter", "kpi")


def _next_task_id(state: dict[str, Any], tool_call_id: str) -> int:
    """A small, unique task id even when several run_sql calls run in parallel."""
    base = max((int(r["task_id"]) for r in state.get("sql_history") or []), default=0)
    for message in reversed(state.get("messages") or []):
        if isinstance(message, AIMessage) and message.tool_calls:
            sql_calls = [c["id"] for c in message.tool_calls if c["name"] == "run_sql"]
            if tool_call_id in sql_calls:
                return base + sql_calls.index(tool_call_id) + 1
            break
    return base + 1


def observation(record: SqlRecord) -> str:
    """What the model reads after a query: the outcome first, then the rows."""
    head = f"task {record['task_id']}"
    if not record["ok"] and str(record.get("error") or "").startswith(DENIED_MARK):
        return f"✗ {head} denied / 未执行:\n{record.get('error')}"
    if not record["ok"]:
        return (
            f"✗ {head} failed / 执行失败: {record.get('error')}\n"
            "Fix the SQL and call run_sql again; check names with table_info."
        )
    more = " (truncated by the row limit)" if record["truncated"] else ""
    if record["row_count"] == 0:
        return (
            f"✓ {head}: 0 rows / 查询结果为空. Check the filter values (names, dates) "
            "against table_info previews before concluding there is no data."
        )
    table = markdown_table(record["columns"], record["rows"], max_rows=OBSERVATION_ROWS)
    return f"✓ {head}: {record['row_count']} rows{more}\n{table}"


@tool
@track_tool(name="run_sql")
def run_sql(sql: str, runtime: ToolRuntime, purpose: str = "", chart: str = "table") -> Command:  # noqa: D417  # runtime is injected
    """Run one read-only SQL query on the warehouse and return the rows.

    Args:
        sql: a single SELECT (or WITH ... SELECT) statement.
        purpose: what this query establishes, in the user's language.
        chart: the chart that fits the result: table, line, bar, pie, funnel, scatter or kpi.
    """
    services = services_for(runtime.config)
    permissions, problem = permissions_for_config(
        services.permission_store, runtime.config, services.settings
    )
    result = run_query(
        services.datasource,
        sql,
        services.settings,
        permissions=permissions,
        denial_reason=problem,
    )
    return sql_command(runtime, result, purpose, chart)


def correction_hints(config: Any, record: SqlRecord) -> str:
    """Closest real names and values when a query failed or matched nothing ('' otherwise)."""
    denied = str(record.get("error") or "").startswith(DENIED_MARK)
    empty = record["ok"] and record["row_count"] == 0
    if denied or (record["ok"] and not empty):
        return ""
    from dataseer.knowledge.corrections import suggest_fixes
    from dataseer.knowledge.retrieval import catalog_entries
    from dataseer.knowledge.values import value_index_for

    services = services_for(config)
    hints = suggest_fixes(
        record["sql"],
        catalog=catalog_entries(services.datasource),
        values=value_index_for(services.datasource, services.pack) if empty else None,
        empty=empty,
        dialect=services.datasource.dialect,
    )
    return "".join(f"\nhint: {h}" for h in hints)


def sql_command(runtime: ToolRuntime, result: QueryResult, purpose: str, chart: str) -> Command:
    """A query's outcome as state (a ``SqlRecord``), a stream event and the observation.

    ``SqlGuardMiddleware`` builds its denials through this too, so a query
    denied by the middleware and one denied at ``run_query`` read the same.
    """
    record: SqlRecord = {
        "task_id": _next_task_id(runtime.state, runtime.tool_call_id or ""),
        "turn": int(runtime.state.get("turn") or 0),
        "purpose": purpose.strip(),
        "sql": result.sql,
        "ok": result.ok,
        "error": result.error,
        "columns": [str(c) for c in result.columns],
        "rows": frame_rows(result.frame) if result.ok else [],
        "row_count": result.row_count,
        "truncated": result.truncated,
        "elapsed": round(result.elapsed, 4),
        "chart": chart if chart in CHARTS else "table",
    }
    frame_note = store_query_frame(runtime.config, record, result.frame) if result.ok else ""
    runtime.stream_writer({"type": "sql", **record, "rows": record["rows"][:OBSERVATION_ROWS]})
    message = ToolMessage(
        observation(record) + frame_note + correction_hints(runtime.config, record),
        tool_call_id=runtime.tool_call_id,
        artifact=record,
        status="success" if record["ok"] else "error",
    )
    return Command(update={"sql_history": [record], "messages": [message]})
