"""SQL guard cost: check latency over the fixture corpus, and overhead next to DuckDB.

Prints p50/p99 of ``SqlGuard.check`` over every case of
``tests/fixtures/guard`` (all dialects), then, for the analyst queries that
run on the sample warehouse at scale 1 (DuckDB cases that the guard allows),
the guard's time as a share of the query's DuckDB execution time on an open
connection, measured interleaved. Goal: under 5 % at p50.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

import _common
import duckdb

sys.path.insert(0, str(_common.ROOT / "tests" / "unit"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="scale 0.1 and fewer repeats")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    repeats = 3 if args.quick else 10
    home = Path(tempfile.mkdtemp(prefix="bench-guard-"))
    _common.use_env(_common.bench_env(home, scale))
    logging.getLogger("sqlglot").setLevel(logging.ERROR)

    from test_sql_guard import CASES, SCHEMA, USERS

    from dataseer.data.sample import ensure_sample
    from dataseer.sql.guard import SqlGuard

    guards: dict[tuple[str, str, str], SqlGuard] = {}

    def guard_for(user: str, dialect: str, mode: str) -> SqlGuard:
        key = (user, dialect, mode)
        if key not in guards:
            guards[key] = SqlGuard(USERS[user], dialect, mode, schema=SCHEMA)  # type: ignore[arg-type]
        return guards[key]

    check_times: list[float] = []
    for _ in range(repeats):
        for case in CASES:
            g = guard_for(case.user, case.dialect, case.mode)
            start = time.perf_counter()
            g.check(case.sql)
            check_times.append(time.perf_counter() - start)
    stats = _common.Stats.of(check_times)
    p99 = _common.percentile(check_times, 99)
    _common.print_table(
        f"SqlGuard.check over the fixture corpus ({len(CASES)} cases x {repeats})",
        ["measure", "p50", "p95", "p99", "max"],
        [
            [
                "check",
                _common.ms(stats.p50),
                _common.ms(stats.p95),
                _common.ms(p99),
                _common.ms(stats.max),
            ]
        ],
    )

    start = time.perf_counter()
    path = ensure_sample(home / f"sample-s{scale:g}.duckdb", scale=scale)
    print(f"\nsample at scale {scale:g}: {time.perf_counter() - start:.1f} s ({path.name})")
    con = duckdb.connect(str(path), read_only=True)
    runnable = []
    for case in CASES:
        if case.dialect != "duckdb" or case.code != "OK":
            continue
        decision = guard_for(case.user, "duckdb", case.mode).check(case.sql)
        sql = decision.rewritten_sql or case.sql
        timer = threading.Timer(2.0, con.interrupt)
        timer.start()
        try:
            con.execute(sql).fetchall()
        except (duckdb.Error, RuntimeError):
            continue
        finally:
            timer.cancel()
        runnable.append((case, sql))
    guard_t: list[float] = []
    query_t: list[float] = []
    shares: list[float] = []
    for _ in range(repeats):
        for case, sql in runnable:
            g = guard_for(case.user, "duckdb", case.mode)
            t0 = time.perf_counter()
            g.check(case.sql)
            t1 = time.perf_counter()
            con.execute(sql).fetchall()
            t2 = time.perf_counter()
            guard_t.append(t1 - t0)
            query_t.append(t2 - t1)
            shares.append((t1 - t0) / (t2 - t1))
    g_stats, q_stats = _common.Stats.of(guard_t), _common.Stats.of(query_t)
    share_p50 = _common.percentile(shares, 50)
    _common.print_table(
        f"guard vs DuckDB on the sample (scale {scale:g}, {len(runnable)} allowed queries x "
        f"{repeats})",
        ["measure", "p50", "p95", "mean"],
        [
            [
                "SqlGuard.check",
                _common.ms(g_stats.p50),
                _common.ms(g_stats.p95),
                _common.ms(g_stats.mean),
            ],
            [
                "DuckDB execute+fetch (baseline)",
                _common.ms(q_stats.p50),
                _common.ms(q_stats.p95),
                _common.ms(q_stats.mean),
            ],
            [
                "guard / query (per query)",
                f"{100 * share_p50:.1f}%",
                f"{100 * _common.percentile(shares, 95):.1f}%",
                _common.share(g_stats.mean, q_stats.mean),
            ],
        ],
    )
    print(
        f"\nratio of p50s: {_common.ratio(g_stats.p50, q_stats.p50)} "
        f"(goal: guard under 5% of execution at p50)"
    )
    con.close()


if __name__ == "__main__":
    main()
