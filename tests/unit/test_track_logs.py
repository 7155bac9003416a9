"""Structured node and tool logs carry thread and checkpoint ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from dataseer.config import Settings
from dataseer.graph import build_graph


def test_nodes_and_tools_log_one_json_line_each(
    sample_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    graph = build_graph(settings=Settings(), checkpointer=InMemorySaver())
    with caplog.at_level("INFO", logger="dataseer.track"):
        graph.invoke(
            {"messages": [HumanMessage("星海远征上个月流水多少？")]},
            {"configurable": {"thread_id": "tracked"}},
        )
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "dataseer.track"]
    names = [(line["event"], line["name"]) for line in lines]
    assert ("node", "route") in names and ("node", "compose") in names
    assert ("tool", "search_tables") in names and ("tool", "run_sql") in names
    assert all(line["thread_id"] == "tracked" and line["ok"] for line in lines)
    assert all(line.get("checkpoint_ns") is not None or line["event"] == "tool" for line in lines)
