"""Usage: tokens and time per node, tool and skill, accumulated in state.

Each model call and each tool call appends one entry to ``loops`` (prompt,
completion and cached tokens of the model; seconds and estimated result
tokens of the tool, and the skill for ``load_skill``). Entries carry ids and
merge by id, so the counts survive a subgraph handing its state back to the
router graph without being counted twice. ``summarize_usage`` totals them per
node, tool and skill; ``dataseer ask --stats`` splits each loop's time into
model, SQL, sandbox and framework.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from dataseer.middleware._partitions import current_turn, tool_result
from dataseer.observe.tokens import estimate_tokens
from dataseer.state import merge_loops

TOOL_KINDS = {"run_sql": "sql", "run_python": "sandbox"}


def summarize_usage(loops: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals per node, tool and skill from loop entries."""
    nodes: dict[str, dict[str, float]] = {}
    tools: dict[str, dict[str, float]] = {}
    skills: dict[str, dict[str, float]] = {}

    def add(target: dict[str, dict[str, float]], key: str, values: dict[str, float]) -> None:
        slot = target.setdefault(key, {})
        for name, value in values.items():
            slot[name] = round(slot.get(name, 0) + value, 6)

    for entry in loops:
        if entry.get("kind") == "model":
            add(
                nodes,
                str(entry.get("node")),
                {
                    "prompt": entry.get("prompt_tokens", 0),
                    "completion": entry.get("completion_tokens", 0),
                    "cached": entry.get("cached_tokens", 0),
                    "calls": 1,
                    "seconds": entry.get("seconds", 0.0),
                },
            )
        else:
            counters = {
                "calls": 1,
                "result_tokens": entry.get("result_tokens", 0),
                "seconds": entry.get("seconds", 0.0),
            }
            add(tools, str(entry.get("tool")), counters)
            if entry.get("skill"):
                add(skills, str(entry["skill"]), counters)
    return {"nodes": nodes, "tools": tools, "skills": skills}


class UsageState(AgentState[Any]):
    """Token and time accounting of the thread."""

    loops: NotRequired[Annotated[list[dict[str, Any]], merge_loops]]


def _model_usage(messages: list[BaseMessage]) -> dict[str, int]:
    found = {"prompt": 0, "completion": 0, "cached": 0, "calls": 0}
    for message in messages:
        meta = getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
        if meta:
            found["prompt"] += int(meta.get("input_tokens", 0))
            found["completion"] += int(meta.get("output_tokens", 0))
            details = meta.get("input_token_details") or {}
            found["cached"] += int(details.get("cache_read", 0) or 0)
            found["calls"] += 1
    return found


class UsageMiddleware(AgentMiddleware[UsageState, Any]):
    """Counts tokens and time; the counts travel with the run's final state."""

    state_schema = UsageState

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node

    def _model_update(
        self, request: ModelRequest[Any], started: float, response: ModelResponse[Any]
    ) -> dict[str, Any]:
        elapsed = time.perf_counter() - started
        found = _model_usage(response.result)
        tools = [
            c["name"] for m in response.result if isinstance(m, AIMessage) for c in m.tool_calls
        ]
        entry = {
            "id": uuid.uuid4().hex,
            "kind": "model",
            "turn": current_turn(dict(request.state)),
            "node": self.node,
            "at": started,
            "seconds": round(elapsed, 6),
            "prompt_tokens": found["prompt"],
            "completion_tokens": found["completion"],
            "cached_tokens": found["cached"],
            "tools": tools,
        }
        return {"loops": [entry]}

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Time the model call and count its tokens."""
        from langchain.agents.middleware.types import ExtendedModelResponse

        started = time.perf_counter()
        response = handler(request)
        return ExtendedModelResponse(
            model_response=response,
            command=Command(update=self._model_update(request, started, response)),
        )

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """Async twin of ``wrap_model_call``."""
        from langchain.agents.middleware.types import ExtendedModelResponse

        started = time.perf_counter()
        response = await handler(request)
        return ExtendedModelResponse(
            model_response=response,
            command=Command(update=self._model_update(request, started, response)),
        )

    def _tool_update(
        self, request: ToolCallRequest, started: float, result: ToolMessage | Command[Any]
    ) -> ToolMessage | Command[Any]:
        elapsed = time.perf_counter() - started
        name = str(request.tool_call.get("name"))
        message = tool_result(result)
        tokens = estimate_tokens(str(message.content)) if message is not None else 0
        entry: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "kind": TOOL_KINDS.get(name, "tool"),
            "turn": int((request.state or {}).get("turn") or 0),
            "tool": name,
            "at": started,
            "seconds": round(elapsed, 6),
            "result_tokens": tokens,
        }
        if name == "load_skill":
            entry["skill"] = str((request.tool_call.get("args") or {}).get("name") or "?")
        update: dict[str, Any] = {"loops": [entry]}
        if isinstance(result, Command) and isinstance(result.update, dict):
            return Command(update={**result.update, **update}, goto=result.goto, graph=result.graph)
        if message is None:
            return result
        return Command(update={**update, "messages": [message]})

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Time the tool call and count its result."""
        started = time.perf_counter()
        return self._tool_update(request, started, handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of ``wrap_tool_call``."""
        started = time.perf_counter()
        return self._tool_update(request, started, await handler(request))
