"""Question understanding: intents, mentions, periods, follow-ups, round trips."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.understand import Filter, QuestionSpec, detect_language, understand

FIXTURE = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "fixtures" / "understand.yaml").read_text("utf-8")
)
TODAY: date = FIXTURE["today"]
QUESTIONS: list[dict[str, Any]] = FIXTURE["questions"]
FOLLOWUPS: list[dict[str, Any]] = FIXTURE["followups"]


@pytest.fixture(scope="module")
def pack() -> KnowledgePack:
    return KnowledgePack.load()


def _check(spec: QuestionSpec, case: dict[str, Any]) -> None:
    got: dict[str, Any] = {}
    want: dict[str, Any] = {}
    simple = {
        "intent": spec.intent,
        "games": [g.id for g in spec.games],
        "metrics": [m.key for m in spec.metrics],
        "dimensions": list(spec.dimensions),
        "terms": [t.key for t in spec.terms],
        "unknown": list(spec.unknown_mentions),
        "missing": spec.missing(),
        "language": spec.language,
        "is_followup": spec.is_followup,
        "filters": {f.dimension: list(f.values) for f in spec.filters},
        "period": spec.period and [spec.period.start, spec.period.end],
        "compare_to": spec.compare_to and [spec.compare_to.start, spec.compare_to.end],
    }
    for key, value in simple.items():
        if key in case:
            got[key] = value
            want[key] = case[key]
    if "filters" in want:
        want["filters"] = {k: [str(v) for v in vs] for k, vs in want["filters"].items()}
    assert got == want


def test_fixture_is_large_enough() -> None:
    assert len(QUESTIONS) >= 30
    assert sum(1 for q in QUESTIONS if detect_language(q["text"]) == "en") >= 8
    intents = {q["intent"] for q in QUESTIONS}
    assert intents == {
        "smalltalk",
        "definition",
        "lookup",
        "trend",
        "compare",
        "why",
        "funnel",
        "unknown",
    }


@pytest.mark.parametrize("case", QUESTIONS, ids=[q["text"] for q in QUESTIONS])
def test_question(pack: KnowledgePack, case: dict[str, Any]) -> None:
    spec = understand(case["text"], pack, TODAY)
    _check(spec, case)
    assert spec.text == case["text"]
    assert spec.is_followup is False


@pytest.mark.parametrize("flow", FOLLOWUPS, ids=[f["name"] for f in FOLLOWUPS])
def test_followups(pack: KnowledgePack, flow: dict[str, Any]) -> None:
    previous: QuestionSpec | None = None
    for step in flow["steps"]:
        spec = understand(step["text"], pack, TODAY, previous)
        _check(spec, step)
        previous = spec


def test_followup_replaces_filters_per_dimension(pack: KnowledgePack) -> None:
    first = understand("星海远征上个月华为渠道海外的流水", pack, TODAY)
    assert {f.dimension: f.values for f in first.filters} == {
        "channel": ("huawei",),
        "region": ("overseas",),
    }
    second = understand("小米呢", pack, TODAY, first)
    assert second.is_followup
    assert {f.dimension: f.values for f in second.filters} == {
        "region": ("overseas",),
        "channel": ("xiaomi",),
    }
    assert second.period == first.period


def test_unknown_game_is_not_replaced_by_previous_game(pack: KnowledgePack) -> None:
    first = understand("星海远征上个月流水", pack, TODAY)
    second = understand("那王者荣耀呢", pack, TODAY, first)
    assert second.games == ()
    assert second.unknown_mentions == ("王者荣耀",)
    assert second.missing() == ["game"]


def test_round_trip_through_json(pack: KnowledgePack) -> None:
    for text in (
        "幻境物语10月10日到10月16日华为渠道3.2.0版本的登录转化率",
        "为什么星海远征8月流水暴涨",
    ):
        spec = understand(text, pack, TODAY)
        data = json.loads(json.dumps(spec.to_dict(), ensure_ascii=False))
        again = QuestionSpec.from_dict(data)
        assert again == spec
        assert again.games[0] is not spec.games[0]
    spec = understand("你好", pack, TODAY)
    assert QuestionSpec.from_dict(spec.to_dict()) == spec
    assert Filter.from_dict(Filter("channel", "channel_name", ("huawei",)).to_dict()) == Filter(
        "channel", "channel_name", ("huawei",)
    )


def test_missing_names_what_blocks_the_answer(pack: KnowledgePack) -> None:
    assert understand("流水", pack, TODAY).missing() == ["game", "period"]
    assert understand("什么是ARPU", pack, TODAY).missing() == []
    assert understand("星海远征", pack, TODAY).missing() == ["metric", "period"]


def test_language_detection() -> None:
    assert detect_language("DAU of 星海") == "zh"
    assert detect_language("DAU last week") == "en"
