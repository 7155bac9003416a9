"""Think: a no-op tool whose reflection is shown once in the next loop.

The model writes what the results mean and what to do next; the reflection
lands in ``reflection``, is rendered as ``<recent_reflection>`` in the very
next prompt, and is cleared with that model call's response, so stale
reasoning never accumulates.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langgraph.types import Command

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

    def _cleared(self, request: ModelRequest[Any], response: ModelResponse[Any]) -> Any:
        """The model has now seen the reflection: clear it with the response."""
        if not dict(request.state).get("reflection"):
            return response
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"reflection": None})
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Clear the reflection once the call that shows it has been made.

        Done inside the model call rather than in an ``after_model`` hook, which
        would cost a graph step on every loop.
        """
        return self._cleared(request, handler(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """Async twin of ``wrap_model_call``."""
        return self._cleared(request, await handler(request))
