"""Table search at warehouse scale: the synthetic 500-table catalog and its evaluation set."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from dataseer.cli import main
from dataseer.data.duckdb_source import DuckDBSource
from dataseer.data.sample.schema import TABLES
from dataseer.knowledge.catalog import (
    EvalQuestion,
    add_catalog,
    catalog_tables,
    eval_path,
    load_eval,
)
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.retrieval import (
    KnowledgeIndex,
    TableEntry,
    catalog_entries,
    table_family,
)


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@pytest.fixture(scope="module")
def catalog_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[EvalQuestion]]:
    """The core sample tables (schema and comments only) plus a 500-table catalog."""
    path = tmp_path_factory.mktemp("catalog") / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        for table in TABLES:
            con.execute(table.ddl())
            con.execute(f"COMMENT ON TABLE {table.name} IS {_text(table.comment)}")
            for col in table.columns:
                con.execute(f"COMMENT ON COLUMN {table.name}.{col.name} IS {_text(col.comment)}")
    return path, add_catalog(path, 500)


@pytest.fixture(scope="module")
def entries(catalog_db: tuple[Path, list[EvalQuestion]]) -> list[TableEntry]:
    source = DuckDBSource(catalog_db[0])
    try:
        return catalog_entries(source)
    finally:
        source.close()


def test_catalog_has_layers_near_duplicates_and_deprecated_tables(
    catalog_db: tuple[Path, list[EvalQuestion]],
) -> None:
    path, _ = catalog_db
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall()
        lineage = con.execute("SELECT count(*) FROM meta_table_lineage").fetchone()
        uncommented = con.execute(
            "SELECT count(*) FROM duckdb_columns() "
            "WHERE NOT internal AND coalesce(comment, '') = ''"
        ).fetchone()
    names = {r[0] for r in rows}
    assert len(names) >= 500 + len(TABLES)
    assert {n.split("_", 1)[0] for n in names} >= {"ods", "dwd", "dws", "ads", "dim", "tmp"}
    deprecated = [n for n, c in rows if re.search("废弃|deprecated", c or "", re.I)]
    assert len(deprecated) >= 80
    assert {"dws_guild_game_1d", "dws_guild_game_1d_old", "dws_guild_game_1m"} <= names
    assert lineage is not None and lineage[0] >= 400
    assert uncommented == (0,)


def test_evaluation_set_is_written_and_names_real_tables(
    catalog_db: tuple[Path, list[EvalQuestion]],
) -> None:
    path, questions = catalog_db
    assert len(questions) >= 100
    assert load_eval(eval_path(path)) == questions
    with duckdb.connect(str(path), read_only=True) as con:
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert all(set(q.tables) <= names for q in questions)
    assert any(len(q.tables) == 2 for q in questions)
    assert all(not any(t in q.question for t in q.tables) for q in questions)


def test_recall_at_5_on_the_500_table_catalog(
    catalog_db: tuple[Path, list[EvalQuestion]], entries: list[TableEntry]
) -> None:
    index = KnowledgeIndex(KnowledgePack.load())
    found = 0.0
    misses = []
    for q in catalog_db[1]:
        top = [name for name, _ in index.search_tables(q.question, entries, k=5)]
        share = sum(t in top for t in q.tables) / len(q.tables)
        found += share
        if share < 1:
            misses.append((q.question, q.tables, top))
    recall = found / len(catalog_db[1])
    assert recall >= 0.95, misses


def test_deprecated_tables_sink_unless_asked_for(entries: list[TableEntry]) -> None:
    index = KnowledgeIndex(KnowledgePack.load())
    ranked = [n for n, _ in index.search_tables("公会每日成员数汇总", entries, k=20)]
    assert ranked.index("dws_guild_game_1d") < ranked.index("dws_guild_game_1d_old")
    old = [n for n, _ in index.search_tables("公会日汇总旧版", entries, k=3)]
    assert "dws_guild_game_1d_old" in old


def test_columns_are_searched(entries: list[TableEntry]) -> None:
    by_name = {e.name: e for e in entries}
    assert ("member_cnt", "公会成员数 / members") in by_name["dws_guild_game_1d"].columns
    index = KnowledgeIndex(KnowledgePack.load())
    top = [n for n, _ in index.search_tables("raw_json 原始上报 公会", entries, k=3)]
    assert top[0] == "ods_guild_log_di"


def test_table_family() -> None:
    assert table_family("ads_guild_war_weekly_wi") == "guild_war"
    assert table_family("tmp_guild_detail_bak") == "guild"
    assert table_family("dws_game_pay_di") == "game_pay"


def test_catalog_size_is_validated() -> None:
    with pytest.raises(ValueError, match="positive"):
        catalog_tables(0)
    with pytest.raises(ValueError, match="exceeds"):
        catalog_tables(100_000)


@pytest.mark.slow
def test_cli_sample_with_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.duckdb"
    assert main(["sample", "--scale", "0.02", "--out", str(out), "--catalog-size", "500"]) == 0
    assert "evaluation questions" in capsys.readouterr().out
    assert len(load_eval(eval_path(out))) >= 100
    source = DuckDBSource(out)
    try:
        assert len(source.list_tables()) >= 500
    finally:
        source.close()
