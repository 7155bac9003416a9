"""Prompt tokens per loop: dataseer's rebuilt prompt against a full-history agent.

The same scripted 30-step analysis (a plan, a schema read, 24 queries with
15-row results, reflections) runs through dataseer's analysis line and through
a plain ``create_agent`` that keeps the whole message history, with the same
static system prompt and the same tools. Tokens are estimated the same way for
both (CJK characters one each, other text one per four characters).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Annotated, Any, NotRequired

from _common import QUESTION, bench_env, print_table, ratio, use_env
from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from dataseer.state import merge_sql_history, merge_tables, merge_todos

STEPS = 30
SQL = (
    "SELECT ds, channel_id, ROUND(SUM(revenue), 2) AS revenue FROM dws_game_pay_di "
    "WHERE game_id IN (1001) AND ds BETWEEN DATE '2026-08-01' AND DATE '2026-08-15' "
    "AND channel_id = {c} GROUP BY ds, channel_id ORDER BY ds"
)


def script() -> list[tuple[str, dict[str, Any]]]:
    """The 30 steps: plan, schema, 24 queries, 3 reflections, then the answer."""
    steps: list[tuple[str, dict[str, Any]]] = [
        (
            "write_todos",
            {"todos": [{"id": "t1", "content": "逐渠道逐日查看", "status": "in_progress"}]},
        ),
        ("table_info", {"table": "dws_game_pay_di"}),
    ]
    for i in range(24):
        steps.append(
            (
                "run_sql",
                {
                    "sql": SQL.format(c=i % 12 + 1) + f" LIMIT {15 + i // 12}",
                    "purpose": f"渠道 {i % 12 + 1} 逐日流水 ({i})",
                },
            )
        )
        if i in (7, 15, 23):
            steps.append(("think", {"reflection": f"到第 {i} 个查询为止，8月5日起普遍上升"}))
    return steps[: STEPS - 1]


class Recorder(BaseChatModel):
    """Plays the script and records the estimated prompt tokens of each call."""

    steps: list[tuple[str, dict[str, Any]]]
    tokens: list[int] = Field(default_factory=list)
    position: int = 0

    @property
    def _llm_type(self) -> str:
        return "bench-recorder"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recorder:
        """Tools are known from the script; nothing to bind."""
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        from dataseer.observe.tokens import estimate_tokens

        self.tokens.append(
            sum(
                estimate_tokens(str(m.content))
                + estimate_tokens(str(getattr(m, "tool_calls", "") or ""))
                for m in messages
            )
        )
        if self.position < len(self.steps):
            name, args = self.steps[self.position]
            self.position += 1
            call = {"name": name, "args": args, "id": f"c{self.position}", "type": "tool_call"}
            return ChatResult(
                generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))]
            )
        return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted for run_all; same size")
    parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dataseer-bench-context-") as tmp:
        use_env(bench_env(Path(tmp) / "home", 0.05))
        from dataseer.config import get_settings
        from dataseer.lines.agents import build_line, middleware_stack
        from dataseer.prompt import load_prompt
        from dataseer.services import reset_services
        from dataseer.tools import ANALYSIS_TOOLS

        ours = Recorder(steps=script(), tokens=[])
        line = build_line("analysis", ours, max_steps=40)
        line.invoke(
            {"messages": [HumanMessage(QUESTION)], "question": QUESTION, "turn": 1},
            {"recursion_limit": 500},
        )

        tools = list(ANALYSIS_TOOLS)
        for mw in middleware_stack("analysis"):
            tools.extend(getattr(mw, "tools", []))
        head = load_prompt("analysis/system", get_settings().resolved_prompts_dir)
        base = Recorder(steps=script(), tokens=[])
        plain = create_agent(base, tools, system_prompt=head, state_schema=PlainState)
        plain.invoke({"messages": [HumanMessage(QUESTION)], "turn": 1}, {"recursion_limit": 500})
        reset_services()

    n = min(len(ours.tokens), len(base.tokens))
    rows = [
        [i + 1, base.tokens[i], ours.tokens[i], ratio(ours.tokens[i], base.tokens[i])]
        for i in range(n)
        if i in (0, 4, 9, 14, 19, 24, n - 1)
    ]
    print(f"bench_context: {STEPS}-step scripted analysis, {n} model calls each")
    print_table(
        "estimated prompt tokens per loop",
        ["loop", "full history (baseline)", "dataseer", "dataseer / baseline"],
        rows,
    )
    growth = (ours.tokens[n - 1] - ours.tokens[9]) / max(1, n - 10)
    base_growth = (base.tokens[n - 1] - base.tokens[9]) / max(1, n - 10)
    print(
        f"final loop: dataseer {ours.tokens[n - 1]} vs baseline {base.tokens[n - 1]} tokens "
        f"= {ours.tokens[n - 1] / base.tokens[n - 1]:.2f} of the baseline (goal <= 0.25)"
    )
    print(
        f"growth per loop after loop 10: dataseer {growth:+.0f} tokens, baseline {base_growth:+.0f}"
    )


class PlainState(AgentState[Any]):
    """The state keys dataseer's tools write, so the baseline runs the very same tools."""

    turn: NotRequired[int]
    sql_history: NotRequired[Annotated[list[Any], merge_sql_history]]
    todos: NotRequired[Annotated[list[Any], merge_todos]]
    reflection: NotRequired[str | None]
    tables_info: NotRequired[Annotated[dict[str, str], merge_tables]]


if __name__ == "__main__":
    main()
