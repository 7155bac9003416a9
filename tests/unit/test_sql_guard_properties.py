"""Property tests: enforce mode's output passes check mode and never widens access.

Queries are generated from a small grammar over the sample warehouse (a
sensitive table, optional joins, extra predicates, CTE/derived wrapping,
UNION ALL). For each, the enforced SQL must pass check mode, and its result
on the sample DuckDB warehouse must be contained in the result of the same
query written with an explicit ``game_id IN (1001)`` filter.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataseer.data.sample.schema import TABLES
from dataseer.sql.guard import DecisionCode, Permissions, SqlGuard

SCHEMA = {t.name: [c.name for c in t.columns] for t in TABLES}
USER = Permissions(
    "analyst_1001",
    allowed_tables=("dws_*", "dim_*", "dwd_*", "ops_events"),
    allowed_game_ids=(1001,),
)
FACTS = ("dws_game_pay_di", "dws_game_active_di", "dws_sdk_funnel_di", "dwd_user_login_di")
EXTRA = (
    "{a}.ds >= DATE '2026-10-01'",
    "{a}.channel_id IN (1, 2, 3)",
    "{a}.ds BETWEEN DATE '2026-09-01' AND DATE '2026-09-30' OR {a}.channel_id = 4",
    "{a}.channel_id IN (SELECT channel_id FROM dim_channel WHERE channel_type = 'store')",
)


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, str]:
    """A query without a game filter, and the same query with an explicit one."""
    table = draw(st.sampled_from(FACTS))
    alias = draw(st.sampled_from(("t", "x1", table)))
    extras = draw(st.lists(st.sampled_from(EXTRA), max_size=2, unique=True))
    join = draw(st.sampled_from(("", "channel", "game", "left_game")))
    source = table if alias == table else f"{table} AS {alias}"
    joins = {
        "": "",
        "channel": f" JOIN dim_channel AS c ON c.channel_id = {alias}.channel_id",
        "game": f" JOIN dim_game AS g ON g.game_id = {alias}.game_id",
        "left_game": f" LEFT JOIN dim_game AS g ON g.game_id = {alias}.game_id",
    }[join]

    def body(with_filter: bool) -> str:
        where = [f"({e.format(a=alias)})" for e in extras]
        if with_filter:
            where.append(f"{alias}.game_id IN (1001)")
        text = f"SELECT {alias}.game_id, {alias}.ds FROM {source}{joins}"
        return text + (" WHERE " + " AND ".join(where) if where else "")

    wrap = draw(st.sampled_from(("plain", "cte", "derived", "union")))

    def wrapped(with_filter: bool) -> str:
        inner = body(with_filter)
        if wrap == "cte":
            inner = f"WITH q AS ({inner}) SELECT game_id, ds FROM q"
        elif wrap == "derived":
            inner = f"SELECT s.game_id, s.ds FROM ({inner}) AS s"
        elif wrap == "union":
            inner = f"{inner} UNION ALL {inner}"
        return f"SELECT game_id, COUNT(*) AS n FROM ({inner}) AS outer_q GROUP BY game_id"

    return wrapped(False), wrapped(True)


@pytest.fixture(scope="module")
def warehouse(sample_path: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(sample_path), read_only=True)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pair=queries())
def test_enforce_output_passes_check_and_never_widens(
    pair: tuple[str, str], warehouse: duckdb.DuckDBPyConnection
) -> None:
    unfiltered, filtered = pair
    check = SqlGuard(USER, schema=SCHEMA)
    assert check.check(filtered).code == DecisionCode.OK
    assert check.check(unfiltered).code == DecisionCode.MISSING_ROW_FILTER
    enforced = SqlGuard(USER, mode="enforce", schema=SCHEMA).check(unfiltered)
    assert enforced.allowed, enforced.reason
    assert enforced.rewritten_sql is not None
    assert check.check(enforced.rewritten_sql).code == DecisionCode.OK
    got = set(warehouse.execute(enforced.rewritten_sql).fetchall())
    expected = set(warehouse.execute(filtered).fetchall())
    assert got <= expected
    assert {row[0] for row in got} <= {1001}


@settings(max_examples=60, deadline=None)
@given(
    games=st.lists(st.integers(min_value=1000, max_value=1010), min_size=1, max_size=4),
    table=st.sampled_from(FACTS),
)
def test_literal_filters_pass_exactly_when_within_allowed(games: list[int], table: str) -> None:
    sql = f"SELECT COUNT(*) FROM {table} WHERE game_id IN ({', '.join(map(str, games))})"
    decision = SqlGuard(USER, schema=SCHEMA).check(sql)
    assert decision.allowed == (set(games) <= {1001})
    enforced = SqlGuard(USER, mode="enforce", schema=SCHEMA).check(sql)
    assert enforced.allowed == decision.allowed
