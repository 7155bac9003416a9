"""Dify conversation_id ↔ LangGraph thread_id, kept in PostgreSQL.

One row per conversation; ``conversation_id`` is the primary key and
``thread_id`` unique. The first message of a conversation proposes a new
thread id; ``INSERT … ON CONFLICT (conversation_id) DO UPDATE … RETURNING``
returns whichever row won, in one statement, so two first messages racing
(Dify retries, double clicks, parallel branches) end on the same thread.
The no-op ``DO UPDATE`` (rather than ``DO NOTHING``) is what makes
``RETURNING`` give the existing row to the loser.
"""

from __future__ import annotations

import contextlib
import uuid

import psycopg

TABLE = "dataseer_dify_threads"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    conversation_id text PRIMARY KEY,
    thread_id uuid NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
)
"""

UPSERT = f"""
INSERT INTO {TABLE} (conversation_id, thread_id) VALUES (%s, %s)
ON CONFLICT (conversation_id) DO UPDATE SET conversation_id = EXCLUDED.conversation_id
RETURNING thread_id
"""


class ThreadMap:
    """Maps conversations to threads in one PostgreSQL database."""

    def __init__(self, database_url: str) -> None:
        if not database_url.startswith(("postgresql://", "postgres://")):
            msg = "threads_database_url must be a postgresql:// URL"
            raise ValueError(msg)
        self.database_url = database_url
        self._ready = False

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(self.database_url, autocommit=True, connect_timeout=10)

    def setup(self) -> None:
        """Create the table if needed (idempotent, safe to race)."""
        with self._connect() as conn, contextlib.suppress(psycopg.errors.UniqueViolation):
            conn.execute(DDL)  # a concurrent CREATE may still collide on the type name
        self._ready = True

    def thread_for(self, conversation_id: str) -> str:
        """The thread of ``conversation_id``, created on first use."""
        if not conversation_id:
            msg = "conversation_id must not be empty"
            raise ValueError(msg)
        if not self._ready:
            self.setup()
        with self._connect() as conn:
            row = conn.execute(UPSERT, (conversation_id, uuid.uuid4())).fetchone()
        assert row is not None
        return str(row[0])
