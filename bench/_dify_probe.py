"""Dify side of ``bench_integrations.py``; runs with the PLUGIN's Python.

Reads one JSON job on stdin and prints one JSON result: the per-event time of
the plugin's conversion (adapter + fold + ``ToolInvokeMessage``) over recorded
parts, and the time to the first text message of ``AskDataseerTool`` against
the live server.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "integrations" / "dify_plugin"
sys.path.insert(0, str(PLUGIN))

from dataseer_dify.bridge import ask  # noqa: E402
from tools.ask_dataseer import AskDataseerTool  # noqa: E402


class Replay:
    """Replays recorded parts as the SDK client would stream them."""

    class Part:
        def __init__(self, event: str, data: object) -> None:
            self.event, self.data = event, data

    def __init__(self, parts: list[list[object]]) -> None:
        self.parts = parts
        self.threads = self
        self.runs = self

    def create(self, **_: object) -> dict[str, str]:
        return {"thread_id": "t", "status": "idle"}

    def get(self, _: str) -> dict[str, str]:
        return {"thread_id": "t", "status": "idle"}

    def stream(self, *_: object, **__: object) -> object:
        return iter(self.Part(str(e), d) for e, d in self.parts)


def main() -> None:
    job = json.load(sys.stdin)
    tool = AskDataseerTool.from_credentials(job["credentials"], user_id="bench")
    parts = job["parts"]
    start = time.perf_counter()
    for _ in range(job["repeat"]):
        for piece in ask(Replay(parts), "q", "t"):
            if piece.text:
                tool.create_text_message(piece.text)
    per_event = (time.perf_counter() - start) / (job["repeat"] * len(parts))
    firsts = []
    for _ in range(job["runs"]):
        tool.session.conversation_id = f"bench-{uuid.uuid4()}"
        begin = time.perf_counter()
        messages = tool.invoke({"query": job["question"]})
        next(iter(messages))
        firsts.append(time.perf_counter() - begin)
        for _rest in messages:
            pass
    sys.stdout.write(json.dumps({"per_event": per_event, "first": firsts}) + "\n")


if __name__ == "__main__":
    main()
