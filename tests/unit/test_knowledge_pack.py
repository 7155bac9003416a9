"""The knowledge pack: loading, validation, mention matching, retrieval, cases on the warehouse."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from dataseer.errors import KnowledgeError
from dataseer.knowledge.pack import DEFAULT_PACK_DIR, KnowledgePack
from dataseer.knowledge.retrieval import KnowledgeIndex, tokenize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ALIASES: list[dict[str, Any]] = yaml.safe_load((FIXTURES / "aliases.yaml").read_text("utf-8"))[
    "cases"
]


@pytest.fixture(scope="module")
def pack() -> KnowledgePack:
    return KnowledgePack.load()


@pytest.fixture(scope="module")
def index(pack: KnowledgePack) -> KnowledgeIndex:
    return KnowledgeIndex(pack)


@pytest.fixture(scope="module")
def warehouse(sample_path: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(sample_path), read_only=True)


def _copy_pack(tmp_path: Path) -> Path:
    target = tmp_path / "pack"
    shutil.copytree(DEFAULT_PACK_DIR, target)
    return target


# --- loading ---------------------------------------------------------------


def test_load_is_cached_per_resolved_path(pack: KnowledgePack, tmp_path: Path) -> None:
    assert KnowledgePack.load() is pack
    assert KnowledgePack.load(DEFAULT_PACK_DIR / ".." / "pack") is pack
    copy = KnowledgePack.load(_copy_pack(tmp_path))
    assert copy is not pack
    assert copy.metrics == pack.metrics
    assert copy.games == pack.games


def test_pack_has_the_required_content(pack: KnowledgePack) -> None:
    assert {g.id for g in pack.games} == {1001, 1002, 1003, 1004, 1005, 1006}
    assert {m.key for m in pack.metrics} >= {
        "dau",
        "new_users",
        "revenue",
        "pay_users",
        "orders",
        "pay_rate",
        "arpu",
        "arppu",
        "retention_d1",
        "retention_d7",
        "funnel_conversion",
    }
    assert len(pack.cases) >= 15
    assert any(c.question.isascii() for c in pack.cases)
    assert any(not c.question.isascii() for c in pack.cases)
    glossary = {t.zh for t in pack.terms}
    for word in (
        "大R",
        "中R",
        "小R",
        "流水",
        "付费率",
        "次留",
        "七留",
        "首充",
        "环比",
        "同比",
        "买量",
    ):
        assert word in glossary or any(word in t.aliases for t in pack.terms), word
    assert pack.metric("pay_rate").kind == "ratio"
    assert pack.game_by_id(1005) is not None
    assert pack.game_by_id("1005") == pack.game_by_id(1005)
    assert pack.game_by_id(9999) is None
    assert "games.yaml" in pack.readme
    with pytest.raises(KeyError, match="unknown metric 'mau'"):
        pack.metric("mau")


@pytest.mark.parametrize(
    ("file", "edit", "expected"),
    [
        ("metrics.yaml", lambda d: d["metrics"][0].update(kind="bogus"), r"metrics\.yaml.*kind"),
        ("metrics.yaml", lambda d: d["metrics"][2].pop("table"), r"metrics\.yaml.*revenue.*table"),
        (
            "metrics.yaml",
            lambda d: d["metrics"][0].update(dimensions=["planet"]),
            r"metrics\.yaml.*dimensions.*planet",
        ),
        ("games.yaml", lambda d: d["games"][0].update(id="x"), r"games\.yaml.*games\[0\]\.id"),
        ("glossary.yaml", lambda d: d["terms"][0].update(metric="nope"), r"glossary\.yaml.*metric"),
        ("cases.yaml", lambda d: d["cases"][0].update(sql="SELEC FROM ("), r"cases\.yaml.*sql"),
        (
            "dimensions.yaml",
            lambda d: d["dimensions"][1].update(grain="hour"),
            r"dimensions.*grain",
        ),
        ("tables.yaml", lambda d: d.update(tables={"a": 1}), r"tables\.yaml.*tables"),
    ],
)
def test_malformed_files_name_file_and_field(
    tmp_path: Path, file: str, edit: Any, expected: str
) -> None:
    folder = _copy_pack(tmp_path)
    data = yaml.safe_load((folder / file).read_text("utf-8"))
    edit(data)
    (folder / file).write_text(yaml.safe_dump(data, allow_unicode=True), "utf-8")
    with pytest.raises(KnowledgeError, match=expected):
        KnowledgePack.load(folder)


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    folder = _copy_pack(tmp_path)
    (folder / "games.yaml").unlink()
    with pytest.raises(KnowledgeError, match=r"games\.yaml: file missing"):
        KnowledgePack.load(folder)
    (folder / "games.yaml").write_text("games: [\n", "utf-8")
    with pytest.raises(KnowledgeError, match=r"games\.yaml: invalid YAML"):
        KnowledgePack.load(folder)
    with pytest.raises(KnowledgeError, match="not found"):
        KnowledgePack.load(tmp_path / "nowhere")


# --- mention matching --------------------------------------------------------


@pytest.mark.parametrize("case", ALIASES, ids=[f"{c['kind']}:{c['text']}" for c in ALIASES])
def test_alias_resolution(pack: KnowledgePack, case: dict[str, Any]) -> None:
    text, kind = case["text"], case["kind"]
    expected = [str(v) for v in case["expect"]]
    if kind == "game":
        got = [str(g.id) for g in pack.match_games(text)]
    elif kind == "metric":
        got = [m.key for m in pack.match_metrics(text)]
    elif kind == "dimension":
        got = [d.key for d in pack.match_dimensions(text)]
    else:
        got = list(
            dict.fromkeys(
                m.target.split("\x1f")[1]
                for m in pack.value_mentions(text)
                if m.target.startswith(kind + "\x1f")
            )
        )
    assert got == expected


def test_aliases_fixture_is_large_enough() -> None:
    assert len(ALIASES) >= 30
    assert {c["kind"] for c in ALIASES} >= {"game", "channel", "metric"}
    assert any(not c["expect"] for c in ALIASES)


def test_longest_match_never_overlaps(pack: KnowledgePack) -> None:
    mentions = pack.game_mentions("星海远征和星海")
    assert [(m.text, m.target) for m in mentions] == [("星海远征", "1001"), ("星海", "1001")]
    assert [m.key for m in pack.match_metrics("付费转化率和转化率")] == [
        "pay_rate",
        "funnel_conversion",
    ]
    assert pack.match_metrics("ARPPU") == [pack.metric("arppu")]


# --- pack agrees with the warehouse -------------------------------------------


def test_games_match_dim_game(pack: KnowledgePack, warehouse: duckdb.DuckDBPyConnection) -> None:
    rows = warehouse.sql(
        "SELECT game_id, game_base_id, game_name, genre, status FROM dim_game ORDER BY game_id"
    ).fetchall()
    assert [(g.id, g.base_id, g.name, g.genre, g.status) for g in pack.games] == rows


def test_dimension_values_match_warehouse(
    pack: KnowledgePack, warehouse: duckdb.DuckDBPyConnection
) -> None:
    def distinct(sql: str) -> set[str]:
        return {r[0] for r in warehouse.sql(sql).fetchall()}

    assert set(pack.dimension("channel").value_codes()) == distinct(
        "SELECT channel_name FROM dim_channel"
    )
    assert set(pack.dimension("region").value_codes()) == distinct(
        "SELECT DISTINCT region FROM dws_game_active_di"
    )
    assert set(pack.dimension("item_category").value_codes()) == distinct(
        "SELECT DISTINCT item_category FROM dws_game_pay_di"
    )
    assert set(pack.dimension("step").value_codes()) == distinct(
        "SELECT DISTINCT step FROM dws_sdk_funnel_di"
    )


def test_tables_and_metric_columns_exist(
    pack: KnowledgePack, warehouse: duckdb.DuckDBPyConnection
) -> None:
    columns: dict[str, set[str]] = {}
    for table, column in warehouse.sql(
        "SELECT table_name, column_name FROM information_schema.columns"
    ).fetchall():
        columns.setdefault(table, set()).add(column)
    assert {t.name for t in pack.tables} == set(columns)
    for doc in pack.tables:
        for key in doc.dimensions:
            assert pack.dimension(key).column in columns[doc.name], (doc.name, key)
    for m in pack.metrics:
        assert m.time_column in columns[m.table]
        if m.column:
            assert m.column in columns[m.table]
        doc = pack.table_doc(m.table)
        assert doc is not None
        if m.kind == "ratio":
            parts = [pack.metric(p) for p in (m.numerator, m.denominator) if p]
            shared = set.intersection(*(set(pack.table_doc(p.table).dimensions) for p in parts))  # type: ignore[union-attr]
            assert set(m.dimensions) <= shared, m.key
        else:
            assert set(m.dimensions) <= set(doc.dimensions) | {"step"}, m.key


def test_every_case_runs_on_the_sample(
    pack: KnowledgePack, warehouse: duckdb.DuckDBPyConnection
) -> None:
    tables = {
        r[0] for r in warehouse.sql("SELECT table_name FROM information_schema.tables").fetchall()
    }
    for case in pack.cases:
        frame = warehouse.sql(case.sql).df()
        assert len(frame) > 0, case.id
        assert set(case.tables) <= tables, case.id


# --- retrieval ----------------------------------------------------------------


def test_tokenize_keeps_pack_words_whole(index: KnowledgeIndex) -> None:
    tokens = tokenize("星海远征上个月付费率是多少")
    assert "星海远征" in tokens
    assert "付费率" in tokens
    assert "是" not in tokens
    assert tokenize("dws_game_pay_di Revenue") == [
        "dws_game_pay_di",
        "dws",
        "game",
        "pay",
        "di",
        "revenue",
    ]


@pytest.mark.parametrize(
    ("query", "kinds", "kind", "key"),
    [
        ("什么是大R", ["term"], "term", "whale"),
        ("付费率怎么算", ["metric"], "metric", "pay_rate"),
        ("day 7 retention", ["metric"], "metric", "retention_d7"),
        ("幻境物语华为渠道登录转化", ["case"], "case", "funnel_huawei_sdk"),
        ("monthly active users", ["case"], "case", "mau_distinct"),
        ("Project Aurora", None, "game", "1006"),
        ("停服维护", ["term"], "term", "maintenance"),
    ],
)
def test_search_ranks_the_expected_entry_first(
    index: KnowledgeIndex, query: str, kinds: list[str] | None, kind: str, key: str
) -> None:
    hits = index.search(query, k=3, kinds=kinds)
    assert hits, query
    assert (hits[0].kind, hits[0].key) == (kind, key)
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_search_validates_arguments(index: KnowledgeIndex) -> None:
    assert index.search("zzzz qqqq") == []
    with pytest.raises(ValueError, match="k must be positive"):
        index.search("流水", k=0)
    with pytest.raises(ValueError, match="unknown kinds"):
        index.search("流水", kinds=["table", "planet"])


@pytest.mark.parametrize(
    ("query", "first", "also"),
    [
        ("星海远征上个月流水", "dws_game_pay_di", None),
        ("星海远征上个月付费率", None, "dws_game_pay_di"),
        ("星海远征上个月付费率", None, "dws_game_active_di"),
        ("次日留存", "dwd_user_login_di", None),
        ("幻境物语华为渠道登录转化率", "dws_sdk_funnel_di", None),
        ("为什么8月流水暴涨，有什么活动", None, "ops_events"),
        ("ETL口径和上游表", "meta_table_lineage", None),
        ("MAU of Mecha Storm in October", "dwd_user_login_di", None),
    ],
)
def test_search_tables(
    index: KnowledgeIndex,
    warehouse: duckdb.DuckDBPyConnection,
    query: str,
    first: str | None,
    also: str | None,
) -> None:
    catalog = warehouse.sql(
        "SELECT table_name, COALESCE(comment, '') FROM duckdb_tables() ORDER BY table_name"
    ).fetchall()
    ranked = index.search_tables(query, [(n, c) for n, c in catalog], k=4)
    names = [n for n, _ in ranked]
    top = 2 if first is None else 4
    if first is not None:
        assert names[0] == first, ranked
    if also is not None:
        assert also in names[:top], ranked


def test_search_tables_only_returns_catalog_tables(index: KnowledgeIndex) -> None:
    ranked = index.search_tables("流水", [("orders_fact", "订单流水事实表 / order revenue")], k=3)
    assert [n for n, _ in ranked] == ["orders_fact"]
    assert index.search_tables("流水", []) == []
