"""A second graph for server tests: the real router graph with a slow offline analyst.

Served next to ``dataseer`` (``langgraph.json`` override ``graphs.slow``) so
that cancel, keepalive, kill -9, timeout and proxy tests have a run that is
still going when they act. Each analyst call first sleeps the seconds named
by the latest ``[sleep=N]`` marker in the prompt (default
``DATASEER_TEST_MODEL_SLEEP``, else 0), then answers exactly as the offline
analyst does.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from dataseer.graph import build_graph
from dataseer.models.offline import OfflineAnalyst

_MARKER = re.compile(r"\[sleep=(\d+(?:\.\d+)?)\]")


class SlowAnalyst(OfflineAnalyst):
    """The offline analyst, thinking slowly."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        seconds = float(os.environ.get("DATASEER_TEST_MODEL_SLEEP", "0") or 0)
        for message in reversed(messages):
            found = _MARKER.search(str(message.content))
            if found:
                seconds = float(found.group(1))
                break
        time.sleep(seconds)
        return super()._generate(messages, *args, **kwargs)


graph = build_graph(model=SlowAnalyst())
