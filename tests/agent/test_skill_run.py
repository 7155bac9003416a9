"""An analysis run whose model loads a skill and follows its steps (scripted model).

The scripted model plays an LLM that reads the skill: after ``load_skill``
it derives its next tool calls from the numbered steps of the body it got
back, so the test fails if the skill's text does not reach the model or
names tools the line does not have.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from dataseer.config import Settings
from dataseer.graph import build_graph
from support.scripted import ScriptedChatModel, text, tool_call

QUESTION = "为什么幻境物语2026年10月华为渠道SDK登录转化下降？"
FUNNEL = (
    "SELECT step, step_order, SUM(users) AS users FROM dws_sdk_funnel_di "
    "WHERE game_id = 1002 AND ds BETWEEN DATE '2026-10-10' AND DATE '2026-10-16' "
    "GROUP BY step, step_order ORDER BY step_order"
)
SPLIT = (
    "SELECT c.channel_name, f.sdk_version, "
    "SUM(CASE WHEN f.step = 'login' THEN f.users END) * 1.0 "
    "/ SUM(CASE WHEN f.step = 'sdk_init' THEN f.users END) AS login_rate "
    "FROM dws_sdk_funnel_di f JOIN dim_channel c ON c.channel_id = f.channel_id "
    "WHERE f.game_id = 1002 AND f.ds BETWEEN DATE '2026-10-10' AND DATE '2026-10-16' "
    "GROUP BY 1, 2 ORDER BY login_rate"
)
ARGS: dict[str, list[dict[str, Any]]] = {
    "search_tables": [{"query": "幻境物语 SDK 漏斗 登录转化"}],
    "table_info": [{"table": "dws_sdk_funnel_di"}],
    "run_sql": [
        {"sql": FUNNEL, "purpose": "漏斗各步骤人数", "chart": "funnel"},
        {"sql": SPLIT, "purpose": "登录转化按渠道和版本拆分", "chart": "bar"},
    ],
    "research": [{"topic": "幻境物语 登录转化", "question": QUESTION}],
}


class SkillFollower:
    """The LLM's side after load_skill: one call per numbered step of the skill."""

    def __init__(self, model: ScriptedChatModel) -> None:
        self.model = model
        self.steps: list[str] | None = None
        self.used: dict[str, int] = {}

    def _read_skill(self, messages: list[BaseMessage]) -> None:
        for m in messages:
            if isinstance(m, ToolMessage) and str(m.content).startswith("# skill funnel-analysis"):
                steps = []
                for line in str(m.content).splitlines():
                    if not re.match(r"^\d+\.", line):
                        continue
                    names = [
                        n for n in re.findall(r"`([a-z_]+)`", line) if n in self.model.bound_tools
                    ]
                    if names:
                        steps.append(names[0])
                self.steps = steps

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        if self.steps is None:
            self._read_skill(messages)
        assert self.steps is not None, "the skill body never reached the model"
        if not self.steps:
            return text(
                "登录转化的下降集中在华为渠道的新 SDK 版本，与版本更新后的登录异常公告吻合。"
            )
        name = self.steps.pop(0)
        n = self.used.get(name, 0)
        self.used[name] = n + 1
        return tool_call(name, **ARGS[name][n])


def test_analysis_run_loads_a_skill_and_follows_it(sample_path: Path) -> None:
    load = AIMessage(
        "",
        tool_calls=[{"name": "load_skill", "args": {"name": "funnel-analysis"}, "id": "c0",
                     "type": "tool_call"}],
    )  # fmt: skip
    model = ScriptedChatModel(script=[load])
    follower = SkillFollower(model)
    model.script += [follower] * 7
    graph = build_graph(model=model, settings=Settings(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "skill-run"}}
    graph.invoke({"messages": [HumanMessage(QUESTION)], "deep": True}, config)
    state = graph.get_state(config).values

    assert state["route"] == "analysis"
    assert state["scene"] == "sdk_funnel"
    first = model.requests[0]
    system = next(str(m.content) for m in first if isinstance(m, SystemMessage))
    assert "`funnel-analysis`" in system and "<scene_knowledge>" in system
    assert {"load_skill", "research", "table_lineage"} <= set(model.bound_tools)
    calls = [
        c["name"]
        for request in model.requests[1:]
        for m in request
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    ]
    order = list(dict.fromkeys(calls))
    assert order == ["load_skill", "search_tables", "table_info", "run_sql", "research"]
    history = state["sql_history"]
    assert [r["ok"] for r in history] == [True, True]
    worst = history[1]["rows"][0]
    assert worst[:2] == ["huawei", "3.2.0"]
    researched = [
        m
        for request in model.requests
        for m in request
        if isinstance(m, ToolMessage) and m.name == "research"
    ]
    assert researched and "华为渠道登录异常说明" in str(researched[0].content)
    assert "华为渠道" in str(state["messages"][-1].content)
