"""Bad input against the real server: each is a clear 4xx in the one shape, and nothing breaks.

Malformed JSON, invalid UTF-8, an oversize body, an oversize message,
unknown assistant and thread ids, and a second run on a busy thread (rejected
by default, enqueued on request). After all of it the server still answers
and the busy thread's first run finishes with its state intact.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from support.auth_server import (
    MAX_MESSAGE_CHARS,
    MAX_REQUEST_BYTES,
    AuthServer,
    shared_auth_server,
)

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.postgres]

QUESTION = "星海远征上个月流水多少？"
USER = "analyst_1001"


@pytest.fixture(scope="session")
def auth_server(server_warehouse: Path, pg_state_database: str) -> Iterator[AuthServer]:
    with shared_auth_server(server_warehouse, pg_state_database) as server:
        yield server


@pytest.fixture
def http(auth_server: AuthServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=auth_server.url, timeout=120, headers=auth_server.headers(USER)
    ) as client:
        yield client


def user_msg(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["message"]
    return dict(body["error"])


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"metadata": ', "bad_request"),
        (b"[1, 2,,]", "bad_request"),
        (b'{"metadata": {"k": "\xff\xfe"}}', "bad_request"),
        (b'{"metadata": {"k": "caf\xc3"}}', "bad_request"),
    ],
    ids=["truncated", "trailing-commas", "latin1-bytes", "cut-utf8"],
)
def test_malformed_json_and_invalid_utf8_are_400(
    http: httpx.Client, body: bytes, code: str
) -> None:
    response = http.post("/threads", content=body, headers=JSON)
    assert response.status_code == 400
    assert error_of(response)["code"] == code
    assert http.post("/threads", json={}).status_code == 200


def test_oversize_body_and_oversize_message_are_413(http: httpx.Client) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    huge = {"metadata": {"blob": "x" * (MAX_REQUEST_BYTES + 10)}}
    response = http.post("/threads", json=huge)
    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"

    long_question = "流水" * MAX_MESSAGE_CHARS
    response = http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "dataseer", "input": user_msg(long_question)}
    )
    assert response.status_code == 413
    assert "DATASEER_MAX_MESSAGE_CHARS" in error_of(response)["message"]
    assert http.get(f"/threads/{tid}").json()["status"] == "idle"
    assert http.get(f"/threads/{tid}/runs").json() == []


def test_unknown_assistant_and_thread_ids_are_4xx(http: httpx.Client) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    cases = {
        "assistant name": (f"/threads/{tid}/runs", "no-such-assistant"),
        "assistant uuid": (f"/threads/{tid}/runs", str(uuid.uuid4())),
        "thread": (f"/threads/{uuid.uuid4()}/runs", "dataseer"),
    }
    for label, (path, assistant) in cases.items():
        response = http.post(path, json={"assistant_id": assistant, "input": user_msg(QUESTION)})
        assert 400 <= response.status_code < 500, label
        error_of(response)
    missing = http.get(f"/threads/{uuid.uuid4()}")
    assert missing.status_code == 404
    assert error_of(missing)["code"] == "not_found"
    not_a_uuid = http.get("/threads/not-a-uuid")
    assert 400 <= not_a_uuid.status_code < 500
    error_of(not_a_uuid)


def test_a_second_run_on_a_busy_thread_is_rejected_or_enqueued(
    auth_server: AuthServer, http: httpx.Client
) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    first = http.post(
        f"/threads/{tid}/runs",
        json={"assistant_id": "slow", "input": user_msg(f"{QUESTION} [sleep=2]")},
    ).json()
    deadline = time.monotonic() + 60
    while http.get(f"/threads/{tid}").json()["status"] != "busy":
        assert time.monotonic() < deadline
        time.sleep(0.2)

    second = http.post(
        f"/threads/{tid}/runs",
        json={"assistant_id": "dataseer", "input": user_msg("按渠道拆开看看")},
    )
    assert second.status_code == 409
    assert error_of(second)["code"] == "conflict"

    queued = http.post(
        f"/threads/{tid}/runs",
        json={
            "assistant_id": "dataseer",
            "input": user_msg("按渠道拆开看看"),
            "multitask_strategy": "enqueue",
        },
    )
    assert queued.status_code == 200
    client = get_sync_client(url=auth_server.url, headers=auth_server.headers(USER), timeout=120)
    client.runs.join(tid, first["run_id"])
    client.runs.join(tid, queued.json()["run_id"])

    runs = {r["run_id"]: r["status"] for r in client.runs.list(tid)}
    assert runs == {first["run_id"]: "success", queued.json()["run_id"]: "success"}
    messages = client.threads.get_state(tid)["values"]["messages"]
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert humans == [f"{QUESTION} [sleep=2]", "按渠道拆开看看"]
    assert messages[-1]["type"] == "ai"
    assert http.get("/ok").status_code == 200
