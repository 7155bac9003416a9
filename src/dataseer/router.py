"""The router: resolve the question against the knowledge pack, then pick a line.

Resolution (games, metrics, periods, dimensions, follow-up inheritance) is
always done by the knowledge pack, with or without an LLM, because it is
exact and cheap. The route itself is chosen by the router-tier model with
structured output when one is configured, and by rules otherwise; a model
failure falls back to the rules instead of failing the run.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field

from dataseer.knowledge.scenes import detect_scene
from dataseer.knowledge.understand import QuestionSpec, understand
from dataseer.knowledge.values import value_index_for
from dataseer.models.tiers import chat_model, is_offline
from dataseer.observe.track import track_node
from dataseer.prompt import load_prompt, render
from dataseer.services import Services, services_for
from dataseer.state import DataseerState, Route

log = logging.getLogger(__name__)

DEEP_INTENTS = frozenset({"why", "funnel", "compare", "trend"})


class RouteDecision(BaseModel):
    """The router model's structured answer."""

    route: Route = Field(description="quick, clarify, lookup or analysis")
    clarification: str = Field(default="", description="the question to ask when route=clarify")
    reason: str = Field(default="", description="one short sentence")


def latest_question(state: DataseerState) -> str:
    """The text of the newest human message."""
    for message in reversed(state.get("messages") or []):
        if isinstance(message, HumanMessage):
            return str(message.text if hasattr(message, "text") else message.content).strip()
    return ""


def clarification_for(spec: QuestionSpec) -> str:
    """What to ask the user, in their language, or '' when nothing blocks answering."""
    zh = spec.language == "zh"
    if spec.unknown_mentions:
        names = "、".join(spec.unknown_mentions)
        return (
            f"没有找到游戏「{names}」。请问您指的是哪款游戏？"
            if zh
            else f"I could not find the game '{names}'. Which game do you mean?"
        )
    if spec.metrics and spec.period is None:
        return (
            "请问要看哪个时间段？例如：上个月、近7天、2026年8月。"
            if zh
            else "Which period should I look at? For example: last month, last 7 days, August 2026."
        )
    return ""


def rule_route(spec: QuestionSpec, deep: bool) -> Route:
    """The offline routing rules.

    Unknown game names are asked about first (guessing a game is worse than
    asking); a question with no metric cannot be answered by a query, so it
    gets the quick line's explanation; a metric with no period is asked about.
    """
    if spec.intent in {"smalltalk", "definition"}:
        return "quick"
    if spec.unknown_mentions:
        return "clarify"
    if spec.intent == "unknown" or not spec.metrics:
        return "quick"
    if spec.period is None:
        return "clarify"
    if deep or spec.intent in DEEP_INTENTS:
        return "analysis"
    return "lookup"


def model_route(services: Services, spec: QuestionSpec, question: str) -> RouteDecision | None:
    """Ask the router-tier model; ``None`` when it fails (the rules take over)."""
    prompt = render(
        load_prompt("router/system", services.settings.resolved_prompts_dir),
        {"resolved": json.dumps(spec.to_dict(), ensure_ascii=False)},
    )
    try:
        model = chat_model(services.settings, "router")
        structured = model.with_structured_output(RouteDecision, method="function_calling")
        result = structured.invoke([SystemMessage(prompt), HumanMessage(question)])
    except Exception as exc:  # a provider outage must not fail the run
        log.warning("router model failed, using rules: %s: %s", type(exc).__name__, exc)
        return None
    return result if isinstance(result, RouteDecision) else None


def resolve(
    question: str, state: DataseerState, config: RunnableConfig | None
) -> tuple[QuestionSpec, Route, str]:
    """Resolve a question and choose its route; returns (spec, route, clarification)."""
    services = services_for(dict(config or {}))
    previous_data = state.get("spec")
    previous = QuestionSpec.from_dict(previous_data) if previous_data else None
    spec = understand(
        question,
        services.pack,
        services.settings.resolved_today,
        previous,
        values=value_index_for(services.datasource, services.pack),
    )
    deep = bool(state.get("deep")) or services.settings.deep
    route = rule_route(spec, deep)
    clarification = clarification_for(spec) if route == "clarify" else ""
    if not is_offline(services.settings, "router") and route != "quick":
        decision = model_route(services, spec, question)
        if decision is not None:
            route = "analysis" if deep and decision.route == "lookup" else decision.route
            if route == "clarify":
                clarification = decision.clarification or clarification_for(spec) or question
    return spec, route, clarification


def scene_for(question: str, spec: QuestionSpec, config: RunnableConfig | None) -> str | None:
    """The run's scene: ``configurable.scene`` when given, else detected from the question."""
    configured = ((config or {}).get("configurable") or {}).get("scene")
    if configured:
        return str(configured)
    services = services_for(dict(config or {}))
    return detect_scene(
        question,
        services.settings.resolved_prompts_dir,
        intent=spec.intent,
        metrics=tuple(m.key for m in spec.metrics),
    )


@track_node(name="route")
def route_node(
    state: DataseerState, config: RunnableConfig
) -> Command[Literal["quick", "clarify", "lookup", "analysis"]]:
    """Entry node: one new question, one route."""
    question = latest_question(state)
    spec, route, clarification = resolve(question, state, config)
    update: dict[str, Any] = {
        "question": question,
        "turn": int(state.get("turn") or 0) + 1,
        "route": route,
        "todos": [],
        "reflection": None,
        "scene": scene_for(question, spec, config),
    }
    if route == "clarify":
        update["clarification"] = clarification
    elif route != "quick":
        update["spec"] = spec.to_dict()
    return Command(goto=route, update=update)


def fold_reply(question: str, reply: str, config: RunnableConfig | None) -> str:
    """The question with the user's clarification folded in.

    A reply that names a known game replaces the unknown name it answers
    ("王者荣耀上个月流水" + "星海远征" → "星海远征上个月流水"); any other reply
    (a period, a metric) is appended.
    """
    services = services_for(dict(config or {}))
    today = services.settings.resolved_today
    asked = understand(question, services.pack, today)
    answered = understand(reply, services.pack, today)
    if asked.unknown_mentions and answered.games:
        return question.replace(asked.unknown_mentions[0], reply, 1)
    return f"{question} {reply}".strip()


@track_node(name="clarify")
def clarify_node(
    state: DataseerState, config: RunnableConfig
) -> Command[Literal["quick", "clarify", "lookup", "analysis"]]:
    """Ask the user through ``interrupt`` and resume with the reply folded in."""
    ask = state.get("clarification") or ""
    reply = interrupt({"type": "clarification", "question": ask, "original": state.get("question")})
    text = str(reply.get("answer", "") if isinstance(reply, dict) else reply).strip()
    question = fold_reply(str(state.get("question", "")), text, config)
    spec, route, clarification = resolve(question, state, config)
    update: dict[str, Any] = {
        "question": question,
        "route": route,
        "messages": [AIMessage(ask), HumanMessage(text)],
    }
    if route == "clarify":
        update["clarification"] = clarification
    elif route != "quick":
        update["spec"] = spec.to_dict()
    return Command(goto=route, update=update)
