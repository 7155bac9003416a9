"""Shared fixtures: the small sample warehouse, PostgreSQL, a fixed 'today'.

Tests that need PostgreSQL read ``DATASEER_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``); they skip when it is
unreachable, except under ``CI=true`` where they must run.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

TEST_SCALE = 0.05
TODAY = date(2026, 11, 29)
PG_URL = os.environ.get(
    "DATASEER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _isolate(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("DATASEER_HOME", str(home))
    monkeypatch.setenv("DATASEER_TODAY", TODAY.isoformat())
    monkeypatch.setenv("DATASEER_SAMPLE_SCALE", str(TEST_SCALE))
    for key in ("DATASEER_MODEL", "DATASEER_BASE_URL", "DATASEER_API_KEY", "DATASEER_DATABASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("DATASEER_DEV_USER", "admin")  # an identity: the SQL guard lets tests read
    for key in ("DATASEER_USER", "DATASEER_PERMISSIONS", "DATASEER_AUDIT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("DATASEER_GUARD_MODE", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _isolated_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same isolation for session- and module-scoped fixtures, set up before them."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _isolate(monkeypatch, tmp_path_factory.getbasetemp() / "dataseer-home")
        yield


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Keep every test away from the user's cache and real model keys (restored after each test)."""
    _isolate(monkeypatch, tmp_path_factory.getbasetemp() / "dataseer-home")


@pytest.fixture(scope="session")
def sample_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small deterministic sample warehouse, built once per session."""
    from dataseer.data.sample import build_sample

    path = tmp_path_factory.getbasetemp() / "dataseer-home" / "sample-s0_05.duckdb"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        build_sample(path, scale=TEST_SCALE)
    return path


def _pg_reachable(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """The PostgreSQL server for tests; skip (or fail under CI) when unreachable."""
    if not _pg_reachable(PG_URL):
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required under CI=true but {PG_URL} is unreachable")
        pytest.skip(f"PostgreSQL unreachable at {PG_URL}")
    return PG_URL


def _with_database(url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


@contextlib.contextmanager
def _throwaway_database(admin_url: str) -> Iterator[str]:
    import psycopg

    name = f"dataseer_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_database(pg_admin_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database for this session (the sample is loaded here), dropped after.

    Tests that write other tables (checkpoints, audit, another sample) must use
    ``pg_scratch`` instead, so that this database keeps exactly the sample.
    """
    with _throwaway_database(pg_admin_url) as url:
        yield url


@pytest.fixture(scope="session")
def pg_state_database(pg_admin_url: str) -> Iterator[str]:
    """A session-wide PostgreSQL database for servers' checkpoints, store and audit."""
    with _throwaway_database(pg_admin_url) as url:
        yield url


@pytest.fixture
def pg_scratch(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped after."""
    with _throwaway_database(pg_admin_url) as url:
        yield url


@pytest.fixture(scope="session")
def sample_pg_url(sample_path: Path, pg_database: str) -> str:
    """The same small sample warehouse loaded into PostgreSQL."""
    from dataseer.data.sample import load_to_postgres

    load_to_postgres(sample_path, pg_database)
    return pg_database
