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
from dataseer.models.offline_plan import PlannedQuery, deepen, plan_queries
from dataseer.observe.tokens import estimate_tokens
from dataseer.prompt import BUDGET_TAG

_RESOLVED = re.compile(r"<resolved_question>(.*?)</resolved_question>", re.S)
_LINE = re.compile(r"^line: (\w+)", re.M)
_QUESTION = re.compile(r"^question: (.*)$", re.M)


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
        prompt_tokens = sum(estimate_tokens(str(m.content)) for m in messages)
        completion = estimate_tokens(
            str(message.content) + json.dumps(message.tool_calls, default=str)
        )
        message.usage_metadata = {
            "input_tokens": prompt_tokens,
            "output_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }
        return ChatResult(generations=[ChatGeneration(message=message)])

    def decide(self, messages: list[BaseMessage]) -> AIMessage:
        """The next step, from the rebuilt prompt and the tool results still in view.

        Progress is read from state as the prompt shows it (``<todo_state>``,
        this turn's ``<sql_history>``), because older tool messages leave the
        message list once their content lives in state.
        """
        system = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
        line = _field(_LINE, system, "lookup")
        turn = int(_field(_TURN, system, "0"))
        question = _field(_QUESTION, system, "") or _last_human(messages)
        spec = _spec_from_prompt(system, question)
        if spec is None or not spec.metrics or spec.period is None:
            return AIMessage(unresolved_reply(spec, question))
        spec = deepen(spec, line)
        plan = plan_queries(spec, line=line)
        run = _this_run(messages)
        latest = _latest_group(run)
        tasks = _tasks(system, turn)
        todos = _section(system, "todo_state")
        tools = set(self.tool_names)
        budget_spent = BUDGET_TAG in system or not tools
        if not budget_spent:
            if line == "analysis" and not todos and "write_todos" in tools:
                return _call("write_todos", {"todos": _todos(plan, completed=0)})
            searched = any(
                c["name"] == "search_tables"
                for m in run
                if isinstance(m, AIMessage)
                for c in m.tool_calls
            )
            if not searched and not tasks and "search_tables" in tools:
                return _call("search_tables", {"query": question})
            # a refusal is final for the offline analyst: it explains the scope
            # instead of running the rest of a plan that would be refused too
            stopped = _non_retryable(latest) or _refused_this_turn(system, turn)
            if len(tasks) < len(plan) and not stopped:
                step = plan[len(tasks)]
                return _call(
                    "run_sql", {"sql": step.sql, "purpose": step.purpose, "chart": step.chart}
                )
            if line == "analysis" and "[pending]" in todos and "write_todos" in tools:
                done = len(plan) if stopped else len(tasks)
                return _call("write_todos", {"todos": _todos(plan, completed=done)})
            if tasks and _latest_name(latest) != "sql_task_detail" and "sql_task_detail" in tools:
                return _calls("sql_task_detail", [{"task_id": t} for t, _ in tasks])
        records = _records(run)
        by_purpose = {r.get("purpose"): r for r in records}
        pairs = [(q, by_purpose[q.purpose]) for q in plan if q.purpose in by_purpose]
        if not pairs and latest and _non_retryable(latest):
            return AIMessage(str(latest[1][-1].content))
        return AIMessage(
            narrate(spec, [q for q, _ in pairs], [r for _, r in pairs], planned=len(plan))
        )


_TURN = re.compile(r"^turn: (\d+)", re.M)
_TASK = re.compile(r"^\[task (\d+) · turn (\d+)\] ([✓✗])", re.M)


def _field(pattern: re.Pattern[str], text: str, default: str) -> str:
    match = pattern.search(text)
    return match.group(1).strip() if match else default


def _section(system: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", system, re.S)
    return match.group(1) if match else ""


def _tasks(system: str, turn: int) -> list[tuple[int, bool]]:
    """This turn's queries as the prompt lists them: (task id, ok)."""
    body = _section(system, "sql_history")
    return [
        (int(m.group(1)), m.group(3) == "✓")
        for m in _TASK.finditer(body)
        if int(m.group(2)) == turn
    ]


def _refused_this_turn(system: str, turn: int) -> bool:
    """Whether a query of this turn was refused (older turns' refusals do not count)."""
    blocks = re.split(r"\n\n(?=\[task \d+ · turn)", _section(system, "sql_history"))
    return any(
        block.startswith("[task ")
        and f" · turn {turn}]" in block.split("\n", 1)[0]
        and "permission denied" in block
        for block in blocks
    )


def _latest_group(run: list[BaseMessage]) -> tuple[AIMessage, list[ToolMessage]] | None:
    for i in range(len(run) - 1, -1, -1):
        message = run[i]
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = {c["id"] for c in message.tool_calls}
            results = [
                m for m in run[i + 1 :] if isinstance(m, ToolMessage) and m.tool_call_id in ids
            ]
            return message, results
    return None


def _latest_name(group: tuple[AIMessage, list[ToolMessage]] | None) -> str:
    return group[0].tool_calls[0]["name"] if group else ""


def _non_retryable(group: tuple[AIMessage, list[ToolMessage]] | None) -> bool:
    """The latest run_sql was refused in a way a retry cannot fix (permission, timeout)."""
    if not group or _latest_name(group) != "run_sql":
        return False
    for result in group[1]:
        text = str(result.content).lower()
        if result.status == "error" and any(
            w in text for w in ("权限", "permission", "denied", "超时", "timed out", "not allowed")
        ):
            return True
    return False


def _records(run: list[BaseMessage]) -> list[dict[str, Any]]:
    """Full records fetched by sql_task_detail or returned by run_sql, in order."""
    found: dict[int, dict[str, Any]] = {}
    for message in run:
        if isinstance(message, ToolMessage) and isinstance(message.artifact, dict):
            record = message.artifact
            if "task_id" in record and "sql" in record:
                found[int(record["task_id"])] = record
    return [found[k] for k in sorted(found)]


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
    return _calls(name, [args])


def _calls(name: str, many: list[dict[str, Any]]) -> AIMessage:
    """One message calling a tool once per argument set (parallel tool calls)."""
    calls = [
        {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
        for args in many
    ]
    return AIMessage("", tool_calls=calls)


def _todos(plan: list[PlannedQuery], *, completed: int) -> list[dict[str, str]]:
    return [
        {
            "id": f"t{i}",
            "content": q.purpose,
            "status": "completed" if i <= completed else "pending",
        }
        for i, q in enumerate(plan, start=1)
    ]
