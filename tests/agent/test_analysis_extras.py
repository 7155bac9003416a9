"""Analysis-line extras: summarizer tier, notebook across runs, phases, stats, HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from dataseer.cli import loop_stats
from dataseer.config import Settings
from dataseer.graph import build_graph
from dataseer.lines.compose import compose_answer
from dataseer.lines.report import END, START, render_html_report, repair_report, wants_report
from dataseer.middleware.sql_history import summarize_with_model
from support.openai_server import OpenAICompatServer, Reply
from support.records import record
from support.scripted import ScriptedChatModel, text, tool_call


def _system(messages: list[BaseMessage]) -> str:
    return next(str(m.content) for m in messages if isinstance(m, SystemMessage))


def test_summarizer_tier_writes_the_summaries(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = record(3, purpose="8月流水", columns=["revenue"], rows=[[72519.42]])
    with OpenAICompatServer(script=[Reply.say("8月流水为 72519.42。\n8月流水")]) as server:
        monkeypatch.setenv("DATASEER_MODEL_SUMMARIZER", "summarizer-model")
        monkeypatch.setenv("DATASEER_BASE_URL", server.base_url)
        monkeypatch.setenv("DATASEER_API_KEY", "test")
        summary, one_line = summarize_with_model(rec, Settings())
        body = server.requests[-1]
    assert (summary, one_line) == ("8月流水为 72519.42。", "8月流水")
    sent = str(body["messages"])
    assert "72519.42" in sent and "8月流水" in sent
    # offline (no summarizer configured) the summary is deterministic
    monkeypatch.delenv("DATASEER_MODEL_SUMMARIZER")
    assert summarize_with_model(rec, Settings()) == ("revenue=72519.42", "revenue=72519.42")


def test_summarizer_failure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = record(1, columns=["n"], rows=[[5]])
    monkeypatch.setenv("DATASEER_MODEL_SUMMARIZER", "summarizer-model")
    monkeypatch.setenv("DATASEER_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    assert summarize_with_model(rec, Settings()) == ("n=5", "n=5")


def test_notebook_notes_outlive_the_run(sample_path: Path) -> None:
    model = ScriptedChatModel(
        script=[
            tool_call("notebook", action="add", content="皮肤是8月流水增长的主因"),
            text("已记录。"),
            text("见笔记。"),
        ]
    )
    store = InMemoryStore()
    graph = build_graph(model=model, settings=Settings(), checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": "notes", "user_id": "admin"}}
    graph.invoke({"messages": [HumanMessage("为什么星海远征8月流水暴涨？")]}, config)
    graph.invoke({"messages": [HumanMessage("为什么星海远征8月流水暴涨？再说一遍")]}, config)
    last = _system(model.requests[-1])
    assert "<notebook>" in last and "皮肤是8月流水增长的主因" in last
    notes = store.search(("notebook", "admin", "notes"))
    assert [n.value["content"] for n in notes] == ["皮肤是8月流水增长的主因"]


def test_stream_marks_phases_and_usage(sample_path: Path) -> None:
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "phases"}}
    events: list[dict[str, Any]] = []
    for _ns, mode, data in graph.stream(
        {"messages": [HumanMessage("为什么星海远征8月流水暴涨？")]},
        config,
        stream_mode=["custom"],
        subgraphs=True,
    ):
        if mode == "custom":
            events.append(data)
    phases = [e["phase"] for e in events if e.get("type") == "phase"]
    assert phases[0] == "planning" and "execution" in phases
    assert phases[-2:] == ["reporting", "done"]
    assert phases.index("reporting") > phases.index("execution")
    usage = next(e for e in events if e.get("type") == "usage")["usage"]
    assert usage["nodes"]["analysis"]["calls"] >= 5 and usage["tools"]["run_sql"]["calls"] == 5
    state = graph.get_state(config).values
    stats = loop_stats([e for e in state["loops"] if e.get("turn") == 1])
    header, _rule, *rows = stats.splitlines()
    assert header.startswith("|loop|prompt tokens|tools|model ms|SQL ms|")
    assert len(rows) == usage["nodes"]["analysis"]["calls"]
    assert any("run_sql" in r for r in rows) and rows[-1].split("|")[3] == "(answer)"


def test_report_is_rendered_self_contained_and_repaired() -> None:
    records = [record(1, purpose="8月流水", columns=["revenue"], rows=[[72519.42]])]
    html = render_html_report("为什么8月流水暴涨？", "- 皮肤驱动增长\n- 夏日祭同期", records)
    assert html.startswith(START) and html.endswith(END)
    assert "<script" not in html and "<link" not in html and "style=" in html
    assert "72519.42" in html and "皮肤驱动增长" in html
    cut = html[: html.index("<table") + 40]
    fixed, repaired = repair_report("分析如下\n" + cut)
    assert repaired and fixed.endswith(END) and fixed.count("</div>") == 1
    assert repair_report(html) == (html, False)
    assert wants_report("帮我出一份星海远征8月的分析报告") and not wants_report("星海远征8月流水")


def test_findings_lead_analyses_and_follow_lookups() -> None:
    records = [record(1, purpose="8月流水")]
    analysis = compose_answer(records, "结论：皮肤", True, findings_first=True)
    assert analysis.index("结论：皮肤") < analysis.index("```sql")
    lookup = compose_answer(records, "结论：皮肤", True, findings_first=False)
    assert lookup.index("```sql") < lookup.index("结论：皮肤")
