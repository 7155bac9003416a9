"""Concurrent offline-analyst runs over SSE against a real ``langgraph dev`` server.

Starts the project's server (explicit dev-auth mode, offline analyst, the
scale-0.05 sample in a temporary home) and streams N runs at once through
``langgraph_sdk``, each on its own thread. Reports runs per second, time to
first event (p50/p95), run time, and streams dropped (a stream that errors or
ends without the run's final answer). The baseline is the same run streamed
alone, measured in the same server just before.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, TODAY, Stats, ms, print_table, ratio

sys.path.insert(0, str(ROOT / "tests"))

QUESTIONS = (
    "星海远征上个月流水多少？",
    "幻境物语上个月DAU",
    "机甲风暴上周新增用户",
    "萌宠大作战上个月付费率",
)


async def one_run(client: Any, question: str) -> tuple[float, float, bool]:
    """(time to first event, total time, ok) of one streamed run on a new thread."""
    started = time.perf_counter()
    first = 0.0
    ok = True
    thread = (await client.threads.create())["thread_id"]
    try:
        async for part in client.runs.stream(
            thread,
            "dataseer",
            input={"messages": [{"role": "user", "content": question}]},
            stream_mode=["updates", "custom"],
            stream_subgraphs=True,
        ):
            if not first and part.event != "metadata":
                first = time.perf_counter() - started
            if part.event == "error":
                ok = False
        state = await client.threads.get_state(thread)
        messages = state["values"].get("messages") or []
        ok = ok and bool(messages) and "```sql" in str(messages[-1].get("content"))
    except Exception:  # a dropped stream is a finding, not a crash of the bench
        ok = False
    return first, time.perf_counter() - started, ok


async def measure(url: str, concurrency: int) -> dict[str, Any]:
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=600)
    alone = [await one_run(client, QUESTIONS[i % len(QUESTIONS)]) for i in range(3)]
    started = time.perf_counter()
    results = await asyncio.gather(
        *(one_run(client, QUESTIONS[i % len(QUESTIONS)]) for i in range(concurrency))
    )
    wall = time.perf_counter() - started
    return {"alone": alone, "results": results, "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 concurrent runs instead of 50")
    parser.add_argument("--runs", type=int, help="concurrent runs (default 50, quick 10)")
    args = parser.parse_args()
    concurrency = args.runs or (10 if args.quick else 50)

    from dataseer.data.sample import build_sample
    from support.langgraph_server import start_langgraph_dev

    with tempfile.TemporaryDirectory(prefix="dataseer-bench-server-") as tmp:
        home = Path(tmp) / "home"
        build_sample(home / "sample-s0_05.duckdb", scale=0.05)
        env = {
            "DATASEER_HOME": str(home),
            "DATASEER_SAMPLE_SCALE": "0.05",
            "DATASEER_TODAY": TODAY,
            "DATASEER_AUTH_DEV": "1",
            "DATASEER_DEV_USER": "admin",
        }
        with start_langgraph_dev(ROOT, env=env, timeout=180) as url:
            found = asyncio.run(measure(url, concurrency))

    alone_first = Stats.of([r[0] for r in found["alone"]])
    alone_total = Stats.of([r[1] for r in found["alone"]])
    firsts = Stats.of([r[0] for r in found["results"] if r[2]] or [0.0])
    totals = Stats.of([r[1] for r in found["results"] if r[2]] or [0.0])
    dropped = sum(1 for r in found["results"] if not r[2])
    print(f"bench_server: {concurrency} concurrent lookup runs over SSE, offline analyst, 2 cores")
    print_table(
        "time to first event and run time",
        ["runs", "first event p50", "first event p95", "run p50", "run p95", "p50 vs alone"],
        [
            [
                "one at a time (baseline)",
                ms(alone_first.p50),
                ms(alone_first.p95),
                ms(alone_total.p50),
                ms(alone_total.p95),
                "1.00x",
            ],
            [
                f"{concurrency} at once",
                ms(firsts.p50),
                ms(firsts.p95),
                ms(totals.p50),
                ms(totals.p95),
                ratio(firsts.p50, alone_first.p50),
            ],
        ],
    )
    print(
        f"throughput: {concurrency / found['wall']:.2f} runs/s "
        f"({concurrency} runs in {found['wall']:.1f} s); streams dropped: {dropped}"
    )


if __name__ == "__main__":
    main()
