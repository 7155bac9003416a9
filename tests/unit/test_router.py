from pathlib import Path

import pytest
import yaml

from dataseer.config import get_settings
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.understand import understand
from dataseer.router import clarification_for, fold_reply, rule_route

CASES = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "routes.yaml").read_text("utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[c["q"] for c in CASES])
def test_rule_route(case: dict) -> None:
    spec = understand(case["q"], KnowledgePack.load(), get_settings().resolved_today)
    assert rule_route(spec, bool(case.get("deep"))) == case["route"]


def test_clarification_questions_are_in_the_users_language() -> None:
    pack, today = KnowledgePack.load(), get_settings().resolved_today
    assert "王者荣耀" in clarification_for(understand("王者荣耀上个月流水", pack, today))
    assert "时间" in clarification_for(understand("星海远征的流水", pack, today))
    assert "period" in clarification_for(understand("Star Expedition revenue", pack, today))
    assert clarification_for(understand("星海远征上个月流水", pack, today)) == ""


def test_a_reply_naming_a_game_replaces_the_unknown_name(sample_path: Path) -> None:
    assert fold_reply("王者荣耀上个月流水", "星海远征", None) == "星海远征上个月流水"
    assert fold_reply("星海远征的流水", "上个月", None) == "星海远征的流水 上个月"
