"""The offline analyst: a deterministic chat model that works like an LLM would.

It implements the chat-model interface and drives the same tools through the
same agent loop as an LLM: it reads the rebuilt system prompt (the resolved
question in ``<resolved_question>``, the line, the budget), looks at the tool
results of this run, and emits the next tool call — plan (analysis line),
find tables, one ``run_sql`` per planned query — then writes the analysis
from the rows it got back. It never states a number that no result holds,
and says plainly what it cannot resolve.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from dataseer.knowledge.understand import QuestionSpec
from dataseer.models.narrate import narrate, unresolved_reply
from dataseer.models.offline_plan import PlannedQuery, plan_queries

_RESOLVED = re.compile(r"<resolved_question>(.*?)</resolved_question>", re.S)
_LINE = re.compile(r"^line: (\w+)", re.M)
_QUESTION = re.compile(r"^question: (.*)$", re.M)


def _tokens(text: str) -> int:
    """A rough token count (CJK characters count one each) for usage metadata."""
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return cjk + (len(text) - cjk) // 4 + 1


class OfflineAnalyst(BaseChatModel):
    """Deterministic analyst for users without an API key, and for tests."""

    tool_names: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "dataseer-offline"

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> OfflineAnalyst:
        """Remember which tools the loop offers (none once the budget is spent)."""
        names = tuple(convert_to_openai_tool(t)["function"]["name"] for t in tools)
        return self.model_copy(update={"tool_names": names})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self.decide(messages)
        prompt_tokens = sum(_tokens(str(m.content)) for m in messages)
        completion = _tokens(str(message.content) + json.dumps(message.tool_calls, default=str))
        message.usage_metadata = {
            "input_tokens": prompt_tokens,
            "output_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }
        return ChatResult(generations=[ChatGeneration(message=message)])

    def decide(self, messages: list[BaseMessage]) -> AIMessage:
        """The next step of the run, from the prompt and this run's tool results."""
        system = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
        line_match = _LINE.search(system)
        line = line_match.group(1) if line_match else "lookup"
        question_match = _QUESTION.search(system)
        question = question_match.group(1).strip() if question_match else _last_human(messages)
        spec = _spec_from_prompt(system, question)
        if spec is None or not spec.metrics:
            return AIMessage(unresolved_reply(spec, question))
        plan = plan_queries(spec, line=line)
        run = _this_run(messages)
        calls = [c for m in run if isinstance(m, AIMessage) for c in m.tool_calls]
        results = {m.tool_call_id: m for m in run if isinstance(m, ToolMessage)}
        done = [c["name"] for c in calls]
        can_call = bool(self.tool_names)
        if (
            can_call
            and line == "analysis"
            and "write_todos" not in done
            and "write_todos" in self.tool_names
        ):
            return _call("write_todos", {"todos": _todos(plan, completed=0)})
        if can_call and "search_tables" not in done and "search_tables" in self.tool_names:
            return _call("search_tables", {"query": question})
        sql_calls = [c for c in calls if c["name"] == "run_sql"]
        if can_call and len(sql_calls) < len(plan):
            step = plan[len(sql_calls)]
            return _call("run_sql", {"sql": step.sql, "purpose": step.purpose, "chart": step.chart})
        todo_updates = [c for c in calls if c["name"] == "write_todos"]
        if (
            can_call
            and line == "analysis"
            and len(todo_updates) < 2
            and "write_todos" in self.tool_names
        ):
            return _call("write_todos", {"todos": _todos(plan, completed=len(plan))})
        records = [
            results[c["id"]].artifact
            for c in sql_calls
            if c["id"] in results and isinstance(results[c["id"]].artifact, dict)
        ]
        return AIMessage(narrate(spec, plan, records))


def _last_human(messages: list[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


def _this_run(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Messages after the latest human message: this run's tool traffic."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return messages[i + 1 :]
    return [m for m in messages if not isinstance(m, SystemMessage)]


def _spec_from_prompt(system: str, question: str) -> QuestionSpec | None:
    match = _RESOLVED.search(system)
    if not match:
        return None
    from dataseer.knowledge.resolved import spec_from_resolved
    from dataseer.services import get_services

    return spec_from_resolved(match.group(1), question, get_services().pack)


def _call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
        ],
    )


def _todos(plan: list[PlannedQuery], *, completed: int) -> list[dict[str, str]]:
    return [
        {
            "id": f"t{i}",
            "content": q.purpose,
            "status": "completed" if i <= completed else "pending",
        }
        for i, q in enumerate(plan, start=1)
    ]
