"""Snapshots of the rendered analysis prompt and the tool schemas the model sees.

Refresh with ``make snapshots`` (``UPDATE_SNAPSHOTS=1``) after an intended
change, and review the diff like code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from langchain_core.messages import HumanMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from dataseer.config import get_settings
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.understand import understand
from dataseer.lines.agents import middleware_stack
from dataseer.tools import ANALYSIS_TOOLS

SNAPSHOTS = Path(__file__).parents[1] / "fixtures" / "snapshots"


def _check(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1" or not path.exists():
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} changed; run `make snapshots` if intended"
    )


def _state() -> dict:
    spec = understand(
        "为什么星海远征8月流水暴涨？", KnowledgePack.load(), get_settings().resolved_today
    )
    records = [
        {
            "task_id": i,
            "turn": 1,
            "purpose": f"查询 {i}",
            "sql": f"SELECT {i} AS n",
            "ok": True,
            "error": None,
            "columns": ["n"],
            "rows": [[i]],
            "row_count": 1,
            "truncated": False,
            "elapsed": 0.0,
            "summary": f"n={i}",
            "one_line": f"n={i}",
        }
        for i in range(1, 13)
    ]
    return {
        "messages": [HumanMessage("为什么星海远征8月流水暴涨？")],
        "question": "为什么星海远征8月流水暴涨？",
        "spec": spec.to_dict(),
        "turn": 1,
        "todos": [
            {"id": "t1", "content": "确认变化", "status": "completed"},
            {"id": "t2", "content": "按维度拆解", "status": "in_progress"},
        ],
        "sql_history": records,
        "tables_info": {"dim_game": "## dim_game\n游戏维表"},
        "reflection": "皮肤贡献最大，需要核对运营事件",
    }


def test_rendered_analysis_prompt_snapshot() -> None:
    prompt = middleware_stack("analysis")[0].build_prompt(_state(), None)
    _check("analysis_prompt.txt", prompt + "\n")


def test_tool_schemas_snapshot() -> None:
    tools = list(ANALYSIS_TOOLS)
    for mw in middleware_stack("analysis"):
        tools.extend(getattr(mw, "tools", []))
    schemas = sorted(
        (convert_to_openai_tool(t) for t in tools), key=lambda s: s["function"]["name"]
    )
    _check(
        "analysis_tools.json",
        json.dumps(schemas, ensure_ascii=False, indent=2, sort_keys=True) + "\n",
    )
