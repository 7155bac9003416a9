"""Benchmark ``dataseer ask`` end to end on the embedded defaults (offline analyst, sample).

Run ``python bench/bench_ask.py`` (scale 1) or ``--quick`` (scale 0.05). In a
temporary ``DATASEER_HOME`` it measures, for the lookup question
"星海远征上个月流水多少？":

- process start alone (``python -c pass``) and process start + ``import
  dataseer.graph``, which also compiles the module-level graph;
- the sample warehouse build, on its own;
- "first ever": ``dataseer ask`` in a fresh process and an empty home, so the
  run builds the sample first;
- cold: ``dataseer ask`` in a fresh process, sample already built;
- warm: the router graph built once in this process (with the CLI's SQLite
  checkpointer) and invoked again and again, each time on a new thread.

For each it reports how much of the time was spent running SQL (the
``elapsed`` of the run's ``sql_history`` records; for the CLI, the figure it
prints) and the ratio against the bare baseline measured in the same run:
the same SQL executed directly through DuckDB.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import (
    QUESTION,
    Stats,
    bench_env,
    ms,
    print_table,
    ratio,
    share,
    timed_process,
    use_env,
)

_CLI_SQL = re.compile(r"\(\d+ rows, ([0-9.]+)s\)")
_CLI_TOTAL = re.compile(r"\(thread \S+ · ([0-9.]+)s\)")


def cli_run(exe: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """One ``dataseer ask`` process: wall time, the CLI's own run time, SQL time."""
    wall, done = timed_process([str(exe), "ask", QUESTION], env)
    sql = sum(float(m) for m in _CLI_SQL.findall(done.stdout))
    total = _CLI_TOTAL.search(done.stdout)
    if sql == 0 or total is None:
        msg = f"unexpected `dataseer ask` output (no SQL ran?):\n{done.stdout[-1500:]}"
        raise RuntimeError(msg)
    return wall, float(total.group(1)), sql


def bench_startup(env: dict[str, str], runs: int) -> None:
    python = sys.executable
    bare = [timed_process([python, "-c", "pass"], env)[0] for _ in range(runs)]
    imported = [timed_process([python, "-c", "import dataseer.graph"], env)[0] for _ in range(runs)]
    base, imp = Stats.of(bare), Stats.of(imported)
    print_table(
        f"process start ({runs} runs each)",
        ["what", "p50", "min", "vs bare python"],
        [
            ["python -c pass (baseline)", ms(base.p50), ms(base.min), "1.00x"],
            [
                "python -c 'import dataseer.graph'",
                ms(imp.p50),
                ms(imp.min),
                ratio(imp.p50, base.p50),
            ],
        ],
    )


def build_timed(path: Path, scale: float) -> float:
    from dataseer.data.sample import build_sample

    start = time.perf_counter()
    build_sample(path, scale=scale)
    return time.perf_counter() - start


def bare_sql(path: Path, sql: str, runs: int) -> tuple[Stats, Stats]:
    """The baseline: the same SQL straight through DuckDB (cold connect, then warm)."""
    import duckdb

    cold: list[float] = []
    for _ in range(max(3, runs // 4)):
        start = time.perf_counter()
        with duckdb.connect(str(path), read_only=True) as con:
            con.execute(sql).fetchall()
        cold.append(time.perf_counter() - start)
    warm: list[float] = []
    with duckdb.connect(str(path), read_only=True) as con:
        con.execute(sql).fetchall()
        for _ in range(runs):
            start = time.perf_counter()
            con.execute(sql).fetchall()
            warm.append(time.perf_counter() - start)
    return Stats.of(cold), Stats.of(warm)


def warm_runs(runs: int) -> dict[str, Any]:
    """Build the graph once and ask the question ``runs + 1`` times on new threads."""
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig

    from dataseer.cli import open_checkpointer
    from dataseer.config import Settings
    from dataseer.graph import build_graph

    settings = Settings()
    walls: list[float] = []
    sqls: list[float] = []
    last_sql = ""
    with open_checkpointer(settings) as saver:
        start = time.perf_counter()
        graph = build_graph(settings=settings, checkpointer=saver)
        build = time.perf_counter() - start
        for _ in range(runs + 1):
            config: RunnableConfig = {
                "configurable": {"thread_id": uuid.uuid4().hex[:12]},
                "recursion_limit": 200,
            }
            start = time.perf_counter()
            state = graph.invoke({"messages": [HumanMessage(QUESTION)]}, config)
            walls.append(time.perf_counter() - start)
            records = state.get("sql_history") or []
            if not records or not all(r["ok"] for r in records):
                msg = f"the warm run did not answer with SQL: {state.get('answer')!r}"
                raise RuntimeError(msg)
            sqls.append(sum(r["elapsed"] for r in records))
            last_sql = records[-1]["sql"]
    from dataseer.services import reset_services

    reset_services()
    return {
        "build": build,
        "first": walls[0],
        "first_sql": sqls[0],
        "walls": walls[1:],
        "sqls": sqls[1:],
        "sql": last_sql,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="scale 0.05 and fewer runs")
    parser.add_argument("--scale", type=float, help="sample scale (default 1, --quick 0.05)")
    parser.add_argument("--cold", type=int, help="fresh-process runs (default 5, --quick 3)")
    parser.add_argument("--warm", type=int, help="in-process runs (default 30, --quick 10)")
    args = parser.parse_args()
    scale = args.scale or (0.05 if args.quick else 1.0)
    cold_n = args.cold or (3 if args.quick else 5)
    warm_n = args.warm or (10 if args.quick else 30)
    exe = Path(sys.executable).with_name("dataseer")
    print(f"bench_ask: scale {scale:g}, question {QUESTION!r}, offline analyst")

    with tempfile.TemporaryDirectory(prefix="dataseer-bench-ask-") as tmp:
        home = Path(tmp) / "home"
        env = bench_env(home, scale)
        use_env(env)
        from dataseer.config import Settings

        bench_startup(env, cold_n)

        first_wall, first_run, first_sql = cli_run(exe, bench_env(Path(tmp) / "first", scale))

        sample = Settings().sample_path
        sample.parent.mkdir(parents=True, exist_ok=True)
        build = build_timed(sample, scale)
        print_table(
            "sample warehouse",
            ["what", "time", "file"],
            [
                [
                    f"build_sample at scale {scale:g}",
                    f"{build:.2f} s",
                    f"{sample.stat().st_size / 1e6:.1f} MB",
                ]
            ],
        )

        cold = [cli_run(exe, env) for _ in range(cold_n)]
        cold_wall = Stats.of([c[0] for c in cold])
        cold_run = Stats.of([c[1] for c in cold])
        cold_sql = Stats.of([c[2] for c in cold])

        warm = warm_runs(warm_n)
        warm_wall, warm_sql = Stats.of(warm["walls"]), Stats.of(warm["sqls"])
        bare_cold, bare_warm = bare_sql(sample, warm["sql"], warm_n)

    print_table(
        f"baseline: the same SQL straight through DuckDB ({bare_warm.n} warm runs)",
        ["what", "p50", "p95"],
        [
            ["connect + query + close", ms(bare_cold.p50), ms(bare_cold.p95)],
            ["query on an open connection", ms(bare_warm.p50), ms(bare_warm.p95)],
        ],
    )
    headers = ["dataseer ask", "n", "p50", "p95", "SQL p50", "SQL share", "vs bare SQL"]
    print_table(
        f"dataseer ask at scale {scale:g} (vs bare SQL: cold rows vs connect+query, warm vs query)",
        headers,
        [
            [
                "first ever (fresh process, builds sample)",
                1,
                ms(first_wall),
                "",
                ms(first_sql),
                share(first_sql, first_wall),
                ratio(first_wall, bare_cold.p50),
            ],
            [
                "cold (fresh process, process wall)",
                cold_wall.n,
                ms(cold_wall.p50),
                ms(cold_wall.p95),
                ms(cold_sql.p50),
                share(cold_sql.p50, cold_wall.p50),
                ratio(cold_wall.p50, bare_cold.p50),
            ],
            [
                "  of which the run (CLI's own timer)",
                cold_run.n,
                ms(cold_run.p50),
                ms(cold_run.p95),
                ms(cold_sql.p50),
                share(cold_sql.p50, cold_run.p50),
                ratio(cold_run.p50, bare_cold.p50),
            ],
            ["in-process: build_graph", 1, ms(warm["build"]), "", "", "", ""],
            [
                "in-process: first invoke (loads services)",
                1,
                ms(warm["first"]),
                "",
                ms(warm["first_sql"]),
                share(warm["first_sql"], warm["first"]),
                ratio(warm["first"], bare_cold.p50),
            ],
            [
                "warm (same graph, new thread)",
                warm_wall.n,
                ms(warm_wall.p50),
                ms(warm_wall.p95),
                ms(warm_sql.p50),
                share(warm_sql.p50, warm_wall.p50),
                ratio(warm_wall.p50, bare_warm.p50),
            ],
        ],
    )
    print(f"\nfirst-ever run's CLI timer: {first_run:.2f} s (includes the sample build)")


if __name__ == "__main__":
    main()
