"""The lookup and analysis lines: ``create_agent`` with a middleware onion.

Onion order (first = outermost; ``before_*`` hooks run in list order,
``after_*`` in reverse, ``wrap_*`` nest):

1. ``BaseAnalysisMiddleware`` — rebuilds the whole prompt from state on every
   loop (asking each inner middleware for its partition) and enforces the
   step budget; outermost, so the request it builds is the one sent.
2. ``UsageMiddleware`` — tokens and time per model call and tool call; just
   inside the prompt layer so it times the model alone.
3. ``VerifyMiddleware`` — checks the final answer's numbers against results.
4. ``TodoMiddleware`` — the plan (analysis line).
5. ``SqlHistoryMiddleware`` — run_sql results as tiered state; repeats and
   retry limits.
6. ``TableInfoMiddleware`` — table schemas cached per thread.
7. ``ThinkMiddleware`` — the reflection shown once (analysis line).
8. ``NotebookMiddleware`` — notes on the LangGraph store (analysis line).
9. ``SqlGuardMiddleware`` — checks every ``run_sql`` call against the run's
   permissions before it runs; a denial becomes an observation that says
   what the user may access. Inside the tool-family layers, so the SQL
   history records denials like any failed query; ``run_query`` beneath the
   tool checks again (the floor for every other path).
10. ``MessageCleanupMiddleware`` — drops tool traffic whose content lives in
    state (innermost, so it runs first after each loop's tools).

Both lines share tools and middlewares; the lookup line has a smaller tool
set, a tighter budget and its own prompt head.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph

from dataseer.middleware import (
    BaseAnalysisMiddleware,
    MessageCleanupMiddleware,
    NotebookMiddleware,
    SqlHistoryMiddleware,
    TableInfoMiddleware,
    ThinkMiddleware,
    TodoMiddleware,
    UsageMiddleware,
    VerifyMiddleware,
)
from dataseer.middleware._partitions import PartitionProvider
from dataseer.middleware.sql_guard import SqlGuardMiddleware
from dataseer.tools import ANALYSIS_TOOLS, LOOKUP_TOOLS

Line = Literal["lookup", "analysis"]


def middleware_stack(line: Line, *, max_steps: int = 30) -> list[Any]:
    """The middlewares of a line, outermost first."""
    inner: list[Any] = [VerifyMiddleware()]
    if line == "analysis":
        inner.append(TodoMiddleware())
    inner += [SqlHistoryMiddleware(), TableInfoMiddleware()]
    if line == "analysis":
        inner += [ThinkMiddleware(), NotebookMiddleware()]
    inner += [SqlGuardMiddleware(), MessageCleanupMiddleware()]
    providers = [m for m in inner if isinstance(m, PartitionProvider)]
    if line == "lookup":
        base = BaseAnalysisMiddleware(
            "lookup", base_steps=6, per_todo=0, max_steps=8, providers=providers
        )
    else:
        base = BaseAnalysisMiddleware(
            "analysis", base_steps=10, per_todo=2, max_steps=max(10, max_steps), providers=providers
        )
    return [base, UsageMiddleware(line), *inner]


def build_line(line: Line, model: BaseChatModel, *, max_steps: int = 30) -> CompiledStateGraph:
    """One agent line, ready to be a node of the router graph."""
    tools = LOOKUP_TOOLS if line == "lookup" else ANALYSIS_TOOLS
    return create_agent(
        model, tools, middleware=middleware_stack(line, max_steps=max_steps), name=line
    )
