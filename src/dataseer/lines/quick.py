"""The quick line: greetings, definitions and what dataseer cannot resolve.

No query runs here. Definitions come from the knowledge pack; with a model
configured it phrases the answer from the same knowledge, offline the pack's
own text is the answer.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from dataseer.knowledge.understand import QuestionSpec, understand
from dataseer.models.tiers import chat_model, is_offline
from dataseer.observe.track import track_node
from dataseer.prompt import load_prompt, render
from dataseer.services import Services, services_for
from dataseer.state import DataseerState

log = logging.getLogger(__name__)

EXAMPLES_ZH = [
    "星海远征上个月流水多少？",
    "幻境物语近7天的 DAU 趋势",
    "为什么星海远征8月流水暴涨？",
]
EXAMPLES_EN = ["What was Star Expedition's revenue last month?", "Why did revenue spike in August?"]


def knowledge_text(spec: QuestionSpec, services: Services) -> str:
    """Definitions of what the question names, from the pack (and retrieval)."""
    blocks: list[str] = []
    zh = spec.language == "zh"
    for term in spec.terms:
        name, definition = (term.zh, term.definition_zh) if zh else (term.en, term.definition_en)
        blocks.append(f"**{name}**：{definition}")
    for metric in spec.metrics:
        name = metric.zh if zh else metric.en
        blocks.append(
            f"**{name}** (`{metric.key}`)：{metric.description}\n"
            f"- {'公式' if zh else 'formula'}: {metric.formula}\n"
            f"- {'来源表' if zh else 'table'}: `{metric.table}` ({metric.time_column})"
        )
    if not blocks:
        for hit in services.index.search(spec.text, k=3, kinds=["term", "metric"]):
            blocks.append(f"**{hit.title}**：{hit.text}")
    return "\n\n".join(dict.fromkeys(blocks))


def offline_reply(spec: QuestionSpec, services: Services) -> str:
    """The deterministic quick answer."""
    lang = "zh" if spec.language == "zh" else "en"
    prompts = services.settings.resolved_prompts_dir
    if spec.intent == "smalltalk":
        return load_prompt(f"quick/greeting.{lang}", prompts)
    knowledge = knowledge_text(spec, services) if spec.intent == "definition" else ""
    if knowledge:
        return knowledge
    return render(load_prompt(f"quick/unresolved.{lang}", prompts), {"question": spec.text})


@track_node(name="quick")
def quick_node(state: DataseerState, config: RunnableConfig) -> dict[str, Any]:
    """Answer without querying."""
    services = services_for(dict(config))
    question = state.get("question", "")
    spec = understand(question, services.pack, services.settings.resolved_today)
    text = offline_reply(spec, services)
    if not is_offline(services.settings, "analyst") and spec.intent != "smalltalk":
        prompt = render(
            load_prompt("quick/system", services.settings.resolved_prompts_dir),
            {"knowledge": knowledge_text(spec, services)},
        )
        try:
            reply = chat_model(services.settings, "analyst").invoke(
                [SystemMessage(prompt), HumanMessage(question)]
            )
            text = str(reply.content) or text
        except Exception as exc:  # answer from the pack when the provider fails
            log.warning("quick line model failed: %s: %s", type(exc).__name__, exc)
    return {"messages": [AIMessage(text, name="dataseer")], "answer": text, "summary": text}
