"""The knowledge pack: games, metrics, dimensions, glossary, cases and table docs.

A pack is a folder of small YAML files that a user can replace with their own
(``DATASEER_KNOWLEDGE_DIR``); the embedded one describes the sample game
warehouse. Everything downstream (question understanding, retrieval, the
metric SQL compiler, prompts) reads the pack through the frozen records here,
so a malformed file fails once, at load, with the file and field named,
instead of somewhere deep in a run.

Mention matching (``match_games`` and friends) is a plain dictionary scan:
the longest surface form wins and matches never overlap, so "星海远征" is one
hit and not also "星海". ASCII forms match case-insensitively and only on word
boundaries, so "arpu" is not found inside "arppu" nor "1001" inside "10010".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import yaml

from dataseer.errors import KnowledgeError

DEFAULT_PACK_DIR = Path(__file__).resolve().parent / "pack"
"""The embedded pack describing the sample warehouse."""

MetricKind = Literal["additive", "ratio", "retention", "funnel"]
METRIC_KINDS: tuple[str, ...] = ("additive", "ratio", "retention", "funnel")
GRAINS: tuple[str, ...] = ("day", "week", "month")

_ASCII_WORD = re.compile(r"[0-9A-Za-z_]")

T = TypeVar("T")


def _tuplify(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_tuplify(v) for v in value)
    return value


class _Record:
    """JSON round-trip shared by the pack records (lists come back as tuples)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict, so the record can live in graph state."""
        return cast("dict[str, Any]", _listify(asdict(cast("Any", self))))

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        """Rebuild the record from ``to_dict`` output."""
        names = {f.name for f in fields(cast("Any", cls))}
        return cls(**{k: _tuplify(v) for k, v in data.items() if k in names})


def _listify(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_listify(v) for v in value]
    if isinstance(value, dict):
        return {k: _listify(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Game(_Record):
    """One game of the warehouse and the names people call it by."""

    id: int
    base_id: int
    name: str
    en_name: str
    aliases: tuple[str, ...] = ()
    genre: str = ""
    status: str = "live"
    note: str = ""

    @property
    def surfaces(self) -> tuple[str, ...]:
        """Every form that names this game in a question, id included."""
        return (self.name, self.en_name, *self.aliases, str(self.id))


@dataclass(frozen=True)
class Metric(_Record):
    """A business metric and how to compute it.

    ``column`` is set for additive metrics; ``numerator``/``denominator`` (keys
    of additive metrics) for ratios; ``offset_days`` for retention.
    """

    key: str
    zh: str
    en: str
    synonyms: tuple[str, ...]
    description: str
    formula: str
    table: str
    time_column: str
    dimensions: tuple[str, ...]
    unit: str
    kind: MetricKind
    decimals: int = 2
    column: str | None = None
    numerator: str | None = None
    denominator: str | None = None
    offset_days: int | None = None

    @property
    def surfaces(self) -> tuple[str, ...]:
        """Every form that names this metric in a question."""
        return (self.key, self.zh, self.en, *self.synonyms)


@dataclass(frozen=True)
class Dimension(_Record):
    """A way to split or filter metrics.

    ``values`` maps a stored value (``huawei``) to the words people use for
    it (``华为``); ``pattern`` recognises free-form values such as SDK
    versions. ``lookup_table``/``label_column`` name the dimension table that
    turns ``column`` ids into readable labels.
    """

    key: str
    zh: str
    en: str
    column: str
    words: tuple[str, ...]
    grain: str | None = None
    lookup_table: str | None = None
    label_column: str | None = None
    values: tuple[tuple[str, tuple[str, ...]], ...] = ()
    pattern: str | None = None

    @property
    def filter_column(self) -> str:
        """The column filter values are compared with (the label when there is a lookup)."""
        return self.label_column or self.column

    def value_codes(self) -> tuple[str, ...]:
        """The stored values this pack knows for the dimension."""
        return tuple(code for code, _ in self.values)


@dataclass(frozen=True)
class Term(_Record):
    """A glossary entry, linked to a metric when it names one."""

    key: str
    zh: str
    en: str
    aliases: tuple[str, ...]
    definition_zh: str
    definition_en: str
    metric: str | None = None

    @property
    def surfaces(self) -> tuple[str, ...]:
        """Every form that names this term."""
        return (self.zh, self.en, *self.aliases)


@dataclass(frozen=True)
class Case(_Record):
    """A historical question and the SQL that answered it (few-shot material)."""

    id: str
    question: str
    sql: str
    tables: tuple[str, ...]
    metrics: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class TableDoc(_Record):
    """A business description of one table, for retrieval and prompts."""

    name: str
    zh: str
    en: str
    description: str
    keywords: tuple[str, ...] = ()
    dimensions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mention:
    """One matched span of a question: where, what text, and what it names."""

    start: int
    end: int
    text: str
    target: str


class _Matcher:
    """Longest-match, non-overlapping dictionary scanner over surface forms."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        table: dict[str, str] = {}
        for surface, target in pairs:
            form = surface.strip().lower()
            if form and form not in table:
                table[form] = target
        self._forms = sorted(table.items(), key=lambda kv: -len(kv[0]))

    def scan(self, text: str) -> list[Mention]:
        lowered = text.lower()
        taken = [False] * len(text)
        found: list[Mention] = []
        for form, target in self._forms:
            start = lowered.find(form)
            while start != -1:
                end = start + len(form)
                if not any(taken[start:end]) and _on_boundary(lowered, start, end):
                    found.append(Mention(start, end, text[start:end], target))
                    for i in range(start, end):
                        taken[i] = True
                start = lowered.find(form, start + 1)
        found.sort(key=lambda m: m.start)
        return found


def _on_boundary(text: str, start: int, end: int) -> bool:
    if _ASCII_WORD.match(text[start]) and start > 0 and _ASCII_WORD.match(text[start - 1]):
        return False
    return not (
        _ASCII_WORD.match(text[end - 1]) and end < len(text) and _ASCII_WORD.match(text[end])
    )


def _unique(items: Iterable[T]) -> list[T]:
    seen: list[T] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


class KnowledgePack:
    """The loaded pack: lookups and mention matching over its records."""

    def __init__(
        self,
        *,
        path: Path,
        games: tuple[Game, ...],
        metrics: tuple[Metric, ...],
        dimensions: tuple[Dimension, ...],
        terms: tuple[Term, ...],
        cases: tuple[Case, ...],
        tables: tuple[TableDoc, ...],
        readme: str = "",
    ) -> None:
        self.path = path
        self.games = games
        self.metrics = metrics
        self.dimensions = dimensions
        self.terms = terms
        self.cases = cases
        self.tables = tables
        self.readme = readme
        self._games = {g.id: g for g in games}
        self._metrics = {m.key: m for m in metrics}
        self._dimensions = {d.key: d for d in dimensions}
        self._terms = {t.key: t for t in terms}
        self._tables = {t.name: t for t in tables}
        self._game_matcher = _Matcher((s, str(g.id)) for g in games for s in g.surfaces)
        self._metric_matcher = _Matcher((s, m.key) for m in metrics for s in m.surfaces)
        self._dimension_matcher = _Matcher((w, d.key) for d in dimensions for w in d.words)
        self._term_matcher = _Matcher((s, t.key) for t in terms for s in t.surfaces)
        self._value_matcher = _Matcher(
            (alias, f"{d.key}\x1f{code}")
            for d in dimensions
            for code, aliases in d.values
            for alias in (code, *aliases)
        )

    @classmethod
    def load(cls, path: Path | None = None) -> KnowledgePack:
        """Load (once per resolved folder) the pack at ``path``, default the embedded one.

        Raises:
            KnowledgeError: a file is missing or malformed; the message names the
                file and the field.
        """
        return _load_cached((path or DEFAULT_PACK_DIR).expanduser().resolve())

    def game_by_id(self, game_id: int | str) -> Game | None:
        """Return the game with this id, or ``None``."""
        try:
            return self._games.get(int(game_id))
        except (TypeError, ValueError):
            return None

    def metric(self, key: str) -> Metric:
        """Return the metric ``key``.

        Raises:
            KeyError: no such metric; the message lists the known keys.
        """
        try:
            return self._metrics[key]
        except KeyError:
            msg = f"unknown metric {key!r}; known: {', '.join(self._metrics)}"
            raise KeyError(msg) from None

    def dimension(self, key: str) -> Dimension:
        """Return the dimension ``key``.

        Raises:
            KeyError: no such dimension.
        """
        try:
            return self._dimensions[key]
        except KeyError:
            msg = f"unknown dimension {key!r}; known: {', '.join(self._dimensions)}"
            raise KeyError(msg) from None

    def term(self, key: str) -> Term | None:
        """Return the glossary term ``key``, or ``None``."""
        return self._terms.get(key)

    def table_doc(self, name: str) -> TableDoc | None:
        """Return the business description of table ``name``, or ``None``."""
        return self._tables.get(name.lower())

    def game_mentions(self, text: str) -> list[Mention]:
        """Spans of ``text`` naming a game (target = game id as text)."""
        return self._game_matcher.scan(text)

    def metric_mentions(self, text: str) -> list[Mention]:
        """Spans of ``text`` naming a metric (target = metric key)."""
        return self._metric_matcher.scan(text)

    def dimension_mentions(self, text: str) -> list[Mention]:
        """Spans of ``text`` asking for a split (target = dimension key)."""
        return self._dimension_matcher.scan(text)

    def term_mentions(self, text: str) -> list[Mention]:
        """Spans of ``text`` naming a glossary term (target = term key)."""
        return self._term_matcher.scan(text)

    def value_mentions(self, text: str) -> list[Mention]:
        """Spans naming a dimension value (target = dimension key, unit separator, code).

        Pattern dimensions (SDK versions) are included, target code = the text.
        """
        found = self._value_matcher.scan(text)
        for dim in self.dimensions:
            if dim.pattern:
                for m in re.finditer(dim.pattern, text):
                    target = f"{dim.key}\x1f{m.group(0)}"
                    found.append(Mention(m.start(), m.end(), m.group(0), target))
        found.sort(key=lambda m: m.start)
        return found

    def match_games(self, text: str) -> list[Game]:
        """Games named in ``text``, in order of first mention."""
        return [self._games[int(i)] for i in _unique(m.target for m in self.game_mentions(text))]

    def match_metrics(self, text: str) -> list[Metric]:
        """Metrics named in ``text``, in order of first mention."""
        keys = _unique(m.target for m in self.metric_mentions(text))
        return [self._metrics[k] for k in keys]

    def match_dimensions(self, text: str) -> list[Dimension]:
        """Dimensions ``text`` asks to split by ("按渠道", "by region")."""
        keys = _unique(m.target for m in self.dimension_mentions(text))
        return [self._dimensions[k] for k in keys]

    def match_terms(self, text: str) -> list[Term]:
        """Glossary terms named in ``text``."""
        return [self._terms[k] for k in _unique(m.target for m in self.term_mentions(text))]

    def vocabulary(self) -> list[str]:
        """Every multi-character surface form of the pack (for tokenizer user words)."""
        words: list[str] = []
        for g in self.games:
            words.extend(g.surfaces)
        for m in self.metrics:
            words.extend(m.surfaces)
        for d in self.dimensions:
            words.extend(d.words)
            for code, aliases in d.values:
                words.extend((code, *aliases))
        for t in self.terms:
            words.extend(t.surfaces)
        return [w for w in _unique(words) if len(w) > 1]


# --- loading ---------------------------------------------------------------

_DIM_PREFIXES_ZH = ("按", "分", "各", "每个", "不同", "各个")
_DIM_SUFFIXES_ZH = ("分布", "拆分", "维度", "细分")
_DIM_PREFIXES_EN = ("by ", "per ", "each ", "across ", "split by ", "broken down by ")


class _Reader:
    """Typed field access over one YAML file, raising errors that name file and field."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def fail(self, where: str, problem: str) -> KnowledgeError:
        return KnowledgeError(f"{self.file.name}: {where}: {problem}")

    def load_list(self, top: str, *, required: bool = True) -> list[dict[str, Any]]:
        if not self.file.exists():
            if required:
                raise KnowledgeError(f"{self.file.name}: file missing from pack {self.file.parent}")
            return []
        try:
            data = yaml.safe_load(self.file.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise KnowledgeError(f"{self.file.name}: invalid YAML: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get(top), list):
            raise self.fail(top, "expected a top-level mapping with a list under this key")
        items = data[top]
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise self.fail(f"{top}[{i}]", "expected a mapping")
        return cast("list[dict[str, Any]]", items)

    def str_(self, item: dict[str, Any], where: str, name: str, default: str | None = None) -> str:
        value = item.get(name, default)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or (default is None and not value.strip()):
            raise self.fail(f"{where}.{name}", "required text is missing or not a string")
        return value.strip()

    def opt_str(self, item: dict[str, Any], where: str, name: str) -> str | None:
        if item.get(name) is None:
            return None
        return self.str_(item, where, name)

    def int_(self, item: dict[str, Any], where: str, name: str, default: int | None = None) -> int:
        value = item.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{where}.{name}", "expected an integer")
        return value

    def strs(self, item: dict[str, Any], where: str, name: str) -> tuple[str, ...]:
        value = item.get(name, [])
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(f"{where}.{name}", "expected a list of strings")
        out: list[str] = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                raise self.fail(f"{where}.{name}", f"expected strings, got {v!r}")
            out.append(str(v).strip())
        return tuple(out)


def _read_games(folder: Path) -> tuple[Game, ...]:
    r = _Reader(folder / "games.yaml")
    games: list[Game] = []
    for i, item in enumerate(r.load_list("games")):
        w = f"games[{i}]"
        game_id = r.int_(item, w, "id")
        games.append(
            Game(
                id=game_id,
                base_id=r.int_(item, w, "base_id", game_id),
                name=r.str_(item, w, "name"),
                en_name=r.str_(item, w, "en_name", ""),
                aliases=r.strs(item, w, "aliases"),
                genre=r.str_(item, w, "genre", ""),
                status=r.str_(item, w, "status", "live"),
                note=r.str_(item, w, "note", ""),
            )
        )
    ids = [g.id for g in games]
    if len(set(ids)) != len(ids):
        raise r.fail("games.id", "duplicate game id")
    return tuple(games)


def _read_metrics(folder: Path, dimension_keys: set[str]) -> tuple[Metric, ...]:
    r = _Reader(folder / "metrics.yaml")
    metrics: list[Metric] = []
    for i, item in enumerate(r.load_list("metrics")):
        w = f"metrics[{i}]"
        key = r.str_(item, w, "key")
        w = f"metrics[{key}]"
        kind = r.str_(item, w, "kind")
        if kind not in METRIC_KINDS:
            raise r.fail(f"{w}.kind", f"must be one of {', '.join(METRIC_KINDS)}, got {kind!r}")
        dims = r.strs(item, w, "dimensions")
        unknown = [d for d in dims if d not in dimension_keys]
        if unknown:
            raise r.fail(f"{w}.dimensions", f"unknown dimension(s) {', '.join(unknown)}")
        metric = Metric(
            key=key,
            zh=r.str_(item, w, "zh"),
            en=r.str_(item, w, "en"),
            synonyms=r.strs(item, w, "synonyms"),
            description=r.str_(item, w, "description", ""),
            formula=r.str_(item, w, "formula", ""),
            table=r.str_(item, w, "table"),
            time_column=r.str_(item, w, "time_column", "ds"),
            dimensions=dims,
            unit=r.str_(item, w, "unit", ""),
            kind=cast("MetricKind", kind),
            decimals=r.int_(item, w, "decimals", 2),
            column=r.opt_str(item, w, "column"),
            numerator=r.opt_str(item, w, "numerator"),
            denominator=r.opt_str(item, w, "denominator"),
            offset_days=(
                r.int_(item, w, "offset_days") if item.get("offset_days") is not None else None
            ),
        )
        if kind == "additive" and not metric.column:
            raise r.fail(f"{w}.column", "additive metrics need the column to sum")
        if kind == "ratio" and not (metric.numerator and metric.denominator):
            raise r.fail(f"{w}.numerator", "ratio metrics need numerator and denominator")
        if kind == "retention" and not metric.offset_days:
            raise r.fail(f"{w}.offset_days", "retention metrics need a positive offset_days")
        metrics.append(metric)
    by_key = {m.key: m for m in metrics}
    if len(by_key) != len(metrics):
        raise r.fail("metrics.key", "duplicate metric key")
    for m in metrics:
        for part in (m.numerator, m.denominator):
            if part is not None and (part not in by_key or by_key[part].kind != "additive"):
                raise r.fail(f"metrics[{m.key}]", f"{part!r} must be the key of an additive metric")
    return tuple(metrics)


def _derived_words(names: tuple[str, ...]) -> list[str]:
    words: list[str] = []
    for name in names:
        if re.search(r"[\u4e00-\u9fff]", name):
            words += [p + name for p in _DIM_PREFIXES_ZH] + [name + s for s in _DIM_SUFFIXES_ZH]
        else:
            words += [p + name for p in _DIM_PREFIXES_EN] + [f"{name} breakdown"]
    return words


def _read_dimensions(folder: Path) -> tuple[Dimension, ...]:
    r = _Reader(folder / "dimensions.yaml")
    dims: list[Dimension] = []
    for i, item in enumerate(r.load_list("dimensions")):
        w = f"dimensions[{i}]"
        key = r.str_(item, w, "key")
        w = f"dimensions[{key}]"
        grain = r.opt_str(item, w, "grain")
        if grain is not None and grain not in GRAINS:
            raise r.fail(f"{w}.grain", f"must be one of {', '.join(GRAINS)}")
        lookup = item.get("lookup")
        table = label = None
        if lookup is not None:
            if not isinstance(lookup, dict):
                raise r.fail(f"{w}.lookup", "expected a mapping with table, key, label")
            table = r.str_(lookup, f"{w}.lookup", "table")
            label = r.str_(lookup, f"{w}.lookup", "label")
        raw_values = item.get("values") or {}
        if not isinstance(raw_values, dict):
            raise r.fail(f"{w}.values", "expected a mapping of value -> list of words")
        values = tuple(
            (str(code), r.strs({"v": aliases}, f"{w}.values.{code}", "v"))
            for code, aliases in raw_values.items()
        )
        pattern = r.opt_str(item, w, "pattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise r.fail(f"{w}.pattern", f"invalid regex: {exc}") from exc
        names = r.strs(item, w, "names")
        words = tuple(_unique([*r.strs(item, w, "words"), *_derived_words(names)]))
        dims.append(
            Dimension(
                key=key,
                zh=r.str_(item, w, "zh"),
                en=r.str_(item, w, "en"),
                column=r.str_(item, w, "column"),
                words=words,
                grain=grain,
                lookup_table=table,
                label_column=label,
                values=values,
                pattern=pattern,
            )
        )
    return tuple(dims)


def _read_terms(folder: Path, metric_keys: set[str]) -> tuple[Term, ...]:
    r = _Reader(folder / "glossary.yaml")
    terms: list[Term] = []
    for i, item in enumerate(r.load_list("terms")):
        w = f"terms[{i}]"
        key = r.str_(item, w, "key")
        w = f"terms[{key}]"
        metric = r.opt_str(item, w, "metric")
        if metric is not None and metric not in metric_keys:
            raise r.fail(f"{w}.metric", f"unknown metric {metric!r}")
        terms.append(
            Term(
                key=key,
                zh=r.str_(item, w, "zh"),
                en=r.str_(item, w, "en"),
                aliases=r.strs(item, w, "aliases"),
                definition_zh=r.str_(item, w, "definition_zh"),
                definition_en=r.str_(item, w, "definition_en"),
                metric=metric,
            )
        )
    return tuple(terms)


def tables_in_sql(sql: str) -> tuple[str, ...]:
    """Names of the tables a query reads (CTE names excluded), in order.

    Raises:
        ValueError: the SQL does not parse.
    """
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError as exc:
        msg = f"SQL does not parse: {exc}"
        raise ValueError(msg) from exc
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    names = [t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() not in ctes]
    return tuple(_unique(names))


def _read_cases(folder: Path, metric_keys: set[str]) -> tuple[Case, ...]:
    r = _Reader(folder / "cases.yaml")
    cases: list[Case] = []
    for i, item in enumerate(r.load_list("cases", required=False)):
        w = f"cases[{i}]"
        sql = r.str_(item, w, "sql")
        try:
            tables = tables_in_sql(sql)
        except ValueError as exc:
            raise r.fail(f"{w}.sql", str(exc)) from exc
        metrics = r.strs(item, w, "metrics")
        unknown = [m for m in metrics if m not in metric_keys]
        if unknown:
            raise r.fail(f"{w}.metrics", f"unknown metric(s) {', '.join(unknown)}")
        cases.append(
            Case(
                id=r.str_(item, w, "id", f"case{i + 1}"),
                question=r.str_(item, w, "question"),
                sql=sql,
                tables=tables,
                metrics=metrics,
                note=r.str_(item, w, "note", ""),
            )
        )
    return tuple(cases)


def _read_tables(folder: Path, dimension_keys: set[str]) -> tuple[TableDoc, ...]:
    r = _Reader(folder / "tables.yaml")
    docs: list[TableDoc] = []
    for i, item in enumerate(r.load_list("tables", required=False)):
        w = f"tables[{i}]"
        name = r.str_(item, w, "name").lower()
        w = f"tables[{name}]"
        dims = r.strs(item, w, "dimensions")
        unknown = [d for d in dims if d not in dimension_keys]
        if unknown:
            raise r.fail(f"{w}.dimensions", f"unknown dimension(s) {', '.join(unknown)}")
        docs.append(
            TableDoc(
                name=name,
                zh=r.str_(item, w, "zh", ""),
                en=r.str_(item, w, "en", ""),
                description=r.str_(item, w, "description", ""),
                keywords=r.strs(item, w, "keywords"),
                dimensions=dims,
            )
        )
    return tuple(docs)


@cache
def _load_cached(folder: Path) -> KnowledgePack:
    if not folder.is_dir():
        msg = f"knowledge pack folder not found: {folder}"
        raise KnowledgeError(msg)
    dimensions = _read_dimensions(folder)
    dimension_keys = {d.key for d in dimensions}
    metrics = _read_metrics(folder, dimension_keys)
    metric_keys = {m.key for m in metrics}
    readme = folder / "README.md"
    return KnowledgePack(
        path=folder,
        games=_read_games(folder),
        metrics=metrics,
        dimensions=dimensions,
        terms=_read_terms(folder, metric_keys),
        cases=_read_cases(folder, metric_keys),
        tables=_read_tables(folder, dimension_keys),
        readme=readme.read_text(encoding="utf-8") if readme.exists() else "",
    )
