"""``dataseer threads …`` and ``dataseer store …`` against the real authenticated server.

The commands run in-process (``dataseer.cli.main``) with the server URL and a
token in the environment, as an operator would run them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from dataseer.cli import main
from support.auth_server import AuthServer, shared_auth_server

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.postgres]

QUESTION = "星海远征上个月流水多少？"
USER = "analyst_all"


@pytest.fixture(scope="session")
def auth_server(server_warehouse: Path, pg_state_database: str) -> Iterator[AuthServer]:
    with shared_auth_server(server_warehouse, pg_state_database) as server:
        yield server


@pytest.fixture
def as_user(auth_server: AuthServer, monkeypatch: pytest.MonkeyPatch) -> AuthServer:
    monkeypatch.setenv("DATASEER_SERVER_URL", auth_server.url)
    monkeypatch.setenv("DATASEER_TOKEN", auth_server.token(USER))
    return auth_server


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    return json.loads(cli(capsys, *argv))


@pytest.fixture
def answered_thread(as_user: AuthServer) -> str:
    client = get_sync_client(url=as_user.url, headers=as_user.headers(USER), timeout=120)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "dataseer", input={"messages": [{"role": "user", "content": QUESTION}]})
    return str(tid)


def sql_count(values: dict[str, Any]) -> int:
    return len(values.get("sql_history") or [])


def test_list_show_history_and_delete(
    capsys: pytest.CaptureFixture[str], answered_thread: str
) -> None:
    listed = cli(capsys, "threads", "list", "--limit", "50")
    assert answered_thread in listed
    shown = cli_json(capsys, "threads", "show", answered_thread)
    assert shown["thread"]["metadata"]["owner"] == USER
    assert [r["status"] for r in shown["runs"]] == ["success"]
    assert shown["values"]["messages"][-1]["type"] == "ai"
    history = cli(capsys, "threads", "history", answered_thread)
    assert "route" in history and "compose" in history
    assert cli_json(capsys, "threads", "delete", answered_thread) == {"deleted": answered_thread}
    assert answered_thread not in cli(capsys, "threads", "list", "--limit", "50")


def test_fork_with_a_patched_state_changes_the_outcome_and_keeps_the_old_branch(
    capsys: pytest.CaptureFixture[str], as_user: AuthServer, answered_thread: str
) -> None:
    client = get_sync_client(url=as_user.url, headers=as_user.headers(USER), timeout=120)
    before = client.threads.get_state(answered_thread)["values"]
    history = client.threads.get_history(answered_thread, limit=100)
    (at_route,) = [h for h in history if list(h["next"]) == ["route"]]
    checkpoint = at_route["checkpoint"]["checkpoint_id"]
    assert before["route"] == "lookup"
    assert sql_count(before) == 1

    forked = cli_json(
        capsys, "threads", "fork", answered_thread, checkpoint, "--values", '{"deep": true}'
    )
    after = forked["values"]
    assert forked["checkpoint_id"] != checkpoint
    assert after["route"] == "analysis"
    assert sql_count(after) >= 3
    assert after["messages"][-1]["content"] != before["messages"][-1]["content"]

    ids = [
        h["checkpoint"]["checkpoint_id"]
        for h in client.threads.get_history(answered_thread, limit=200)
    ]
    assert checkpoint in ids  # the original branch is still there to go back to

    replayed = cli_json(capsys, "threads", "replay", answered_thread, checkpoint)
    assert replayed["route"] == "lookup"
    assert replayed["messages"][-1]["content"] == before["messages"][-1]["content"]


def test_patch_repairs_a_stuck_thread(
    capsys: pytest.CaptureFixture[str], as_user: AuthServer
) -> None:
    client = get_sync_client(url=as_user.url, headers=as_user.headers(USER), timeout=120)
    tid = client.threads.create()["thread_id"]
    client.runs.create(
        tid, "slow", input={"messages": [{"role": "user", "content": f"{QUESTION} [sleep=30]"}]}
    )
    result = cli_json(capsys, "threads", "patch", tid, "--cancel", "--values", '{"deep": false}')
    assert len(result["cancelled"]) == 1
    assert result["checkpoint_id"]
    assert result["status"] != "busy"
    done = client.runs.wait(
        tid, "dataseer", input={"messages": [{"role": "user", "content": QUESTION}]}
    )
    assert isinstance(done, dict) and done["messages"][-1]["type"] == "ai"


def test_store_ls_get_rm(capsys: pytest.CaptureFixture[str], as_user: AuthServer) -> None:
    client = get_sync_client(url=as_user.url, headers=as_user.headers(USER), timeout=120)
    client.store.put_item(["prefs"], "chart", {"kind": "bar"})
    listed = cli_json(capsys, "store", "ls", f"{USER}/prefs")
    assert [i["key"] for i in listed["items"]] == ["chart"]
    assert f"{USER}/prefs" in cli_json(capsys, "store", "ls")["namespaces"]
    item = cli_json(capsys, "store", "get", "prefs", "chart")
    assert item["value"] == {"kind": "bar"}
    assert item["namespace"] == [USER, "prefs"]
    cli_json(capsys, "store", "rm", "prefs", "chart")
    assert client.store.get_item(["prefs"], "chart") is None
    assert main(["store", "get", "prefs", "chart"]) == 2
