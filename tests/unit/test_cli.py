"""The ``dataseer`` command, run in-process as a user would run it."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from dataseer.cli import main
from dataseer.services import reset_services


def _thread(out: str) -> str:
    match = re.search(r"\(thread (\w+) ·", out)
    assert match, out
    return match.group(1)


def test_ask_streams_sql_and_answer_then_follows_up(
    sample_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "星海远征上个月流水多少？"]) == 0
    out = capsys.readouterr().out
    assert "▸ 规划 / planning → lookup" in out
    assert "✓ [task 1]" in out and "```sql" in out and "|revenue|" in out
    thread = _thread(out)
    assert main(["ask", "按渠道拆开看看", "--thread", thread]) == 0
    follow = capsys.readouterr().out
    assert "channel_name" in follow and "huawei" in follow
    assert _thread(follow) == thread


def test_clarification_reply_on_the_same_thread(
    sample_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "王者荣耀上个月流水"]) == 0
    out = capsys.readouterr().out
    assert "? 没有找到游戏「王者荣耀」" in out
    thread = re.search(r"--thread (\w+)", out)
    assert thread
    assert main(["ask", "星海远征", "--thread", thread.group(1)]) == 0
    assert "星海远征 2026-10 流水" in capsys.readouterr().out


def test_postgres_checkpointer_keeps_threads(
    sample_path: Path,
    pg_scratch: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATASEER_DATABASE_URL", pg_scratch)
    assert main(["ask", "幻境物语上个月DAU"]) == 0
    thread = _thread(capsys.readouterr().out)
    import psycopg

    with psycopg.connect(pg_scratch) as conn:
        row = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s", (thread,)
        ).fetchone()
    assert row is not None and row[0] > 0


def test_sample_command_builds_and_loads(
    tmp_path: Path, pg_scratch: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "w.duckdb"
    assert main(["sample", "--scale", "0.02", "--out", str(out), "--to", pg_scratch]) == 0
    assert "built" in capsys.readouterr().out
    with duckdb.connect(str(out), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM dim_game").fetchone()
    assert row == (6,)
    import psycopg

    with psycopg.connect(pg_scratch) as conn:
        pg_row = conn.execute("SELECT count(*) FROM dim_game").fetchone()
    assert pg_row == (6,)


def test_doctor_and_bad_warehouse(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "offline analyst" in out and "tables:" in out
    reset_services()
    monkeypatch.setenv("DATASEER_WAREHOUSE", "/nonexistent/w.duckdb")
    assert main(["doctor"]) == 2
    assert "warehouse file not found" in capsys.readouterr().err
    reset_services()
