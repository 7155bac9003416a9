"""Keyword retrieval over the knowledge pack and the live table catalog.

Questions are short and full of domain words ("星海远征上个月付费率"), so a
lexical ranker (BM25, via ``bm25s``) beats embeddings here and needs no model
download. Chinese is segmented with jieba, whose dictionary is taught every
name, alias and synonym of the pack so that "星海远征" or "付费率" stay one
token; ``cut_for_search`` also emits the sub-words, so "星海" still meets
"星海远征". English and identifiers become lowercase word tokens
(``dws_game_pay_di`` → ``dws game pay di`` plus the whole name).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import bm25s
import jieba

from dataseer.knowledge.pack import KnowledgePack

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


class KnowledgeIndex:
    """BM25 search over a pack's metrics, terms, cases, table docs and games."""

    def __init__(self, pack: KnowledgePack) -> None:
        self.pack = pack
        _jieba(pack.vocabulary())
        self._docs = _docs(pack)
        self._index = _Bm25([tokenize(d.search_text) for d in self._docs])
        self._case_docs = [d for d in self._docs if d.kind == "case"]
        self._case_index = _Bm25([tokenize(d.search_text) for d in self._case_docs])
        self._table_cache: dict[tuple[tuple[str, str], ...], tuple[list[str], _Bm25]] = {}

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

    def _table_index(self, tables: Sequence[tuple[str, str]]) -> tuple[list[str], _Bm25]:
        key = tuple((n.lower(), c) for n, c in tables)
        cached = self._table_cache.get(key)
        if cached is not None:
            return cached
        names: list[str] = []
        corpus: list[list[str]] = []
        for name, comment in key:
            doc = self.pack.table_doc(name)
            extra = f"{doc.zh} {doc.en} {doc.description} {' '.join(doc.keywords)}" if doc else ""
            names.append(name)
            corpus.append(tokenize(f"{name} {comment} {extra}"))
        built = (names, _Bm25(corpus))
        if len(self._table_cache) > 32:
            self._table_cache.clear()
        self._table_cache[key] = built
        return built

    def search_tables(
        self, query: str, tables: Sequence[tuple[str, str]], k: int = 8
    ) -> list[tuple[str, float]]:
        """Rank the catalog's ``(name, comment)`` tables for ``query``.

        A table scores by BM25 over its name, comment and pack description,
        plus credit from the three best matching historical cases that read it,
        plus credit when the question names a metric computed from it (a
        ratio's denominator table included). Only tables of ``tables`` are
        returned, with positive scores, best first.
        """
        if k <= 0:
            msg = f"k must be positive, got {k}"
            raise ValueError(msg)
        if not tables:
            return []
        names, index = self._table_index(tables)
        tokens = tokenize(query)
        scores: dict[str, float] = dict(zip(names, index.scores(tokens), strict=True))
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
        ranked = sorted(((n, round(s, 4)) for n, s in scores.items() if s > 0), key=lambda x: -x[1])
        return ranked[:k]


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
