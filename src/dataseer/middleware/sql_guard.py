"""Guard every ``run_sql`` call before it runs: a denial becomes an observation.

The model proposes SQL; this layer asks ``SqlGuard`` whether the run's user
may read it (permissions from the store for ``configurable.user_id``, or the
profile of the run's personal credentials). A denied query never reaches the
tool: the model gets a ``ToolMessage(status="error")`` that says what was
denied, why, and what the user may access, so it can rewrite the query or
suggest a permission request; the denied query is kept in ``sql_history``
like any failed one, so the answer shows it. In enforce mode a query lacking
the row filter is rewritten (the filter injected on the syntax tree), the
rewritten SQL is what runs, and the observation says so.

``run_query`` checks again beneath the tool: this layer explains, that one is
the floor for every path. Both decisions are audited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import ToolCall, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from dataseer.data.protocol import QueryResult
from dataseer.services import services_for
from dataseer.sql.execute import check_query, denial_message, warehouse_facts
from dataseer.sql.guard import Decision
from dataseer.sql.permission_store import permissions_for_config
from dataseer.tools.sql import sql_command

GuardMode = Literal["check", "enforce"]

REWRITE_NOTE = (
    "注意：该查询缺少你的权限过滤条件，已在语法树上自动加入后执行；实际执行的 SQL 如下 / "
    "note: the query lacked your permission filter, which was added on the syntax tree; "
    "this is the SQL that ran:"
)


class SqlGuardState(AgentState[Any]):
    """No state of its own: denials land in ``sql_history`` through the tool's record."""


class SqlGuardError(ValueError):
    """The middleware was configured with an unknown mode or tool."""


class SqlGuardMiddleware(AgentMiddleware[SqlGuardState, Any]):
    """Checks each ``run_sql`` call with the run's permissions before the tool runs.

    Args:
        mode: ``check`` (deny what lacks the filter) or ``enforce`` (inject
            it when the guard can); ``None`` = ``Settings.guard_mode``.
        tool_name: the guarded tool.
    """

    state_schema = SqlGuardState

    def __init__(self, mode: GuardMode | None = None, *, tool_name: str = "run_sql") -> None:
        super().__init__()
        if mode not in (None, "check", "enforce"):
            msg = f"unknown guard mode {mode!r}; expected 'check' or 'enforce'"
            raise SqlGuardError(msg)
        if not tool_name:
            msg = "SqlGuardMiddleware needs the name of the tool it guards"
            raise SqlGuardError(msg)
        self.mode = mode
        self.tool_name = tool_name

    def _config(self, request: ToolCallRequest) -> Mapping[str, Any]:
        runtime = request.runtime
        config = getattr(runtime, "config", None) if runtime is not None else None
        return config or {}

    def review(self, request: ToolCallRequest) -> tuple[ToolCallRequest | None, Any, str]:
        """Decide one call: (request to run or ``None``, denial result, rewrite note).

        Returns ``(request, None, "")`` to run unchanged, ``(rewritten, None,
        sql)`` to run the rewritten SQL, or ``(None, command, "")`` for a denial.
        """
        args = dict(request.tool_call.get("args") or {})
        sql = str(args.get("sql") or "").strip().rstrip(";").strip()
        if not sql:
            return request, None, ""
        config = self._config(request)
        services = services_for(config)
        permissions, problem = permissions_for_config(
            services.permission_store, config, services.settings
        )
        decision: Decision = check_query(
            services.datasource,
            sql,
            services.settings,
            permissions=permissions,
            layer="middleware",
            mode=self.mode,
            denial_reason=problem,
        )
        if not decision.allowed:
            names = warehouse_facts(services.datasource).game_names
            result = QueryResult(sql=sql, error=denial_message(decision, permissions, names))
            command = sql_command(
                request.runtime,
                result,
                str(args.get("purpose") or ""),
                str(args.get("chart") or "table"),
            )
            return None, command, ""
        rewritten = decision.rewritten_sql
        if rewritten and rewritten.strip() != sql:
            call: ToolCall = {**request.tool_call, "args": {**args, "sql": rewritten}}
            return request.override(tool_call=call), None, rewritten
        return request, None, ""

    @staticmethod
    def _noted(result: ToolMessage | Command[Any], rewritten: str) -> ToolMessage | Command[Any]:
        """Tell the model that its query was rewritten before it ran."""
        note = f"{REWRITE_NOTE}\n```sql\n{rewritten}\n```\n"
        if isinstance(result, ToolMessage):
            return result.model_copy(update={"content": note + str(result.content)})
        update = result.update if isinstance(result.update, dict) else None
        if update is None:
            return result
        messages = [
            m.model_copy(update={"content": note + str(m.content)})
            if isinstance(m, ToolMessage)
            else m
            for m in update.get("messages", [])
        ]
        return Command(update={**update, "messages": messages})

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the guarded tool only with an allowed (possibly rewritten) query."""
        if request.tool_call.get("name") != self.tool_name:
            return handler(request)
        allowed, denial, rewritten = self.review(request)
        if allowed is None:
            return denial
        result = handler(allowed)
        return self._noted(result, rewritten) if rewritten else result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of ``wrap_tool_call``.

        The review reads the permission store and writes the audit (blocking
        I/O), so it runs in a worker thread, never on the event loop.
        """
        if request.tool_call.get("name") != self.tool_name:
            return await handler(request)
        allowed, denial, rewritten = await asyncio.to_thread(self.review, request)
        if allowed is None:
            return denial
        result = await handler(allowed)
        return self._noted(result, rewritten) if rewritten else result
