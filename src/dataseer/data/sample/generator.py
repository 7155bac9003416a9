"""Build the deterministic sample game warehouse as one DuckDB file.

The big tables are generated inside DuckDB with SQL: every random draw is an
integer hash of (entity, day, purpose, seed), never ``random()``, so the same
seed, scale and end date give the same rows on every machine and thread count.
The user-level login table is the source of truth; the daily active summary is
built from it with ``GROUP BY`` (so ``dau`` is the distinct user count by
construction) and the payment summary is drawn from that summary. The SDK
funnel is generated directly with counts large enough for stable ratios.

The file is written under a temporary name in the target folder and renamed
into place, so readers never see a half-built warehouse; ``ensure_sample``
adds a lock file so concurrent processes build it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from datetime import date
from importlib import resources
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import yaml

from dataseer.data.sample import params
from dataseer.data.sample.schema import TABLES

DEFAULT_END_DATE = date(2026, 11, 28)

LINEAGE: tuple[tuple[str, str, str], ...] = (
    (
        "dwd_user_login_di",
        "ods_login_log_di",
        """INSERT OVERWRITE TABLE dwd_user_login_di PARTITION (ds = '${ds}')
SELECT l.game_id, l.uid, u.channel_id, u.region,
       CAST(SUM(l.session_seconds) / 60 AS INTEGER) AS online_minutes
FROM ods_login_log_di l
JOIN dim_user u ON u.uid = l.uid AND u.game_id = l.game_id
WHERE l.ds = '${ds}'
GROUP BY l.game_id, l.uid, u.channel_id, u.region""",
    ),
    (
        "dws_game_active_di",
        "dwd_user_login_di",
        """INSERT INTO dws_game_active_di
WITH first_login AS (
  SELECT game_id, uid, MIN(ds) AS first_ds
  FROM dwd_user_login_di
  GROUP BY game_id, uid
)
SELECT d.ds, d.game_id, d.channel_id, d.region,
       COUNT(DISTINCT d.uid) AS dau,
       COUNT(DISTINCT d.uid) FILTER (WHERE d.ds = f.first_ds) AS new_users
FROM dwd_user_login_di d
JOIN first_login f ON f.game_id = d.game_id AND f.uid = d.uid
GROUP BY d.ds, d.game_id, d.channel_id, d.region""",
    ),
    (
        "dws_game_pay_di",
        "ods_pay_order_di",
        """INSERT OVERWRITE TABLE dws_game_pay_di PARTITION (ds = '${ds}')
SELECT o.game_id, u.channel_id, u.region, i.item_category,
       COUNT(DISTINCT o.uid) AS pay_users,
       COUNT(*) AS orders,
       CAST(SUM(o.amount_cny) AS DECIMAL(18, 2)) AS revenue
FROM ods_pay_order_di o
JOIN dim_item i ON i.item_id = o.item_id
JOIN dwd_user_login_di u ON u.uid = o.uid AND u.game_id = o.game_id AND u.ds = o.ds
WHERE o.ds = '${ds}' AND o.order_status = 'paid'
GROUP BY o.game_id, u.channel_id, u.region, i.item_category""",
    ),
    (
        "dws_game_pay_di",
        "dwd_user_login_di",
        "-- channel and region of each paying user come from dwd_user_login_di;"
        " see the ods_pay_order_di row for the full statement",
    ),
    (
        "dws_sdk_funnel_di",
        "ods_sdk_event_log_di",
        """INSERT OVERWRITE TABLE dws_sdk_funnel_di PARTITION (ds = '${ds}')
SELECT e.game_id, e.channel_id, e.sdk_version, s.step, s.step_order,
       COUNT(DISTINCT e.device_id) AS users
FROM ods_sdk_event_log_di e
JOIN dim_funnel_step s ON s.event_name = e.event_name
WHERE e.ds = '${ds}'
GROUP BY e.game_id, e.channel_id, e.sdk_version, s.step, s.step_order""",
    ),
)


def _hash_macros(con: duckdb.DuckDBPyConnection, seed: int) -> None:
    salt = (seed * 2654435761) & 0xFFFFFFFF
    con.execute("CREATE TEMP MACRO _m1(x) AS (xor(x >> 16, x) * 73244475) & 4294967295")
    con.execute(
        "CREATE TEMP MACRO _h32(x) AS xor(_m1(_m1(x & 4294967295)) >> 16, _m1(_m1(x & 4294967295)))"
    )
    con.execute(
        "CREATE TEMP MACRO u01(a, b, c) AS _h32(CAST(a AS BIGINT) * 73856093 "
        f"+ CAST(b AS BIGINT) * 19349663 + CAST(c AS BIGINT) * 83492791 + {salt}) "
        "/ 4294967296.0"
    )


def _register(con: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame) -> None:
    con.register(f"{name}_src", pa.Table.from_pandas(frame, preserve_index=False))
    con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM {name}_src")
    con.unregister(f"{name}_src")


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for table in TABLES:
        con.execute(table.ddl())


def _comment_tables(con: duckdb.DuckDBPyConnection) -> None:
    for table in TABLES:
        con.execute(f"COMMENT ON TABLE {table.name} IS {_sql_text(table.comment)}")
        for col in table.columns:
            con.execute(f"COMMENT ON COLUMN {table.name}.{col.name} IS {_sql_text(col.comment)}")


_USERS_SQL = """
CREATE TEMP TABLE users AS
WITH joins AS (
  SELECT game_id, day_idx,
         CAST(floor(join_mu * {scale} + u01(game_id, day_idx, 1)) AS BIGINT) AS n
  FROM game_day
), expanded AS (
  SELECT game_id, day_idx, unnest(range(n)) AS k FROM joins WHERE n > 0
), numbered AS (
  SELECT 100000000 + row_number() OVER (ORDER BY day_idx, game_id, k) AS uid,
         game_id, day_idx AS join_idx
  FROM expanded
), drawn AS (
  SELECT *, u01(uid, 0, 11) AS ut, u01(uid, 0, 12) AS ul, u01(uid, 0, 13) AS up,
         u01(uid, 0, 14) AS urc
  FROM numbered
), last_day AS (
  SELECT game_id, max(day_idx) AS last_idx FROM game_day GROUP BY game_id
)
SELECT d.uid, d.game_id, d.join_idx,
       CASE WHEN d.ut < 0.57 THEN 0 WHEN d.ut < 0.92 THEN 1 ELSE 2 END AS kind,
       least(
         CASE WHEN d.ut < 0.57 THEN floor(d.ul * 7)
              WHEN d.ut < 0.92 THEN 3 + floor(d.ul * d.ul * 90)
              ELSE 60 + floor(d.ul * 500) END,
         l.last_idx - d.join_idx
       )::BIGINT AS life,
       CASE WHEN d.ut < 0.57 THEN 0.33
            WHEN d.ut < 0.92 THEN 0.30 + 0.25 * d.up
            ELSE 0.70 + 0.22 * d.up END AS p,
       rc.channel_id, rc.region
FROM drawn d
JOIN last_day l ON l.game_id = d.game_id
JOIN region_channel rc ON rc.game_id = d.game_id AND d.urc >= rc.lo AND d.urc < rc.hi
"""

_DWD_SQL = """
INSERT INTO dwd_user_login_di
SELECT g.ds, x.game_id, x.uid, x.channel_id, x.region,
       CAST(greatest(1, round(
         (CASE x.kind WHEN 0 THEN 18 WHEN 1 THEN 42 ELSE 95 END)
         * g.act_mult * (0.35 + 1.3 * u01(x.uid, g.day_idx, 3))
       )) AS INTEGER) AS online_minutes
FROM (SELECT *, unnest(range(life + 1)) AS off FROM users) x
JOIN game_day g ON g.game_id = x.game_id AND g.day_idx = x.join_idx + x.off
WHERE x.off = 0 OR u01(x.uid, g.day_idx, 2) < x.p * g.act_mult
ORDER BY g.ds, x.game_id, x.uid
"""

_PAY_SQL = """
INSERT INTO dws_game_pay_di
WITH cells AS (
  SELECT a.ds, a.game_id, a.channel_id, a.region, a.dau, r.region_idx,
         c.item_category, c.cat_idx, c.rate, c.arppu, c.extra_orders, c.day_idx,
         a.game_id * 1000 + a.channel_id * 10 + r.region_idx AS cell_key,
         CASE a.region WHEN 'overseas' THEN 0.8 ELSE 1.0 END AS region_rate,
         CASE a.region WHEN 'overseas' THEN 1.3 ELSE 1.0 END AS region_arppu
  FROM dws_game_active_di a
  JOIN regions r ON r.region = a.region
  JOIN category_day c ON c.game_id = a.game_id AND c.ds = a.ds
), drawn AS (
  SELECT *,
         least(dau, CAST(floor(dau * rate * region_rate
                               + u01(cell_key, day_idx, 20 + cat_idx)) AS BIGINT)) AS pay_users
  FROM cells
)
SELECT ds, game_id, channel_id, region, item_category, pay_users,
       pay_users + CAST(floor(pay_users * extra_orders * 2 * u01(cell_key, day_idx, 30 + cat_idx)
                              + u01(cell_key, day_idx, 40 + cat_idx)) AS BIGINT) AS orders,
       CAST(pay_users * arppu * region_arppu * (0.7 + 0.6 * u01(cell_key, day_idx, 50 + cat_idx))
            AS DECIMAL(18, 2)) AS revenue
FROM drawn
WHERE pay_users > 0
ORDER BY ds, game_id, channel_id, region, item_category
"""

_FUNNEL_SQL = """
INSERT INTO dws_sdk_funnel_di
WITH keyed AS (
  SELECT f.*, f.game_id * 10000000 + f.channel_id * 100000 + f.version_idx AS key
  FROM funnel_base f
), base AS (
  SELECT k.*, k.dl_mu * {funnel_scale} * (0.9 + 0.2 * u01(k.key, k.day_idx, 60)) AS dl
  FROM keyed k
), conv AS (
  SELECT b.ds, b.game_id, b.channel_id, b.sdk_version, b.dl,
         c.c2 * (0.98 + 0.04 * u01(b.key, b.day_idx, 61)) AS c2,
         c.c3 * (0.99 + 0.02 * u01(b.key, b.day_idx, 62)) AS c3,
         CASE WHEN b.game_id = {inc_game} AND b.channel_id = {inc_channel}
                   AND b.sdk_version = '{inc_version}'
                   AND b.ds BETWEEN DATE '{inc_start}' AND DATE '{inc_end}'
              THEN {inc_login} ELSE c.c4 END
           * (0.98 + 0.04 * u01(b.key, b.day_idx, 63)) AS c4,
         c.c5 * (0.97 + 0.06 * u01(b.key, b.day_idx, 64)) AS c5,
         c.c6 * (0.9 + 0.2 * u01(b.key, b.day_idx, 65)) AS c6
  FROM base b JOIN funnel_channel c ON c.channel_id = b.channel_id
), counts AS (
  SELECT ds, game_id, channel_id, sdk_version,
         [dl, dl * c2, dl * c2 * c3, dl * c2 * c3 * c4, dl * c2 * c3 * c4 * c5,
          dl * c2 * c3 * c4 * c5 * c6] AS reached
  FROM conv
)
SELECT c.ds, c.game_id, c.channel_id, c.sdk_version, s.step, s.step_order,
       CAST(round(c.reached[s.step_order]) AS BIGINT) AS users
FROM counts c CROSS JOIN funnel_steps s
WHERE round(c.reached[1]) >= 1
ORDER BY c.ds, c.game_id, c.channel_id, c.sdk_version, s.step_order
"""

_ACTIVE_SQL = """
INSERT INTO dws_game_active_di
WITH first_login AS (
  SELECT game_id, uid, min(ds) AS first_ds
  FROM dwd_user_login_di
  GROUP BY game_id, uid
)
SELECT d.ds, d.game_id, d.channel_id, d.region,
       count(DISTINCT d.uid) AS dau,
       count(DISTINCT d.uid) FILTER (WHERE d.ds = f.first_ds) AS new_users
FROM dwd_user_login_di d
JOIN first_login f ON f.game_id = d.game_id AND f.uid = d.uid
GROUP BY d.ds, d.game_id, d.channel_id, d.region
ORDER BY d.ds, d.game_id, d.channel_id, d.region
"""


def _funnel_channel_frame() -> pd.DataFrame:
    base = params.STEP_CONVERSION
    tweaks = {
        "official": {"c2": 0.80 / base[1]},
        "app_store": {"c2": 0.93 / base[1]},
        "google_play": {"c2": 0.91 / base[1]},
        "taptap": {"c4": 0.92 / base[3], "c5": 0.86 / base[4]},
        "bilibili": {"c5": 0.85 / base[4]},
    }
    rows = []
    for cid, name, *_ in params.CHANNELS:
        t = tweaks.get(name, {})
        rows.append((cid, *(base[i] * t.get(f"c{i + 1}", 1.0) for i in range(1, len(base)))))
    return pd.DataFrame(rows, columns=["channel_id", "c2", "c3", "c4", "c5", "c6"])


def announcements_frame(end_date: date) -> pd.DataFrame:
    """Rows of ``announcements`` (``announcements.yaml``) published on or before ``end_date``."""
    text = resources.files(__package__).joinpath("announcements.yaml").read_text(encoding="utf-8")
    rows = sorted(
        (
            (int(r["game_id"]), r["ds"], str(r["category"]), str(r["title"]), str(r["content"]))
            for r in yaml.safe_load(text)
            if r["ds"] <= end_date
        ),
        key=lambda r: (r[1], r[0]),
    )
    frame = pd.DataFrame(rows, columns=["game_id", "ds", "category", "title", "content"])
    frame.insert(0, "announcement_id", range(1, len(frame) + 1))
    return frame


def _populate(con: duckdb.DuckDBPyConnection, scale: float, seed: int, end_date: date) -> None:
    _hash_macros(con, seed)
    game_days = params.game_day_frame(end_date, seed)
    _register(con, "game_day", game_days)
    _register(con, "category_day", params.category_day_frame(game_days))
    _register(con, "region_channel", params.region_channel_frame(seed))
    _register(con, "funnel_base", params.funnel_base_frame(game_days, seed))
    _register(con, "funnel_channel", _funnel_channel_frame())
    _register(
        con,
        "regions",
        pd.DataFrame({"region": params.REGIONS, "region_idx": range(len(params.REGIONS))}),
    )
    _register(
        con,
        "funnel_steps",
        pd.DataFrame({"step": params.STEPS, "step_order": range(1, len(params.STEPS) + 1)}),
    )

    _create_tables(con)
    _insert_frame(con, "dim_game", params.dim_game_frame())
    _insert_frame(con, "dim_channel", params.dim_channel_frame())
    _insert_frame(con, "ops_events", params.ops_events_frame(end_date))
    _insert_frame(con, "announcements", announcements_frame(end_date))
    _insert_frame(
        con,
        "meta_table_lineage",
        pd.DataFrame(LINEAGE, columns=["table_name", "upstream_table", "etl_sql"]),
    )

    con.execute(_USERS_SQL.format(scale=repr(float(scale))))
    con.execute(_DWD_SQL)
    con.execute(_ACTIVE_SQL)
    con.execute(_PAY_SQL)
    inc = params.FUNNEL_INCIDENT
    con.execute(
        _FUNNEL_SQL.format(
            funnel_scale=repr(max(float(scale), 1.0)),
            inc_game=inc.game_id,
            inc_channel=params.CHANNEL_IDS[inc.channel_name],
            inc_version=inc.sdk_version,
            inc_start=inc.start,
            inc_end=inc.end,
            inc_login=repr(inc.login_conversion),
        )
    )
    _comment_tables(con)


def _insert_frame(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    con.register("_frame_src", pa.Table.from_pandas(frame, preserve_index=False))
    cols = ", ".join(frame.columns)
    con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _frame_src")
    con.unregister("_frame_src")


def build_sample(
    path: Path,
    *,
    scale: float = 1.0,
    seed: int = 7,
    end_date: date = DEFAULT_END_DATE,
) -> Path:
    """Build the sample warehouse at ``path`` and return ``path``.

    The same ``seed``, ``scale`` and ``end_date`` always give identical data.
    ``scale`` sets the number of users (scale 1 is about five million login
    rows); the three injected anomalies described in ``manifest.yaml`` hold at
    any scale from 0.02 up. An existing file at ``path`` is replaced
    atomically once the new one is complete.

    Raises:
        ValueError: when ``scale`` is not positive or ``end_date`` is before
            the first day of data.
    """
    if not scale > 0:
        msg = f"scale must be positive, got {scale!r}"
        raise ValueError(msg)
    if end_date < params.START_DATE:
        msg = f"end_date must be on or after {params.START_DATE}, got {end_date}"
        raise ValueError(msg)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        con = duckdb.connect(str(tmp))
        try:
            con.execute("SET enable_progress_bar = false")
            _populate(con, scale, seed % (2**31), end_date)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
    return path


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def ensure_sample(path: Path, *, scale: float = 1.0) -> Path:
    """Return ``path``, building the sample warehouse there on first use.

    Safe when several processes call it at once: they serialise on
    ``<path>.lock`` and only the first one builds. An existing file is trusted
    as is (its scale is not checked), so use a file name that names the scale.
    """
    path = Path(path)
    if path.exists():
        return path
    with _locked(path.with_name(path.name + ".lock")):
        if not path.exists():
            build_sample(path, scale=scale)
    return path
