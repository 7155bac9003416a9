"""Structured logs of nodes and tools: one JSON line per call, with thread and checkpoint ids.

``@track_node`` wraps a graph node and ``@track_tool`` a tool function; each
call logs ``{"event": "node"|"tool", "name", "thread_id", "checkpoint_id",
"run_id", "seconds", "ok", "tokens"}`` on the ``dataseer.track`` logger (the
ids come from the running LangGraph config, so a line can be matched to
``dataseer threads history``). ``tokens`` sums the ``usage_metadata`` of the
AI messages a node returned: token usage per node.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["logger", "node_tokens", "track_node", "track_tool"]

logger = logging.getLogger("dataseer.track")
F = TypeVar("F", bound=Callable[..., Any])


def _ids() -> dict[str, Any]:
    try:
        from langgraph.config import get_config

        config = get_config()
    except (RuntimeError, ImportError):
        return {"thread_id": None, "checkpoint_id": None, "run_id": None}
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    return {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_id": configurable.get("checkpoint_id") or metadata.get("checkpoint_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns")
        or metadata.get("langgraph_checkpoint_ns"),
        "run_id": metadata.get("run_id") or config.get("run_id"),
    }


def node_tokens(update: Any) -> dict[str, int]:
    """Token usage of the AI messages in a node's state update."""
    total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    messages = update.get("messages") if isinstance(update, dict) else None
    for message in messages or []:
        usage = getattr(message, "usage_metadata", None)
        if isinstance(usage, dict):
            for key in total:
                total[key] += int(usage.get(key) or 0)
    return total


def _log(kind: str, name: str, started: float, ok: bool, result: Any, error: str | None) -> None:
    record = {
        "event": kind,
        "name": name,
        **_ids(),
        "seconds": round(time.perf_counter() - started, 6),
        "ok": ok,
    }
    if kind == "node" and ok:
        record["tokens"] = node_tokens(result)
    if error:
        record["error"] = error
    logger.info(json.dumps(record, ensure_ascii=False, default=str))


def _track(kind: str, name: str | None) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        label: str = name or str(getattr(fn, "__name__", kind))
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    _log(kind, label, started, False, None, f"{type(exc).__name__}: {exc}")
                    raise
                _log(kind, label, started, True, result, None)
                return result

            return awrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                _log(kind, label, started, False, None, f"{type(exc).__name__}: {exc}")
                raise
            _log(kind, label, started, True, result, None)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate


def track_node(fn: F | None = None, *, name: str | None = None) -> Any:
    """Log every call of a graph node (``@track_node`` or ``@track_node(name=...)``)."""
    return _track("node", name)(fn) if fn is not None else _track("node", name)


def track_tool(fn: F | None = None, *, name: str | None = None) -> Any:
    """Log every call of a tool function (``@track_tool`` or ``@track_tool(name=...)``)."""
    return _track("tool", name)(fn) if fn is not None else _track("tool", name)
