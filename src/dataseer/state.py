"""State schemas and reducers shared by the router graph and its lines.

The router graph and the agent lines share these keys, so a line compiled as
a subgraph hands its SQL records and answer back to the parent unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

Route = Literal["quick", "clarify", "lookup", "analysis"]


class SqlRecord(TypedDict):
    """One executed (or failed) query, JSON-safe so checkpoints stay portable."""

    task_id: int
    turn: int
    purpose: str
    sql: str
    ok: bool
    error: NotRequired[str | None]
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool
    elapsed: float
    chart: NotRequired[str]
    frame: NotRequired[str]
    """The result's variable name in the datalayer (``df_3_monthly_revenue``), for run_python."""
    frame_path: NotRequired[str]
    """The Arrow IPC file holding the result's rows (the data stays on disk, not in state)."""
    summary: NotRequired[str]
    one_line: NotRequired[str]
    sql_compact: NotRequired[str]
    retryable: NotRequired[bool]


class Todo(TypedDict):
    """One item of the analysis plan."""

    id: str
    content: str
    status: Literal["pending", "in_progress", "completed"]


def merge_sql_history(
    left: list[SqlRecord] | None, right: list[SqlRecord] | None
) -> list[SqlRecord]:
    """Append new records, replacing any with the same ``task_id``.

    Replacing (not duplicating) lets a retry or a summarizer update a record
    in place while plain appends stay cheap.
    """
    merged = list(left or [])
    index = {rec["task_id"]: i for i, rec in enumerate(merged)}
    for rec in right or []:
        pos = index.get(rec["task_id"])
        if pos is None:
            index[rec["task_id"]] = len(merged)
            merged.append(rec)
        else:
            merged[pos] = rec
    return merged


def merge_todos(left: list[Todo] | None, right: list[Todo] | None) -> list[Todo]:
    """Merge todos by id: new ids append, known ids update in place."""
    merged = list(left or [])
    index = {t["id"]: i for i, t in enumerate(merged)}
    for todo in right or []:
        pos = index.get(todo["id"])
        if pos is None:
            index[todo["id"]] = len(merged)
            merged.append(todo)
        else:
            merged[pos] = {**merged[pos], **todo}
    return merged


def merge_loops(
    left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Append usage entries, skipping ids already present (subgraph hand-backs)."""
    merged = list(left or [])
    seen = {entry.get("id") for entry in merged}
    merged.extend(e for e in right or [] if e.get("id") not in seen)
    return merged


def merge_tables(left: dict[str, str] | None, right: dict[str, str] | None) -> dict[str, str]:
    """Later schema text for a table replaces earlier text."""
    return {**(left or {}), **(right or {})}


class DataseerState(TypedDict):
    """The router graph's state: one thread, many questions (turns)."""

    messages: Annotated[list[AnyMessage], add_messages]
    question: NotRequired[str]
    """The current question, with clarification replies folded in."""
    spec: NotRequired[dict[str, Any] | None]
    """The resolved question (``QuestionSpec.to_dict()``); the previous one seeds follow-ups."""
    route: NotRequired[Route]
    clarification: NotRequired[str]
    """The question put to the user while the run waits on an interrupt."""
    turn: NotRequired[int]
    """Counts questions in the thread; SQL records carry the turn they belong to."""
    deep: NotRequired[bool]
    sql_history: NotRequired[Annotated[list[SqlRecord], merge_sql_history]]
    todos: NotRequired[Annotated[list[Todo], merge_todos]]
    reflection: NotRequired[str | None]
    scene: NotRequired[str | None]
    """The scene of the current question (``configurable.scene`` or detected by the router)."""
    tables_info: NotRequired[Annotated[dict[str, str], merge_tables]]
    loops: NotRequired[Annotated[list[dict[str, Any]], merge_loops]]
    usage: NotRequired[dict[str, Any]]
    """Token and time totals of the latest question, per node, tool and skill."""
    answer: NotRequired[str]
    summary: NotRequired[str]


class DataseerInput(TypedDict):
    """What a caller sends: messages, and optionally ``deep`` to force analysis."""

    messages: Annotated[list[AnyMessage], add_messages]
    deep: NotRequired[bool]
