"""Scenes: files with three sections, detection, and injection into the rebuilt prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from dataseer.config import PROJECT_ROOT, get_settings
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.scenes import (
    SceneError,
    detect_scene,
    list_scenes,
    load_scene,
    parse_scene,
    scene_knowledge,
)
from dataseer.knowledge.understand import understand
from dataseer.lines.agents import middleware_stack
from dataseer.router import route_node

PROMPTS = PROJECT_ROOT / "prompts"


def test_shipped_scenes_have_the_three_sections() -> None:
    scenes = list_scenes(PROMPTS)
    assert set(scenes) >= {"sdk_funnel", "revenue_anomaly"}
    for scene in scenes.values():
        for heading in ("Exploration path", "SQL notes", "Common tables"):
            assert heading in scene.body


def test_a_scene_without_a_section_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "x.md"
    bad.write_text("---\nkey: x\n---\n## Exploration path\n1. look\n", encoding="utf-8")
    with pytest.raises(SceneError, match="SQL notes, common tables"):
        parse_scene(bad)
    with pytest.raises(SceneError, match="unknown scene 'nope'"):
        load_scene("nope", PROMPTS)


@pytest.mark.parametrize(
    "question,scene",
    [
        ("为什么星海远征8月流水暴涨？", "revenue_anomaly"),
        ("幻境物语10月华为渠道SDK登录转化漏斗", "sdk_funnel"),
        ("why did Star Expedition revenue spike in August 2026?", "revenue_anomaly"),
        ("星海远征上个月流水多少", None),
        ("为什么机甲风暴9月3日DAU下降", None),
    ],
)
def test_detect_scene(question: str, scene: str | None) -> None:
    spec = understand(question, KnowledgePack.load(), get_settings().resolved_today)
    found = detect_scene(
        question, PROMPTS, intent=spec.intent, metrics=tuple(m.key for m in spec.metrics)
    )
    assert found == scene


def _state(question: str, **extra: Any) -> dict[str, Any]:
    spec = understand(question, KnowledgePack.load(), get_settings().resolved_today)
    return {"messages": [HumanMessage(question)], "question": question, "spec": spec.to_dict(),
            "turn": 1, **extra}  # fmt: skip


def test_scene_knowledge_is_injected_last_after_ops_events(sample_path: Path) -> None:
    state = _state("为什么星海远征8月流水暴涨？", scene="revenue_anomaly")
    prompt = middleware_stack("analysis")[0].build_prompt(state, None)
    tags = ["\n<question_context>\n", "\n<game_info>\n", "\n<metric_rules>\n",
            "\n<ops_events>\n", "\n<scene_knowledge>\n"]  # fmt: skip
    positions = [prompt.index(t) for t in tags]
    assert positions == sorted(positions)
    assert "\n<skills>\n" in prompt and prompt.index("\n<skills>\n") < positions[0]
    ops = prompt[positions[3] : positions[4]]
    assert "夏日祭" in ops
    assert "scene: revenue_anomaly" in prompt[positions[4] :]
    assert "dws_game_pay_di" in prompt[positions[4] :]


def test_config_scene_wins_and_unknown_scene_is_ignored(sample_path: Path) -> None:
    state = _state("为什么星海远征8月流水暴涨？", scene="revenue_anomaly")
    base = middleware_stack("analysis")[0]
    prompt = base.build_prompt(state, {"configurable": {"scene": "sdk_funnel"}})
    assert "scene: sdk_funnel" in prompt and "scene: revenue_anomaly" not in prompt
    none = base.build_prompt(_state("星海远征上个月流水多少"), None)
    assert "<scene_knowledge>" not in none
    assert scene_knowledge("no_such_scene", PROMPTS) == ""


def test_router_stores_the_scene(sample_path: Path) -> None:
    state: Any = {"messages": [HumanMessage("为什么星海远征8月流水暴涨？")]}
    command = route_node(state, {"configurable": {}})
    assert command.update["scene"] == "revenue_anomaly"
    command = route_node(state, {"configurable": {"scene": "sdk_funnel"}})
    assert command.update["scene"] == "sdk_funnel"
    plain: Any = {"messages": [HumanMessage("星海远征上个月流水多少")]}
    assert route_node(plain, {"configurable": {}}).update["scene"] is None
