"""dataseer's run stream → chat-friendly chunks, shared by the chat integrations.

Chat front ends (Dify, the WeCom intelligent bot) show one growing message,
not LangGraph's event stream. This module turns the parts of a run streamed
by the LangGraph server (``langgraph_sdk`` ``runs.stream`` with
``stream_mode=["messages-tuple", "updates", "custom"]`` and
``stream_subgraphs=True``) into :class:`Chunk` objects of a few kinds, and
:class:`MarkdownFolder` turns chunks into append-only markdown with the
thinking folded away:

* ``thinking`` — the route taken, the phases (planning, execution,
  reporting), tool calls, each SQL statement as a code block marked ✓ or ✗
  with the first rows of its result, Python snippets; folded in
  ``<details>`` (Dify) or ``<think>`` (WeCom);
* ``answer`` — the text of the answer nodes (``compose``, ``quick``) at the
  root of the graph, as it streams;
* ``clarify`` — the question dataseer asks back when it interrupts;
* ``image`` — a chart (PNG, base64), rendered by each front end natively;
* ``error`` — a failed run, as a sentence.

Only message content leaves: run ids, namespaces, node names, checkpoint and
token metadata are read to classify events and then dropped.

The module depends on the standard library only, because the Dify plugin
(which has its own dependency set and cannot import dataseer) carries a
byte-identical copy of it, made by ``make -C integrations/dify_plugin vendor``
and checked by a test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ANSWER_NODES",
    "DETAILS_FOLD",
    "STREAM_MODES",
    "THINK_FOLD",
    "Chunk",
    "MarkdownFolder",
    "StreamAdapter",
    "markdown_table",
]

ChunkKind = Literal["thinking", "answer", "clarify", "image", "error"]

STREAM_MODES = ["messages-tuple", "updates", "custom"]
"""The stream modes the adapter understands (ask for subgraphs too)."""

ANSWER_NODES = frozenset({"compose", "quick"})
"""Root-graph nodes whose AI messages are the answer the user reads."""

DETAILS_FOLD = ("<details>\n<summary>思考过程 / Thinking</summary>\n\n", "\n</details>\n\n")
"""How Dify folds thinking: an HTML ``<details>`` block inside its markdown."""

THINK_FOLD = ("<think>\n", "\n</think>\n\n")
"""How the WeCom intelligent bot folds thinking in a stream message."""

TABLE_ROWS = 10
ARG_CHARS = 80
PHASE_LABELS = {
    "planning": "规划 / planning",
    "execution": "执行 / executing",
    "sub_agent": "子任务 / sub-agent",
    "reporting": "汇总 / reporting",
}
QUIET_TOOLS = frozenset({"run_sql", "run_python"})
"""Tool calls not echoed as calls: their own custom events show them in full."""


@dataclass(frozen=True)
class Chunk:
    """One piece of what the user sees; ``text`` is markdown, ``image`` base64 PNG."""

    kind: ChunkKind
    text: str = ""
    image: str = ""


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) >= 1000 else f"{value:g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: Sequence[Any], rows: Sequence[Sequence[Any]], max_rows: int) -> str:
    """A compact ``|a|b|`` table of at most ``max_rows`` rows (and a count of the rest)."""
    if not columns:
        return ""
    lines = [
        "|" + "|".join(_cell(c) for c in columns) + "|",
        "|" + "|".join("-" for _ in columns) + "|",
    ]
    lines += ["|" + "|".join(_cell(v) for v in row) + "|" for row in rows[:max_rows]]
    if len(rows) > max_rows:
        lines.append(f"\n… {len(rows) - max_rows} more rows / 另有 {len(rows) - max_rows} 行")
    return "\n".join(lines)


def _brief(args: Any) -> str:
    if not isinstance(args, Mapping) or not args:
        return ""
    text = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()
    )
    return text if len(text) <= ARG_CHARS else text[: ARG_CHARS - 1] + "…"


def _text_of(content: Any) -> str:
    """The text of a message's content (a string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block
            if isinstance(block, str)
            else str(block.get("text", ""))
            if isinstance(block, Mapping) and block.get("type") == "text"
            else ""
            for block in content
        )
    return ""


@dataclass
class StreamAdapter:
    """Classifies one run's stream parts into chunks; keep one instance per run.

    It is stateful only to drop repeats: a message already seen whole is not
    emitted again, and a phase is announced once until it changes.
    """

    table_rows: int = TABLE_ROWS
    _phase: str = ""
    _seen: set[str] = field(default_factory=set)
    _streamed: set[str] = field(default_factory=set)

    def feed(self, event: str, data: Any) -> list[Chunk]:
        """Chunks for one stream part (``StreamPart.event``, ``StreamPart.data``).

        Subgraph events carry ``|<namespace>`` after the mode (``custom|lookup:…``);
        the namespace only tells the root graph from the agent lines.
        """
        mode, _, namespace = event.partition("|")
        if mode == "custom" and isinstance(data, Mapping):
            return self._custom(data)
        if mode in {"messages", "messages-tuple"} and isinstance(data, Sequence) and data:
            meta = data[1] if len(data) > 1 and isinstance(data[1], Mapping) else {}
            return self._message(data[0], meta, root=not namespace)
        if mode == "updates" and isinstance(data, Mapping) and not namespace:
            return self._update(data)
        if mode == "error":
            message = data.get("message") if isinstance(data, Mapping) else data
            return [Chunk("error", f"⚠️ 运行出错 / the run failed: {message or 'unknown error'}")]
        return []

    def feed_all(self, parts: Iterable[tuple[str, Any]]) -> list[Chunk]:
        """Chunks for a whole recorded run."""
        return [chunk for event, data in parts for chunk in self.feed(event, data)]

    def _update(self, data: Mapping[str, Any]) -> list[Chunk]:
        out: list[Chunk] = []
        for node, update in data.items():
            if node == "__interrupt__" and isinstance(update, Sequence):
                for item in update:
                    value = item.get("value") if isinstance(item, Mapping) else item
                    question = value.get("question") if isinstance(value, Mapping) else value
                    if question:
                        out.append(Chunk("clarify", f"❓ {question}"))
            elif node == "route" and isinstance(update, Mapping) and update.get("route"):
                out.append(Chunk("thinking", f"路由 / route: **{update['route']}**\n\n"))
        return out

    def _custom(self, data: Mapping[str, Any]) -> list[Chunk]:
        kind = data.get("type")
        if kind == "phase":
            name = str(data.get("phase") or "")
            if name == self._phase or name not in PHASE_LABELS:
                self._phase = name
                return []
            self._phase = name
            return [Chunk("thinking", f"▸ {PHASE_LABELS[name]}\n\n")]
        if kind == "sql":
            return [Chunk("thinking", self._sql(data))]
        if kind == "python":
            mark = "✓" if data.get("ok") else "✗"
            text = f"{mark} python\n```python\n{str(data.get('code') or '').strip()}\n```\n"
            detail = data.get("stdout") or data.get("value") or data.get("error")
            if detail:
                text += f"\n```\n{str(detail)[:1500].rstrip()}\n```\n"
            return [Chunk("thinking", text + "\n")]
        if kind == "chart" and data.get("base64"):
            return [Chunk("image", image=str(data["base64"]))]
        return []

    def _sql(self, data: Mapping[str, Any]) -> str:
        ok = bool(data.get("ok"))
        head = f"{'✓' if ok else '✗'} **{data.get('task_id', '')}. {data.get('purpose') or 'SQL'}**"
        if ok:
            head += f" ({data.get('row_count', 0)} rows, {float(data.get('elapsed') or 0):.3f}s)"
        text = f"{head}\n\n```sql\n{str(data.get('sql') or '').strip()}\n```\n\n"
        if ok:
            rows = data.get("rows") or []
            total = int(data.get("row_count") or len(rows))
            table = markdown_table(data.get("columns") or [], rows, self.table_rows)
            if table:
                text += table + "\n"
                if total > len(rows) and len(rows) <= self.table_rows:
                    text += f"\n… {total - len(rows)} more rows / 另有 {total - len(rows)} 行\n"
        else:
            error = str(data.get("error") or "").strip().splitlines()
            text += f"> {' '.join(error[:3])}\n"
        return text + "\n"

    def _message(self, message: Any, meta: Mapping[str, Any], *, root: bool) -> list[Chunk]:
        if not isinstance(message, Mapping):
            return []
        kind = str(message.get("type") or "")
        if kind not in {"ai", "AIMessageChunk", "AIMessage"}:
            return []
        message_id = str(message.get("id") or "")
        whole = kind != "AIMessageChunk"
        if whole and message_id and message_id in self._seen | self._streamed:
            return []
        if whole and message_id:
            self._seen.add(message_id)
        elif message_id:
            self._streamed.add(message_id)
        text = _text_of(message.get("content"))
        if root:
            if meta.get("langgraph_node") in ANSWER_NODES and text:
                return [Chunk("answer", text)]
            return []
        out = [Chunk("thinking", text + ("\n\n" if whole else ""))] if text else []
        calls = message.get("tool_calls") if whole else message.get("tool_call_chunks")
        for call in calls or []:
            name = call.get("name") if isinstance(call, Mapping) else None
            if name and name not in QUIET_TOOLS:
                args = _brief(call.get("args")) if whole else ""
                out.append(Chunk("thinking", f"→ `{name}`({args})\n\n"))
        return out


@dataclass
class MarkdownFolder:
    """Chunks → append-only markdown, thinking folded between ``fold`` markers.

    Dify and WeCom both show one growing message, so a thinking block is
    opened at the first thinking chunk and closed before the first answer
    text; images are kept aside for the front end to send its own way.
    ``thinking=False`` drops thinking entirely (the plain-markdown fallback).
    """

    fold: tuple[str, str] = DETAILS_FOLD
    thinking: bool = True
    images: list[str] = field(default_factory=list)
    text: str = ""
    _open: bool = False

    def push(self, chunk: Chunk) -> str:
        """The markdown to append for ``chunk`` ('' for images and dropped thinking)."""
        if chunk.kind == "image":
            self.images.append(chunk.image)
            return ""
        if chunk.kind == "thinking":
            if not self.thinking or not chunk.text:
                return ""
            delta = ("" if self._open else self.fold[0]) + chunk.text
            self._open = True
        else:
            delta = self.close() + chunk.text
            if chunk.kind in {"clarify", "error"}:
                delta += "\n"
        self.text += delta
        return delta

    def close(self) -> str:
        """The text that closes an open thinking block ('' when none is open)."""
        if not self._open:
            return ""
        self._open = False
        return self.fold[1]

    def snapshot(self) -> str:
        """The markdown so far, with an open thinking block shown closed."""
        return self.text + (self.fold[1] if self._open else "")

    def finish(self) -> str:
        """Close the thinking block and record it in ``text``; returns what was appended."""
        tail = self.close()
        self.text += tail
        return tail
