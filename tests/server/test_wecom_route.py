"""The WeCom intelligent-bot callback on a real ``langgraph dev`` server.

Callbacks are built with ``wechatpy`` (an independent implementation of the
WeCom crypto) and replies opened with it too. The server runs the project's
``langgraph.json`` (auth on: the API itself needs a bearer token) with a bot
configured through ``DATASEER_WECOM_*`` and a user map that makes the WeCom
user ``zhangsan`` the dataseer user ``analyst_1001`` (game 1001 only).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from wechatpy.crypto import _get_signature
from wechatpy.enterprise.crypto import PrpCrypto as RefPrp
from wechatpy.enterprise.crypto import WeChatCrypto as RefCrypto

from dataseer.server.auth import issue_token
from dataseer.server.wecom.mapping import thread_id_for
from support.langgraph_server import start_langgraph_dev

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROJECT_DIR = Path(__file__).resolve().parents[2]
TOKEN = "dataseer-wecom-token"
AES_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
CORP = "wwdataseer"
SECRET = "wecom-test-secret-0123456789abcdef"
BOT = "/wecom/callback"
RUN_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def wecom_server(server_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    users = tmp_path_factory.mktemp("wecom") / "users.yaml"
    users.write_text("users:\n  zhangsan: analyst_1001\n  boss: admin\n", "utf-8")
    env = {
        "DATASEER_HOME": str(server_warehouse.parent),
        "DATASEER_SAMPLE_SCALE": "0.05",
        "DATASEER_TODAY": "2026-11-29",
        "DATASEER_AUTH_SECRET": SECRET,
        "DATASEER_WECOM_TOKEN": TOKEN,
        "DATASEER_WECOM_AES_KEY": AES_KEY,
        "DATASEER_WECOM_RECEIVE_ID": CORP,
        "DATASEER_WECOM_USERS": str(users),
    }
    with contextlib.ExitStack() as stack:
        with pytest.MonkeyPatch.context() as mp:
            for key in [k for k in os.environ if k.startswith("DATASEER_")]:
                mp.delenv(key)
            url = stack.enter_context(start_langgraph_dev(PROJECT_DIR, env=env, timeout=180))
        yield url


def ref() -> Any:
    return RefPrp(RefCrypto(TOKEN, AES_KEY, CORP).key)


def signed(
    encrypt: str, *, timestamp: str | None = None, nonce: str | None = None
) -> dict[str, str]:
    ts = timestamp or str(int(time.time()))
    nonce = nonce or uuid.uuid4().hex[:10]
    return {
        "msg_signature": _get_signature(TOKEN, ts, nonce, encrypt),
        "timestamp": ts,
        "nonce": nonce,
    }


def sealed(message: dict[str, Any], receive_id: str = CORP) -> str:
    return ref().encrypt(json.dumps(message, ensure_ascii=False), receive_id).decode()


def text_message(user: str, text: str, chat: str = "", msgid: str | None = None) -> dict[str, Any]:
    return {
        "msgid": msgid or uuid.uuid4().hex,
        "aibotid": "bot1",
        "chatid": chat,
        "chattype": "group" if chat else "single",
        "from": {"userid": user},
        "msgtype": "text",
        "text": {"content": text},
    }


def opened(response: httpx.Response) -> dict[str, Any]:
    """Verify the reply's signature and decrypt it, with wechatpy."""
    assert response.status_code == 200, response.text
    body = response.json()
    expected = _get_signature(TOKEN, str(body["timestamp"]), body["nonce"], body["encrypt"])
    assert body["msgsignature"] == expected
    return dict(json.loads(ref().decrypt(body["encrypt"], CORP)))


def post(http: httpx.Client, message: dict[str, Any], **sign: Any) -> httpx.Response:
    encrypt = sealed(message)
    return http.post(BOT, params=signed(encrypt, **sign), json={"encrypt": encrypt})


def ask_and_wait(http: httpx.Client, message: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Send a message, then poll stream refreshes until ``finish``; all contents seen."""
    first = opened(post(http, message))
    assert first["msgtype"] == "stream" and first["stream"]["finish"] is False
    stream_id = first["stream"]["id"]
    seen = [first["stream"]["content"]]
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        refresh = {**message, "msgid": uuid.uuid4().hex, "msgtype": "stream"}
        refresh.pop("text", None)
        refresh["stream"] = {"id": stream_id}
        reply = opened(post(http, refresh))
        seen.append(reply["stream"]["content"])
        if reply["stream"]["finish"]:
            return reply, seen
        time.sleep(0.5)
    pytest.fail("the stream never finished")


async def wecom_threads(url: str) -> list[dict[str, Any]]:
    admin = issue_token("admin", secret=SECRET, roles=["admin"])
    client = get_client(url=url, headers={"Authorization": f"Bearer {admin}"})
    return list(await client.threads.search(metadata={"source": "wecom"}, limit=100))


def threads_now(url: str) -> list[dict[str, Any]]:
    return asyncio.run(wecom_threads(url))


@pytest.fixture(scope="module")
def http(wecom_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=wecom_server, timeout=60.0) as client:
        yield client


def test_url_verification_echoes_the_decrypted_echostr(http: httpx.Client) -> None:
    echostr = ref().encrypt("echo-7788", CORP).decode()
    response = http.get(BOT, params={**signed(echostr), "echostr": echostr})
    assert response.status_code == 200
    assert response.text == "echo-7788"


def test_group_message_runs_as_the_mapped_user_and_streams_the_scope_answer(
    http: httpx.Client, wecom_server: str
) -> None:
    message = text_message("zhangsan", "@dataseer 幻境物语上个月流水", chat="wrkGROUP1")
    final, seen = ask_and_wait(http, message)

    content = final["stream"]["content"]
    assert "抱歉" in content and "不在您的数据权限范围内" in content
    assert "星海远征（1001）" in content
    assert content.startswith("<think>") and "✗ **1." in content and "</think>" in content
    assert "1002" in content.split("</think>", 1)[0]
    assert len(seen) >= 2 and all(content.startswith(s.split("</think>")[0][:20]) for s in seen)

    expected = thread_id_for(CORP, "wrkGROUP1", "zhangsan")
    threads = {t["thread_id"]: t for t in threads_now(wecom_server)}
    assert threads[expected]["metadata"]["owner"] == "analyst_1001"

    follow = text_message("zhangsan", "@dataseer 星海远征上个月流水多少？", chat="wrkGROUP1")
    final, _ = ask_and_wait(http, follow)
    answer = final["stream"]["content"].split("</think>", 1)[1]
    assert "```sql" in answer and "权限" not in answer and "✓" in final["stream"]["content"]
    threads = {t["thread_id"]: t for t in threads_now(wecom_server)}
    humans = [m for m in threads[expected]["values"]["messages"] if m["type"] == "human"]
    assert [m["content"] for m in humans] == ["幻境物语上个月流水", "星海远征上个月流水多少？"]


def test_unmapped_user_is_told_and_nothing_runs(http: httpx.Client, wecom_server: str) -> None:
    before = len(threads_now(wecom_server))
    reply = opened(post(http, text_message("stranger", "星海远征上个月流水")))
    assert reply["msgtype"] == "markdown" and "尚未开通" in reply["markdown"]["content"]
    assert len(threads_now(wecom_server)) == before


def rejection(response: httpx.Response, reason: str) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == f"wecom_{reason}" and error["message"]


def test_forged_stale_replayed_and_foreign_callbacks_are_rejected_and_run_nothing(
    http: httpx.Client, wecom_server: str
) -> None:
    before = len(threads_now(wecom_server))
    message = text_message("boss", "星海远征上个月流水")
    encrypt = sealed(message)

    forged = signed(encrypt)
    forged["msg_signature"] = _get_signature("wrong-token", forged["timestamp"], "x", encrypt)
    rejection(http.post(BOT, params=forged, json={"encrypt": encrypt}), "signature")

    stale = signed(encrypt, timestamp=str(int(time.time()) - 3600))
    rejection(http.post(BOT, params=stale, json={"encrypt": encrypt}), "stale")

    foreign = sealed(message, receive_id="wwOTHERCORP")
    rejection(http.post(BOT, params=signed(foreign), json={"encrypt": foreign}), "receive_id")

    echostr = ref().encrypt("echo", CORP).decode()
    params = {**signed(echostr), "echostr": echostr}
    params["msg_signature"] = "0" * 40
    rejection(http.get(BOT, params=params), "signature")

    event = {**text_message("boss", ""), "msgtype": "event", "event": {"eventtype": "enter_chat"}}
    event.pop("text")
    event_encrypt = sealed(event)
    once = signed(event_encrypt)
    assert http.post(BOT, params=once, json={"encrypt": event_encrypt}).status_code == 200
    rejection(http.post(BOT, params=once, json={"encrypt": event_encrypt}), "replay")

    missing = http.post(BOT, params={"timestamp": "1"}, json={"encrypt": encrypt})
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "bad_request"

    time.sleep(1.0)
    assert len(threads_now(wecom_server)) == before
