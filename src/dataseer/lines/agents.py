"""The lookup and analysis lines: ``create_agent`` with a middleware onion.

Onion order (first = outermost; ``before_*`` hooks run in list order,
``after_*`` in reverse, ``wrap_*`` nest):

1. ``BaseAnalysisMiddleware`` — rebuilds the prompt from state on every loop
   and enforces the step budget (outermost, so it sees the final request).
2. ``MessageCleanupMiddleware`` — drops tool traffic after the run, once its
   content lives in state (innermost).

Both lines share tools and middlewares; the lookup line has a smaller tool
set, a tighter budget and its own prompt head.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph

from dataseer.middleware import BaseAnalysisMiddleware, MessageCleanupMiddleware
from dataseer.tools import ANALYSIS_TOOLS, LOOKUP_TOOLS

Line = Literal["lookup", "analysis"]


def middleware_stack(line: Line, *, max_steps: int = 30) -> list[Any]:
    """The middlewares of a line, outermost first."""
    if line == "lookup":
        budget = BaseAnalysisMiddleware("lookup", base_steps=5, per_todo=0, max_steps=6)
    else:
        budget = BaseAnalysisMiddleware(
            "analysis", base_steps=10, per_todo=2, max_steps=max(10, max_steps)
        )
    return [budget, MessageCleanupMiddleware()]


def build_line(line: Line, model: BaseChatModel, *, max_steps: int = 30) -> CompiledStateGraph:
    """One agent line, ready to be a node of the router graph."""
    tools = LOOKUP_TOOLS if line == "lookup" else ANALYSIS_TOOLS
    return create_agent(
        model, tools, middleware=middleware_stack(line, max_steps=max_steps), name=line
    )
