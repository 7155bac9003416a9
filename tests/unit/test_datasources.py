"""The DuckDB and PostgreSQL datasources answer the same way behind one protocol.

Every test taking ``source`` runs twice: on the small sample warehouse in
DuckDB and on the same warehouse loaded into PostgreSQL.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from dataseer.data.duckdb_source import DuckDBSource, split_name
from dataseer.data.open import open_datasource
from dataseer.data.postgres_source import PostgresSource
from dataseer.data.protocol import Datasource, QueryResult
from dataseer.data.sample.schema import TABLES
from dataseer.errors import DatasourceError

SPECS = {table.name: table for table in TABLES}
TIMEOUT_TEXT = "查询超时 / query timed out after"
SLOW_SQL = {
    "duckdb": "SELECT count(*) FROM range(1000000000) a, range(1000000) b",
    "postgres": "SELECT pg_sleep(30)",
}
DEFAULT_SCHEMA = {"duckdb": "main", "postgres": "public"}

# Written in the SQL both dialects share, so each must give the same frame.
PARITY_QUERIES = {
    "revenue_by_month_1001": """
        SELECT substr(CAST(ds AS VARCHAR), 1, 7) AS month, sum(revenue) AS revenue
        FROM dws_game_pay_di WHERE game_id = 1001
        GROUP BY 1 ORDER BY 1
    """,
    "dau_by_channel": """
        SELECT c.channel_name, sum(a.dau) AS dau, count(*) AS row_count
        FROM dws_game_active_di a JOIN dim_channel c ON c.channel_id = a.channel_id
        GROUP BY c.channel_name ORDER BY c.channel_name
    """,
    "latest_day_per_game": """
        SELECT game_id, max(ds) AS last_ds, min(ds) AS first_ds
        FROM dws_game_active_di GROUP BY game_id ORDER BY game_id
    """,
    "arppu_by_category": """
        SELECT item_category, round(sum(revenue) / sum(pay_users), 4) AS arppu,
               avg(orders) AS avg_orders
        FROM dws_game_pay_di GROUP BY item_category ORDER BY item_category
    """,
    "games": "SELECT game_id, game_name, genre, launch_date, status FROM dim_game ORDER BY game_id",
    "distinct_users_1002": """
        SELECT count(DISTINCT uid) AS users, count(*) AS logins, sum(online_minutes) AS minutes
        FROM dwd_user_login_di WHERE game_id = 1002
    """,
}


@pytest.fixture(
    scope="module",
    params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def source(request: pytest.FixtureRequest) -> Iterator[Datasource]:
    if request.param == "duckdb":
        opened: Datasource = DuckDBSource(request.getfixturevalue("sample_path"))
    else:
        opened = PostgresSource(request.getfixturevalue("sample_pg_url"))
    with opened as live:
        yield live


@pytest.fixture(scope="module")
def duck(sample_path: Path) -> Iterator[DuckDBSource]:
    with DuckDBSource(sample_path) as live:
        yield live


@pytest.fixture(scope="module")
def pg(sample_pg_url: str) -> Iterator[PostgresSource]:
    with PostgresSource(sample_pg_url) as live:
        yield live


def _ok(result: QueryResult) -> pd.DataFrame:
    assert result.error is None, result.error
    return result.frame


# -- catalog -------------------------------------------------------------------------


def test_list_tables_are_the_sample_tables_with_their_comments(source: Datasource) -> None:
    tables = source.list_tables()
    names = [t.name for t in tables]
    assert names == sorted(names)
    assert {t.name: t.comment for t in tables} == {n: s.comment for n, s in SPECS.items()}


def test_table_info_has_columns_comments_and_ds_time_column(source: Datasource) -> None:
    info = source.table_info("dws_game_pay_di")
    spec = SPECS["dws_game_pay_di"]
    assert info.error is None
    assert info.name == "dws_game_pay_di"
    assert info.comment == spec.comment
    assert [(c.name, c.comment) for c in info.columns] == [
        (c.name, c.comment) for c in spec.columns
    ]
    types = {c.name: c.type.lower() for c in info.columns}
    assert types["ds"] == "date"
    assert "int" in types["pay_users"]
    assert info.time_column == "ds"


def test_preview_rows_all_come_from_the_latest_partition(source: Datasource) -> None:
    info = source.table_info("dws_game_active_di")
    latest = _ok(source.execute("SELECT max(ds) AS m FROM dws_game_active_di"))["m"].iloc[0]
    assert len(info.preview) == 3
    assert list(info.preview.columns) == [c.name for c in info.columns]
    assert (info.preview["ds"] == latest).all()
    oldest = _ok(source.execute("SELECT min(ds) AS m FROM dws_game_active_di"))["m"].iloc[0]
    assert oldest < latest


def test_time_column_falls_back_to_first_date_column_or_none(source: Datasource) -> None:
    game = source.table_info("dim_game")
    assert game.time_column == "launch_date"
    latest = _ok(source.execute("SELECT max(launch_date) AS m FROM dim_game"))["m"].iloc[0]
    assert (game.preview["launch_date"] == latest).all()
    channel = source.table_info("dim_channel")
    assert channel.time_column is None
    assert len(channel.preview) == 3


def test_table_names_match_ignoring_case_and_schema(source: Datasource) -> None:
    schema = DEFAULT_SCHEMA[source.dialect]
    for name in ("DWS_GAME_PAY_DI", f"{schema}.dws_game_pay_di", f'"{schema.upper()}"."Dim_Game"'):
        info = source.table_info(name)
        assert info.error is None, name
        assert info.name in {"dws_game_pay_di", "dim_game"}


def test_unknown_table_names_close_real_tables(source: Datasource) -> None:
    info = source.table_info("dws_game_pay_d")
    assert info.error is not None
    assert info.error.startswith("表不存在 / unknown table `dws_game_pay_d`; similar: ")
    assert "dws_game_pay_di" in info.error.split("similar: ")[1]
    assert info.columns == ()
    assert info.preview.empty
    nothing = source.table_info("zzz_qqq")
    assert nothing.error == "表不存在 / unknown table `zzz_qqq`"


def test_hostile_table_name_is_only_ever_a_name(source: Datasource) -> None:
    info = source.table_info("dim_game; DROP TABLE dim_game")
    assert info.error is not None
    assert source.table_info("dim_game").error is None


# -- execute ---------------------------------------------------------------------------


def test_execute_returns_frame_columns_and_counts(source: Datasource) -> None:
    sql = "SELECT game_id, game_name, launch_date FROM dim_game ORDER BY game_id"
    result = source.execute(sql)
    frame = _ok(result)
    assert result.sql == sql
    assert result.columns == ["game_id", "game_name", "launch_date"]
    assert result.row_count == len(frame) == 6
    assert not result.truncated
    assert frame["game_id"].iloc[0] == 1001
    assert str(frame["launch_date"].dtype) == "datetime64[us]"
    assert pd.api.types.is_integer_dtype(frame["game_id"])
    assert result.elapsed > 0


@pytest.mark.parametrize("limit", [0, 5, 6, 7])
def test_limit_sets_truncated_exactly(source: Datasource, limit: int) -> None:
    result = source.execute("SELECT game_id FROM dim_game ORDER BY game_id", limit=limit)
    frame = _ok(result)
    assert result.row_count == len(frame) == min(limit, 6)
    assert result.truncated == (limit < 6)
    assert list(frame["game_id"]) == [1001, 1002, 1003, 1004, 1005, 1006][:limit]


def test_big_result_is_cut_quickly(source: Datasource) -> None:
    started = time.perf_counter()
    result = source.execute("SELECT * FROM dwd_user_login_di", limit=10)
    assert result.row_count == 10
    assert result.truncated
    assert time.perf_counter() - started < 5


def test_sql_error_is_the_database_message(source: Datasource) -> None:
    result = source.execute("SELECT no_such_column FROM dim_game")
    assert not result.ok
    assert result.error is not None
    assert "no_such_column" in result.error
    assert "Traceback" not in result.error
    assert result.frame.empty
    assert result.row_count == 0


def test_slow_query_times_out_and_source_stays_usable(source: Datasource) -> None:
    started = time.perf_counter()
    result = source.execute(SLOW_SQL[source.dialect], timeout=0.3)
    assert result.error == "查询超时 / query timed out after 0.3s"
    assert time.perf_counter() - started < 5
    assert _ok(source.execute("SELECT count(*) AS n FROM dim_game"))["n"].iloc[0] == 6


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO dim_channel (channel_id, channel_name, channel_type) VALUES (99, 'x', 'y')",
        "DELETE FROM dim_game",
        "UPDATE dim_game SET game_name = 'x'",
        "CREATE TABLE hack AS SELECT 1 AS a",
        "DROP TABLE dim_channel",
    ],
)
def test_writes_are_rejected(source: Datasource, sql: str) -> None:
    result = source.execute(sql)
    assert not result.ok
    assert result.error is not None
    assert "read-only" in result.error
    assert _ok(source.execute("SELECT count(*) AS n FROM dim_game"))["n"].iloc[0] == 6
    assert "hack" not in {t.name for t in source.list_tables()}


def test_duckdb_sql_cannot_reach_other_files(duck: DuckDBSource, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    for sql in (
        f"SELECT * FROM read_csv('{secret}')",
        f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
        "SET enable_external_access = true",
    ):
        result = duck.execute(sql)
        assert result.error is not None, sql
    assert not (tmp_path / "out.csv").exists()
    with duckdb.connect(str(duck.path), read_only=True) as other:
        assert other.execute("SELECT count(*) FROM dim_game").fetchall() == [(6,)]


def test_bad_limits_are_rejected_early(source: Datasource) -> None:
    with pytest.raises(ValueError, match="limit"):
        source.execute("SELECT 1", limit=-1)
    with pytest.raises(ValueError, match="timeout"):
        source.execute("SELECT 1", timeout=0)


def test_concurrent_execute_from_threads(source: Datasource) -> None:
    sql = (
        "SELECT ds, sum(dau) AS dau FROM dws_game_active_di WHERE game_id = {} "
        "GROUP BY ds ORDER BY ds"
    )
    games = [1001, 1002, 1003, 1004] * 6
    serial = {g: _ok(source.execute(sql.format(g), limit=100_000)) for g in set(games)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        slow = pool.submit(source.execute, SLOW_SQL[source.dialect], timeout=1.0)
        results = list(pool.map(lambda g: source.execute(sql.format(g), limit=100_000), games))
    for game, result in zip(games, results, strict=True):
        pd.testing.assert_frame_equal(_ok(result), serial[game])
    assert slow.result().error == "查询超时 / query timed out after 1s"


# -- both backends agree ----------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(PARITY_QUERIES))
def test_backends_give_identical_frames(duck: DuckDBSource, pg: PostgresSource, name: str) -> None:
    sql = PARITY_QUERIES[name]
    from_duck = _ok(duck.execute(sql))
    from_pg = _ok(pg.execute(sql))
    assert len(from_duck) > 0
    pd.testing.assert_frame_equal(from_duck, from_pg, check_dtype=False, check_exact=False)
    for column in from_duck.columns:
        duck_type, pg_type = from_duck[column].dtype, from_pg[column].dtype
        if pd.api.types.is_numeric_dtype(duck_type):
            # sum(INTEGER) is HUGEINT (float64) in DuckDB but bigint in PostgreSQL.
            assert pd.api.types.is_numeric_dtype(pg_type), column
        else:
            assert duck_type == pg_type, column


@pytest.mark.postgres
def test_backends_give_the_same_dtypes_for_the_same_column_types(
    duck: DuckDBSource, pg: PostgresSource
) -> None:
    sql = """
        SELECT ds, game_id, channel_id, region, item_category, pay_users, orders, revenue
        FROM dws_game_pay_di ORDER BY ds, game_id, channel_id, region, item_category
    """
    from_duck = _ok(duck.execute(sql, limit=50))
    from_pg = _ok(pg.execute(sql, limit=50))
    pd.testing.assert_frame_equal(from_duck, from_pg)
    assert str(from_pg["ds"].dtype) == "datetime64[us]"
    assert str(from_pg["revenue"].dtype) == "float64"


@pytest.mark.postgres
def test_backends_agree_on_nulls(duck: DuckDBSource, pg: PostgresSource) -> None:
    sql = """
        SELECT game_id,
               CASE WHEN game_id % 2 = 0 THEN game_id END AS even_id,
               CASE WHEN game_id % 2 = 0 THEN game_name END AS even_name,
               CASE WHEN game_id % 2 = 0 THEN launch_date END AS even_launch,
               CASE WHEN game_id % 2 = 0 THEN game_id > 1003 END AS big
        FROM dim_game ORDER BY game_id
    """
    from_duck = _ok(duck.execute(sql))
    from_pg = _ok(pg.execute(sql))
    pd.testing.assert_frame_equal(from_duck, from_pg)
    assert from_pg["even_id"].isna().sum() == 3


# -- names, opening, lifecycle --------------------------------------------------------


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("odd") / "odd.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE SCHEMA edge")
        conn.execute(
            'CREATE TABLE edge."Mixed ""Case"".T" (seen TIMESTAMP, n INTEGER);'
            'INSERT INTO edge."Mixed ""Case"".T" VALUES '
            "('2026-01-01 08:00', 1), ('2026-01-02 09:00', 2), ('2026-01-02 09:00', 3)"
        )
    return path


@pytest.fixture(scope="module")
def odd_pg(pg_database: str) -> Iterator[PostgresSource]:
    import psycopg

    schema = f"edge_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}"."Mixed ""Case"".T" (seen TIMESTAMP, n INTEGER)')
        conn.execute(
            f'INSERT INTO "{schema}"."Mixed ""Case"".T" VALUES '
            "('2026-01-01 08:00', 1), ('2026-01-02 09:00', 2), ('2026-01-02 09:00', 3)"
        )
    with PostgresSource(pg_database, schema=schema) as live:
        yield live


def _check_odd(source: Datasource, qualified: str) -> None:
    info = source.table_info(qualified)
    assert info.error is None
    assert info.time_column == "seen"
    assert sorted(info.preview["n"]) == [2, 3]
    assert source.table_info('"mixed ""case"".t"').error is None


def test_quoted_and_qualified_names_duckdb(odd_names: Path) -> None:
    with DuckDBSource(odd_names) as source:
        assert [t.name for t in source.list_tables()] == ['edge.Mixed "Case".T']
        _check_odd(source, 'EDGE."mixed ""case"".t"')
        _check_odd(source, 'odd.edge."Mixed ""Case"".T"')


@pytest.mark.postgres
def test_quoted_and_qualified_names_postgres(odd_pg: PostgresSource) -> None:
    assert [t.name for t in odd_pg.list_tables()] == ['Mixed "Case".T']
    _check_odd(odd_pg, f'{odd_pg.schema}."mixed ""case"".t"')
    assert odd_pg.table_info('public."Mixed ""Case"".T"').error is not None


def test_split_name_keeps_quoted_dots() -> None:
    assert split_name('a."b.c"') == ["a", "b.c"]
    assert split_name("`x`.y") == ["x", "y"]
    assert split_name(" t ") == ["t"]


def test_open_datasource_picks_the_backend(sample_path: Path, tmp_path: Path) -> None:
    with open_datasource(sample_path) as duck:
        assert isinstance(duck, DuckDBSource)
        assert isinstance(duck, Datasource)
        assert duck.dialect == "duckdb"
    with pytest.raises(DatasourceError, match="warehouse file not found"):
        open_datasource(tmp_path / "missing.duckdb")
    with pytest.raises(DatasourceError, match="not found"):
        DuckDBSource(tmp_path / "missing.duckdb")


@pytest.mark.postgres
def test_open_datasource_takes_postgres_urls(sample_pg_url: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(sample_pg_url)
    auth = str(params.get("user", "postgres"))
    if params.get("password"):
        auth += f":{params['password']}"
    host = f"{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}"
    url = f"postgresql://{auth}@{host}/{params['dbname']}"
    with open_datasource(url) as source:
        assert isinstance(source, PostgresSource)
        assert source.dialect == "postgres"
        assert isinstance(source, Datasource)
        assert [t.name for t in source.list_tables()] == sorted(SPECS)


@pytest.mark.postgres
def test_unreachable_postgres_is_a_datasource_error() -> None:
    with pytest.raises(DatasourceError, match="cannot connect"):
        PostgresSource("postgresql://postgres@127.0.0.1:1/none", open_timeout=0.5)


def test_closed_source_refuses_calls(sample_path: Path) -> None:
    source = DuckDBSource(sample_path)
    source.close()
    source.close()
    with pytest.raises(DatasourceError, match="closed"):
        source.execute("SELECT 1")


@pytest.mark.postgres
def test_closed_postgres_source_refuses_calls(sample_pg_url: str) -> None:
    source = PostgresSource(sample_pg_url, min_size=0, max_size=1)
    source.close()
    with pytest.raises(DatasourceError, match="closed"):
        source.execute("SELECT 1")
    with pytest.raises(DatasourceError, match="closed"):
        source.list_tables()
