"""Compose the user-facing answer: the exact SQL and rows, and the summary.

The model writes only the analysis. The SQL it ran and the result tables are
attached here from ``sql_history``, verbatim, so an answer can never show a
number that no query returned next to a query that did not run.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, RemoveMessage

from dataseer.lines.report import START, render_html_report, repair_report, wants_report
from dataseer.middleware.usage import summarize_usage
from dataseer.observe import emit, phase
from dataseer.observe.track import track_node
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


def compose_answer(
    records: list[SqlRecord], summary: str, zh: bool, *, findings_first: bool
) -> str:
    """The full answer text for one turn.

    Lookups show the query and its rows, then the one-line answer; analyses
    lead with the findings, then every query that backs them.
    """
    if not records:
        return summary
    blocks = [render_record(i, r, zh) for i, r in enumerate(records, start=1)]
    if findings_first:
        heading = "### 查询明细" if zh else "### Queries"
        return "\n\n".join([summary.strip(), heading, *blocks])
    heading = "### 结论" if zh else "### Answer"
    return "\n\n".join([*blocks, heading, summary.strip()])


@track_node(name="compose")
def compose_node(state: DataseerState) -> dict[str, Any]:
    """Replace the line's final message with the composed answer."""
    turn = int(state.get("turn") or 0)
    records = [r for r in state.get("sql_history") or [] if r.get("turn") == turn]
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    summary = str(last.content) if isinstance(last, AIMessage) else ""
    spec = state.get("spec") or {}
    zh = spec.get("language", "zh") == "zh"
    summary, repaired = repair_report(summary)
    if repaired:
        summary += "\n\n⚠ " + (
            "报告在生成时被截断，已自动补全结构，内容可能不完整。"
            if zh
            else "The report was cut off while it was written; its structure was closed "
            "automatically and its content may be incomplete."
        )
    analysis = state.get("route") == "analysis"
    question = str(state.get("question") or "")
    if analysis and records and START not in summary and wants_report(question):
        summary += "\n\n" + render_html_report(question, summary, records)
    answer = compose_answer(records, summary, zh, findings_first=analysis)
    loops = [e for e in state.get("loops") or [] if e.get("turn") == turn]
    update: dict[str, Any] = {
        "answer": answer,
        "summary": summary,
        "deep": False,
        "usage": summarize_usage(loops),
    }
    new_message = AIMessage(answer, name="dataseer")
    if isinstance(last, AIMessage) and last.id:
        update["messages"] = [RemoveMessage(id=last.id), new_message]
    else:
        update["messages"] = [new_message]
    emit({"type": "usage", "turn": turn, "usage": update["usage"]})
    phase("done")
    return update
