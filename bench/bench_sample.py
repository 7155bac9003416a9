"""Benchmark the sample warehouse build (and optionally the PostgreSQL load).

Run ``python bench/bench_sample.py`` to build the warehouse at scale 1 and 10
into a temporary folder and print, for each, wall time, file size, total rows
and rows per second, then the scale-10/scale-1 time ratio (ideal: ~10, linear).
``--pg URL`` also times ``load_to_postgres`` of the scale-1 file into a fresh
database on that server.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import duckdb

from dataseer.data.sample import TABLE_NAMES, build_sample, load_to_postgres


def total_rows(path: Path) -> int:
    with duckdb.connect(str(path), read_only=True) as con:
        return sum(
            con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
            for t in TABLE_NAMES
        )


def bench_build(folder: Path, scale: float) -> tuple[float, Path]:
    path = folder / f"sample-s{scale:g}.duckdb"
    start = time.perf_counter()
    build_sample(path, scale=scale)
    elapsed = time.perf_counter() - start
    rows = total_rows(path)
    size_mb = path.stat().st_size / 1e6
    print(
        f"scale {scale:>5g}: build {elapsed:7.2f} s  file {size_mb:8.1f} MB  "
        f"rows {rows:>11,}  {rows / elapsed:>12,.0f} rows/s"
    )
    return elapsed, path


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
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--pg", metavar="URL", help="also time load_to_postgres at scale 1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dataseer-bench-") as tmp:
        results = {scale: bench_build(Path(tmp), scale) for scale in args.scales}
        base = results.get(1.0)
        if base is not None:
            for scale, (elapsed, _) in results.items():
                if scale != 1.0:
                    print(f"time ratio scale {scale:g} / scale 1: {elapsed / base[0]:.2f}x")
            if args.pg:
                bench_pg(base[1], args.pg)


if __name__ == "__main__":
    main()
