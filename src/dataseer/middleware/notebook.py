"""Notebook: durable notes on the LangGraph Store, kept across runs.

Notes are namespaced by user and thread (``("notebook", user, thread)``) so
that a long investigation can pick up where it left off, and one analyst's
notes are never shown to another. Before each model call the notes are
loaded into state and rendered as ``<notebook>``.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, NotRequired

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.tools import tool
from langgraph.runtime import Runtime

MAX_NOTES_SHOWN = 20


def namespace(config: Any) -> tuple[str, str, str]:
    """The store namespace of a run's notes: user and thread."""
    configurable = (config or {}).get("configurable") or {}
    user = str(configurable.get("user_id") or "anonymous")
    thread = str(configurable.get("thread_id") or "default")
    return ("notebook", user, thread)


@tool
def notebook(  # noqa: D417  # runtime is injected
    action: Literal["add", "list", "update", "delete"],
    runtime: ToolRuntime,
    content: str = "",
    note_id: str = "",
) -> str:
    """Keep notes that outlive this run: findings, definitions agreed with the user, open leads.

    Args:
        action: add (needs content), list, update (needs note_id and content),
            delete (needs note_id).
        content: the note text.
        note_id: the id shown by list.
    """
    store = runtime.store
    if store is None:
        return "笔记本不可用（未配置 store）/ notebook unavailable: no store configured"
    ns = namespace(runtime.config)
    if action == "list":
        items = store.search(ns, limit=100)
        if not items:
            return "（空）/ (no notes)"
        return "\n".join(f"- {i.key}: {i.value.get('content', '')}" for i in items)
    if action == "add":
        if not content.strip():
            return "add 需要 content / add needs content"
        key = uuid.uuid4().hex[:8]
        store.put(ns, key, {"content": content.strip()})
        return f"added note {key}"
    if not note_id or store.get(ns, note_id) is None:
        return f"没有笔记 {note_id!r} / no note {note_id!r}; call notebook(action='list')"
    if action == "update":
        if not content.strip():
            return "update 需要 content / update needs content"
        store.put(ns, note_id, {"content": content.strip()})
        return f"updated note {note_id}"
    store.delete(ns, note_id)
    return f"deleted note {note_id}"


class NotebookState(AgentState[Any]):
    """The notes of this user and thread, loaded before each model call."""

    notes: NotRequired[list[dict[str, str]]]


class NotebookMiddleware(AgentMiddleware[NotebookState, Any]):
    """Owns the ``notebook`` tool and the ``<notebook>`` partition."""

    state_schema = NotebookState
    tools = [notebook]  # noqa: RUF012  # the AgentMiddleware contract is a class attribute
    partition = "notebook"

    def render(self, state: dict[str, Any]) -> str:
        """The notes, newest last."""
        return "\n".join(f"- {n['id']}: {n['content']}" for n in state.get("notes") or [])

    def before_model(self, state: NotebookState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Load the notes so the prompt shows them."""
        if runtime.store is None:
            return None
        from langgraph.config import get_config

        items = runtime.store.search(namespace(get_config()), limit=MAX_NOTES_SHOWN)
        notes = [{"id": i.key, "content": str(i.value.get("content", ""))} for i in items]
        return {"notes": notes} if notes != (state.get("notes") or []) else None

    async def abefore_model(
        self, state: NotebookState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``before_model``, awaiting the store."""
        if runtime.store is None:
            return None
        from langgraph.config import get_config

        items = await runtime.store.asearch(namespace(get_config()), limit=MAX_NOTES_SHOWN)
        notes = [{"id": i.key, "content": str(i.value.get("content", ""))} for i in items]
        return {"notes": notes} if notes != (state.get("notes") or []) else None
