"""Table info: each table's schema fetched once per thread, kept in state.

``table_info`` results are cached in ``tables_info`` and rendered as the
``<tables_info>`` partition, so the model always has the schemas it looked at
in front of it, and a second ``table_info`` call for the same table is
answered from state without touching the warehouse.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from dataseer.middleware._partitions import tool_result
from dataseer.state import merge_tables


class TableInfoState(AgentState[Any]):
    """Schemas the thread has read, keyed by lower-case table name."""

    tables_info: NotRequired[Annotated[dict[str, str], merge_tables]]


class TableInfoMiddleware(AgentMiddleware[TableInfoState, Any]):
    """Caches table_info per thread and renders ``<tables_info>``."""

    state_schema = TableInfoState
    partition = "tables_info"

    def __init__(self, *, max_tables: int = 8) -> None:
        super().__init__()
        if max_tables < 1:
            msg = f"max_tables must be at least 1, got {max_tables}"
            raise ValueError(msg)
        self.max_tables = max_tables

    def render(self, state: dict[str, Any]) -> str:
        """The most recently read schemas (at most ``max_tables``)."""
        tables = list((state.get("tables_info") or {}).values())
        return "\n\n".join(tables[-self.max_tables :])

    @staticmethod
    def _key(request: ToolCallRequest) -> str:
        return str((request.tool_call.get("args") or {}).get("table") or "").strip().lower()

    def _cached(self, request: ToolCallRequest) -> ToolMessage | None:
        state = request.state if isinstance(request.state, dict) else {}
        text = (state.get("tables_info") or {}).get(self._key(request))
        if text is None:
            return None
        return ToolMessage(
            "（已缓存，见 <tables_info> / cached, see <tables_info>)\n" + text,
            tool_call_id=str(request.tool_call.get("id") or ""),
        )

    def _store(self, request: ToolCallRequest, result: ToolMessage | Command[Any]) -> Any:
        message = tool_result(result)
        if (
            message is None
            or message.status == "error"
            or not str(message.content).startswith("## ")
        ):
            return result
        update = {"tables_info": {self._key(request): str(message.content)}, "messages": [message]}
        return Command(update=update)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Answer a repeated table_info from state; store a new one."""
        if request.tool_call.get("name") != "table_info":
            return handler(request)
        return self._cached(request) or self._store(request, handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of ``wrap_tool_call``."""
        if request.tool_call.get("name") != "table_info":
            return await handler(request)
        return self._cached(request) or self._store(request, await handler(request))
