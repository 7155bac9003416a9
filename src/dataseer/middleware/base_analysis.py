"""Rebuild the whole prompt from state on every loop, and enforce the step budget.

The model never sees an ever-growing transcript: each call gets a static head
(role, rules, strategies, from ``prompts/<line>/system.md``) followed by XML
partitions rendered from state. The head comes first and never changes within
a run, so providers can cache its prefix.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.config import get_config

from dataseer.knowledge.resolved import resolved_json
from dataseer.knowledge.understand import QuestionSpec
from dataseer.prompt import join_partitions, load_prompt, markdown_table, partition
from dataseer.services import services_for
from dataseer.state import SqlRecord, Todo, merge_sql_history, merge_todos

FULL_RESULTS = 3
"""The most recent queries shown with their result tables; older ones as one line."""

BUDGET_TAG = "budget_exhausted"


class BaseAnalysisState(AgentState[Any]):
    """The keys the agent lines share with the router graph."""

    question: NotRequired[str]
    spec: NotRequired[dict[str, Any] | None]
    turn: NotRequired[int]
    sql_history: NotRequired[Annotated[list[SqlRecord], merge_sql_history]]
    todos: NotRequired[Annotated[list[Todo], merge_todos]]
    reflection: NotRequired[str | None]


class BaseAnalysisError(ValueError):
    """The middleware was configured with an impossible budget."""


def steps_taken(messages: list[Any]) -> int:
    """Model turns with tool calls since the latest question (this run's loops)."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and message.tool_calls:
            count += 1
    return count


class BaseAnalysisMiddleware(AgentMiddleware[BaseAnalysisState, Any]):
    """Outermost layer: prompt rebuilt from state each loop, adaptive step budget.

    The budget is ``base_steps + per_todo * open_todos``, never above
    ``max_steps``. When it is spent the model is called once more without
    tools and told to answer from what it already knows, so a runaway model
    ends with an answer instead of an error.
    """

    state_schema = BaseAnalysisState

    def __init__(
        self,
        line: str,
        *,
        base_steps: int = 8,
        per_todo: int = 2,
        max_steps: int = 30,
    ) -> None:
        super().__init__()
        if base_steps < 1 or per_todo < 0 or max_steps < base_steps:
            msg = (
                f"invalid step budget: base_steps={base_steps}, per_todo={per_todo}, "
                f"max_steps={max_steps} (need base_steps >= 1, max_steps >= base_steps)"
            )
            raise BaseAnalysisError(msg)
        self.line = line
        self.base_steps = base_steps
        self.per_todo = per_todo
        self.max_steps = max_steps

    def budget(self, state: dict[str, Any]) -> int:
        """Steps allowed for this run, given the open items of the plan."""
        open_todos = sum(1 for t in state.get("todos") or [] if t.get("status") != "completed")
        return min(self.max_steps, self.base_steps + self.per_todo * open_todos)

    def build_prompt(self, state: dict[str, Any], config: Mapping[str, Any] | None) -> str:
        """The whole system prompt for one loop, from state alone."""
        services = services_for(config)
        head = load_prompt(f"{self.line}/system", services.settings.resolved_prompts_dir)
        spec_data = state.get("spec")
        spec = QuestionSpec.from_dict(spec_data) if spec_data else None
        turn = int(state.get("turn") or 0)
        history = [r for r in state.get("sql_history") or [] if r.get("turn") == turn]
        parts = [
            head,
            partition("question_context", self._question_context(state, spec, services)),
            partition("game_info", self._game_info(spec)),
            partition("metric_rules", self._metric_rules(spec)),
            partition("todo_state", self._todo_state(state.get("todos") or [])),
            partition("sql_history", render_sql_history(history)),
            partition("recent_reflection", state.get("reflection") or ""),
        ]
        return join_partitions(parts)

    def _question_context(
        self, state: dict[str, Any], spec: QuestionSpec | None, services: Any
    ) -> str:
        lines = [
            f"line: {self.line}",
            f"question: {state.get('question', '')}",
            f"today: {services.settings.resolved_today}",
        ]
        if spec is not None:
            lines.append(f"<resolved_question>{resolved_json(spec)}</resolved_question>")
        earlier = [m for m in state.get("messages", [])[:-1] if isinstance(m, HumanMessage)][-3:]
        if earlier:
            lines.append("earlier questions: " + " | ".join(str(m.content)[:120] for m in earlier))
        return "\n".join(lines)

    @staticmethod
    def _game_info(spec: QuestionSpec | None) -> str:
        if spec is None or not spec.games:
            return ""
        rows = [[g.id, g.name, g.status, ", ".join(g.aliases), g.note] for g in spec.games]
        return markdown_table(["game_id", "name", "status", "aliases", "note"], rows)

    @staticmethod
    def _metric_rules(spec: QuestionSpec | None) -> str:
        if spec is None or not spec.metrics:
            return ""
        rows = [
            [m.key, m.zh, m.formula, m.table, m.time_column, ", ".join(m.dimensions)]
            for m in spec.metrics
        ]
        return markdown_table(["metric", "name", "formula", "table", "time", "dimensions"], rows)

    @staticmethod
    def _todo_state(todos: list[Todo]) -> str:
        return "\n".join(f"- [{t['status']}] {t['id']}: {t['content']}" for t in todos)

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state = dict(request.state)
        prompt = self.build_prompt(state, get_config())
        steps = steps_taken(request.messages)
        if steps >= self.budget(state):
            note = partition(
                BUDGET_TAG,
                f"Step budget spent ({steps} steps). Do not call tools. Answer now from the "
                "results above; say plainly what remains unverified. "
                "步数预算已用完：请基于已有结果直接作答，并说明尚未核实的部分。",
            )
            return request.override(
                system_message=SystemMessage(join_partitions([prompt, note])),
                tools=[],
                tool_choice=None,
            )
        return request.override(system_message=SystemMessage(prompt))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Replace the system prompt with one rebuilt from state."""
        return handler(self._request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of ``wrap_model_call``."""
        return await handler(self._request(request))


def render_sql_history(records: list[SqlRecord]) -> str:
    """This turn's queries: the latest few with rows, older ones as one line."""
    out: list[str] = []
    for i, rec in enumerate(records):
        recent = i >= len(records) - FULL_RESULTS
        status = "✓" if rec["ok"] else "✗"
        line = (
            f"[task {rec['task_id']}] {status} {rec.get('purpose') or ''} · {rec['row_count']} rows"
        )
        if not recent:
            out.append(line)
            continue
        body = f"```sql\n{rec['sql']}\n```"
        if rec["ok"]:
            body += "\n" + markdown_table(rec["columns"], rec["rows"], max_rows=15)
        else:
            body += f"\nerror: {rec.get('error')}"
        out.append(f"{line}\n{body}")
    return "\n\n".join(out)
