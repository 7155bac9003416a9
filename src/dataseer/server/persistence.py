"""The server's checkpointer and store, named by ``langgraph.json``.

``langgraph.json`` points ``checkpointer.path`` and ``store.path`` here, and
the LangGraph server (``langgraph dev`` and ``dataseer serve`` alike) enters
these async context managers once at start-up.

- With ``DATASEER_DATABASE_URL`` (PostgreSQL) both are
  ``langgraph-checkpoint-postgres`` on one connection pool: every checkpoint
  is committed before the next step runs, so a killed server restarts with
  every thread where it stopped.
- Without it they are SQLite files under ``DATASEER_HOME/server`` — durable
  too, for one machine, with no database to run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from dataseer.config import Settings, env_settings

__all__ = ["checkpointer", "store"]

_POOL_SIZE = 10


def _is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("postgresql://", "postgres://"))


@asynccontextmanager
async def _pool(url: str) -> AsyncIterator[Any]:
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(
        url, min_size=1, max_size=_POOL_SIZE, kwargs=kwargs, open=False
    ) as pool:
        await pool.open(wait=True, timeout=30)
        yield pool


def _sqlite_path(settings: Settings, name: str) -> str:
    folder = settings.home / "server"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / name)


@asynccontextmanager
async def checkpointer() -> AsyncIterator[Any]:
    """The durable checkpointer: PostgreSQL when configured, else SQLite."""
    settings = env_settings()
    if _is_postgres(settings.database_url):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with _pool(str(settings.database_url)) as pool:
            pg_saver = AsyncPostgresSaver(pool)
            await pg_saver.setup()
            yield pg_saver
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(
        _sqlite_path(settings, "checkpoints.sqlite")
    ) as saver:
        await saver.setup()
        yield saver


@asynccontextmanager
async def store() -> AsyncIterator[Any]:
    """The durable long-term store: PostgreSQL when configured, else SQLite."""
    settings = env_settings()
    if _is_postgres(settings.database_url):
        from langgraph.store.postgres import AsyncPostgresStore

        async with _pool(str(settings.database_url)) as pool:
            pg_store = AsyncPostgresStore(pool)
            await pg_store.setup()
            yield pg_store
        return
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async with AsyncSqliteStore.from_conn_string(_sqlite_path(settings, "store.sqlite")) as lite:
        await lite.setup()
        yield lite
