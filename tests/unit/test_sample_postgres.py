"""The sample warehouse loaded into PostgreSQL answers like the DuckDB file."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from dataseer.data.sample import TABLE_NAMES, load_manifest, load_to_postgres
from dataseer.data.sample.postgres import pg_type
from dataseer.errors import DatasourceError

pytestmark = pytest.mark.postgres

MANIFEST = load_manifest()
ANOMALIES = {a["id"]: a for a in MANIFEST["anomalies"]}

AUGUST_REVENUE = (
    "SELECT sum(revenue) FROM dws_game_pay_di "
    "WHERE game_id = 1001 AND ds BETWEEN DATE '2026-08-01' AND DATE '2026-08-31'"
)
FUNNEL_INCIDENT = """
SELECT sum(f.users) FILTER (WHERE f.step = 'login') AS login,
       sum(f.users) FILTER (WHERE f.step = 'sdk_init') AS sdk_init
FROM dws_sdk_funnel_di f JOIN dim_channel c ON c.channel_id = f.channel_id
WHERE f.game_id = 1002 AND c.channel_name = 'huawei' AND f.sdk_version = '3.2.0'
  AND f.ds BETWEEN DATE '2026-10-10' AND DATE '2026-10-16'
"""
DAU_BY_GAME = (
    "SELECT game_id, sum(dau), sum(new_users) FROM dws_game_active_di "
    "GROUP BY game_id ORDER BY game_id"
)


@pytest.fixture(scope="module")
def duck(sample_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect(str(sample_path), read_only=True) as c:
        yield c


@pytest.fixture(scope="module")
def pg(sample_pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(sample_pg_url) as c:
        yield c


def both(duck: duckdb.DuckDBPyConnection, pg: psycopg.Connection[Any], query: str) -> tuple:
    return duck.execute(query).fetchall(), pg.execute(query).fetchall()


@pytest.mark.parametrize("table", TABLE_NAMES)
def test_row_counts_match(
    duck: duckdb.DuckDBPyConnection, pg: psycopg.Connection[Any], table: str
) -> None:
    d, p = both(duck, pg, f"SELECT count(*) FROM {table}")
    assert d == p
    assert d[0][0] > 0


def test_aggregates_match(duck: duckdb.DuckDBPyConnection, pg: psycopg.Connection[Any]) -> None:
    d, p = both(duck, pg, AUGUST_REVENUE)
    assert d == p
    assert isinstance(p[0][0], Decimal) and p[0][0] > 0
    d, p = both(duck, pg, FUNNEL_INCIDENT)
    assert d == p
    login, sdk_init = p[0]
    bounds = ANOMALIES["sdk_login_drop_1002_huawei_320"]["expected_value"]
    assert bounds["min"] <= login / sdk_init <= bounds["max"]
    d, p = both(duck, pg, DAU_BY_GAME)
    assert d == p


def test_text_and_dates_round_trip(
    duck: duckdb.DuckDBPyConnection, pg: psycopg.Connection[Any]
) -> None:
    query = "SELECT event_id, game_id, start_ds, end_ds, event_type, title, description " \
        "FROM ops_events ORDER BY event_id"  # fmt: skip
    d, p = both(duck, pg, query)
    assert d == p
    d, p = both(duck, pg, "SELECT * FROM meta_table_lineage ORDER BY table_name, upstream_table")
    assert d == p
    assert any("\n" in row[2] for row in p)


def test_types_and_comments_match(
    duck: duckdb.DuckDBPyConnection, pg: psycopg.Connection[Any]
) -> None:
    pg_cols = {
        (t, c): (typ, comment)
        for t, c, typ, comment in pg.execute(
            """SELECT c.table_name, c.column_name, format_type(a.atttypid, a.atttypmod),
                      col_description(a.attrelid, a.attnum)
               FROM information_schema.columns c
               JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema,
                                                          c.table_name)::regclass
                                  AND a.attname = c.column_name
               WHERE c.table_schema = 'public'"""
        ).fetchall()
    }
    duck_cols = duck.execute(
        "SELECT table_name, column_name, data_type, comment "
        "FROM duckdb_columns() WHERE NOT internal"
    ).fetchall()
    assert len(pg_cols) == len(duck_cols)
    for table, column, typ, comment in duck_cols:
        pg_typ, pg_comment = pg_cols[(table, column)]
        assert pg_typ == pg_type(typ).replace(", ", ",")
        assert pg_comment == comment
    assert pg_cols[("dws_game_pay_di", "revenue")][0] == "numeric(18,2)"
    table_comments = dict(
        pg.execute(
            "SELECT relname, obj_description(oid, 'pg_class') FROM pg_class "
            "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"
        ).fetchall()
    )
    assert table_comments == dict(
        duck.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall()
    )


def test_reload_into_schema_replaces_tables(sample_path: Path, pg_scratch: str) -> None:
    load_to_postgres(sample_path, pg_scratch, schema="sample_copy")
    with psycopg.connect(pg_scratch, autocommit=True) as c:
        c.execute("DELETE FROM sample_copy.dim_game")
        c.execute("CREATE TABLE sample_copy.keep_me (x int)")
    load_to_postgres(sample_path, pg_scratch, schema="sample_copy")
    with psycopg.connect(pg_scratch) as c:
        assert c.execute("SELECT count(*) FROM sample_copy.dim_game").fetchone() == (6,)
        assert c.execute("SELECT count(*) FROM sample_copy.keep_me").fetchone() == (0,)


def test_missing_file_is_a_datasource_error(tmp_path: Path, pg_scratch: str) -> None:
    with pytest.raises(DatasourceError, match="not found"):
        load_to_postgres(tmp_path / "nope.duckdb", pg_scratch)


def test_pg_type_mapping() -> None:
    assert pg_type("DECIMAL(18,2)") == "numeric(18, 2)"
    assert pg_type("VARCHAR") == "text"
    with pytest.raises(DatasourceError):
        pg_type("MAP(VARCHAR, INTEGER)")
