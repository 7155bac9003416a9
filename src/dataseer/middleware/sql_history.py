"""SQL history: every ``run_sql`` call as a record in state, rendered in tiers.

Long analyses stay small because the prompt never carries the transcript of
queries: the last ``full`` queries appear with their (truncated) result
tables, the next ones up to ``summarized`` as one-sentence summaries, older
ones as a single line; ``sql_task_detail`` fetches any record in full on
demand. The middleware also guards the loop: an identical query that already
succeeded is answered from state instead of re-executed, a task that keeps
failing hits a retry limit, and a non-retryable failure (a permission
denial, a timeout) stops that path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

import sqlglot
from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from dataseer.config import Settings, get_settings
from dataseer.middleware._partitions import current_turn, tool_result
from dataseer.models.tiers import chat_model
from dataseer.prompt import format_cell, load_prompt, markdown_table
from dataseer.state import SqlRecord, merge_sql_history

PROMPT_ROWS = 8
"""Rows of each full-tier result in the prompt; ``sql_task_detail`` returns the rest."""

log = logging.getLogger(__name__)

NON_RETRYABLE = ("权限", "permission", "denied", "超时", "timed out", "timeout")
"""Error fragments of failures that a rewrite of the same query cannot fix."""


class SqlHistoryState(AgentState[Any]):
    """The SQL records of the thread and the current turn."""

    turn: NotRequired[int]
    sql_history: NotRequired[Annotated[list[SqlRecord], merge_sql_history]]


class SqlHistoryError(ValueError):
    """The middleware was configured with impossible tiers."""


def compress_sql(sql: str, dialect: str = "duckdb") -> str:
    """One-line SQL without comments or layout, for the prompt's older tiers."""
    try:
        return sqlglot.transpile(sql, read=dialect, write=dialect, pretty=False, comments=False)[0]
    except sqlglot.errors.SqlglotError:
        return " ".join(sql.split())


def normalize_sql(sql: str) -> str:
    """A key that equal queries share whatever their layout and case."""
    return compress_sql(sql.strip().rstrip(";")).lower()


def summarize(record: SqlRecord) -> tuple[str, str]:
    """Deterministic (summary, one-line summary) of a record's result."""
    if not record["ok"]:
        error = str(record.get("error") or "").splitlines()[0][:160]
        return f"failed: {error}", "failed"
    columns, rows = record["columns"], record["rows"]
    if not rows:
        return "0 rows (empty result)", "0 rows"
    if len(rows) == 1:
        pairs = ", ".join(f"{c}={format_cell(v)}" for c, v in zip(columns, rows[0], strict=False))
        return pairs, pairs[:80]
    first = ", ".join(f"{c}={format_cell(v)}" for c, v in zip(columns, rows[0], strict=False))
    return (
        f"{record['row_count']} rows × {len(columns)} cols ({', '.join(columns)}); first: {first}",
        f"{record['row_count']} rows",
    )


def summarize_with_model(record: SqlRecord, settings: Settings) -> tuple[str, str]:
    """(summary, one-line summary) from the summarizer tier; deterministic otherwise.

    An LLM summary costs a model call per query, so it is opt-in: only an
    explicit ``DATASEER_MODEL_SUMMARIZER`` turns it on (the tier does not fall
    back to ``DATASEER_MODEL`` here). A provider failure falls back to the
    deterministic summary: a summary is a convenience, never a reason to fail
    a query the user is waiting for.
    """
    fallback = summarize(record)
    if not record["ok"] or not settings.model_summarizer or not record["rows"]:
        return fallback
    table = markdown_table(record["columns"], record["rows"], max_rows=20)
    prompt = load_prompt("summarizer/system", settings.resolved_prompts_dir)
    try:
        reply = chat_model(settings, "summarizer").invoke(
            [SystemMessage(prompt), HumanMessage(f"purpose: {record.get('purpose')}\n{table}")]
        )
    except Exception as exc:  # fall back rather than fail the query
        log.warning("summarizer failed, using the deterministic summary: %s", exc)
        return fallback
    lines = [line.strip() for line in str(reply.content).splitlines() if line.strip()]
    if not lines:
        return fallback
    return lines[0][:400], (lines[1] if len(lines) > 1 else lines[0])[:120]


def render_tiers(records: list[SqlRecord], *, full: int = 3, summarized: int = 10) -> str:
    """Newest first in detail: ``full`` with tables, then summaries, then one line."""
    out: list[str] = []
    n = len(records)
    for i, rec in enumerate(records):
        age = n - i  # 1 = newest
        mark = "✓" if rec["ok"] else "✗"
        head = (
            f"[task {rec['task_id']} · turn {rec.get('turn', 0)}] {mark} {rec.get('purpose') or ''}"
        )
        if rec.get("frame") and rec["ok"]:
            head += f" → {rec['frame']}"
        if age > summarized:
            out.append(f"{head} · {rec.get('one_line') or summarize(rec)[1]}")
        elif age > full:
            out.append(f"{head} · {rec.get('summary') or summarize(rec)[0]}")
        else:
            body = f"```sql\n{rec['sql']}\n```"
            if rec["ok"]:
                body += "\n" + markdown_table(rec["columns"], rec["rows"], max_rows=PROMPT_ROWS)
                if rec["row_count"] > PROMPT_ROWS:
                    body += f"\n(sql_task_detail({rec['task_id']}) returns all rows)"
            else:
                body += f"\nerror: {rec.get('error')}"
            out.append(f"{head} · {rec['row_count']} rows\n{body}")
    return "\n\n".join(out)


@tool
def sql_task_detail(task_id: int, runtime: ToolRuntime) -> ToolMessage:  # noqa: D417  # runtime is injected
    """Fetch one earlier query in full: purpose, SQL, every stored row or the error.

    Args:
        task_id: the task number shown in <sql_history>.
    """
    records = runtime.state.get("sql_history") or []
    found = next((r for r in records if r["task_id"] == int(task_id)), None)
    if found is None:
        known = ", ".join(str(r["task_id"]) for r in records) or "none"
        return ToolMessage(
            f"没有任务 {task_id} / no task {task_id}; known tasks: {known}",
            tool_call_id=runtime.tool_call_id or "",
            status="error",
        )
    parts = [
        f"task {found['task_id']}: {found.get('purpose') or ''}",
        f"```sql\n{found['sql']}\n```",
    ]
    if found["ok"]:
        parts.append(markdown_table(found["columns"], found["rows"]))
        if found["truncated"] or found["row_count"] > len(found["rows"]):
            parts.append(f"(showing {len(found['rows'])} of {found['row_count']}+ rows)")
    else:
        parts.append(f"error: {found.get('error')}")
    return ToolMessage("\n".join(parts), tool_call_id=runtime.tool_call_id or "", artifact=found)


class SqlHistoryMiddleware(AgentMiddleware[SqlHistoryState, Any]):
    """Turns run_sql results into tiered state; serves repeats; limits retries."""

    state_schema = SqlHistoryState
    tools = [sql_task_detail]  # noqa: RUF012  # the AgentMiddleware contract is a class attribute
    partition = "sql_history"

    def __init__(self, *, full: int = 3, summarized: int = 10, max_retries: int = 3) -> None:
        super().__init__()
        if not 0 < full <= summarized or max_retries < 1:
            msg = (
                f"invalid SQL history tiers: full={full}, summarized={summarized}, "
                f"max_retries={max_retries} (need 0 < full <= summarized, max_retries >= 1)"
            )
            raise SqlHistoryError(msg)
        self.full = full
        self.summarized = summarized
        self.max_retries = max_retries

    def render(self, state: dict[str, Any]) -> str:
        """The ``<sql_history>`` partition."""
        return render_tiers(
            list(state.get("sql_history") or []), full=self.full, summarized=self.summarized
        )

    def _short_circuit(self, request: ToolCallRequest) -> ToolMessage | None:
        """An answer from state for a repeat or a task that must not be retried."""
        args = request.tool_call.get("args") or {}
        call_id = str(request.tool_call.get("id") or "")
        state = request.state if isinstance(request.state, dict) else {}
        turn = current_turn(state)
        records = [r for r in state.get("sql_history") or [] if r.get("turn") == turn]
        key = normalize_sql(str(args.get("sql") or ""))
        for rec in records:
            if rec["ok"] and normalize_sql(rec["sql"]) == key:
                task = rec["task_id"]
                return ToolMessage(
                    f"与任务 {task} 的查询完全相同，已从状态返回，未重复执行 / identical to "
                    f"task {task}; served from state, not re-executed.\n"
                    + markdown_table(rec["columns"], rec["rows"], max_rows=20),
                    tool_call_id=call_id,
                    artifact=rec,
                )
        purpose = str(args.get("purpose") or "").strip()
        if not purpose:
            return None
        failures = [r for r in records if not r["ok"] and r.get("purpose") == purpose]
        # A refused or timed-out query stops that path: the same SQL is not run
        # again. A rewrite (inside the scope the refusal named) may still run.
        blocked = [
            r for r in failures if not r.get("retryable", True) and normalize_sql(r["sql"]) == key
        ]
        if blocked:
            last = blocked[-1]
            return ToolMessage(
                f"任务「{purpose}」因不可重试的失败而停止 / task '{purpose}' stopped after a "
                f"non-retryable failure (task {last['task_id']}: {last.get('error')}). "
                "Do not retry it; continue with other tasks or answer with what is known.",
                tool_call_id=call_id,
                status="error",
            )
        if len(failures) >= self.max_retries:
            return ToolMessage(
                f"任务「{purpose}」已失败 {len(failures)} 次，达到重试上限 / task '{purpose}' "
                f"failed {len(failures)} times: retry limit reached. Move on or answer with "
                "what is known.",
                tool_call_id=call_id,
                status="error",
            )
        return None

    @staticmethod
    def _enrich(result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        """Add summaries, compact SQL and retryability to the new record."""
        if not isinstance(result, Command) or not isinstance(result.update, dict):
            return result
        records = result.update.get("sql_history") or []
        try:
            settings = get_settings(get_config())
        except RuntimeError:  # called outside a run (tests of the hook)
            settings = get_settings()
        enriched = []
        for rec in records:
            summary, one_line = summarize_with_model(rec, settings)
            error = str(rec.get("error") or "").lower()
            retryable = rec["ok"] or not any(word in error for word in NON_RETRYABLE)
            enriched.append(
                {
                    **rec,
                    "summary": summary,
                    "one_line": one_line,
                    "sql_compact": compress_sql(rec["sql"]),
                    "retryable": retryable,
                }
            )
        message = tool_result(result)
        if message is not None and isinstance(message.artifact, dict) and enriched:
            message.artifact = enriched[-1]
        return Command(update={**result.update, "sql_history": enriched})

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Serve repeats from state, enforce retry limits, enrich new records."""
        if request.tool_call.get("name") != "run_sql":
            return handler(request)
        short = self._short_circuit(request)
        if short is not None:
            return short
        return self._enrich(handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of ``wrap_tool_call``."""
        if request.tool_call.get("name") != "run_sql":
            return await handler(request)
        short = self._short_circuit(request)
        if short is not None:
            return short
        result = await handler(request)
        return await asyncio.to_thread(self._enrich, result)
