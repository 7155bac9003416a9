"""Compose the user-facing answer: the exact SQL and rows first, then the summary.

The model writes only the analysis. The SQL it ran and the result tables are
attached here from ``sql_history``, verbatim, so an answer can never show a
number that no query returned next to a query that did not run.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, RemoveMessage

from dataseer.prompt import markdown_table
from dataseer.state import DataseerState, SqlRecord

ANSWER_ROWS = 50


def render_record(index: int, record: SqlRecord, zh: bool) -> str:
    """One query as shown to the user: purpose, SQL with ✓/✗, table or error."""
    mark = "✓" if record["ok"] else "✗"
    title = record.get("purpose") or (f"查询 {index}" if zh else f"Query {index}")
    parts = [f"**{index}. {title}** {mark}", f"```sql\n{record['sql']}\n```"]
    if record["ok"]:
        parts.append(markdown_table(record["columns"], record["rows"], max_rows=ANSWER_ROWS))
        note = []
        if record["truncated"]:
            note.append("结果已按行数上限截断" if zh else "truncated by the row limit")
        if record.get("chart") and record.get("chart") != "table":
            note.append(("建议图表" if zh else "suggested chart") + f": {record.get('chart')}")
        if note:
            parts.append(f"_{'; '.join(note)}_")
    else:
        parts.append(f"> {record.get('error')}")
    return "\n\n".join(parts)


def compose_answer(records: list[SqlRecord], summary: str, zh: bool) -> str:
    """The full answer text for one turn."""
    if not records:
        return summary
    blocks = [render_record(i, r, zh) for i, r in enumerate(records, start=1)]
    heading = "### 结论" if zh else "### Answer"
    return "\n\n".join([*blocks, heading, summary.strip()])


def compose_node(state: DataseerState) -> dict[str, Any]:
    """Replace the line's final message with the composed answer."""
    turn = int(state.get("turn") or 0)
    records = [r for r in state.get("sql_history") or [] if r.get("turn") == turn]
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    summary = str(last.content) if isinstance(last, AIMessage) else ""
    spec = state.get("spec") or {}
    zh = spec.get("language", "zh") == "zh"
    answer = compose_answer(records, summary, zh)
    update: dict[str, Any] = {"answer": answer, "summary": summary, "deep": False}
    new_message = AIMessage(answer, name="dataseer")
    if isinstance(last, AIMessage) and last.id:
        update["messages"] = [RemoveMessage(id=last.id), new_message]
    else:
        update["messages"] = [new_message]
    return update
