"""Benchmark the per-loop overhead of the analysis line's agent loop.

Run ``python bench/bench_loop.py`` (or ``--quick`` for fewer runs). An
instant, scripted chat model calls the cheap ``think`` tool ``--loops`` times
and then answers, so one loop is a model call plus a tool call and whatever
the framework and middlewares add around them. The time between two
consecutive model calls of a run is one loop sample.

Two agents run interleaved with the same model and tool:

- baseline: plain ``langchain.agents.create_agent`` with no middleware;
- dataseer: ``dataseer.lines.agents.build_line("analysis", model)``, i.e. the
  same loop through the middleware stack (prompt rebuilt from state on every
  loop, step budget, message cleanup).

It prints p50/p95 per-loop milliseconds for both, the ratio, and the fixed
cost of a run outside its loops. The line's prompt middleware loads the
services, so the run uses a sample warehouse (scale 0.05) in a temporary home.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NotRequired

from _common import QUESTION, Stats, bench_env, ms, print_table, ratio, use_env
from langchain.agents import AgentState, create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

_ids = itertools.count(1)


class LoopModel(BaseChatModel):
    """Calls ``think`` ``loops`` times in a run, then answers.

    A call with no tool result after the latest human message starts a new
    run; every call is stamped so the caller can cut a run into loops.
    """

    loops: int = 8
    stamps: list[float] = Field(default_factory=list)
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "bench-loop"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> LoopModel:
        """The script ignores the offered tools; binding costs nothing."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.stamps.append(time.perf_counter())
        fresh = True
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                break
            fresh = fresh and not isinstance(message, ToolMessage)
        # dataseer drops older tool messages, so count this run's calls instead
        self.calls = 0 if fresh else self.calls
        done = self.calls
        self.calls += 1
        if done < self.loops:
            call = {
                "name": "think",
                "args": {"reflection": f"step {done + 1}: the numbers agree so far"},
                "id": f"call_{next(_ids)}",
                "type": "tool_call",
            }
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"answered after {done} loops")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ThinkState(AgentState[Any]):
    """The plain agent's state plus the key ``think`` writes to."""

    reflection: NotRequired[str | None]


def one_run(agent: Any, model: LoopModel, payload: dict[str, Any]) -> tuple[list[float], float]:
    """Invoke once; return the loop samples and the time spent outside the loops."""
    model.stamps.clear()
    start = time.perf_counter()
    state = agent.invoke(payload, {"recursion_limit": 1000})
    end = time.perf_counter()
    stamps = list(model.stamps)
    if len(stamps) != model.loops + 1 or "answered" not in str(state["messages"][-1].content):
        msg = f"the run did not loop {model.loops} times ({len(stamps)} model calls)"
        raise RuntimeError(msg)
    loops = [b - a for a, b in itertools.pairwise(stamps)]
    return loops, (stamps[0] - start) + (end - stamps[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--loops", type=int, default=8, help="think calls per run (< 10, budget)")
    parser.add_argument("--runs", type=int, help="measured runs per agent (default 60, quick 15)")
    parser.add_argument(
        "--records", type=int, default=30, help="SQL records already in state (default 30)"
    )
    args = parser.parse_args()
    if not 1 <= args.loops < 10:
        parser.error("--loops must be within 1..9: the analysis line's base budget is 10 steps")
    runs = args.runs or (15 if args.quick else 60)

    with tempfile.TemporaryDirectory(prefix="dataseer-bench-loop-") as tmp:
        use_env(bench_env(Path(tmp) / "home", 0.05))
        from dataseer.lines.agents import build_line
        from dataseer.services import get_services, reset_services
        from dataseer.tools.plan import think

        start = time.perf_counter()
        get_services()
        services_s = time.perf_counter() - start

        model = LoopModel(loops=args.loops)
        plain = create_agent(model, [think], state_schema=ThinkState, name="plain")
        line = build_line("analysis", model)
        plain_in = {"messages": [HumanMessage(QUESTION)]}
        records = [
            {
                "task_id": i,
                "turn": 0,
                "purpose": f"earlier query {i}",
                "sql": f"SELECT {i} AS n",
                "ok": True,
                "error": None,
                "columns": ["day", "revenue"],
                "rows": [[f"2026-08-{d:02d}", 1000.0 + d * i] for d in range(1, 16)],
                "row_count": 15,
                "truncated": False,
                "elapsed": 0.001,
            }
            for i in range(1, args.records + 1)
        ]
        line_in = {
            "messages": [HumanMessage(QUESTION)],
            "question": QUESTION,
            "turn": 1,
            "sql_history": records,
        }

        for _ in range(3):
            one_run(plain, model, plain_in)
            one_run(line, model, line_in)
        samples: dict[str, list[float]] = {"plain": [], "line": []}
        fixed: dict[str, list[float]] = {"plain": [], "line": []}
        for _ in range(runs):
            for name, agent, payload in (("plain", plain, plain_in), ("line", line, line_in)):
                loops, outside = one_run(agent, model, payload)
                samples[name].extend(loops)
                fixed[name].append(outside)
        reset_services()

    base, ours = Stats.of(samples["plain"]), Stats.of(samples["line"])
    base_fixed, ours_fixed = Stats.of(fixed["plain"]), Stats.of(fixed["line"])
    print(
        f"bench_loop: {args.loops} think loops per run, {runs} runs per agent, "
        f"{args.records} SQL records in the line's state "
        f"(+3 warm-up), instant scripted model; services loaded in {services_s:.2f} s"
    )
    print_table(
        f"per-loop time (model call + think tool), {base.n} loops each",
        ["agent", "p50", "p95", "mean", "p50 vs plain", "p95 vs plain"],
        [
            [
                "plain create_agent (baseline)",
                ms(base.p50),
                ms(base.p95),
                ms(base.mean),
                "1.00x",
                "1.00x",
            ],
            [
                "dataseer analysis line",
                ms(ours.p50),
                ms(ours.p95),
                ms(ours.mean),
                ratio(ours.p50, base.p50),
                ratio(ours.p95, base.p95),
            ],
        ],
    )
    print(f"middleware overhead per loop (p50 difference): {ms(ours.p50 - base.p50)}")
    print_table(
        "per-run time outside the loops (entry, first model call setup, final answer, exit)",
        ["agent", "p50", "p95", "p50 vs plain"],
        [
            ["plain create_agent (baseline)", ms(base_fixed.p50), ms(base_fixed.p95), "1.00x"],
            [
                "dataseer analysis line",
                ms(ours_fixed.p50),
                ms(ours_fixed.p95),
                ratio(ours_fixed.p50, base_fixed.p50),
            ],
        ],
    )


if __name__ == "__main__":
    main()
