"""Benchmark the chat integrations: conversion overhead and time to first chunk.

Run ``python bench/bench_integrations.py`` (``--quick`` for fewer runs). One
real ``langgraph dev`` server (auth on, a WeCom bot configured, offline
analyst, sample at scale 0.05) serves every path in the same run:

- per-event overhead of each conversion layer, over the parts of a recorded
  real run: the shared adapter alone; the WeCom layer (adapter + ``<think>``
  fold + the encrypted, signed stream reply of one refresh); the Dify layer
  (adapter + ``<details>`` fold + ``ToolInvokeMessage``, in the plugin's venv);
- time to first chunk for the same question: a direct ``langgraph_sdk``
  stream (baseline: first part, and first answer-bearing part), the Dify
  path (``AskDataseerTool.invoke`` → first text message, incl. the
  PostgreSQL thread map) and the chat-bot path (encrypted callback → first
  refresh with content; polled every 20 ms, so ±20 ms).

The Dify figures need ``integrations/dify_plugin/.venv`` (``make -C
integrations/dify_plugin venv``) and PostgreSQL; they are skipped otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from _common import QUESTION, ROOT, Stats, bench_env, ms, print_table, ratio, use_env

sys.path.insert(0, str(ROOT / "tests"))

SECRET = "bench-integrations-secret-0123456789"
TOKEN, AES_KEY, CORP = "bench-token", "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C", "wwbench"
PLUGIN_PY = ROOT / "integrations" / "dify_plugin" / ".venv" / "bin" / "python"
PG_URL = os.environ.get(
    "DATASEER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


async def direct(url: str, token: str) -> tuple[float, float, list[list[Any]]]:
    from langgraph_sdk import get_client

    from dataseer.server.stream_adapter import STREAM_MODES, StreamAdapter

    client = get_client(url=url, headers={"Authorization": f"Bearer {token}"})
    thread = await client.threads.create()
    adapter = StreamAdapter()
    begin = time.perf_counter()
    first = first_answer = 0.0
    parts: list[list[Any]] = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "dataseer",
        input={"messages": [{"role": "user", "content": QUESTION}]},
        stream_mode=STREAM_MODES,
        stream_subgraphs=True,
    ):
        now = time.perf_counter() - begin
        first = first or now
        if not first_answer and any(c.text for c in adapter.feed(part.event, part.data)):
            first_answer = now
        parts.append([part.event, part.data])
    return first, first_answer, parts


def wecom_first(http: httpx.Client) -> float:
    from wechatpy.crypto import _get_signature
    from wechatpy.enterprise.crypto import PrpCrypto, WeChatCrypto

    prp = PrpCrypto(WeChatCrypto(TOKEN, AES_KEY, CORP).key)

    def call(message: dict[str, Any]) -> dict[str, Any]:
        encrypt = prp.encrypt(json.dumps(message, ensure_ascii=False), CORP).decode()
        ts, nonce = str(int(time.time())), uuid.uuid4().hex
        params = {"msg_signature": _get_signature(TOKEN, ts, nonce, encrypt), "timestamp": ts}
        response = http.post(
            "/wecom/callback", params={**params, "nonce": nonce}, json={"encrypt": encrypt}
        )
        response.raise_for_status()
        return dict(json.loads(prp.decrypt(response.json()["encrypt"], CORP)))

    base = {"chattype": "single", "from": {"userid": "boss"}, "aibotid": "b"}
    begin = time.perf_counter()
    reply = call(
        {**base, "msgid": uuid.uuid4().hex, "msgtype": "text", "text": {"content": QUESTION}}
    )
    stream_id = reply["stream"]["id"]
    first = 0.0
    while True:
        reply = call(
            {**base, "msgid": uuid.uuid4().hex, "msgtype": "stream", "stream": {"id": stream_id}}
        )
        if not first and reply["stream"]["content"]:
            first = time.perf_counter() - begin
        if reply["stream"]["finish"]:
            return first
        time.sleep(0.02)


def conversion_overheads(parts: list[list[Any]], repeat: int) -> dict[str, float]:
    from dataseer.server.stream_adapter import THINK_FOLD, MarkdownFolder, StreamAdapter
    from dataseer.server.wecom.crypto import WeComCrypto

    crypto = WeComCrypto(TOKEN, AES_KEY, CORP)
    out: dict[str, float] = {}
    start = time.perf_counter()
    for _ in range(repeat):
        adapter = StreamAdapter()
        for event, data in parts:
            adapter.feed(event, data)
    out["shared adapter"] = (time.perf_counter() - start) / (repeat * len(parts))
    start = time.perf_counter()
    for _ in range(repeat):
        adapter, folder = StreamAdapter(), MarkdownFolder(fold=THINK_FOLD)
        for event, data in parts:
            for chunk in adapter.feed(event, data):
                folder.push(chunk)
            reply = {"msgtype": "stream", "stream": {"id": "s", "content": folder.snapshot()}}
            crypto.seal(json.dumps(reply, ensure_ascii=False), "1", "n")
    out["WeCom (adapter + fold + seal per part)"] = (time.perf_counter() - start) / (
        repeat * len(parts)
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs, repeat = (2, 50) if args.quick else (5, 300)
    home = Path(tempfile.mkdtemp(prefix="bench-integrations-"))
    users = home / "wecom-users.yaml"
    users.write_text("users:\n  boss: admin\n", "utf-8")
    env = bench_env(home, 0.05)
    use_env(env)
    from dataseer.data.sample import build_sample
    from dataseer.server.auth import issue_token
    from support.langgraph_server import start_langgraph_dev

    build_sample(home / "sample-s0_05.duckdb", scale=0.05)
    server_env = {
        "DATASEER_AUTH_SECRET": SECRET,
        "DATASEER_WECOM_TOKEN": TOKEN,
        "DATASEER_WECOM_AES_KEY": AES_KEY,
        "DATASEER_WECOM_RECEIVE_ID": CORP,
        "DATASEER_WECOM_USERS": str(users),
    }
    admin = issue_token("admin", secret=SECRET, roles=["admin"], ttl=7200)
    with start_langgraph_dev(ROOT, env=server_env, timeout=240) as url:
        asyncio.run(direct(url, admin))  # warm the graph and the services
        direct_first, direct_answer, parts = [], [], []
        wecom, dify_first = [], []
        with httpx.Client(base_url=url, timeout=120) as http:
            wecom_first(http)  # warm
            for _ in range(runs):
                first, answer, parts = asyncio.run(direct(url, admin))
                direct_first.append(first)
                direct_answer.append(answer)
                wecom.append(wecom_first(http))
        overheads = conversion_overheads(parts, repeat)
        dify_per_event = None
        if PLUGIN_PY.exists():
            job = {
                "credentials": {
                    "server_url": url,
                    "api_token": admin,
                    "threads_database_url": PG_URL,
                },
                "parts": parts,
                "repeat": repeat,
                "runs": runs + 1,
                "question": QUESTION,
            }
            with contextlib.suppress(subprocess.CalledProcessError):
                done = subprocess.run(
                    [str(PLUGIN_PY), str(Path(__file__).with_name("_dify_probe.py"))],
                    input=json.dumps(job),
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=600,
                )
                result = json.loads(done.stdout.strip().splitlines()[-1])
                dify_per_event = result["per_event"]
                dify_first = result["first"][1:]  # the first one warms the plugin process
    base = overheads["shared adapter"]
    rows = [[name, ms(value), ratio(value, base)] for name, value in overheads.items()]
    if dify_per_event is not None:
        rows.append(
            [
                "Dify (adapter + fold + ToolInvokeMessage)",
                ms(dify_per_event),
                ratio(dify_per_event, base),
            ]
        )
    print_table(
        f"Per-event conversion overhead ({len(parts)} parts of one real run, x{repeat})",
        ["layer", "per event", "vs adapter"],
        rows,
    )
    baseline = Stats.of(direct_first)
    rows = [
        ["direct langgraph_sdk: first part", ms(baseline.p50), ms(baseline.max), "1.00x"],
    ]
    for name, sample in (
        ("direct langgraph_sdk: first answer-bearing part", direct_answer),
        ("chat bot (WeCom callback → first refresh with content)", wecom),
        ("Dify (AskDataseerTool → first text message)", dify_first),
    ):
        if sample:
            stats = Stats.of(sample)
            rows.append([name, ms(stats.p50), ms(stats.max), ratio(stats.p50, baseline.p50)])
    print_table(
        f"Time to first chunk, {QUESTION} ({runs} runs each, same server)",
        ["path", "p50", "max", "p50 vs direct"],
        rows,
    )


if __name__ == "__main__":
    main()
