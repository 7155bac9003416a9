"""Benchmark the sample warehouse build (and optionally the PostgreSQL load).

Run ``python bench/bench_sample.py`` to build the warehouse at scale 1 and 10
into a temporary folder and print, for each, wall time, file size, total rows
and rows per second, then the scale-10/scale-1 time ratio (ideal: ~10, linear).
``--quick`` builds scale 0.1 and 1 instead. The ratio baseline is the first
scale given. ``--pg URL`` also times ``load_to_postgres`` of that baseline file
into a fresh database on that server.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import duckdb
from _common import print_table, ratio

from dataseer.data.sample import TABLE_NAMES, build_sample, load_to_postgres


def total_rows(path: Path) -> int:
    with duckdb.connect(str(path), read_only=True) as con:
        return sum(
            con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
            for t in TABLE_NAMES
        )


def bench_build(folder: Path, scale: float) -> tuple[float, Path, list[str]]:
    path = folder / f"sample-s{scale:g}.duckdb"
    start = time.perf_counter()
    build_sample(path, scale=scale)
    elapsed = time.perf_counter() - start
    rows = total_rows(path)
    size_mb = path.stat().st_size / 1e6
    row = [
        f"scale {scale:g}",
        f"{elapsed:.2f} s",
        f"{size_mb:.1f} MB",
        f"{rows:,}",
        f"{rows / elapsed:,.0f}",
    ]
    return elapsed, path, row


def bench_pg(path: Path, admin_url: str) -> None:
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"dataseer_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = make_conninfo(admin_url, dbname=name)
        rows = total_rows(path)
        start = time.perf_counter()
        load_to_postgres(path, url)
        elapsed = time.perf_counter() - start
        print(f"postgres load of {path.name}: {elapsed:7.2f} s  {rows / elapsed:>12,.0f} rows/s")
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", help="default 1 10 (--quick: 0.1 1)")
    parser.add_argument("--quick", action="store_true", help="scales 0.1 and 1")
    parser.add_argument("--pg", metavar="URL", help="also time load_to_postgres at the first scale")
    args = parser.parse_args()
    scales = args.scales or ([0.1, 1.0] if args.quick else [1.0, 10.0])
    with tempfile.TemporaryDirectory(prefix="dataseer-bench-") as tmp:
        results = {scale: bench_build(Path(tmp), scale) for scale in scales}
        base_scale = scales[0]
        base_time, base_path, _ = results[base_scale]
        print_table(
            "sample warehouse build",
            ["scale", "build", "file", "rows", "rows/s", f"time vs scale {base_scale:g}", "ideal"],
            [
                [*row, ratio(elapsed, base_time), f"{scale / base_scale:g}x"]
                for scale, (elapsed, _, row) in results.items()
            ],
        )
        if args.pg:
            bench_pg(base_path, args.pg)


if __name__ == "__main__":
    main()
