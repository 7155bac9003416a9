from datetime import date
from decimal import Decimal

import pytest

from dataseer.config import get_settings
from dataseer.errors import ConfigError
from dataseer.prompt import (
    format_cell,
    join_partitions,
    load_prompt,
    markdown_table,
    partition,
    render,
)
from dataseer.state import merge_sql_history, merge_todos


def _rec(task_id: int, sql: str) -> dict:
    return {
        "task_id": task_id,
        "turn": 1,
        "purpose": "",
        "sql": sql,
        "ok": True,
        "columns": [],
        "rows": [],
        "row_count": 0,
        "truncated": False,
        "elapsed": 0.0,
    }


def test_sql_history_appends_and_replaces_by_task_id() -> None:
    merged = merge_sql_history([_rec(1, "a"), _rec(2, "b")], [_rec(2, "b2"), _rec(3, "c")])
    assert [(r["task_id"], r["sql"]) for r in merged] == [(1, "a"), (2, "b2"), (3, "c")]
    assert merge_sql_history(None, None) == []


def test_todos_merge_by_id() -> None:
    left = [{"id": "t1", "content": "confirm", "status": "pending"}]
    right = [
        {"id": "t1", "content": "confirm", "status": "completed"},
        {"id": "t2", "content": "decompose", "status": "pending"},
    ]
    merged = merge_todos(left, right)
    assert [(t["id"], t["status"]) for t in merged] == [("t1", "completed"), ("t2", "pending")]


def test_markdown_table_is_compact_and_cut() -> None:
    table = markdown_table(["a", "b"], [[1, 2.5], [None, "x|y"], [3, 4]], max_rows=2)
    assert table.splitlines() == ["|a|b|", "|-|-|", "|1|2.5|", "|NULL|x\\|y|", "…(+1 rows)"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1234567.89, "1234567.89"),
        (3.0, "3"),
        (0.123456, "0.1235"),
        (Decimal("12.50"), "12.5"),
        (date(2026, 8, 1), "2026-08-01"),
        (float("nan"), "NULL"),
        (0.00001234, "1.234e-05"),
    ],
)
def test_format_cell(value: object, expected: str) -> None:
    assert format_cell(value) == expected


def test_partitions_and_render() -> None:
    assert partition("x", "  ") == ""
    assert (
        join_partitions([partition("a", "1"), "", partition("b", "2")])
        == "<a>\n1\n</a>\n\n<b>\n2\n</b>"
    )
    assert render("{known} {unknown}", {"known": "k"}) == "k {unknown}"


def test_every_line_has_its_prompt_file() -> None:
    prompts = get_settings().resolved_prompts_dir
    for name in ("analysis/system", "lookup/system", "quick/system", "router/system"):
        assert "dataseer" in load_prompt(name, prompts)
    with pytest.raises(ConfigError, match="prompt file not found"):
        load_prompt("nope/missing", prompts)


def test_run_config_overrides_only_run_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATASEER_WAREHOUSE", "/data/w.duckdb")
    settings = get_settings({"configurable": {"today": "2026-08-01", "warehouse": "/etc/passwd"}})
    assert settings.today == date(2026, 8, 1)
    assert settings.warehouse == "/data/w.duckdb"
