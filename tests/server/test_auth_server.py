"""The authenticated server: tokens, ownership on every route, identity in runs, streaming.

A real ``langgraph dev`` on the project's ``langgraph.json`` (JWT auth,
PostgreSQL checkpointer and store), driven by ``langgraph_sdk`` with the
tokens of two analysts and an admin.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import APIStatusError

from support.auth_server import AUDIENCE, ISSUER, RUN_TIMEOUT, AuthServer, shared_auth_server

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.postgres]

QUESTION = "星海远征上个月流水多少？"
ALICE, BOB, ROOT = "analyst_1001", "analyst_all", "admin"


@pytest.fixture(scope="session")
def auth_server(server_warehouse: Path, pg_state_database: str) -> Iterator[AuthServer]:
    with shared_auth_server(server_warehouse, pg_state_database) as server:
        yield server


def client(
    server: AuthServer, user: str, roles: tuple[str, ...] = ("analyst",)
) -> SyncLangGraphClient:
    return get_sync_client(url=server.url, headers=server.headers(user, roles), timeout=120)


def user_msg(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def status_of(call: Any) -> int:
    """The HTTP status a client call failed with (0 when it succeeded)."""
    try:
        call()
    except (APIStatusError, httpx.HTTPStatusError) as exc:
        return exc.response.status_code
    return 0


def assert_error_shape(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["message"]
    return dict(body["error"])


@pytest.fixture(scope="session")
def alice_thread(auth_server: AuthServer) -> dict[str, Any]:
    """Alice's thread with one finished run, and a store item and a cron of hers."""
    alice = client(auth_server, ALICE)
    thread = alice.threads.create(metadata={"topic": "revenue"})
    tid = thread["thread_id"]
    run = alice.runs.create(
        tid,
        "dataseer",
        input=user_msg(QUESTION),
        config={"configurable": {"user_id": ROOT, "roles": ["admin"]}},
    )
    alice.runs.join(tid, run["run_id"])
    alice.store.put_item(["notes"], "q1", {"text": "mine"})
    cron = alice.crons.create_for_thread(
        tid, "dataseer", schedule="0 0 1 1 *", input=user_msg(QUESTION)
    )
    return {"thread_id": tid, "run_id": run["run_id"], "cron_id": cron["cron_id"]}


def test_missing_forged_expired_and_foreign_tokens_are_401_in_one_shape(
    auth_server: AuthServer,
) -> None:
    now = int(time.time())
    claims = {"sub": ALICE, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    bad = {
        "missing": None,
        "not bearer": f"Basic {auth_server.token(ALICE)}",
        "garbage": "Bearer not.a.jwt",
        "forged": "Bearer "
        + auth_server.token(ALICE, secret="someone-elses-secret-0123456789abcdef"),
        "expired": "Bearer " + auth_server.token(ALICE, ttl=-120),
        "wrong issuer": "Bearer " + auth_server.token(ALICE, issuer="https://evil.invalid"),
        "wrong audience": "Bearer " + auth_server.token(ALICE, audience="other-app"),
        "alg none": "Bearer " + jwt.encode(claims, None, algorithm="none"),
        "no subject": "Bearer "
        + jwt.encode({k: v for k, v in claims.items() if k != "sub"}, "x" * 40, algorithm="HS256"),
    }
    with httpx.Client(base_url=auth_server.url, timeout=60) as http:
        for label, header in bad.items():
            headers = {"Authorization": header} if header else {}
            response = http.post("/threads/search", json={}, headers=headers)
            error = assert_error_shape(response, 401)
            assert error["code"] == "unauthorized", label
        # The Studio bypass header of `langgraph dev` must not open the door.
        studio = http.post("/threads/search", json={}, headers={"x-auth-scheme": "langsmith"})
        assert_error_shape(studio, 401)
        ok = http.post("/threads/search", json={}, headers=auth_server.headers(ALICE))
        assert ok.status_code == 200


def test_another_user_cannot_touch_a_thread_on_any_route(
    auth_server: AuthServer, alice_thread: dict[str, Any]
) -> None:
    tid, rid, cron_id = alice_thread["thread_id"], alice_thread["run_id"], alice_thread["cron_id"]
    bob = client(auth_server, BOB)
    attempts = {
        "get": lambda: bob.threads.get(tid),
        "state": lambda: bob.threads.get_state(tid),
        "history": lambda: bob.threads.get_history(tid),
        "update metadata": lambda: bob.threads.update(tid, metadata={"owner": BOB}),
        "update state": lambda: bob.threads.update_state(tid, {"deep": True}),
        "fork (copy)": lambda: bob.threads.copy(tid),
        "delete": lambda: bob.threads.delete(tid),
        "runs list": lambda: bob.runs.list(tid),
        "run get": lambda: bob.runs.get(tid, rid),
        "run join": lambda: bob.runs.join(tid, rid),
        "run cancel": lambda: bob.runs.cancel(tid, rid),
        "run delete": lambda: bob.runs.delete(tid, rid),
        "new run": lambda: bob.runs.create(tid, "dataseer", input=user_msg(QUESTION)),
        "stream run": lambda: list(bob.runs.stream(tid, "dataseer", input=user_msg(QUESTION))),
        "cron delete": lambda: bob.crons.delete(cron_id),
    }
    statuses = {label: status_of(call) for label, call in attempts.items()}
    refused = {label: s for label, s in statuses.items() if s not in {403, 404, 409}}
    # A listing of runs may come back empty rather than refused; nothing else may succeed.
    if refused.get("runs list") == 0:
        assert bob.runs.list(tid) == []
        refused.pop("runs list")
    assert refused == {}
    # Joining the stream of a run on her thread yields nothing of hers.
    leaked = [p for p in bob.runs.join_stream(tid, rid) if p.event not in {"error", "end"}]
    assert leaked == []
    bobs = bob.threads.search(limit=100)
    assert tid not in {t["thread_id"] for t in bobs}
    assert all(t["metadata"]["owner"] == BOB for t in bobs)  # no copy of hers either
    assert cron_id not in {c["cron_id"] for c in bob.crons.search(limit=100)}
    assert bob.store.get_item(["notes"], "q1") is None
    assert bob.store.search_items(["notes"])["items"] == []

    alice = client(auth_server, ALICE)
    state = alice.threads.get_state(tid)
    assert state["values"]["messages"][-1]["type"] == "ai"
    assert alice.threads.get(tid)["metadata"]["owner"] == ALICE
    assert alice.store.get_item(["notes"], "q1")["value"] == {"text": "mine"}
    assert [c["cron_id"] for c in alice.crons.search(thread_id=tid)] == [cron_id]


def test_admin_sees_every_thread_and_store_item(
    auth_server: AuthServer, alice_thread: dict[str, Any]
) -> None:
    root = client(auth_server, ROOT, ("admin",))
    tid = alice_thread["thread_id"]
    assert root.threads.get(tid)["metadata"]["owner"] == ALICE
    assert tid in {t["thread_id"] for t in root.threads.search(limit=1000)}
    item = root.store.get_item([ALICE, "notes"], "q1")
    assert item is not None and item["value"] == {"text": "mine"}


def test_identity_in_every_run_comes_from_the_token_not_the_request(
    auth_server: AuthServer, alice_thread: dict[str, Any]
) -> None:
    """Alice asked with ``configurable.user_id = admin``; the run still acted as Alice."""
    alice = client(auth_server, ALICE)
    tid, rid = alice_thread["thread_id"], alice_thread["run_id"]
    configurable = alice.runs.get(tid, rid)["kwargs"]["config"]["configurable"]
    assert configurable["user_id"] == ALICE
    assert configurable["roles"] == ["analyst"]
    metadata = alice.threads.get_state(tid)["metadata"]
    assert (metadata["user_id"], metadata["roles"]) == (ALICE, ["analyst"])


def test_stream_modes_carry_messages_updates_and_custom_phase_and_sql_events(
    auth_server: AuthServer,
) -> None:
    alice = client(auth_server, ALICE)
    tid = alice.threads.create()["thread_id"]
    parts = list(
        alice.runs.stream(
            tid,
            "dataseer",
            input=user_msg(QUESTION),
            stream_mode=["messages", "updates", "custom"],
            stream_subgraphs=True,
        )
    )
    kinds = {p.event.split("|", 1)[0] for p in parts}
    assert {"metadata", "updates", "custom"} <= kinds
    assert any(k.startswith("messages") for k in kinds)
    assert "error" not in kinds
    custom = [p.data for p in parts if p.event.startswith("custom")]
    assert any(d.get("type") == "sql" and d.get("ok") for d in custom)
    assert any(d.get("type") == "phase" for d in custom)


def test_cancel_stops_a_running_run_and_the_thread_keeps_working(auth_server: AuthServer) -> None:
    alice = client(auth_server, ALICE)
    tid = alice.threads.create()["thread_id"]
    run = alice.runs.create(tid, "slow", input=user_msg(f"{QUESTION} [sleep=30]"))
    deadline = time.monotonic() + 60
    while alice.runs.get(tid, run["run_id"])["status"] == "pending":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    started = time.monotonic()
    alice.runs.cancel(tid, run["run_id"], wait=True)
    assert time.monotonic() - started < 25
    assert alice.runs.get(tid, run["run_id"])["status"] == "interrupted"
    assert alice.threads.get(tid)["status"] in {"idle", "interrupted"}
    after = alice.runs.wait(tid, "dataseer", input=user_msg(QUESTION))
    assert isinstance(after, dict) and after["messages"][-1]["type"] == "ai"


def test_keepalive_comments_flow_while_the_model_is_silent(auth_server: AuthServer) -> None:
    headers = auth_server.headers(ALICE)
    with httpx.Client(base_url=auth_server.url, timeout=120, headers=headers) as http:
        tid = http.post("/threads", json={}).json()["thread_id"]
        body = {
            "assistant_id": "slow",
            "input": user_msg(f"{QUESTION} [sleep=4]"),
            "stream_mode": ["updates"],
        }
        lines: list[tuple[float, str]] = []
        with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                lines.append((time.monotonic(), line))
    beats = [t for t, line in lines if line.startswith(":")]
    events = [line for _, line in lines if line.startswith("event:")]
    assert "event: end" not in events[:-1]
    # The model sleeps 4 s per call with nothing to stream; keepalive is 1 s here.
    assert len(beats) >= 3
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    assert max(gaps) < 3.0


def test_a_run_over_the_timeout_is_stopped(auth_server: AuthServer) -> None:
    alice = client(auth_server, ALICE)
    tid = alice.threads.create()["thread_id"]
    started = time.monotonic()
    run = alice.runs.create(tid, "slow", input=user_msg(f"{QUESTION} [sleep=60]"))
    final = alice.runs.join(tid, run["run_id"])
    elapsed = time.monotonic() - started
    status = alice.runs.get(tid, run["run_id"])["status"]
    assert status in {"timeout", "error"}, (status, final)
    assert elapsed < RUN_TIMEOUT + 30
    assert alice.threads.get(tid)["status"] != "busy"
