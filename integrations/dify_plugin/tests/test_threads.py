"""Conversation → thread mapping in PostgreSQL, under racing first messages."""

from __future__ import annotations

import threading
import uuid

import psycopg

from dataseer_dify.threads import TABLE, ThreadMap


def test_racing_first_messages_share_one_thread(pg_url: str) -> None:
    maps = [ThreadMap(pg_url) for _ in range(12)]  # separate instances, as separate workers
    conversation = f"conv-{uuid.uuid4()}"
    barrier = threading.Barrier(len(maps))
    found: list[str] = []

    def first_message(mapping: ThreadMap) -> None:
        mapping.setup()
        barrier.wait()
        found.append(mapping.thread_for(conversation))

    workers = [threading.Thread(target=first_message, args=(m,)) for m in maps]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert len(found) == len(maps)
    assert len(set(found)) == 1
    uuid.UUID(found[0])
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            f"SELECT thread_id FROM {TABLE} WHERE conversation_id = %s", (conversation,)
        ).fetchall()
    assert [str(r[0]) for r in rows] == found[:1]


def test_conversations_get_distinct_stable_threads(pg_url: str) -> None:
    mapping = ThreadMap(pg_url)
    a, b = f"a-{uuid.uuid4()}", f"b-{uuid.uuid4()}"
    first = mapping.thread_for(a)
    assert mapping.thread_for(b) != first
    assert ThreadMap(pg_url).thread_for(a) == first


def test_bad_inputs_are_refused_early(pg_url: str) -> None:
    import pytest

    with pytest.raises(ValueError, match="postgresql"):
        ThreadMap("sqlite:///x")
    with pytest.raises(ValueError, match="conversation_id"):
        ThreadMap(pg_url).thread_for("")
