"""The value index: mentions linked to stored values, closest values, SQL hints, understand()."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from dataseer.data.duckdb_source import DuckDBSource
from dataseer.knowledge.corrections import suggest_fixes
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.retrieval import catalog_entries
from dataseer.knowledge.understand import understand
from dataseer.knowledge.values import ValueIndex, comment_aliases, edit_distance

CASES: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parents[1] / "fixtures" / "mentions.yaml").read_text(encoding="utf-8")
)
TODAY = date(2026, 11, 29)


@pytest.fixture(scope="module")
def source(sample_path: Path) -> Any:
    src = DuckDBSource(sample_path)
    yield src
    src.close()


@pytest.fixture(scope="module")
def values(source: DuckDBSource) -> ValueIndex:
    return ValueIndex.build(source, KnowledgePack.load())


@pytest.mark.parametrize("case", CASES["links"], ids=[c["text"] for c in CASES["links"]])
def test_links(values: ValueIndex, case: dict[str, Any]) -> None:
    got = [[lk.column, lk.value, lk.match] for lk in values.link(case["text"])]
    assert got == ([] if case.get("none") else [[str(x) for x in e] for e in case["expect"]])


def test_linking_accuracy_over_the_fixture(values: ValueIndex) -> None:
    right = sum(
        [[lk.column, lk.value] for lk in values.link(c["text"])]
        == ([] if c.get("none") else [[str(x) for x in e[:2]] for e in c["expect"]])
        for c in CASES["links"]
    )
    assert right / len(CASES["links"]) >= 0.95


@pytest.mark.parametrize("table,column,literal,best", CASES["closest"])
def test_closest_values(
    values: ValueIndex, table: str, column: str, literal: str, best: str
) -> None:
    assert values.closest_values(table, column, str(literal), k=3)[0] == str(best)


def test_index_reads_the_warehouse(values: ValueIndex) -> None:
    columns = values.columns()
    assert ("dim_channel", "channel_name") in columns
    assert ("dws_sdk_funnel_di", "sdk_version") in columns
    assert not any(c in {"title", "description", "content"} for _, c in columns)
    assert values.values("dim_game", "game_name")[:1]
    game = values.link("星海")[0]
    assert (game.code, game.dimension) == ("1001", "game")
    assert values.closest_values("dim_channel", "channel_name", "zzzzzz") == []
    with pytest.raises(ValueError, match="positive"):
        values.closest_values("dim_channel", "channel_name", "x", k=0)


def test_edit_distance_and_comment_pairs() -> None:
    assert edit_distance("huawie", "huawei") == 1
    assert edit_distance("xiaomi", "xiaomi") == 0
    assert edit_distance("abc", "xyz") == 3
    pairs = comment_aliases(
        "渠道编码：official 官网、huawei 华为 / skin (皮肤), monthly card (月卡)"
    )
    assert ("huawei", "华为") in pairs and ("monthly card", "月卡") in pairs


def test_sql_hints_for_unmatched_literals_and_unknown_names(
    source: DuckDBSource, values: ValueIndex
) -> None:
    catalog = catalog_entries(source)
    empty = (
        "SELECT SUM(p.revenue) FROM dws_game_pay_di p JOIN dim_channel c "
        "ON c.channel_id = p.channel_id WHERE c.channel_name = 'huawie'"
    )
    assert source.execute(empty).row_count in (0, 1)
    hints = suggest_fixes(empty, catalog=catalog, values=values, empty=True)
    assert any("'huawie'" in h and "'huawei'" in h for h in hints), hints
    games = "SELECT game_id FROM dim_game WHERE game_name IN ('星海')"
    hints = suggest_fixes(games, catalog=catalog, values=values, empty=True)
    assert any("'星海远征'" in h for h in hints), hints
    bad = "SELECT SUM(revenu) FROM dws_game_pay_di WHERE game_id = 1001"
    hints = suggest_fixes(bad, catalog=catalog, values=None, empty=False)
    assert any("`revenu`" in h and "`revenue`" in h for h in hints), hints
    hints = suggest_fixes(
        "SELECT * FROM dws_game_pays_di", catalog=catalog, values=None, empty=False
    )
    assert any("`dws_game_pay_di`" in h for h in hints), hints
    assert suggest_fixes("SELEC nonsense (", catalog=catalog, values=values, empty=True) == []
    fine = "SELECT * FROM dim_channel WHERE channel_name = 'huawei'"
    assert suggest_fixes(fine, catalog=catalog, values=values, empty=True) == []


def test_understand_uses_the_value_index(values: ValueIndex) -> None:
    pack = KnowledgePack.load()
    plain = understand("huawie渠道上个月流水", pack, TODAY)
    linked = understand("huawie渠道上个月流水", pack, TODAY, values=values)
    assert not any(f.dimension == "channel" for f in plain.filters)
    assert [(f.dimension, f.values) for f in linked.filters] == [("channel", ("huawei",))]
    assert understand("萌宠大作战上个月流水", pack, TODAY, values=values).games[0].id == 1004
    unknown = understand("王者荣耀上个月流水", pack, TODAY, values=values)
    assert unknown.unknown_mentions == ("王者荣耀",)
