"""The value index: link the words of a question to real values in the warehouse.

Questions name values the schema never spells: "华为" is stored as
``huawei``, "星海" means the game ``星海远征`` (id 1001), "huawie" is a typo
of ``huawei``. The index reads the distinct values of low-cardinality text
columns from the warehouse itself (channels, regions, item categories, SDK
versions, funnel steps, game names...), attaches the words people use for
them (the pack's aliases, and the ``code 中文`` pairs column comments list),
and links mentions to them in three passes, most certain first:

1. exact or alias matches, longest first, never overlapping;
2. partial matches: a Chinese word that begins exactly one value ("星海"),
   since short names keep the head of the full name;
3. typo matches of an ASCII word within one or two edits of exactly one
   value ("huawie" → ``huawei``).

An ambiguous partial or typo match links nothing: a wrong filter is worse
than none. The same index answers ``closest_values`` for SQL self-correction
when a filter literal matched no row.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from dataseer.data.protocol import Datasource
from dataseer.knowledge.pack import KnowledgePack, _Matcher
from dataseer.knowledge.retrieval import _jieba

MatchKind = Literal["exact", "alias", "partial", "fuzzy"]

MAX_DISTINCT = 60
"""Columns with more distinct values than this are not indexed (ids, free text)."""

_FREE_TEXT = re.compile(
    r"title|desc|content|comment|remark|note|text|sql|json|url|uid|time$|^table_|_table$",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_ASCII_RUN = re.compile(r"[A-Za-z][A-Za-z0-9_.]{2,}")
_PAIR_CODE_FIRST = re.compile(r"([A-Za-z][A-Za-z0-9_.]*)\s+([\u4e00-\u9fffA-Za-z]+[\u4e00-\u9fff])")
_PAIR_WORD_PAREN = re.compile(r"([A-Za-z][A-Za-z ]*[A-Za-z])\s*\(([^()]+)\)")


@dataclass(frozen=True)
class ValueEntry:
    """One distinct value of one column, with the words people use for it.

    ``code`` is what a fact table filters on: the game id for a game name,
    otherwise the value itself. ``dimension`` is the pack dimension the
    column belongs to, when there is one.
    """

    table: str
    column: str
    value: str
    aliases: tuple[str, ...] = ()
    code: str = ""
    dimension: str | None = None


@dataclass(frozen=True)
class Link:
    """A mention of the question linked to a stored value."""

    text: str
    start: int
    end: int
    table: str
    column: str
    value: str
    match: MatchKind
    score: float
    code: str = ""
    dimension: str | None = None
    tables: tuple[str, ...] = field(default=())
    """Every table holding the value in this column (the first is ``table``)."""


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, swaps and transpositions.

    >>> edit_distance("huawie", "huawei")
    1
    """
    a, b = a.lower(), b.lower()
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def similarity(query: str, candidate: str) -> float:
    """How close a literal is to a stored value, in [0, 1]; containment counts high."""
    q, c = query.strip().lower(), candidate.strip().lower()
    if not q or not c:
        return 0.0
    if q == c:
        return 1.0
    if q in c or c in q:
        return 0.9 * min(len(q), len(c)) / max(len(q), len(c)) + 0.1
    return max(0.0, 1.0 - edit_distance(q, c) / max(len(q), len(c)))


def _typo_budget(word: str) -> int:
    return 1 if len(word) <= 6 else 2


def comment_aliases(comment: str) -> list[tuple[str, str]]:
    """``(code, word)`` pairs a column comment lists ("huawei 华为", "skin (皮肤)")."""
    pairs = [(m.group(1), m.group(2)) for m in _PAIR_CODE_FIRST.finditer(comment)]
    pairs += [(m.group(1).strip(), m.group(2).strip()) for m in _PAIR_WORD_PAREN.finditer(comment)]
    return pairs


class ValueIndex:
    """Linked values of the warehouse's low-cardinality columns."""

    def __init__(self, entries: Sequence[ValueEntry]) -> None:
        self.entries = tuple(entries)
        self._by_column: dict[tuple[str, str], list[ValueEntry]] = {}
        grouped: dict[tuple[str, str], list[ValueEntry]] = {}
        for e in self.entries:
            self._by_column.setdefault((e.table.lower(), e.column.lower()), []).append(e)
            grouped.setdefault((e.column.lower(), e.value), []).append(e)
        self._groups = [
            sorted(g, key=lambda e: (not e.table.startswith("dim_"), e.table))
            for g in grouped.values()
        ]
        pairs: list[tuple[str, str]] = []
        self._surfaces: list[tuple[str, int]] = []
        for i, group in enumerate(self._groups):
            head = group[0]
            forms = {head.value, *(a for e in group for a in e.aliases)}
            for form in forms:
                if len(form) >= 2 and not form.isdigit():
                    pairs.append((form, str(i)))
                    self._surfaces.append((form.lower(), i))
        self._matcher = _Matcher(pairs)
        _jieba([f for f, _ in pairs if _CJK.search(f)])

    @classmethod
    def build(
        cls,
        datasource: Datasource,
        pack: KnowledgePack | None = None,
        *,
        tables: Iterable[str] | None = None,
        max_distinct: int = MAX_DISTINCT,
    ) -> ValueIndex:
        """Read low-cardinality text columns of ``datasource`` into an index.

        Args:
            datasource: the warehouse.
            pack: adds the pack's game and dimension aliases and ties
                columns to dimensions; optional.
            tables: the tables to read; default the dimension tables
                (``dim_*``) and every table the pack documents.
            max_distinct: columns with more distinct values are skipped.
        """
        names = {t.name.lower(): t.name for t in datasource.list_tables()}
        if tables is None:
            documented = {d.name for d in pack.tables} if pack else set()
            wanted = [n for n in names if n.startswith("dim_") or n in documented]
        else:
            wanted = [t.lower() for t in tables if t.lower() in names]
        dims_by_column: dict[str, str] = {}
        value_aliases: dict[tuple[str, str], tuple[str, ...]] = {}
        if pack is not None:
            for d in pack.dimensions:
                dims_by_column[d.filter_column.lower()] = d.key
                for code, words in d.values:
                    value_aliases[(d.filter_column.lower(), code)] = words
        games = {g.name: g for g in pack.games} if pack else {}
        entries: list[ValueEntry] = []
        for table in sorted(wanted):
            info = datasource.table_info(names[table])
            if info.error:
                continue
            for col in info.columns:
                kind = col.type.upper()
                if not (kind.startswith(("VARCHAR", "TEXT", "CHAR")) or kind == "STRING"):
                    continue
                if _FREE_TEXT.search(col.name):
                    continue
                values = _distinct(datasource, info.name, col.name, max_distinct)
                if values is None or not values:
                    continue
                if sum(len(v) for v in values) / len(values) > 24:
                    continue
                from_comment: dict[str, list[str]] = {}
                stored = set(values)
                for a, b in comment_aliases(col.comment):
                    if a in stored:
                        from_comment.setdefault(a, []).append(b)
                    elif b in stored:
                        from_comment.setdefault(b, []).append(a)
                column = col.name.lower()
                for value in values:
                    aliases = [
                        *value_aliases.get((column, value), ()),
                        *from_comment.get(value, []),
                    ]
                    code = value
                    dimension = dims_by_column.get(column)
                    game = games.get(value) if column == "game_name" else None
                    if game is not None:
                        aliases += [s for s in game.surfaces if s != str(game.id)]
                        code = str(game.id)
                        dimension = "game"
                    entries.append(
                        ValueEntry(
                            info.name,
                            col.name,
                            value,
                            tuple(dict.fromkeys(a for a in aliases if a and a != value)),
                            code,
                            dimension,
                        )
                    )
        return cls(entries)

    def columns(self) -> list[tuple[str, str]]:
        """The indexed ``(table, column)`` pairs."""
        return sorted({(e.table, e.column) for e in self.entries})

    def values(self, table: str, column: str) -> list[str]:
        """The stored values of an indexed column ([] when not indexed)."""
        return [e.value for e in self._by_column.get((table.lower(), column.lower()), [])]

    def find(self, table: str, column: str, value: str) -> ValueEntry | None:
        """The entry of this exact value (or alias) of an indexed column."""
        wanted = value.strip().lower()
        for e in self._by_column.get((table.lower(), column.lower()), []):
            if e.value.lower() == wanted or wanted in (a.lower() for a in e.aliases):
                return e
        return None

    def closest_values(self, table: str, column: str, value: str, k: int = 3) -> list[str]:
        """The ``k`` stored values of ``table.column`` closest to ``value``, best first.

        Aliases count: "华为" is closest to ``huawei``. Values scoring under
        0.4 are left out, so nonsense gets no suggestion.

        Raises:
            ValueError: ``k`` is not positive.
        """
        if k <= 0:
            msg = f"k must be positive, got {k}"
            raise ValueError(msg)
        scored: list[tuple[float, str]] = []
        for e in self._by_column.get((table.lower(), column.lower()), []):
            best = max(similarity(value, form) for form in (e.value, *e.aliases))
            if best >= 0.4:
                scored.append((best, e.value))
        scored.sort(key=lambda sv: (-sv[0], sv[1]))
        return [v for _, v in scored[:k]]

    def _link(
        self, group: int, text: str, start: int, end: int, match: MatchKind, score: float
    ) -> Link:
        entries = self._groups[group]
        head = entries[0]
        return Link(
            text=text,
            start=start,
            end=end,
            table=head.table,
            column=head.column,
            value=head.value,
            match=match,
            score=round(score, 3),
            code=head.code or head.value,
            dimension=head.dimension,
            tables=tuple(dict.fromkeys(e.table for e in entries)),
        )

    def link(self, text: str) -> list[Link]:
        """Link the mentions of ``text`` to stored values (see module docs for the passes)."""
        links: list[Link] = []
        taken = [False] * len(text)
        for m in self._matcher.scan(text):
            group = int(m.target)
            exact = m.text.lower() == self._groups[group][0].value.lower()
            links.append(
                self._link(group, m.text, m.start, m.end, "exact" if exact else "alias", 1.0)
            )
            for i in range(m.start, m.end):
                taken[i] = True
        links += self._partial(text, taken)
        links += self._fuzzy(text, taken)
        links.sort(key=lambda lk: lk.start)
        return links

    def _partial(self, text: str, taken: list[bool]) -> list[Link]:
        found: list[Link] = []
        for run in re.finditer(r"[\u4e00-\u9fff]{2,}", text):
            pos = run.start()
            for word in _jieba().cut(run.group(0)):
                start, end = pos, pos + len(word)
                pos = end
                if len(word) < 2 or any(taken[start:end]):
                    continue
                groups = {i for form, i in self._surfaces if form.startswith(word) and form != word}
                if len(groups) != 1:
                    continue
                group = groups.pop()
                best = max(
                    len(word) / len(form)
                    for form, i in self._surfaces
                    if i == group and form.startswith(word)
                )
                found.append(self._link(group, word, start, end, "partial", 0.5 + 0.4 * best))
                for i in range(start, end):
                    taken[i] = True
        return found

    def _fuzzy(self, text: str, taken: list[bool]) -> list[Link]:
        found: list[Link] = []
        for m in _ASCII_RUN.finditer(text):
            word = m.group(0)
            if len(word) < 4 or any(taken[m.start() : m.end()]):
                continue
            budget = _typo_budget(word)
            scored = sorted(
                (edit_distance(word, form), i)
                for form, i in self._surfaces
                if len(form) >= 4 and not _CJK.search(form) and abs(len(form) - len(word)) <= budget
            )
            close = [(d, i) for d, i in scored if d <= budget]
            if not close or close[0][0] == 0:
                continue
            best = close[0][0]
            groups = {i for d, i in close if d == best}
            if len(groups) != 1:
                continue
            score = 1.0 - best / max(len(word), 1)
            found.append(self._link(groups.pop(), word, m.start(), m.end(), "fuzzy", score))
        return found


def _distinct(datasource: Datasource, table: str, column: str, limit: int) -> list[str] | None:
    quoted_table = ".".join(f'"{p}"' for p in table.split("."))
    sql = (
        f'SELECT CAST("{column}" AS VARCHAR) AS v, count(*) AS n FROM {quoted_table} '
        f'WHERE "{column}" IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1'
    )
    result = datasource.execute(sql, limit=limit + 1, timeout=30.0)
    if not result.ok or result.row_count > limit:
        return None
    return [str(v) for v in result.frame["v"].tolist()]


_lock = threading.Lock()
_cache: dict[tuple[int, int, tuple[str, ...]], ValueIndex] = {}


def value_index_for(datasource: Datasource, pack: KnowledgePack | None = None) -> ValueIndex:
    """The (cached) value index of a datasource; rebuilt when its table list changes."""
    key = (id(datasource), id(pack), tuple(t.name for t in datasource.list_tables()))
    with _lock:
        found = _cache.get(key)
    if found is not None:
        return found
    built = ValueIndex.build(datasource, pack)
    with _lock:
        if len(_cache) > 8:
            _cache.clear()
        _cache[key] = built
    return built
