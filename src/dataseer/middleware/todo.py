"""Todo: the analysis plan, merged by task id, rendered as ``<todo_state>``.

The plan also drives the step budget (see ``BaseAnalysisMiddleware``): each
open item buys a few more loops.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentMiddleware, AgentState

from dataseer.state import Todo, merge_todos
from dataseer.tools.plan import write_todos


class TodoState(AgentState[Any]):
    """The plan of the current question."""

    todos: NotRequired[Annotated[list[Todo], merge_todos]]


def render_todos(todos: list[Todo]) -> str:
    """One line per item, status first."""
    return "\n".join(f"- [{t['status']}] {t['id']}: {t['content']}" for t in todos)


class TodoMiddleware(AgentMiddleware[TodoState, Any]):
    """Owns ``write_todos`` and the ``<todo_state>`` partition."""

    state_schema = TodoState
    tools = [write_todos]  # noqa: RUF012  # the AgentMiddleware contract is a class attribute
    partition = "todo_state"

    def render(self, state: dict[str, Any]) -> str:
        """The plan as a checklist."""
        return render_todos(list(state.get("todos") or []))
