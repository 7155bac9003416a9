"""Think: a no-op tool whose reflection is shown once in the next loop.

The model writes what the results mean and what to do next; the reflection
lands in ``reflection``, is rendered as ``<recent_reflection>`` in the very
next prompt, and is cleared after that model call, so stale reasoning never
accumulates.
"""

from __future__ import annotations

from typing import Any, NotRequired

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langgraph.runtime import Runtime

from dataseer.tools.plan import think


class ThinkState(AgentState[Any]):
    """The latest reflection, shown once."""

    reflection: NotRequired[str | None]


class ThinkMiddleware(AgentMiddleware[ThinkState, Any]):
    """Owns the ``think`` tool and the ``<recent_reflection>`` partition."""

    state_schema = ThinkState
    tools = [think]  # noqa: RUF012  # the AgentMiddleware contract is a class attribute
    partition = "recent_reflection"

    def render(self, state: dict[str, Any]) -> str:
        """The reflection written since the previous model call."""
        return str(state.get("reflection") or "")

    def after_model(self, state: ThinkState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """The model has now seen the reflection: clear it."""
        return {"reflection": None} if state.get("reflection") else None

    async def aafter_model(self, state: ThinkState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of ``after_model``; it awaits nothing."""
        return self.after_model(state, runtime)
