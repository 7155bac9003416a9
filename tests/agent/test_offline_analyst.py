"""The offline analyst end to end: every number it states equals a reference query.

Each question runs through the whole router graph on the sample warehouse,
once on DuckDB and once on PostgreSQL (the same warehouse loaded there): the
same questions must give the same answers on both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from dataseer.config import Settings
from dataseer.graph import build_graph
from dataseer.models.narrate import fmt


@pytest.fixture(params=["duckdb", "postgres"])
def backend(
    request: pytest.FixtureRequest, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    if request.param == "postgres":
        url = request.getfixturevalue("sample_pg_url")
        monkeypatch.setenv("DATASEER_WAREHOUSE", url)
    else:
        monkeypatch.setenv("DATASEER_WAREHOUSE", str(sample_path))
    return str(request.param)


@pytest.fixture(scope="module")
def ref(sample_path: Path) -> Any:
    con = duckdb.connect(str(sample_path), read_only=True)

    def one(sql: str) -> Any:
        row = con.execute(sql).fetchone()
        assert row is not None
        return row[0]

    yield one
    con.close()


def ask(question: str, *, deep: bool = False) -> dict[str, Any]:
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [HumanMessage(question)], "deep": deep}, config)
    return dict(graph.get_state(config).values)


def revenue(ref: Any, game: int, start: str, end: str, extra: str = "") -> float:
    return float(
        ref(
            f"SELECT ROUND(SUM(revenue), 2) FROM dws_game_pay_di WHERE game_id = {game} "
            f"AND ds BETWEEN DATE '{start}' AND DATE '{end}' {extra}"
        )
    )


def test_lookup(backend: str, ref: Any) -> None:
    state = ask("星海远征上个月流水多少？")
    assert state["route"] == "lookup"
    expected = revenue(ref, 1001, "2026-10-01", "2026-10-31")
    assert f"流水：{fmt(expected)}" in state["summary"]
    assert len(state["sql_history"]) == 1


def test_trend_finds_the_maintenance_day(backend: str, ref: Any) -> None:
    state = ask("机甲风暴9月DAU趋势")
    assert state["route"] == "analysis"
    low = ref(
        "SELECT SUM(dau) FROM dws_game_active_di WHERE game_id = 1003 AND ds = DATE '2026-09-03'"
    )
    summary = state["summary"]
    assert f"最低 2026-09-03（{fmt(int(low))}）" in summary
    assert "停服维护" in summary


def test_period_comparison(backend: str, ref: Any) -> None:
    state = ask("星海远征7月和8月流水对比")
    aug = revenue(ref, 1001, "2026-08-01", "2026-08-31")
    jul = revenue(ref, 1001, "2026-07-01", "2026-07-31")
    summary = state["summary"]
    assert fmt(aug) in summary and fmt(jul) in summary
    assert fmt(round(aug - jul, 2), signed=True) in summary
    assert fmt(round((aug - jul) / jul, 4), ratio=True, signed=True) in summary


def test_attribution_names_skins_and_the_summer_event(backend: str, ref: Any) -> None:
    state = ask("为什么星海远征8月流水暴涨？")
    summary = state["summary"]
    headline = summary.splitlines()[0]
    assert headline.startswith("结论：") and "皮肤" in headline and "夏日祭" in headline
    skin = "AND item_category = '皮肤'"
    delta = revenue(ref, 1001, "2026-08-01", "2026-08-31", skin) - revenue(
        ref, 1001, "2026-07-01", "2026-07-31", skin
    )
    assert fmt(round(delta, 2), signed=True) in summary
    purposes = [r["purpose"] for r in state["sql_history"]]
    assert any("渠道" in p for p in purposes) and any("大区" in p for p in purposes)
    assert all(r["ok"] for r in state["sql_history"])


def test_funnel_pins_huawei_320(backend: str, ref: Any) -> None:
    state = ask("幻境物语10月10日到10月16日SDK漏斗登录转化为什么下降？")
    conversion = ref(
        """
        SELECT ROUND(SUM(users) FILTER (WHERE step = 'login') * 1.0
                   / SUM(users) FILTER (WHERE step = 'sdk_init'), 4)
        FROM dws_sdk_funnel_di f JOIN dim_channel c USING (channel_id)
        WHERE game_id = 1002 AND c.channel_name = 'huawei' AND sdk_version = '3.2.0'
          AND ds BETWEEN DATE '2026-10-10' AND DATE '2026-10-16'
        """
    )
    assert f"huawei / 3.2.0 的 login 步转化率仅 {fmt(conversion, ratio=True)}" in state["summary"]


def test_english_question_gets_an_english_answer(backend: str, ref: Any) -> None:
    state = ask("What was Star Expedition revenue last month by channel?")
    last = state["sql_history"][-1]
    assert "channel_name" in last["columns"]
    top = max(last["rows"], key=lambda r: r[last["columns"].index("revenue")])
    assert state["summary"].startswith("Star Expedition 2026-10 Revenue:")
    assert f"{top[last['columns'].index('channel_name')]} {fmt(top[-1])}" in state["summary"]


def test_unresolvable_question_says_so(backend: str) -> None:
    state = ask("帮我看看最近怎么样")
    assert state["route"] == "quick"
    assert "无法解析" in state["messages"][-1].content
    assert "DATASEER_MODEL" in state["messages"][-1].content
    assert not state.get("sql_history")
