"""Fixtures: a real dataseer server (started by the server's own Python) and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

PLUGIN = Path(__file__).resolve().parents[1]
ROOT = PLUGIN.parents[1]
SERVER_PYTHON = Path(os.environ.get("DATASEER_PYTHON", ROOT / ".venv" / "bin" / "python"))
PG_URL = os.environ.get(
    "DATASEER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)

sys.path.insert(0, str(PLUGIN))


@pytest.fixture(scope="session")
def server() -> Iterator[dict[str, Any]]:
    """``{"url", "tokens": {"admin", "analyst_1001"}}`` of a running dataseer server."""
    if not SERVER_PYTHON.exists():
        pytest.fail(f"the dataseer server's Python is missing at {SERVER_PYTHON}")
    process = subprocess.Popen(
        [str(SERVER_PYTHON), str(Path(__file__).with_name("launch_server.py"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(timeout=30)
        pytest.fail(f"the dataseer server did not start (exit {process.returncode})")
    try:
        yield json.loads(line)
    finally:
        process.stdin.close()
        process.wait(timeout=60)


def _reachable() -> bool:
    try:
        with psycopg.connect(PG_URL, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the thread map, dropped afterwards."""
    if not _reachable():
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL unreachable at {PG_URL}")
        pytest.skip(f"PostgreSQL unreachable at {PG_URL}")
    name = f"dify_threads_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = PG_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
