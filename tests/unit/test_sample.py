"""The sample warehouse obeys its manifest, its own invariants and is deterministic."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dataseer.data.sample import TABLE_NAMES, build_sample, ensure_sample, load_manifest
from dataseer.data.sample.params import CHANNELS

TEST_SCALE = 0.05
MANIFEST = load_manifest()
ANOMALIES = {a["id"]: a for a in MANIFEST["anomalies"]}


@pytest.fixture(scope="module")
def con(sample_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect(str(sample_path), read_only=True) as connection:
        yield connection


def one(con: duckdb.DuckDBPyConnection, query: str, params: list[Any] | None = None) -> Any:
    row = con.execute(query, params or []).fetchone()
    assert row is not None
    return row[0]


def checksums(path: Path) -> dict[str, tuple[int, int]]:
    with duckdb.connect(str(path), read_only=True) as c:
        return {
            t: c.execute(f"SELECT count(*), sum(hash(x)) FROM {t} x").fetchone()  # type: ignore[misc]
            for t in TABLE_NAMES
        }


def test_tables_are_the_manifest_tables(con: duckdb.DuckDBPyConnection) -> None:
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert tables == set(MANIFEST["tables"]) == set(TABLE_NAMES)


@pytest.mark.parametrize("table", sorted(MANIFEST["tables"]))
def test_row_counts_match_manifest(con: duckdb.DuckDBPyConnection, table: str) -> None:
    rule = MANIFEST["tables"][table]["rows"]
    n = one(con, f"SELECT count(*) FROM {table}")
    if "exact" in rule:
        assert n == rule["exact"]
    if "min" in rule:
        assert rule["min"] <= n <= rule["max"]
    if "per_scale" in rule:
        expected = rule["per_scale"] * TEST_SCALE
        assert abs(n - expected) <= rule["tolerance"] * expected
    if "by_scale" in rule:
        lo, hi = rule["by_scale"][TEST_SCALE]
        assert lo <= n <= hi


def _period_sum(
    con: duckdb.DuckDBPyConnection, a: dict[str, Any], period: dict[str, date], extra: str = ""
) -> float:
    query = (
        f"SELECT coalesce(sum({a['metric']}), 0) FROM {a['table']} "
        f"WHERE game_id = ? AND ds BETWEEN ? AND ? {extra}"
    )
    return float(one(con, query, [a["game_id"], period["start"], period["end"]]))


def test_revenue_spike_driven_by_skins(con: duckdb.DuckDBPyConnection) -> None:
    a = ANOMALIES["revenue_spike_1001_2026_08"]
    period, base = _period_sum(con, a, a["period"]), _period_sum(con, a, a["baseline"])
    ratio = period / base
    assert a["expected_ratio"]["min"] <= ratio <= a["expected_ratio"]["max"]

    drv = a["driver"]
    only = f"AND {drv['dimension']} = '{drv['value']}'"
    driver_change = _period_sum(con, a, a["period"], only) - _period_sum(
        con, a, a["baseline"], only
    )
    assert driver_change / (period - base) > drv["min_share_of_change"]

    conc = a["concentration"]
    assert _period_sum(con, a, conc) / period >= conc["min_share_of_period"]


def _conversion(con: duckdb.DuckDBPyConnection, a: dict[str, Any], period: dict[str, date],
                where: str) -> float:  # fmt: skip
    num, den = con.execute(
        f"""SELECT sum(users) FILTER (WHERE f.step = ?), sum(users) FILTER (WHERE f.step = ?)
        FROM {a["table"]} f JOIN dim_channel c USING (channel_id)
        WHERE f.game_id = ? AND f.ds BETWEEN ? AND ? AND {where}""",
        [a["numerator_step"], a["denominator_step"], a["game_id"], period["start"], period["end"]],
    ).fetchone()  # type: ignore[misc]
    assert den > 1000, "too few users for a stable conversion"
    return float(num) / float(den)


def test_sdk_login_drop_only_on_huawei_320(con: duckdb.DuckDBPyConnection) -> None:
    a = ANOMALIES["sdk_login_drop_1002_huawei_320"]
    f = a["filters"]
    hit = f"c.channel_name = '{f['channel_name']}' AND f.sdk_version = '{f['sdk_version']}'"
    during = _conversion(con, a, a["period"], hit)
    assert a["expected_value"]["min"] <= during <= a["expected_value"]["max"]
    after = _conversion(con, a, a["baseline"], hit)
    assert a["baseline_value"]["min"] <= after <= a["baseline_value"]["max"]
    others = con.execute(
        """SELECT c.channel_name, f.sdk_version,
                  sum(users) FILTER (WHERE step = 'login')
                  / sum(users) FILTER (WHERE step = 'sdk_init')
        FROM dws_sdk_funnel_di f JOIN dim_channel c USING (channel_id)
        WHERE f.game_id = ? AND f.ds BETWEEN ? AND ?
          AND NOT (c.channel_name = ? AND f.sdk_version = ?)
          AND f.step IN ('login', 'sdk_init')
        GROUP BY ALL HAVING sum(users) FILTER (WHERE step = 'sdk_init') > 1000""",
        [a["game_id"], a["period"]["start"], a["period"]["end"], f["channel_name"],
         f["sdk_version"]],
    ).fetchall()  # fmt: skip
    assert len(others) >= 5
    lo, hi = a["control"]["expected_value"]["min"], a["control"]["expected_value"]["max"]
    assert all(lo <= r[2] <= hi for r in others), others


def test_maintenance_dau_drop_and_recovery(con: duckdb.DuckDBPyConnection) -> None:
    a = ANOMALIES["dau_drop_1003_2026_09_03"]

    def daily_avg(period: dict[str, date]) -> float:
        days = (period["end"] - period["start"]).days + 1
        return _period_sum(con, a, period) / days

    base = daily_avg(a["baseline"])
    ratio = daily_avg(a["period"]) / base
    assert a["expected_ratio"]["min"] <= ratio <= a["expected_ratio"]["max"]
    assert daily_avg(a["recovery"]["period"]) / base >= a["recovery"]["min_ratio"]


@pytest.mark.parametrize("anomaly", sorted(ANOMALIES))
def test_anomaly_has_its_ops_event(con: duckdb.DuckDBPyConnection, anomaly: str) -> None:
    ev = ANOMALIES[anomaly]["ops_event"]
    n = one(
        con,
        "SELECT count(*) FROM ops_events WHERE game_id = ? AND event_type = ? AND title = ? "
        "AND start_ds = ? AND end_ds = ?",
        [ev["game_id"], ev["event_type"], ev["title"], ev["start"], ev["end"]],
    )
    assert n == 1


def test_summer_festival_is_a_skin_sale(con: duckdb.DuckDBPyConnection) -> None:
    desc = one(con, "SELECT description FROM ops_events WHERE title = '夏日祭'")
    assert "皮肤" in desc


def test_dau_is_distinct_users_of_dwd(con: duckdb.DuckDBPyConnection) -> None:
    mismatches = one(
        con,
        """WITH d AS (
             SELECT ds, game_id, channel_id, region, count(DISTINCT uid) AS users
             FROM dwd_user_login_di GROUP BY ALL)
           SELECT count(*) FROM d FULL JOIN dws_game_active_di a
             USING (ds, game_id, channel_id, region)
           WHERE a.dau IS DISTINCT FROM d.users""",
    )
    assert mismatches == 0
    assert one(con, "SELECT sum(dau) FROM dws_game_active_di") == one(
        con, "SELECT count(*) FROM dwd_user_login_di"
    )


def test_new_users_are_first_logins(con: duckdb.DuckDBPyConnection) -> None:
    mismatches = one(
        con,
        """WITH f AS (SELECT game_id, uid, min(ds) AS first_ds FROM dwd_user_login_di GROUP BY ALL),
           n AS (SELECT d.ds, d.game_id, d.channel_id, d.region, count(*) AS nu
                 FROM dwd_user_login_di d JOIN f USING (game_id, uid)
                 WHERE d.ds = f.first_ds GROUP BY ALL)
           SELECT count(*) FROM dws_game_active_di a LEFT JOIN n
             USING (ds, game_id, channel_id, region)
           WHERE a.new_users <> coalesce(n.nu, 0)""",
    )
    assert mismatches == 0
    assert one(con, "SELECT sum(new_users) FROM dws_game_active_di") == one(
        con, "SELECT count(DISTINCT (game_id, uid)) FROM dwd_user_login_di"
    )


def test_users_keep_one_channel_and_region(con: duckdb.DuckDBPyConnection) -> None:
    assert (
        one(
            con,
            "SELECT count(*) FROM (SELECT uid FROM dwd_user_login_di GROUP BY uid "
            "HAVING count(DISTINCT (game_id, channel_id, region)) > 1)",
        )
        == 0
    )


def test_retention_is_plausible(con: duckdb.DuckDBPyConnection) -> None:
    d1, d7 = con.execute(
        """WITH f AS (SELECT game_id, uid, min(ds) AS first_ds FROM dwd_user_login_di
                      GROUP BY ALL HAVING min(ds) < DATE '2026-11-01')
           SELECT avg((l1.uid IS NOT NULL)::INT), avg((l7.uid IS NOT NULL)::INT)
           FROM f
           LEFT JOIN dwd_user_login_di l1
             ON l1.game_id = f.game_id AND l1.uid = f.uid AND l1.ds = f.first_ds + 1
           LEFT JOIN dwd_user_login_di l7
             ON l7.game_id = f.game_id AND l7.uid = f.uid AND l7.ds = f.first_ds + 7"""
    ).fetchone()  # type: ignore[misc]
    assert 0.30 <= d1 <= 0.50
    assert 0.10 <= d7 <= 0.25


def test_weekends_are_busier(con: duckdb.DuckDBPyConnection) -> None:
    weekend, weekday = con.execute(
        """SELECT avg(dau) FILTER (WHERE isodow(ds) >= 6), avg(dau) FILTER (WHERE isodow(ds) < 6)
           FROM (SELECT ds, sum(dau) AS dau FROM dws_game_active_di
                 WHERE ds >= DATE '2026-01-01' GROUP BY ds)"""
    ).fetchone()  # type: ignore[misc]
    assert weekend > 1.05 * weekday


@pytest.mark.parametrize("rule", MANIFEST["lifecycle"], ids=lambda r: str(r["game_id"]))
def test_game_lifecycle(con: duckdb.DuckDBPyConnection, rule: dict[str, Any]) -> None:
    assert (
        one(con, "SELECT status FROM dim_game WHERE game_id = ?", [rule["game_id"]])
        == rule["status"]
    )
    for table in ("dwd_user_login_di", "dws_game_active_di", "dws_game_pay_di"):
        first, last = con.execute(
            f"SELECT min(ds), max(ds) FROM {table} WHERE game_id = ?", [rule["game_id"]]
        ).fetchone()  # type: ignore[misc]
        if "last_activity" in rule:
            assert last is not None and last <= rule["last_activity"]
        if "first_activity" in rule:
            assert first is not None and first >= rule["first_activity"]
    if "last_activity" in rule:
        assert (
            one(
                con,
                "SELECT max(ds) FROM dwd_user_login_di WHERE game_id = ?",
                [rule["game_id"]],
            )
            == rule["last_activity"]
        )


def test_testing_game_is_small(con: duckdb.DuckDBPyConnection) -> None:
    per_game = dict(
        con.execute(
            "SELECT game_id, avg(dau) FROM (SELECT ds, game_id, sum(dau) AS dau "
            "FROM dws_game_active_di WHERE ds >= DATE '2026-11-01' GROUP BY ALL) GROUP BY ALL"
        ).fetchall()
    )
    assert per_game[1006] < min(v for g, v in per_game.items() if g != 1006)


def test_dimension_values(con: duckdb.DuckDBPyConnection) -> None:
    names = {r[0] for r in con.execute("SELECT channel_name FROM dim_channel").fetchall()}
    assert {"official", "app_store", "google_play", "huawei", "xiaomi", "bilibili",
            "taptap"} <= names  # fmt: skip
    assert names == {c[1] for c in CHANNELS}
    statuses = {r[0] for r in con.execute("SELECT DISTINCT status FROM dim_game").fetchall()}
    assert statuses == {"live", "offline", "testing"}
    bases = dict(con.execute("SELECT game_id, game_base_id FROM dim_game").fetchall())
    assert bases[1001] == bases[1006]
    cats = {
        r[0] for r in con.execute("SELECT DISTINCT item_category FROM dws_game_pay_di").fetchall()
    }
    assert {"皮肤", "月卡", "抽卡", "礼包"} <= cats
    steps = con.execute(
        "SELECT DISTINCT step, step_order FROM dws_sdk_funnel_di ORDER BY step_order"
    ).fetchall()
    assert [s for s, _ in steps] == [
        "download", "install", "sdk_init", "login", "create_role", "first_pay",
    ]  # fmt: skip
    assert [o for _, o in steps] == [1, 2, 3, 4, 5, 6]


def test_funnel_is_monotone(con: duckdb.DuckDBPyConnection) -> None:
    violations = one(
        con,
        """SELECT count(*) FROM (
             SELECT users, lag(users) OVER (PARTITION BY ds, game_id, channel_id, sdk_version
                                           ORDER BY step_order) AS prev
             FROM dws_sdk_funnel_di) WHERE users > prev""",
    )
    assert violations == 0


def test_ops_calendar_and_lineage(con: duckdb.DuckDBPyConnection) -> None:
    assert one(con, "SELECT count(DISTINCT game_id) FROM ops_events") == 6
    assert one(con, "SELECT count(*) FROM ops_events WHERE end_ds < start_ds") == 0
    lineage = con.execute("SELECT table_name, upstream_table, etl_sql FROM meta_table_lineage")
    rows = lineage.fetchall()
    assert {t for t, _, _ in rows} >= {"dws_game_active_di", "dws_game_pay_di",
                                        "dws_sdk_funnel_di"}  # fmt: skip
    assert ("dws_game_active_di", "dwd_user_login_di") in {(t, u) for t, u, _ in rows}
    assert all(u.startswith(("dwd_", "ods_")) for _, u, _ in rows)


_CJK = re.compile(r"[\u4e00-\u9fff]")
_ASCII_WORD = re.compile(r"[A-Za-z]{3,}")


def test_every_table_and_column_has_bilingual_comment(con: duckdb.DuckDBPyConnection) -> None:
    comments = con.execute(
        "SELECT table_name, NULL, comment FROM duckdb_tables() UNION ALL "
        "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE NOT internal"
    ).fetchall()
    assert len(comments) > len(TABLE_NAMES)
    for table, column, comment in comments:
        assert comment, (table, column)
        zh, sep, en = comment.partition(" / ")
        assert sep and _CJK.search(zh) and _ASCII_WORD.search(en), (table, column, comment)


def test_build_is_deterministic(tmp_path: Path) -> None:
    a = build_sample(tmp_path / "a" / "s.duckdb", scale=0.02)
    b = build_sample(tmp_path / "b" / "s.duckdb", scale=0.02)
    other = build_sample(tmp_path / "c" / "s.duckdb", scale=0.02, seed=8)
    assert checksums(a) == checksums(b)
    differ = {t for t, v in checksums(other).items() if v != checksums(a)[t]}
    assert {"dwd_user_login_di", "dws_game_pay_di", "dws_sdk_funnel_di"} <= differ
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["s.duckdb"]


def test_end_date_cuts_the_data(tmp_path: Path) -> None:
    path = build_sample(tmp_path / "s.duckdb", scale=0.02, end_date=date(2026, 9, 30))
    with duckdb.connect(str(path), read_only=True) as c:
        for table in ("dwd_user_login_di", "dws_game_pay_di", "dws_sdk_funnel_di"):
            assert one(c, f"SELECT max(ds) FROM {table}") == date(2026, 9, 30)
        assert one(c, "SELECT count(*) FROM dwd_user_login_di WHERE game_id = 1006") == 0


def test_build_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="scale"):
        build_sample(tmp_path / "s.duckdb", scale=0)
    with pytest.raises(ValueError, match="end_date"):
        build_sample(tmp_path / "s.duckdb", end_date=date(2024, 12, 31))
    assert not list(tmp_path.iterdir())


def test_ensure_sample_is_safe_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.duckdb"
    code = (
        "import sys; from pathlib import Path; from dataseer.data.sample import ensure_sample; "
        "ensure_sample(Path(sys.argv[1]), scale=0.02)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)]) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.duckdb", "shared.duckdb.lock"]
    stamp = path.stat().st_mtime_ns
    assert ensure_sample(path, scale=0.02) == path
    assert path.stat().st_mtime_ns == stamp
    assert checksums(path)["dwd_user_login_di"][0] > 0
