"""The research subagent: scope, the offline plan over ops events and announcements, TTL cache."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from dataseer.config import PROJECT_ROOT
from dataseer.data.duckdb_source import DuckDBSource
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.research import (
    ResearchCache,
    announcements_between,
    ops_events_digest,
    research_scope,
    run_research,
    scoped_games,
)

TODAY = date(2026, 11, 29)
QUESTION = "为什么幻境物语10月中旬华为渠道登录转化下降"


@pytest.fixture(scope="module")
def source(sample_path: Path) -> Any:
    src = DuckDBSource(sample_path)
    yield src
    src.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _run(source: DuckDBSource, cache: ResearchCache, **kw: Any) -> Any:
    args = {"topic": "幻境物语 登录转化", "question": QUESTION, **kw}
    return run_research(
        args.pop("topic"),
        args.pop("question"),
        datasource=source,
        pack=KnowledgePack.load(),
        today=TODAY,
        prompts_dir=PROJECT_ROOT / "prompts",
        cache=cache,
        **args,
    )


def test_scope_from_topic_and_question() -> None:
    scope = research_scope("幻境物语 登录转化", QUESTION, KnowledgePack.load(), TODAY)
    assert scope.game_ids == (1002,)
    assert scope.start <= date(2026, 10, 11) and scope.end >= date(2026, 10, 20)
    default = research_scope("流水", "最近怎么样", KnowledgePack.load(), TODAY)
    assert default.game_ids == () and default.end == date(2026, 12, 2)


def test_offline_research_finds_the_events_and_the_notice(source: DuckDBSource) -> None:
    result = _run(source, ResearchCache())
    assert not result.cached
    assert "3.5版本更新（SDK 3.2.0）" in result.text  # ops_events
    assert "华为渠道登录异常说明" in result.text  # announcements only
    assert "星海远征" not in result.text


def test_cache_hits_and_ttl(source: DuckDBSource) -> None:
    clock = Clock()
    cache = ResearchCache(ttl_seconds=60, clock=clock)
    first = _run(source, cache)
    again = _run(source, cache, question="  " + QUESTION.upper() + " ")
    assert again.cached and again.text == first.text
    assert again.elapsed < first.elapsed
    assert (cache.hits, cache.misses) == (1, 1)
    other_scene = _run(source, cache, scene="sdk_funnel")
    assert not other_scene.cached
    clock.now += 61
    assert not _run(source, cache).cached


def test_cache_validation_and_eviction() -> None:
    with pytest.raises(ValueError, match="positive"):
        ResearchCache(ttl_seconds=0)
    cache = ResearchCache(max_entries=2)
    for i in range(3):
        cache.put(None, "t", f"q{i}", str(i))
    assert cache.get(None, "t", "q0") is None and cache.get(None, "t", "q2") == "2"


def test_empty_research_is_refused(source: DuckDBSource) -> None:
    with pytest.raises(ValueError, match="topic or a question"):
        _run(source, ResearchCache(), topic=" ", question="")


def test_announcements_table_and_digest(source: DuckDBSource) -> None:
    rows = announcements_between(source, [1003], date(2026, 9, 1), date(2026, 9, 5))
    assert [r["category"] for r in rows] == ["maintenance", "notice"]
    keyword = announcements_between(source, [], date(2026, 1, 1), date(2026, 12, 31), "华为")
    assert keyword and all("华为" in r["title"] + r["content"] for r in keyword)
    digest = ops_events_digest(source, [1001], date(2026, 8, 1), date(2026, 8, 31))
    assert "夏日祭" in digest and "幻境物语" not in digest


@pytest.mark.parametrize(
    ("requested", "allowed", "expected"),
    [
        ((1002,), None, (1002,)),
        ((), None, ()),
        ((1002,), (1001,), None),
        ((), (1001,), (1001,)),
        ((1001, 1002), (1001,), (1001,)),
        ((), (), None),
    ],
)
def test_scoped_games(requested: tuple, allowed: tuple | None, expected: tuple | None) -> None:
    assert scoped_games(requested, allowed) == expected


def test_research_stays_inside_the_users_game_scope(source: DuckDBSource) -> None:
    cache = ResearchCache(ttl_seconds=60)
    everyone = _run(source, cache)
    scoped = _run(source, cache, allowed_games=(1001,))
    assert not scoped.cached  # another scope is another cache entry
    assert "3.5版本更新" in everyone.text
    assert "幻境物语" not in scoped.text and "3.5版本更新" not in scoped.text
    assert (
        announcements_between(
            source, [1002], date(2026, 10, 1), date(2026, 10, 31), allowed=(1001,)
        )
        == []
    )


def test_table_previews_stay_inside_the_game_scope() -> None:
    import pandas as pd

    from dataseer.tools.catalog import scoped_preview

    preview = pd.DataFrame({"game_id": [1001, 1002, 1003], "dau": [1, 2, 3]})
    assert scoped_preview(preview, (1001,))["game_id"].tolist() == [1001]
    assert scoped_preview(preview, None).equals(preview)
    assert scoped_preview(preview, False).empty
    assert len(scoped_preview(pd.DataFrame({"channel_id": [1, 2]}), (1001,))) == 2
