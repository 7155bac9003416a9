"""Rebuild the whole prompt from state on every loop, and enforce the step budget.

The model never sees an ever-growing transcript: each call gets a static head
(role, rules, strategies, from ``prompts/<line>/system.md``) followed by XML
partitions rendered from state. The head comes first and never changes within
a run, so providers can cache its prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command

from dataseer.config import get_settings
from dataseer.errors import DataseerError, ModelError
from dataseer.knowledge.research import ops_events_digest, scoped_games
from dataseer.knowledge.resolved import resolved_json
from dataseer.knowledge.scenes import scene_knowledge
from dataseer.knowledge.skills import skill_book
from dataseer.knowledge.understand import QuestionSpec
from dataseer.middleware._partitions import PartitionProvider
from dataseer.observe import phase
from dataseer.prompt import BUDGET_TAG, join_partitions, load_prompt, markdown_table, partition
from dataseer.services import services_for
from dataseer.sql.permission_store import allowed_games

PARTITION_ORDER = (
    "question_context",
    "game_info",
    "metric_rules",
    "tables_info",
    "todo_state",
    "sql_history",
    "recent_reflection",
    "ops_events",
    "scene_knowledge",
    "notebook",
    "verification",
)
"""Static knowledge first (cache-friendly), fast-changing state last."""


class BaseAnalysisState(AgentState[Any]):
    """The keys the agent lines share with the router graph."""

    question: NotRequired[str]
    spec: NotRequired[dict[str, Any] | None]
    turn: NotRequired[int]
    steps: NotRequired[int]
    """Model turns with tool calls in this run; older tool messages leave the list."""
    scene: NotRequired[str | None]


def _scene(state: Mapping[str, Any], config: Mapping[str, Any] | None) -> str | None:
    """The run's scene: ``configurable.scene`` wins over the router's detection."""
    configured = ((config or {}).get("configurable") or {}).get("scene")
    return str(configured) if configured else state.get("scene")


def _skills_listing(settings: Any) -> str:
    book = skill_book(
        settings.resolved_prompts_dir, settings.skills_enabled, settings.skills_disabled
    )
    listing = book.listing()
    if not listing:
        return ""
    return (
        "Skills you can load with `load_skill(name)` when one fits the question; "
        "then follow its steps. / 合适时用 load_skill 加载技能并按步骤执行。\n" + listing
    )


def _ops_events(services: Any, spec: QuestionSpec | None, config: Any) -> str:
    """Ops events of the question's games and period, within the user's game scope."""
    if spec is None or spec.period is None:
        return ""
    allowed = allowed_games(services, config)
    if allowed is False:
        return ""
    games = scoped_games([g.id for g in spec.games], allowed)
    if games is None:
        return ""
    start, end = spec.period.start, spec.period.end
    if spec.compare_to is not None:
        start, end = min(start, spec.compare_to.start), max(end, spec.compare_to.end)
    return ops_events_digest(services.datasource, games, start, end)


class BaseAnalysisError(ValueError):
    """The middleware was configured with an impossible budget."""


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
        providers: Sequence[PartitionProvider] = (),
    ) -> None:
        super().__init__()
        if base_steps < 1 or per_todo < 0 or max_steps < base_steps:
            msg = (
                f"invalid step budget: base_steps={base_steps}, per_todo={per_todo}, "
                f"max_steps={max_steps} (need base_steps >= 1, max_steps >= base_steps)"
            )
            raise BaseAnalysisError(msg)
        self.line = line
        self.providers = list(providers)
        self.base_steps = base_steps
        self.per_todo = per_todo
        self.max_steps = max_steps

    def budget(self, state: dict[str, Any]) -> int:
        """Steps allowed for this run, given the open items of the plan."""
        open_todos = sum(1 for t in state.get("todos") or [] if t.get("status") != "completed")
        return min(self.max_steps, self.base_steps + self.per_todo * open_todos)

    def build_prompt(self, state: dict[str, Any], config: Mapping[str, Any] | None) -> str:
        """The whole system prompt for one loop, from state alone.

        Partitions come in a fixed order, static knowledge first and the
        fast-changing state last; middlewares that own a slice of state
        render their own partition (``PartitionProvider``).
        """
        services = services_for(config)
        head = load_prompt(f"{self.line}/system", services.settings.resolved_prompts_dir)
        if self.line == "analysis":
            python_guide = load_prompt("analysis/python", services.settings.resolved_prompts_dir)
            head = f"{head}\n\n{python_guide}"
        spec_data = state.get("spec")
        spec = QuestionSpec.from_dict(spec_data) if spec_data else None
        if self.line == "analysis":
            head = join_partitions([head, partition("skills", _skills_listing(services.settings))])
        own = {
            "question_context": self._question_context(state, spec, services),
            "game_info": self._game_info(spec),
            "metric_rules": self._metric_rules(spec),
            "ops_events": _ops_events(services, spec, config),
            "scene_knowledge": scene_knowledge(
                _scene(state, config), services.settings.resolved_prompts_dir
            ),
        }
        for provider in self.providers:
            own[provider.partition] = provider.render(state)
        ordered = [tag for tag in PARTITION_ORDER if tag in own]
        ordered += [tag for tag in own if tag not in PARTITION_ORDER]
        return join_partitions([head, *(partition(tag, own[tag]) for tag in ordered)])

    def _question_context(
        self, state: dict[str, Any], spec: QuestionSpec | None, services: Any
    ) -> str:
        lines = [
            f"line: {self.line}",
            f"turn: {int(state.get('turn') or 0)}",
            f"question: {state.get('question', '')}",
            f"today: {services.settings.resolved_today}",
        ]
        if spec is not None:
            lines.append(f"<resolved_question>{resolved_json(spec)}</resolved_question>")
        humans = [m for m in state.get("messages", []) if isinstance(m, HumanMessage)]
        earlier = humans[:-1][-3:]
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

    def before_agent(self, state: BaseAnalysisState, runtime: Runtime[Any]) -> dict[str, Any]:
        """A new run starts its step count at zero."""
        return {"steps": 0}

    async def abefore_agent(
        self, state: BaseAnalysisState, runtime: Runtime[Any]
    ) -> dict[str, Any]:
        """Async twin of ``before_agent``."""
        return self.before_agent(state, runtime)

    @staticmethod
    def counted(request: ModelRequest[Any], response: ModelResponse[Any]) -> Any:
        """The response, plus one step when the model asked for tools.

        Counting inside the model call (rather than in an ``after_model`` hook)
        saves a graph step on every loop.
        """
        if not any(isinstance(m, AIMessage) and m.tool_calls for m in response.result):
            phase("reporting")
            return response
        state: dict[str, Any] = dict(request.state)
        steps = int(state.get("steps") or 0) + 1
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"steps": steps})
        )

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state: dict[str, Any] = dict(request.state)
        prompt = self.build_prompt(state, get_config())
        steps = int(state.get("steps") or 0)
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

    @staticmethod
    def _mark_phase(request: ModelRequest[Any]) -> None:
        phase("planning" if not request.state.get("steps") else "execution")

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Replace the system prompt with one rebuilt from state; mark the phase."""
        self._mark_phase(request)
        try:
            response = handler(self._request(request))
        except GraphBubbleUp:
            raise
        except Exception as exc:
            raise self._model_error(exc, request.model) from exc
        return self.counted(request, response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """Async twin of ``wrap_model_call``."""
        self._mark_phase(request)
        # Rebuilding the prompt reads prompt files and the warehouse (ops
        # events): blocking work that must stay off the server's event loop.
        built = await asyncio.to_thread(self._request, request)
        try:
            response = await handler(built)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            raise self._model_error(exc, request.model) from exc
        return self.counted(request, response)

    def _model_error(self, exc: Exception, model: Any) -> Exception:
        """A provider failure as a ``ModelError`` naming tier, model and endpoint.

        Errors that are already ours pass through unchanged; the thread's
        checkpoint is intact either way, so the run can be resumed.
        """
        if isinstance(exc, DataseerError):
            return exc
        settings = get_settings(get_config())
        name = (
            getattr(model, "model_name", None)
            or settings.model_for("analyst")
            or type(model).__name__
        )
        where = f" at {settings.base_url}" if settings.base_url else ""
        msg = (
            f"{self.line} line: analyst model {name!r}{where} failed: {type(exc).__name__}: {exc}. "
            "The thread is saved; retry the question to resume."
        )
        return ModelError(msg)
