"""kill -9 mid-run, restart, and the thread continues from PostgreSQL with nothing lost.

A server of its own (it gets killed): the project's ``langgraph.json`` with the
PostgreSQL checkpointer on a fresh database. A slow run is killed after its
query ran and before its answer; the server restarts on the same state folder
and port; the run is picked up again, resumes from the last checkpoint and
finishes. The question is in the thread once, the query ran once, and every
checkpoint written before the kill is still in the history.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph_sdk import get_sync_client

from support.auth_server import PROJECT_DIR, SLOW_GRAPH, AuthServer, clean_environ, server_env
from support.langgraph_server import free_port, start_langgraph_dev

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.postgres]

QUESTION = "星海远征上个月流水多少？ [sleep=3]"
USER = "analyst_all"


@pytest.fixture(scope="module")
def durable_db(pg_admin_url: str) -> Iterator[str]:
    from urllib.parse import urlsplit, urlunsplit

    name = f"dataseer_durable_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(pg_admin_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def server(
    env: dict[str, str], workdir: Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> Iterator[str]:
    with contextlib.ExitStack() as stack:
        with clean_environ():
            url = stack.enter_context(
                start_langgraph_dev(
                    PROJECT_DIR,
                    env=env,
                    timeout=240,
                    overrides={"graphs": {"slow": SLOW_GRAPH}},
                    workdir=workdir,
                    port=port,
                    on_start=processes.append,
                    allow_blocking=os.environ.get("DS_TEST_ALLOW_BLOCKING") == "1",
                )
            )
        yield url


def test_kill_9_mid_run_then_restart_resumes_from_postgres(
    server_warehouse: Path, durable_db: str
) -> None:
    env = server_env(server_warehouse, durable_db)
    env["DATASEER_RUN_TIMEOUT"] = "600"
    helper = AuthServer("", server_warehouse, durable_db, env)
    headers = helper.headers(USER)
    workdir = Path(tempfile.mkdtemp(prefix="dataseer-durable-"))
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []

    with server(env, workdir, port, processes) as url:
        client = get_sync_client(url=url, headers=headers, timeout=120)
        tid = client.threads.create()["thread_id"]
        seen: list[Any] = []
        run_id = ""
        with contextlib.suppress(Exception):  # the stream breaks when the server dies
            for part in client.runs.stream(
                tid,
                "slow",
                input={"messages": [{"role": "user", "content": QUESTION}]},
                stream_mode=["custom"],
                stream_subgraphs=True,
            ):
                if part.event == "metadata":
                    run_id = part.data["run_id"]
                data = part.data
                if isinstance(data, dict) and data.get("type") == "sql":
                    # The query ran; the analyst now thinks for 3 s before answering.
                    seen = list(client.threads.get_history(tid, limit=200))
                    assert client.runs.get(tid, run_id)["status"] == "running"
                    time.sleep(1.5)  # past the 1 s flush of the dev runtime's thread records
                    os.killpg(processes[0].pid, signal.SIGKILL)
                    processes[0].wait(timeout=30)
                    break
        assert seen, "the query never ran"
        assert processes[0].returncode == -signal.SIGKILL

    killed_at = {h["checkpoint"]["checkpoint_id"] for h in seen}
    with server(env, workdir, port, processes) as url:
        client = get_sync_client(url=url, headers=headers, timeout=300)
        client.runs.join(tid, run_id)
        final = client.runs.get(tid, run_id)
        state = client.threads.get_state(tid)
        history = list(client.threads.get_history(tid, limit=500))

    assert final["status"] == "success"
    values = state["values"]
    humans = [m for m in values["messages"] if m["type"] == "human"]
    assert [m["content"] for m in humans] == [QUESTION]
    assert values["messages"][-1]["type"] == "ai"
    assert "```sql" in values["messages"][-1]["content"]
    assert len(values["sql_history"]) == 1
    assert killed_at <= {h["checkpoint"]["checkpoint_id"] for h in history}
    with psycopg.connect(durable_db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s", (str(tid),)
        ).fetchone()
    assert row is not None and row[0] >= len(history)
