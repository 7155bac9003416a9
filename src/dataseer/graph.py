"""The router graph: route → (quick | clarify | lookup → compose | analysis → compose).

``graph`` is what ``langgraph.json`` serves; ``build_graph`` lets the CLI and
tests supply their own models, checkpointer and store.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from dataseer.config import Settings
from dataseer.lines.agents import build_line
from dataseer.lines.compose import compose_node
from dataseer.lines.quick import quick_node
from dataseer.models.tiers import chat_model
from dataseer.router import clarify_node, route_node
from dataseer.state import DataseerInput, DataseerState

RECURSION_LIMIT = 1000


def build_graph(
    *,
    model: BaseChatModel | None = None,
    settings: Settings | None = None,
    checkpointer: Any = None,
    store: Any = None,
) -> CompiledStateGraph:
    """Compile the router graph.

    Args:
        model: the analyst-tier model for both agent lines; default from settings
            (the offline analyst when no model is configured).
        settings: process settings; default from the environment.
        checkpointer: a LangGraph checkpointer (the server supplies its own).
        store: a LangGraph store.
    """
    settings = settings or Settings()
    analyst = model or chat_model(settings, "analyst")
    builder = StateGraph(DataseerState, input_schema=DataseerInput)
    builder.add_node("route", route_node)
    builder.add_node("clarify", clarify_node)
    builder.add_node("quick", quick_node)
    builder.add_node("lookup", build_line("lookup", analyst, max_steps=settings.max_steps))
    builder.add_node("analysis", build_line("analysis", analyst, max_steps=settings.max_steps))
    builder.add_node("compose", compose_node)
    builder.add_edge(START, "route")
    builder.add_edge("quick", END)
    builder.add_edge("lookup", "compose")
    builder.add_edge("analysis", "compose")
    builder.add_edge("compose", END)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name="dataseer")
    # Each agent loop is several graph steps (middleware hooks are nodes); the
    # step budget, not LangGraph's default recursion limit of 25, bounds a run.
    from dataseer.observe.tracing import tracing_callbacks

    callbacks = tracing_callbacks()  # Langfuse when its keys are set; nothing otherwise
    if callbacks:
        return compiled.with_config(recursion_limit=RECURSION_LIMIT, callbacks=callbacks)
    return compiled.with_config(recursion_limit=RECURSION_LIMIT)


graph = build_graph()
