"""The metric SQL compiler, checked against pandas computed from the raw sample tables."""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from dataseer.knowledge.metrics import (
    compile_comparison_sql,
    compile_contribution_sql,
    compile_funnel_sql,
    compile_metric_sql,
    compile_ops_events_sql,
)
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.periods import Period
from dataseer.knowledge.understand import Filter

AUG = Period(date(2026, 8, 1), date(2026, 8, 31), "month")
JUL = Period(date(2026, 7, 1), date(2026, 7, 31), "month")
INCIDENT = Period(date(2026, 10, 10), date(2026, 10, 16), "range")
WEEK_BEFORE = Period(date(2026, 10, 3), date(2026, 10, 9), "range")
HUAWEI = Filter("channel", "channel_name", ("huawei",))
SDK_320 = Filter("sdk_version", "sdk_version", ("3.2.0",))


@pytest.fixture(scope="module")
def con(sample_path: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(sample_path), read_only=True)


@pytest.fixture(scope="module")
def raw(con: duckdb.DuckDBPyConnection) -> dict[str, pd.DataFrame]:
    tables = ("dim_channel", "dws_game_pay_di", "dws_game_active_di", "dws_sdk_funnel_di")
    frames = {t: con.sql(f"SELECT * FROM {t}").df() for t in tables}
    frames["dwd_user_login_di"] = con.sql(
        "SELECT ds, game_id, uid, channel_id, region FROM dwd_user_login_di WHERE game_id = 1001"
    ).df()
    frames["ops_events"] = con.sql("SELECT * FROM ops_events").df()
    for frame in frames.values():
        for col in ("ds", "start_ds", "end_ds"):
            if col in frame:
                frame[col] = pd.to_datetime(frame[col]).dt.date
    return frames


def _run(con: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    return con.sql(sql).df()


def _in(frame: pd.DataFrame, period: Period, games: list[int]) -> pd.DataFrame:
    mask = (frame["ds"] >= period.start) & (frame["ds"] <= period.end)
    return frame[mask & frame["game_id"].isin(games)]


def test_sql_is_readable_and_literal() -> None:
    sql = compile_metric_sql("revenue", games=[1001], period=AUG, dimensions=["channel"])
    assert "game_id IN (1001)" in sql
    assert "BETWEEN DATE '2026-08-01' AND DATE '2026-08-31'" in sql
    assert "*" not in sql
    assert sql.startswith("SELECT\n  c.channel_name,")


def test_revenue_by_channel(con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]) -> None:
    got = _run(con, compile_metric_sql("revenue", games=[1001], period=AUG, dimensions=["channel"]))
    pay = _in(raw["dws_game_pay_di"], AUG, [1001]).merge(raw["dim_channel"], on="channel_id")
    want = pay.groupby("channel_name")["revenue"].sum().astype(float).round(2)
    assert list(got.columns) == ["channel_name", "revenue"]
    assert got.set_index("channel_name")["revenue"].to_dict() == pytest.approx(want.to_dict())
    assert list(got["revenue"]) == sorted(got["revenue"], reverse=True)


def test_monthly_revenue_with_filters(
    con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]
) -> None:
    q3 = Period(date(2026, 7, 1), date(2026, 9, 30), "quarter")
    skin = Filter("item_category", "item_category", ("皮肤",))
    sql = compile_metric_sql(
        "revenue", games=[1001, 1002], period=q3, grain="month", filters=[HUAWEI, skin]
    )
    got = _run(con, sql)
    pay = _in(raw["dws_game_pay_di"], q3, [1001, 1002]).merge(raw["dim_channel"], on="channel_id")
    pay = pay[(pay["channel_name"] == "huawei") & (pay["item_category"] == "皮肤")]
    want = pay.groupby(pd.to_datetime(pay["ds"]).dt.to_period("M"))["revenue"].sum().astype(float)
    assert [str(pd.Timestamp(m).to_period("M")) for m in got["month"]] == [
        str(p) for p in want.index
    ]
    assert list(got["revenue"]) == pytest.approx(list(want.round(2)))


def test_dau_daily_by_game(con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]) -> None:
    week = Period(date(2026, 11, 16), date(2026, 11, 22), "week")
    got = _run(
        con, compile_metric_sql("dau", games=[1003, 1004], period=week, dimensions=["game", "day"])
    )
    assert list(got.columns) == ["ds", "game_id", "game_name", "dau"]
    act = _in(raw["dws_game_active_di"], week, [1003, 1004])
    want = act.groupby(["ds", "game_id"])["dau"].sum()
    got_map = {(pd.Timestamp(r.ds).date(), r.game_id): r.dau for r in got.itertuples()}
    assert got_map == want.to_dict()
    assert set(got["game_name"]) == {"机甲风暴", "萌宠大作战"}


def test_pay_rate_by_region(con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]) -> None:
    got = _run(con, compile_metric_sql("pay_rate", games=[1001], period=AUG, dimensions=["region"]))
    pay = _in(raw["dws_game_pay_di"], AUG, [1001]).groupby("region")["pay_users"].sum()
    act = _in(raw["dws_game_active_di"], AUG, [1001]).groupby("region")["dau"].sum()
    want = (pay / act).round(4)
    assert got.set_index("region")["pay_rate"].to_dict() == pytest.approx(want.to_dict())
    assert got.set_index("region")["dau"].to_dict() == act.to_dict()


@pytest.mark.parametrize(
    ("key", "num", "den"), [("arpu", "revenue", "dau"), ("arppu", "revenue", "pay_users")]
)
def test_arpu_and_arppu(
    con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame], key: str, num: str, den: str
) -> None:
    got = _run(con, compile_metric_sql(key, games=[1001, 1004], period=AUG))
    pay = _in(raw["dws_game_pay_di"], AUG, [1001, 1004])
    act = _in(raw["dws_game_active_di"], AUG, [1001, 1004])
    denominator = act["dau"].sum() if den == "dau" else pay[den].sum()
    assert float(got[key].iloc[0]) == pytest.approx(round(float(pay[num].sum()) / denominator, 2))


def _retention_reference(
    logins: pd.DataFrame, period: Period, offset: int, by: str | None
) -> pd.Series:
    first = logins.groupby("uid")["ds"].min().rename("first_ds").reset_index()
    cohort = logins.merge(first, left_on=["uid", "ds"], right_on=["uid", "first_ds"])
    cohort = cohort[(cohort["first_ds"] >= period.start) & (cohort["first_ds"] <= period.end)]
    last = logins["ds"].max()
    cohort = cohort[cohort["first_ds"] + timedelta(days=offset) <= last]
    active = set(zip(logins["uid"], logins["ds"], strict=True))
    cohort = cohort.assign(
        back=[
            (u, d + timedelta(days=offset)) in active
            for u, d in zip(cohort["uid"], cohort["ds"], strict=True)
        ]
    )
    if by is None:
        return pd.Series({"all": cohort["back"].mean()})
    return cohort.groupby(by)["back"].mean()


def test_d1_retention(con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]) -> None:
    got = _run(con, compile_metric_sql("retention_d1", games=[1001], period=AUG))
    want = _retention_reference(raw["dwd_user_login_di"], AUG, 1, None)["all"]
    assert got["retention_d1"].iloc[0] == pytest.approx(round(want, 4))
    assert got["cohort_users"].iloc[0] > 50


def test_d7_retention_by_region(
    con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]
) -> None:
    got = _run(
        con, compile_metric_sql("retention_d7", games=[1001], period=AUG, dimensions=["region"])
    )
    want = _retention_reference(raw["dwd_user_login_di"], AUG, 7, "region").round(4)
    assert got.set_index("region")["retention_d7"].to_dict() == pytest.approx(want.to_dict())


def test_funnel_incident(con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]) -> None:
    got = _run(con, compile_funnel_sql(games=[1002], period=INCIDENT, filters=[HUAWEI, SDK_320]))
    assert list(got["step"]) == [
        "download",
        "install",
        "sdk_init",
        "login",
        "create_role",
        "first_pay",
    ]
    f = _in(raw["dws_sdk_funnel_di"], INCIDENT, [1002]).merge(raw["dim_channel"], on="channel_id")
    f = f[(f["channel_name"] == "huawei") & (f["sdk_version"] == "3.2.0")]
    users = f.groupby("step_order")["users"].sum()
    assert list(got["users"]) == list(users)
    login = got.set_index("step").loc["login"]
    assert login["step_conversion"] == pytest.approx(round(users[4] / users[3], 4))
    assert login["step_conversion"] == pytest.approx(0.55, abs=0.03)
    assert login["overall_conversion"] == pytest.approx(round(users[4] / users[1], 4))
    assert pd.isna(got["step_conversion"].iloc[0])


def test_funnel_step_filter_keeps_conversion(con: duckdb.DuckDBPyConnection) -> None:
    step = Filter("step", "step", ("login",))
    full = _run(con, compile_funnel_sql(games=[1002], period=INCIDENT, filters=[HUAWEI, SDK_320]))
    one = _run(
        con, compile_funnel_sql(games=[1002], period=INCIDENT, filters=[HUAWEI, SDK_320, step])
    )
    assert list(one["step"]) == ["login"]
    assert one["step_conversion"].iloc[0] == full.set_index("step").loc["login", "step_conversion"]


def test_funnel_metric_by_sdk_version(con: duckdb.DuckDBPyConnection) -> None:
    got = _run(
        con,
        compile_metric_sql(
            "funnel_conversion",
            games=[1002],
            period=INCIDENT,
            dimensions=["sdk_version"],
            filters=[HUAWEI],
        ),
    )
    login = got[got["step"] == "login"].set_index("sdk_version")["funnel_conversion"]
    assert login["3.2.0"] < 0.6 < login.drop("3.2.0").min()


def test_comparison(con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]) -> None:
    got = _run(con, compile_comparison_sql("revenue", games=[1001], period=AUG, compare_to=JUL))
    cur = float(_in(raw["dws_game_pay_di"], AUG, [1001])["revenue"].sum())
    prev = float(_in(raw["dws_game_pay_di"], JUL, [1001])["revenue"].sum())
    row = got.iloc[0]
    assert (row["current_value"], row["previous_value"]) == pytest.approx(
        (round(cur, 2), round(prev, 2))
    )
    assert row["delta"] == pytest.approx(round(cur - prev, 2))
    assert row["pct_change"] == pytest.approx(round((cur - prev) / prev, 4))


def test_comparison_of_a_ratio_by_channel(
    con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]
) -> None:
    sql = compile_comparison_sql(
        "pay_rate", games=[1001], period=AUG, compare_to=JUL, dimensions=["channel"]
    )
    got = _run(con, sql).set_index("channel_name")

    def rate(period: Period) -> pd.Series:
        pay = _in(raw["dws_game_pay_di"], period, [1001]).groupby("channel_id")["pay_users"].sum()
        act = _in(raw["dws_game_active_di"], period, [1001]).groupby("channel_id")["dau"].sum()
        names = raw["dim_channel"].set_index("channel_id")["channel_name"]
        return (pay / act).rename(index=names)

    cur, prev = rate(AUG), rate(JUL)
    assert got["current_value"].to_dict() == pytest.approx(cur.round(4).to_dict())
    assert got["delta"].to_dict() == pytest.approx((cur - prev).round(4).to_dict())


def test_contribution_of_an_additive_metric(
    con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]
) -> None:
    sql = compile_contribution_sql(
        "revenue", games=[1001], period=AUG, compare_to=JUL, dimension="item_category"
    )
    got = _run(con, sql)
    cur = _in(raw["dws_game_pay_di"], AUG, [1001]).groupby("item_category")["revenue"].sum()
    prev = _in(raw["dws_game_pay_di"], JUL, [1001]).groupby("item_category")["revenue"].sum()
    delta = (cur - prev).astype(float)
    assert got.set_index("item_category")["delta"].to_dict() == pytest.approx(
        delta.round(2).to_dict()
    )
    assert got["share_of_delta"].sum() == pytest.approx(1.0, abs=1e-3)
    assert list(got["delta"].abs()) == sorted(got["delta"].abs(), reverse=True)
    assert got["item_category"].iloc[0] == "皮肤"


def test_contribution_of_a_ratio_adds_up(con: duckdb.DuckDBPyConnection) -> None:
    sql = compile_contribution_sql(
        "pay_rate", games=[1001], period=AUG, compare_to=JUL, dimension="channel"
    )
    got = _run(con, sql)
    overall = _run(
        con, compile_comparison_sql("pay_rate", games=[1001], period=AUG, compare_to=JUL)
    )
    assert got["contribution"].sum() == pytest.approx(overall["delta"].iloc[0], abs=1e-3)
    assert got["share_of_delta"].sum() == pytest.approx(1.0, abs=1e-3)
    assert {"current_pay_users", "current_dau", "previous_pay_users", "previous_dau"} <= set(
        got.columns
    )
    assert (
        got["current_dau"].sum()
        == _run(con, compile_metric_sql("dau", games=[1001], period=AUG))["dau"].iloc[0]
    )


def test_funnel_contribution_points_at_huawei(con: duckdb.DuckDBPyConnection) -> None:
    sql = compile_contribution_sql(
        "funnel_conversion",
        games=[1002],
        period=INCIDENT,
        compare_to=WEEK_BEFORE,
        dimension="channel",
        filters=[Filter("step", "step", ("login",))],
    )
    got = _run(con, sql)
    assert set(got["step"]) == {"login"}
    assert got["channel_name"].iloc[0] == "huawei"
    assert got["delta"].iloc[0] < -0.1


def test_ops_events_overlap(con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]) -> None:
    got = _run(
        con,
        compile_ops_events_sql(
            games=[1001, 1003], period=Period(date(2026, 8, 15), date(2026, 9, 5), "range")
        ),
    )
    ev = raw["ops_events"]
    want = ev[
        ev["game_id"].isin([1001, 1003])
        & (ev["start_ds"] <= date(2026, 9, 5))
        & (ev["end_ds"] >= date(2026, 8, 15))
    ]
    assert sorted(got["event_id"]) == sorted(want["event_id"])
    assert "夏日祭" in set(got["title"])
    assert "maintenance" in set(got["event_type"])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: compile_metric_sql(
                "pay_rate", games=[1001], period=AUG, dimensions=["item_category"]
            ),
            "cannot be split",
        ),
        (
            lambda: compile_metric_sql(
                "retention_d1",
                games=[1001],
                period=AUG,
                filters=[Filter("item_category", "item_category", ("皮肤",))],
            ),
            "cannot be filtered",
        ),
        (lambda: compile_metric_sql("revenue", games=[1001], period=AUG, grain="hour"), "grain"),  # type: ignore[arg-type]
        (
            lambda: compile_metric_sql(
                "revenue", games=[1001], period=AUG, dimensions=["day"], grain="month"
            ),
            "time grain",
        ),
        (
            lambda: compile_comparison_sql(
                "revenue", games=[1001], period=AUG, compare_to=JUL, dimensions=["day"]
            ),
            "time dimension",
        ),
        (
            lambda: compile_metric_sql(
                "revenue",
                games=[1001],
                period=AUG,
                filters=[Filter("channel", "channel_type", ("store",))],
            ),
            "use 'channel_name'",
        ),
    ],
)
def test_invalid_requests_are_refused(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_all_games_when_none_given(
    con: duckdb.DuckDBPyConnection, raw: dict[str, pd.DataFrame]
) -> None:
    sql = compile_metric_sql("new_users", games=[], period=AUG, dimensions=["game"])
    assert "game_id IN" not in sql
    got = _run(con, sql)
    want = raw["dws_game_active_di"]
    want = (
        want[(want["ds"] >= AUG.start) & (want["ds"] <= AUG.end)]
        .groupby("game_id")["new_users"]
        .sum()
    )
    assert got.set_index("game_id")["new_users"].to_dict() == want.to_dict()


@pytest.mark.postgres
def test_compiled_sql_runs_on_postgres(sample_pg_url: str, con: duckdb.DuckDBPyConnection) -> None:
    import psycopg

    pack = KnowledgePack.load()
    statements = [
        compile_metric_sql(
            "revenue", games=[1001], period=AUG, dimensions=["channel"], grain="week", pack=pack
        ),
        compile_metric_sql("pay_rate", games=[1001], period=AUG, dimensions=["region"], pack=pack),
        compile_metric_sql(
            "retention_d1", games=[1001], period=AUG, dimensions=["channel"], pack=pack
        ),
        compile_funnel_sql(games=[1002], period=INCIDENT, filters=[HUAWEI, SDK_320], pack=pack),
        compile_comparison_sql("arppu", games=[1001], period=AUG, compare_to=JUL, pack=pack),
        compile_contribution_sql(
            "pay_rate", games=[1001], period=AUG, compare_to=JUL, dimension="channel", pack=pack
        ),
        compile_ops_events_sql(games=[1001], period=AUG),
    ]
    with psycopg.connect(sample_pg_url) as pg:
        for sql in statements:
            pg_rows = sorted(_normalise(r) for r in pg.execute(sql).fetchall())
            duck_rows = sorted(_normalise(r) for r in con.sql(sql).fetchall())
            assert pg_rows == duck_rows, sql


def _normalise(row: tuple[object, ...]) -> tuple[str, ...]:
    """Make a row comparable across engines: numbers to 4 decimals, dates as ISO text."""
    out: list[str] = []
    for value in row:
        if isinstance(value, Decimal | int | float) and not isinstance(value, bool):
            number = float(value)
            out.append("nan" if math.isnan(number) else f"{number:.4f}")
        elif isinstance(value, datetime):
            out.append(value.date().isoformat())
        elif isinstance(value, date):
            out.append(value.isoformat())
        else:
            out.append(str(value))
    return tuple(out)
