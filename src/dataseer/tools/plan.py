"""Planning tools: the TODO list and the no-op ``think`` reflection."""

from __future__ import annotations

from typing import Literal

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command
from typing_extensions import TypedDict


class TodoInput(TypedDict):
    """One plan item as the model writes it."""

    id: str
    content: str
    status: Literal["pending", "in_progress", "completed"]


@tool
def write_todos(todos: list[TodoInput], runtime: ToolRuntime) -> Command:  # noqa: D417  # runtime is injected
    """Write or update the analysis plan; items are merged by id.

    Args:
        todos: plan items; reuse an id to update its status or wording.
    """
    for todo in todos:
        if not todo.get("id") or not todo.get("content"):
            return Command(
                update={
                    "messages": [
                        ToolMessage(
                            "每个 todo 需要 id 和 content / each todo needs an id and content",
                            tool_call_id=runtime.tool_call_id,
                            status="error",
                        )
                    ]
                }
            )
    summary = "; ".join(f"[{t['status']}] {t['id']}: {t['content']}" for t in todos)
    return Command(
        update={
            "todos": [dict(t) for t in todos],
            "messages": [
                ToolMessage(f"plan updated: {summary}", tool_call_id=runtime.tool_call_id)
            ],
        }
    )


@tool
def think(reflection: str, runtime: ToolRuntime) -> Command:  # noqa: D417  # runtime is injected
    """Record a reflection: what the results show, what is missing, what to do next.

    Args:
        reflection: your reasoning in a few sentences.
    """
    return Command(
        update={
            "reflection": reflection,
            "messages": [ToolMessage("reflection recorded", tool_call_id=runtime.tool_call_id)],
        }
    )
