"""Shared pieces of the middleware stack: prompt partitions and tool results.

A middleware that owns a slice of state can also own how that slice appears
in the prompt: it implements ``PartitionProvider`` and the prompt middleware
asks every provider in the stack for its partition on each loop.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import ToolMessage
from langgraph.types import Command


@runtime_checkable
class PartitionProvider(Protocol):
    """A middleware that renders one XML partition of the prompt from state."""

    partition: str
    """The XML tag of the partition, e.g. ``sql_history``."""

    def render(self, state: dict[str, Any]) -> str:
        """The partition body for this state ('' to leave it out)."""
        ...


def tool_result(result: ToolMessage | Command[Any]) -> ToolMessage | None:
    """The ToolMessage inside a tool call's result, whichever form it took."""
    if isinstance(result, ToolMessage):
        return result
    update = result.update if isinstance(result.update, dict) else {}
    for message in update.get("messages", []):
        if isinstance(message, ToolMessage):
            return message
    return None


def current_turn(state: dict[str, Any]) -> int:
    """The question number of this run within the thread."""
    return int(state.get("turn") or 0)
