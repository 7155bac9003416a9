"""The research subagent: what happened around a period, from ops events and announcements.

When a number moves, the analyst asks "what did we do then?". The research
subagent is a small ReAct agent (``langchain.agents.create_agent``) with two
read-only tools over the warehouse, ``list_ops_events`` (the operations
calendar) and ``search_announcements`` (player-facing notices), scoped to
the games and the period the topic and question name (±3 days, since
causes often start just before a swing). It runs on the analyst-tier
model; without one, ``OfflineResearcher`` follows the same plan
deterministically: calendar first, then announcements, then a summary of
what overlaps.

Research is slow next to everything else in a loop (an LLM call or several),
and the same question is often researched again in a thread, so results are
kept in an in-memory TTL cache keyed by (scene, topic, question).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool

from dataseer.data.protocol import Datasource
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.periods import find_periods

MARGIN_DAYS = 3
DEFAULT_WINDOW_DAYS = 30
DEFAULT_TTL_S = 600.0
_SCOPE = re.compile(r"<scope>(.*?)</scope>", re.S)


@dataclass(frozen=True)
class Scope:
    """What to research: games (empty = all) and an inclusive date window."""

    game_ids: tuple[int, ...]
    start: date
    end: date

    def to_json(self) -> str:
        """The scope as the JSON the subagent's first message carries."""
        return json.dumps(
            {"game_ids": list(self.game_ids), "start": str(self.start), "end": str(self.end)}
        )


def research_scope(topic: str, question: str, pack: KnowledgePack, today: date) -> Scope:
    """The games and window a topic and question name; the last 30 days when no period is named.

    The window is widened by three days on each side.
    """
    text = f"{topic} {question}"
    games = tuple(g.id for g in pack.match_games(text))
    periods = find_periods(text, today)
    if periods:
        start = min(p.start for p in periods)
        end = max(p.end for p in periods)
    else:
        end = today
        start = today - timedelta(days=DEFAULT_WINDOW_DAYS)
    margin = timedelta(days=MARGIN_DAYS)
    return Scope(games, start - margin, end + margin)


def scoped_games(requested: Sequence[int], allowed: Sequence[int] | None) -> tuple[int, ...] | None:
    """The games a read may touch: the request within the user's scope.

    ``allowed`` is ``None`` for users who may see every game; an empty request
    then means all games (``()``). For scoped users an empty request means
    their whole scope, and ``None`` comes back when nothing is left (read
    nothing).
    """
    ids = tuple(int(g) for g in requested)
    if allowed is None:
        return ids
    scope = tuple(int(g) for g in allowed)
    kept = tuple(g for g in ids if g in scope) if ids else scope
    return kept or None


def _ids_sql(game_ids: Sequence[int]) -> str:
    ids = [int(g) for g in game_ids]
    return f" AND e.game_id IN ({', '.join(str(g) for g in ids)})" if ids else ""


def ops_events_between(
    datasource: Datasource,
    game_ids: Sequence[int],
    start: date,
    end: date,
    allowed: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Ops events overlapping ``[start, end]`` for these games (all games when empty).

    ``allowed`` is the user's game scope (``None`` = every game); events of
    other games are never read.
    """
    scoped = scoped_games(game_ids, allowed)
    if scoped is None:
        return []
    game_ids = scoped
    sql = (
        "SELECT e.game_id, g.game_name, e.start_ds, e.end_ds, e.event_type, e.title, "
        "e.description FROM ops_events AS e LEFT JOIN dim_game AS g ON g.game_id = e.game_id "
        f"WHERE e.start_ds <= DATE '{end}' AND e.end_ds >= DATE '{start}'{_ids_sql(game_ids)} "
        "ORDER BY e.start_ds, e.game_id"
    )
    return _rows(datasource, sql)


def announcements_between(
    datasource: Datasource,
    game_ids: Sequence[int],
    start: date,
    end: date,
    keyword: str = "",
    allowed: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Announcements published in ``[start, end]``, optionally containing ``keyword``.

    ``allowed`` is the user's game scope, as for ``ops_events_between``.
    """
    scoped = scoped_games(game_ids, allowed)
    if scoped is None:
        return []
    game_ids = scoped
    like = ""
    if keyword.strip():
        word = keyword.strip().replace("'", "''").replace("%", "")
        like = f" AND (e.title LIKE '%{word}%' OR e.content LIKE '%{word}%')"
    sql = (
        "SELECT e.game_id, g.game_name, e.ds, e.category, e.title, e.content "
        "FROM announcements AS e LEFT JOIN dim_game AS g ON g.game_id = e.game_id "
        f"WHERE e.ds BETWEEN DATE '{start}' AND DATE '{end}'{_ids_sql(game_ids)}{like} "
        "ORDER BY e.ds, e.game_id"
    )
    return _rows(datasource, sql)


def _rows(datasource: Datasource, sql: str) -> list[dict[str, Any]]:
    result = datasource.execute(sql, limit=200, timeout=10.0)
    if not result.ok:
        return []
    return [
        {str(k): _plain(v) for k, v in row.items()}
        for row in result.frame.to_dict(orient="records")
    ]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def _table(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    from dataseer.prompt import markdown_table

    return markdown_table(list(columns), [[r.get(c) for c in columns] for r in rows])


def research_tools(datasource: Datasource, allowed: Sequence[int] | None = None) -> list[BaseTool]:
    """The subagent's two read-only tools over ``datasource``, within ``allowed`` games."""

    @tool(response_format="content_and_artifact")
    def list_ops_events(
        start: str, end: str, game_ids: list[int] | None = None
    ) -> tuple[str, list[dict[str, Any]]]:
        """Operations events (activities, versions, maintenance, promotions) overlapping a window.

        Args:
            start: first day, YYYY-MM-DD.
            end: last day, YYYY-MM-DD.
            game_ids: games to include; empty for all games.
        """
        rows = ops_events_between(
            datasource,
            game_ids or [],
            date.fromisoformat(start),
            date.fromisoformat(end),
            allowed,
        )
        if not rows:
            return f"no ops events between {start} and {end}", rows
        cols = ("game_name", "start_ds", "end_ds", "event_type", "title", "description")
        return _table(rows, cols), rows

    @tool(response_format="content_and_artifact")
    def search_announcements(
        start: str, end: str, game_ids: list[int] | None = None, keyword: str = ""
    ) -> tuple[str, list[dict[str, Any]]]:
        """Player-facing announcements (patch notes, notices, store posts) published in a window.

        Args:
            start: first day, YYYY-MM-DD.
            end: last day, YYYY-MM-DD.
            game_ids: games to include; empty for all games.
            keyword: optional word the title or text must contain.
        """
        rows = announcements_between(
            datasource,
            game_ids or [],
            date.fromisoformat(start),
            date.fromisoformat(end),
            keyword,
            allowed,
        )
        if not rows:
            return f"no announcements between {start} and {end}", rows
        return _table(rows, ("game_name", "ds", "category", "title", "content")), rows

    return [list_ops_events, search_announcements]


class OfflineResearcher(BaseChatModel):
    """The deterministic research model: calendar, announcements, then a summary."""

    @property
    def _llm_type(self) -> str:
        return "dataseer-offline-research"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineResearcher:
        """Tools are known by name; nothing to bind."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.decide(messages))])

    def decide(self, messages: list[BaseMessage]) -> AIMessage:
        """The next step from the scope in the first message and the tool results so far."""
        first = next((m for m in messages if isinstance(m, HumanMessage)), None)
        match = _SCOPE.search(str(first.content) if first else "")
        if match is None:
            return AIMessage("no research scope given / 没有给出调查范围")
        scope = json.loads(match.group(1))
        done = {m.name for m in messages if isinstance(m, ToolMessage)}
        for name in ("list_ops_events", "search_announcements"):
            if name not in done:
                args = {"start": scope["start"], "end": scope["end"], "game_ids": scope["game_ids"]}
                return AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": name,
                            "args": args,
                            "id": f"call_{uuid.uuid4().hex[:12]}",
                            "type": "tool_call",
                        }
                    ],
                )
        results = {m.name: m for m in messages if isinstance(m, ToolMessage)}
        events = results["list_ops_events"].artifact or []
        notices = results["search_announcements"].artifact or []
        return AIMessage(_summary(scope, events, notices))


def _summary(
    scope: dict[str, Any], events: list[dict[str, Any]], notices: list[dict[str, Any]]
) -> str:
    lines = [f"调查范围 / scope: {scope['start']} ~ {scope['end']}"]
    if not events and not notices:
        lines.append("该时段没有运营事件或公告 / no ops events or announcements in this window.")
        return "\n".join(lines)
    if events:
        lines.append(f"\n运营事件 / ops events ({len(events)}):")
        lines += [
            f"- {_days(e['start_ds'], e['end_ds'])} {e.get('game_name') or e['game_id']} "
            f"[{e['event_type']}] {e['title']}: {e.get('description') or ''}"
            for e in events
        ]
    if notices:
        lines.append(f"\n公告 / announcements ({len(notices)}):")
        lines += [
            f"- {n['ds']} {n.get('game_name') or n['game_id']} [{n['category']}] "
            f"{n['title']}: {n.get('content') or ''}"
            for n in notices
        ]
    return "\n".join(lines)


def _days(start: str, end: str) -> str:
    return start if start == end else f"{start}~{end}"


@dataclass
class _Entry:
    value: str
    expires: float


@dataclass
class ResearchCache:
    """An in-memory TTL cache keyed by (scene, topic, question), safe across threads."""

    ttl_seconds: float = DEFAULT_TTL_S
    max_entries: int = 256
    clock: Callable[[], float] = time.monotonic
    hits: int = 0
    misses: int = 0
    _data: dict[tuple[str, str, str], _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.ttl_seconds <= 0 or self.max_entries <= 0:
            msg = "ttl_seconds and max_entries must be positive"
            raise ValueError(msg)

    @staticmethod
    def key(scene: str | None, topic: str, question: str) -> tuple[str, str, str]:
        """The normalised key: whitespace and case do not make a new entry."""
        return (scene or "", " ".join(topic.lower().split()), " ".join(question.lower().split()))

    def get(self, scene: str | None, topic: str, question: str) -> str | None:
        """The cached result, or ``None`` when absent or expired."""
        key = self.key(scene, topic, question)
        with self._lock:
            entry = self._data.get(key)
            if entry is None or entry.expires <= self.clock():
                self._data.pop(key, None)
                self.misses += 1
                return None
            self.hits += 1
            return entry.value

    def put(self, scene: str | None, topic: str, question: str, value: str) -> None:
        """Store a result for ``ttl_seconds``; the oldest entry goes when full."""
        with self._lock:
            if len(self._data) >= self.max_entries:
                self._data.pop(next(iter(self._data)))
            self._data[self.key(scene, topic, question)] = _Entry(
                value, self.clock() + self.ttl_seconds
            )

    def clear(self) -> None:
        """Forget everything (tests, reloads)."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0


DEFAULT_CACHE = ResearchCache()


@dataclass(frozen=True)
class ResearchResult:
    """What the research subagent found, and whether it came from the cache."""

    text: str
    cached: bool
    elapsed: float


def run_research(
    topic: str,
    question: str,
    *,
    datasource: Datasource,
    pack: KnowledgePack,
    today: date,
    prompts_dir: Path,
    model: BaseChatModel | None = None,
    scene: str | None = None,
    cache: ResearchCache | None = None,
    allowed_games: Sequence[int] | None = None,
) -> ResearchResult:
    """Research ``topic``/``question`` with the subagent, or answer from the cache.

    Args:
        topic: what to look into ("星海远征 流水").
        question: the user's question, for the period and the games.
        datasource: the warehouse holding ``ops_events`` and ``announcements``.
        pack: resolves game names.
        today: anchors relative periods.
        prompts_dir: holds ``research/system.md``.
        model: the analyst-tier model; ``None`` = ``OfflineResearcher``.
        scene: the run's scene, part of the cache key.
        cache: the TTL cache; default the process-wide one.
        allowed_games: the user's game scope (``None`` = every game); part of
            the cache key, so one user's findings never reach another scope.

    Raises:
        ValueError: both ``topic`` and ``question`` are empty.
    """
    if not (topic.strip() or question.strip()):
        msg = "research needs a topic or a question"
        raise ValueError(msg)
    started = time.perf_counter()
    store = cache if cache is not None else DEFAULT_CACHE
    scope_key = "all" if allowed_games is None else ",".join(map(str, sorted(allowed_games)))
    scene_key = f"{scene or ''}|games={scope_key}"
    found = store.get(scene_key, topic, question)
    if found is not None:
        return ResearchResult(found, True, time.perf_counter() - started)
    from dataseer.prompt import load_prompt

    scope = research_scope(topic, question, pack, today)
    agent = create_agent(
        model or OfflineResearcher(),
        research_tools(datasource, allowed_games),
        system_prompt=load_prompt("research/system", prompts_dir),
        name="research",
    )
    message = (
        f"topic: {topic}\nquestion: {question}\ntoday: {today}\n<scope>{scope.to_json()}</scope>"
    )
    state = agent.invoke({"messages": [HumanMessage(message)]}, {"recursion_limit": 12})
    final = state["messages"][-1]
    text = str(final.content).strip() if isinstance(final, AIMessage) else ""
    if not text:
        text = "research ended without findings / 调查未得出结论"
    store.put(scene_key, topic, question, text)
    return ResearchResult(text, False, time.perf_counter() - started)


_digest_lock = threading.Lock()
_digests: dict[tuple[int, tuple[int, ...], date, date], str] = {}


def ops_events_digest(
    datasource: Datasource, game_ids: Sequence[int], start: date, end: date
) -> str:
    """The ``<ops_events>`` prompt partition: events overlapping the window ±3 days.

    Rebuilt prompts ask for it on every loop, so it is memoised per
    datasource, games and window.
    """
    margin = timedelta(days=MARGIN_DAYS)
    key = (id(datasource), tuple(sorted(game_ids)), start - margin, end + margin)
    with _digest_lock:
        found = _digests.get(key)
    if found is not None:
        return found
    rows = ops_events_between(datasource, key[1], key[2], key[3])
    text = "\n".join(
        f"- {_days(r['start_ds'], r['end_ds'])} {r.get('game_name') or r['game_id']} "
        f"[{r['event_type']}] {r['title']}"
        for r in rows[:20]
    )
    with _digest_lock:
        if len(_digests) > 256:
            _digests.clear()
        _digests[key] = text
    return text
