"""Drop the intermediate tool traffic once the run has turned it into state.

After the agent ends, every AI tool-call message and its tool results leave
the thread's message list: the queries and their rows live in
``sql_history``, the plan in ``todos``. A call and its results are always
removed together, so no tool call is ever left without its result (providers
reject such orphans).
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, RemoveMessage, ToolMessage
from langgraph.runtime import Runtime


class MessageCleanupError(RuntimeError):
    """Cleanup would have left a tool call without its result."""


def removable_ids(messages: list[Any]) -> list[str]:
    """Ids of tool-call AI messages whose results are all present, plus those results."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    ids: list[str] = []
    for message in messages:
        if not (isinstance(message, AIMessage) and message.tool_calls):
            continue
        answered = [results.get(str(call["id"])) for call in message.tool_calls]
        if any(r is None for r in answered):
            continue
        ids.append(str(message.id))
        ids.extend(str(r.id) for r in answered if r is not None)
    return ids


class MessageCleanupMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Innermost layer: keeps the thread's message list to questions and answers."""

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Remove this run's tool traffic; its content already lives in state."""
        ids = removable_ids(list(state["messages"]))
        if not ids:
            return None
        return {"messages": [RemoveMessage(id=i) for i in ids]}

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``after_agent``; it awaits nothing."""
        return self.after_agent(state, runtime)
