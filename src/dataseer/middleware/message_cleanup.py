"""Drop intermediate tool traffic once its content lives in state.

Before each model call, completed tool-call groups older than the latest one
leave the message list when every tool in the group is *state-backed* (its
result is already rendered from state: SQL history, table info, the plan, the
reflection, notes). The latest group stays so the model sees its immediate
result; groups of other tools (search results, skills, research) stay until
the run ends. After the run, all tool traffic leaves. A call and its results
are always removed together, so no tool call is ever left without its result
(providers reject such orphans).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.runtime import Runtime

STATE_BACKED = frozenset(
    {"run_sql", "table_info", "write_todos", "think", "notebook", "sql_task_detail"}
)


def tool_groups(messages: list[Any]) -> list[tuple[AIMessage, list[ToolMessage]]]:
    """Each AI tool-call message of the current run with its results, oldest first."""
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            start = i + 1
            break
    run = messages[start:]
    results = {m.tool_call_id: m for m in run if isinstance(m, ToolMessage)}
    groups = []
    for message in run:
        if isinstance(message, AIMessage) and message.tool_calls:
            answered = [results.get(str(call["id"])) for call in message.tool_calls]
            if all(r is not None for r in answered):
                groups.append((message, [r for r in answered if r is not None]))
    return groups


def removable_ids(
    messages: list[Any], *, keep_latest: bool = False, only: Collection[str] | None = None
) -> list[str]:
    """Ids of complete tool-call groups to drop (the AI message and its results)."""
    groups = tool_groups(messages)
    if keep_latest and groups:
        groups = groups[:-1]
    ids: list[str] = []
    for call, results in groups:
        if only is not None and not all(c["name"] in only for c in call.tool_calls):
            continue
        ids.append(str(call.id))
        ids.extend(str(r.id) for r in results)
    return ids


class MessageCleanupMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Innermost layer: keeps the message list short and always valid."""

    def __init__(self, state_backed: Collection[str] = STATE_BACKED) -> None:
        super().__init__()
        self.state_backed = frozenset(state_backed)

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Drop older state-backed tool traffic before the next model call."""
        ids = removable_ids(list(state["messages"]), keep_latest=True, only=self.state_backed)
        return {"messages": [RemoveMessage(id=i) for i in ids]} if ids else None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``before_model``; it awaits nothing."""
        return self.before_model(state, runtime)

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Remove all of this run's tool traffic; its content already lives in state."""
        ids = removable_ids(list(state["messages"]))
        return {"messages": [RemoveMessage(id=i) for i in ids]} if ids else None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``after_agent``; it awaits nothing."""
        return self.after_agent(state, runtime)
