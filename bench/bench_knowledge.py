"""Knowledge at warehouse scale: table recall, search latency, linking, research cache.

Table recall@5 on the 500-table catalog, value-linking accuracy on the
mentions fixture, research cache hits.

Baselines measured in the same run: recall and latency with tables given as
``(name, comment)`` only (no columns), and a research call that misses the
cache. Run ``python bench/bench_knowledge.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import duckdb
import yaml
from _common import ROOT, percentile, print_table, ratio

from dataseer.data.duckdb_source import DuckDBSource
from dataseer.data.sample import build_sample
from dataseer.data.sample.schema import TABLES
from dataseer.knowledge.catalog import add_catalog
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.research import ResearchCache, run_research
from dataseer.knowledge.retrieval import KnowledgeIndex, catalog_entries
from dataseer.knowledge.values import ValueIndex


def _catalog_db(folder: Path, size: int) -> tuple[Path, list]:  # type: ignore[type-arg]
    path = folder / "catalog.duckdb"
    with duckdb.connect(str(path)) as con:
        for t in TABLES:
            con.execute(t.ddl())
            con.execute(f"COMMENT ON TABLE {t.name} IS '{t.comment}'")
            for c in t.columns:
                con.execute(f"COMMENT ON COLUMN {t.name}.{c.name} IS '{c.comment}'")
    return path, add_catalog(path, size)


def _recall(index: KnowledgeIndex, tables: list, questions: list) -> tuple[float, list[float]]:  # type: ignore[type-arg]
    found, latencies = 0.0, []
    for q in questions:
        started = time.perf_counter()
        top = [n for n, _ in index.search_tables(q.question, tables, k=5)]
        latencies.append(time.perf_counter() - started)
        found += sum(t in top for t in q.tables) / len(q.tables)
    return found / len(questions), latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    pack = KnowledgePack.load()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, questions = _catalog_db(folder, 500)
        source = DuckDBSource(path)
        started = time.perf_counter()
        entries = catalog_entries(source)
        read_catalog = time.perf_counter() - started
        index = KnowledgeIndex(pack)
        started = time.perf_counter()
        index.search_tables("warm up", entries, k=5)
        build = time.perf_counter() - started
        recall, lat = _recall(index, entries, questions)
        plain = [(e.name, e.comment) for e in entries]
        index.search_tables("warm up", plain, k=5)
        base_recall, base_lat = _recall(index, plain, questions)
        source.close()
        print_table(
            f"table recall@5 — {len(entries)} tables, {len(questions)} questions",
            ["variant", "recall@5", "p50 search", "p95 search"],
            [
                ["names+comments+columns (shipped)", f"{recall:.1%}",
                 f"{percentile(lat, 50) * 1000:.2f} ms", f"{percentile(lat, 95) * 1000:.2f} ms"],
                ["names+comments only (baseline)", f"{base_recall:.1%}",
                 f"{percentile(base_lat, 50) * 1000:.2f} ms",
                 f"{percentile(base_lat, 95) * 1000:.2f} ms"],
            ],
        )  # fmt: skip
        print(f"catalog read {read_catalog * 1000:.0f} ms, index build {build * 1000:.0f} ms")

        sample = build_sample(folder / "s.duckdb", scale=0.02)
        source = DuckDBSource(sample)
        started = time.perf_counter()
        values = ValueIndex.build(source, pack)
        value_build = time.perf_counter() - started
        cases = yaml.safe_load((ROOT / "tests/fixtures/mentions.yaml").read_text("utf-8"))["links"]
        right = 0
        for case in cases:
            got = [[lk.column, lk.value] for lk in values.link(case["text"])]
            want = [] if case.get("none") else [[str(x) for x in e[:2]] for e in case["expect"]]
            right += got == want
        print_table(
            "value linking",
            ["cases", "accuracy", "index build", "columns indexed"],
            [[len(cases), f"{right / len(cases):.1%}", f"{value_build * 1000:.0f} ms",
              len(values.columns())]],
        )  # fmt: skip

        cache = ResearchCache()
        runs = 3 if args.quick else 20
        misses, hits = [], []
        for i in range(runs):
            for bucket in (misses, hits):
                started = time.perf_counter()
                result = run_research(
                    "幻境物语 登录转化",
                    f"为什么幻境物语2026年10月登录转化下降 #{i}",
                    datasource=source,
                    pack=pack,
                    today=date(2026, 11, 29),
                    prompts_dir=ROOT / "prompts",
                    cache=cache,
                )
                bucket.append(time.perf_counter() - started)
                assert result.cached == (bucket is hits)
        source.close()
        miss, hit = percentile(misses, 50), percentile(hits, 50)
        print_table(
            "research subagent (offline model)",
            ["call", "p50", "vs miss"],
            [["cache miss (subagent run)", f"{miss * 1000:.2f} ms", "1.00x"],
             ["cache hit", f"{hit * 1e6:.1f} µs", ratio(hit, miss)]],
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
