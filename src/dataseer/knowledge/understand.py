"""Question understanding: turn one question into a structured ``QuestionSpec``.

The router, the offline analyst and the lookup line all need the same facts
about a question: which games, metrics and periods it names, how it wants the
numbers split, what it filters on and what kind of answer it expects. This
module extracts them deterministically from the knowledge pack (dictionary
matching, no model), so the offline mode and the tests see exactly what an
LLM-backed run sees as its starting point.

Intent cues are checked in a fixed order, most specific first: small talk,
definition, why, funnel, compare, trend; anything else with a metric is a
lookup, and without one it is unknown. A follow-up ("按渠道拆开看看",
"那上个月呢", "换成幻境物语") inherits what it leaves out from the previous
spec of the conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date
from typing import Any, Literal, cast

from dataseer.knowledge.pack import Game, KnowledgePack, Mention, Metric, Term
from dataseer.knowledge.periods import Grain, Period, find_periods
from dataseer.knowledge.retrieval import tokenize
from dataseer.knowledge.values import ValueIndex

Intent = Literal[
    "smalltalk", "definition", "lookup", "trend", "compare", "why", "funnel", "unknown"
]
Language = Literal["zh", "en"]

ANALYTIC_INTENTS: frozenset[str] = frozenset({"lookup", "trend", "compare", "why", "funnel"})
_GRAIN_DIMENSIONS = ("day", "week", "month")

_CJK = re.compile(r"[\u4e00-\u9fff]")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PUNCT = r"\s,.!?;:，。！？；：、~～\"'“”‘’()（）\[\]【】<>《》|"
_PUNCT_CHARS = " \t\n,.!?;:，。！？；：、~～\"'“”‘’()（）[]【】<>《》|"
_JOINER_BEFORE = re.compile(r"(?:和|与|跟|及|、|以及|对比|比|vs\.?|and)\s*$", re.IGNORECASE)

_SMALLTALK = re.compile(
    r"^\s*(?:你好|您好|嗨|哈喽|哈啰|在吗|在不在|早上好|早安|下午好|晚上好|晚安|谢谢|多谢|感谢|辛苦了|"
    r"再见|拜拜|好的|好吧|ok|okay|hi|hello|hey|thanks|thank you|thx|bye|goodbye|good morning|"
    r"good evening|你是谁|你能做什么|你会什么|who are you|what can you do)"
    rf"(?:[{_PUNCT}]*(?:你好|您好|啊|呀|呢|哈|了|你|大家|there|a lot|so much|very much))*"
    rf"[{_PUNCT}]*$",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"什么是|是什么|是啥|啥是|什么意思|啥意思|指什么|的定义|的含义|含义是|怎么算|怎么计算|如何计算|"
    r"怎么定义|口径|解释一下|解释下|"
    r"\bwhat\s+(?:is|are|does|do)\b|\bdefine\b|\bdefinition\b|\bmeaning\s+of\b|\bexplain\b|"
    r"\bhow\s+(?:is|are|do\s+you)\b.*\b(?:calculated|computed|defined|measured)\b",
    re.IGNORECASE,
)
_WHY = re.compile(
    r"为什么|为何|为啥|原因|归因|怎么回事|咋回事|怎么了|暴涨|暴跌|大涨|大跌|下跌|下滑|下降|骤降|骤增|"
    r"猛增|猛跌|跳水|异常|波动|"
    r"\bwhy\b|\broot\s+cause|\bcause[sd]?\b|\breasons?\b|\battribut\w*|\bspiked?\b|\bplunged?\b|"
    r"\bdrop(?:ped|s)?\b|\bfell\b|\bdeclined?\b|\bsurged?\b|\bcollapsed?\b",
    re.IGNORECASE,
)
_FUNNEL = re.compile(r"漏斗|\bfunnel", re.IGNORECASE)
_COMPARE = re.compile(
    r"对比|比较|相比|相较|较之|环比|同比|和.{0,12}比|跟.{0,12}比|比上|较上|"
    r"\bvs\.?(?=\s|$)|\bversus\b|\bcompar\w*|\byoy\b|\bmom\b|\bwow\b|\bover\s+the\s+same\b|"
    r"\bagainst\b|\bthan\b",
    re.IGNORECASE,
)
_YOY = re.compile(
    r"同比|去年同期|\byoy\b|\byear[\s-]+over[\s-]+year\b|same\s+period\s+last\s+year", re.IGNORECASE
)
_MOM = re.compile(
    r"环比|上期|上一期|\bmom\b|\bwow\b|\bmonth[\s-]+over[\s-]+month\b|\bweek[\s-]+over[\s-]+week\b|"
    r"\bperiod[\s-]+over[\s-]+period\b|\bprevious\s+period\b",
    re.IGNORECASE,
)
_TREND = re.compile(
    r"趋势|走势|曲线|每天|每日|逐日|每周|逐周|每月|逐月|变化|波动情况|"
    r"\bdaily\b|\bweekly\b|\bmonthly\b|\btrends?\b|\bover\s+time\b|\bday\s+by\s+day\b|\btime\s+series\b",
    re.IGNORECASE,
)
_ALL_GAMES = re.compile(
    r"所有游戏|全部游戏|全游戏|各游戏|全公司|大盘|\ball\s+games\b|\bevery\s+game\b|\beach\s+game\b|"
    r"\bacross\s+games\b|\bportfolio\b",
    re.IGNORECASE,
)
_BOOK_TITLE = re.compile(r"《([^》]{1,30})》")
_ANCHOR_WORDS = re.compile(r"游戏|手游|这款|呢|怎么样|咋样|如何|表现|\bgame\b", re.IGNORECASE)
_LEAD_WORDS = re.compile(
    r"^(?:请问|请|帮我|帮忙|麻烦|给我|我想|我要|想|查一下|查下|查查|查询|查|看一下|看下|看看|看|"
    r"统计一下|统计|告诉我|问一下|知道|分析一下|分析|一下|那么|那|还有|换成|换|改成|关于|"
    r"对于|的|这个|这款|那个|那款|一款|个|款|叫)+"
)
_TRAIL_WORDS = re.compile(
    r"(?:的|之|这款|这个|那款|整体|总|总的|全部|累计|平均|日均|当前|目前|游戏|手游|表现|情况|数据)+$"
)
_GENERIC = _words(
    "游戏 手游 整体 总体 全部 所有 大盘 公司 全公司 我们 你们 他们 它 这 "
    "那 今天 昨天 最近 近期 目前 当前 现在 期间 活动 平均 日均 人均 累计 "
    "整个 数据 情况 表现 指标 各 每 新 老 总 分 一共 合计 同期 对应 本 "
    "上 下 同 之前 以来 至今 前后 当天 当日 当月 当周 各个 每个 哪个 "
    "哪款 什么 多少 是否 有没有 能否 能不能 可以 帮 查 看 版本 渠道 平台 "
    "地区 区域 大区 品类 类别 道具 步骤 环节 用户 玩家 区服 官方 月 周 "
    "天 日 年 整体的 具体"
)
_EN_STOP = _words(
    "the a an this that last previous next current what which how why show give tell get list "
    "compare total overall daily weekly monthly average all every each our my their its in of for "
    "by per and or vs versus from to between during since until q1 q2 q3 q4 h1 h2 "
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday yesterday today week month year day china game games"
)
_EN_CANDIDATE = re.compile(
    r"\b(?:for|of|in|about)\s+([A-Z][\w'-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'-]*){0,3})"
    r"|([A-Z][\w'-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'-]*){0,3})\s+(?:game|'s)\b"
)


@dataclass(frozen=True)
class Filter:
    """Keep only rows whose ``column`` (of dimension ``dimension``) is one of ``values``."""

    dimension: str
    column: str
    values: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return {"dimension": self.dimension, "column": self.column, "values": list(self.values)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Filter:
        """Rebuild from ``to_dict`` output."""
        return cls(str(data["dimension"]), str(data["column"]), tuple(data["values"]))


def _period_to_dict(period: Period | None) -> dict[str, Any] | None:
    if period is None:
        return None
    return {
        "start": period.start.isoformat(),
        "end": period.end.isoformat(),
        "grain": period.grain,
        "label": period.label,
        "text": period.text,
    }


def _period_from_dict(data: dict[str, Any] | None) -> Period | None:
    if data is None:
        return None
    return Period(
        start=date.fromisoformat(data["start"]),
        end=date.fromisoformat(data["end"]),
        grain=cast("Grain", data["grain"]),
        label=data.get("label", ""),
        text=data.get("text", ""),
    )


@dataclass(frozen=True)
class QuestionSpec:
    """What a question asks, resolved against the knowledge pack.

    ``unknown_mentions`` holds game-like names the pack does not know
    ("王者荣耀"), so the answer can say so instead of guessing. ``compare_to``
    is the baseline period of a comparison or an explanation.
    """

    text: str
    intent: Intent
    games: tuple[Game, ...] = ()
    metrics: tuple[Metric, ...] = ()
    period: Period | None = None
    compare_to: Period | None = None
    dimensions: tuple[str, ...] = ()
    filters: tuple[Filter, ...] = ()
    terms: tuple[Term, ...] = ()
    unknown_mentions: tuple[str, ...] = ()
    is_followup: bool = False
    language: Language = "zh"

    def missing(self) -> list[str]:
        """What blocks answering: any of ``game``, ``metric``, ``period``.

        Small talk and definitions need nothing. A split by game ("各游戏")
        stands in for naming games.
        """
        if self.intent in ("smalltalk", "definition"):
            return []
        missing: list[str] = []
        if not self.games and "game" not in self.dimensions:
            missing.append("game")
        if not self.metrics:
            missing.append("metric")
        if self.period is None:
            missing.append("period")
        return missing

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict (for graph state and checkpoints)."""
        return {
            "text": self.text,
            "intent": self.intent,
            "games": [g.to_dict() for g in self.games],
            "metrics": [m.to_dict() for m in self.metrics],
            "period": _period_to_dict(self.period),
            "compare_to": _period_to_dict(self.compare_to),
            "dimensions": list(self.dimensions),
            "filters": [f.to_dict() for f in self.filters],
            "terms": [t.to_dict() for t in self.terms],
            "unknown_mentions": list(self.unknown_mentions),
            "is_followup": self.is_followup,
            "language": self.language,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuestionSpec:
        """Rebuild a spec from ``to_dict`` output; needs no pack."""
        return cls(
            text=data["text"],
            intent=cast("Intent", data["intent"]),
            games=tuple(Game.from_dict(g) for g in data.get("games", [])),
            metrics=tuple(Metric.from_dict(m) for m in data.get("metrics", [])),
            period=_period_from_dict(data.get("period")),
            compare_to=_period_from_dict(data.get("compare_to")),
            dimensions=tuple(data.get("dimensions", [])),
            filters=tuple(Filter.from_dict(f) for f in data.get("filters", [])),
            terms=tuple(Term.from_dict(t) for t in data.get("terms", [])),
            unknown_mentions=tuple(data.get("unknown_mentions", [])),
            is_followup=bool(data.get("is_followup", False)),
            language=cast("Language", data.get("language", "zh")),
        )


def detect_language(text: str) -> Language:
    """``zh`` when the text has any CJK character, else ``en``."""
    return "zh" if _CJK.search(text) else "en"


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        for i in range(start, min(end, len(chars))):
            chars[i] = "|"
    return "".join(chars)


def _period_spans(text: str, periods: list[Period]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    position = 0
    for p in periods:
        if not p.text:
            continue
        start = text.find(p.text, position)
        if start == -1:
            start = text.lower().find(p.text.lower())
        if start != -1:
            spans.append((start, start + len(p.text)))
            position = start + len(p.text)
    return spans


def _is_generic(candidate: str) -> bool:
    if candidate in _GENERIC:
        return True
    words = [w for w in tokenize(candidate) if w]
    return not words or all(w in _GENERIC or (len(w) == 1 and _CJK.match(w)) for w in words)


def _clean_candidate(raw: str) -> str:
    candidate = raw.strip(_PUNCT_CHARS)
    candidate = _LEAD_WORDS.sub("", candidate)
    candidate = _TRAIL_WORDS.sub("", candidate)
    return candidate.strip()


def _unknown_mentions(
    text: str, masked: str, pack: KnowledgePack, anchors: list[Mention], games: list[Mention]
) -> list[str]:
    """Game-like names the pack does not know (see module docs for the cues)."""
    found: list[str] = []
    known = {s.lower() for g in pack.games for s in g.surfaces}
    known |= {w.lower() for w in pack.vocabulary()}

    def add(candidate: str) -> None:
        candidate = _clean_candidate(candidate)
        if (
            len(candidate) >= 2
            and candidate.lower() not in known
            and "|" not in candidate
            and not _is_generic(candidate)
            and candidate not in found
        ):
            found.append(candidate)

    for m in _BOOK_TITLE.finditer(text):
        if m.group(1).strip().lower() not in known:
            add(m.group(1))
    anchor_starts = {a.start for a in anchors}
    anchor_starts.update(m.start() for m in _ANCHOR_WORDS.finditer(masked))
    for g in games:
        joiner = _JOINER_BEFORE.search(text[: g.start])
        if joiner:
            anchor_starts.add(joiner.start())
    stop = set(_PUNCT_CHARS)
    for anchor in sorted(anchor_starts):
        begin = anchor
        while begin > 0 and masked[begin - 1] not in stop:
            begin -= 1
        piece = masked[begin:anchor]
        if _CJK.search(piece) or re.fullmatch(r"[A-Za-z][\w-]{1,15}", piece):
            add(piece)
    if not _CJK.search(text):
        for m in _EN_CANDIDATE.finditer(masked):
            words = (m.group(1) or m.group(2) or "").split()
            while words and words[0].lower() in _EN_STOP:
                words.pop(0)
            while words and words[-1].lower() in _EN_STOP:
                words.pop()
            if words and "|" not in " ".join(words):
                add(" ".join(words))
    return found


def _filters(
    pack: KnowledgePack, values: list[Mention], blocked: list[tuple[int, int]], intent: str
) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
    """Return (dimension, code) filter picks and the spans they used."""
    picks: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    for m in values:
        if any(m.start < end and start < m.end for start, end in blocked):
            continue
        dimension, code = m.target.split("\x1f", 1)
        if dimension == "step" and intent != "funnel":
            continue
        spans.append((m.start, m.end))
        if (dimension, code) not in picks:
            picks.append((dimension, code))
    return picks, spans


def _build_filters(pack: KnowledgePack, picks: list[tuple[str, str]]) -> tuple[Filter, ...]:
    grouped: dict[str, list[str]] = {}
    for dimension, code in picks:
        grouped.setdefault(dimension, []).append(code)
    return tuple(
        Filter(d, pack.dimension(d).filter_column, tuple(codes)) for d, codes in grouped.items()
    )


def _base_intent(
    text: str,
    *,
    metrics: list[Metric],
    games: list[Game],
    periods: list[Period],
    terms: list[Term],
    masked_metrics: str,
) -> Intent:
    if _SMALLTALK.match(text) and not (metrics or games or terms):
        return "smalltalk"
    if (
        _DEFINITION.search(text)
        and not periods
        and not (games and metrics)
        and (metrics or terms or games)
    ):
        return "definition"
    if _WHY.search(text):
        return "why"
    if any(m.kind == "funnel" for m in metrics) or _FUNNEL.search(text):
        return "funnel"
    if _COMPARE.search(masked_metrics) or len(periods) >= 2:
        return "compare"
    if _TREND.search(text):
        return "trend"
    return "lookup" if metrics else "unknown"


def _value_links(
    text: str, values: ValueIndex | None, pack: KnowledgePack, game_mentions: list[Mention]
) -> tuple[list[Mention], list[Mention]]:
    """Game mentions and dimension-value mentions the warehouse's value index adds.

    The pack's dictionary comes first; the index only adds what it missed:
    partial names ("星海"), typos ("huawie") and stored values the pack does
    not list. Value mentions use the pack's dimension-and-code targets.
    """
    if values is None:
        return [], []
    taken = [(m.start, m.end) for m in (*game_mentions, *pack.value_mentions(text))]
    games: list[Mention] = []
    dims: list[Mention] = []
    known = {d.key for d in pack.dimensions}
    for link in values.link(text):
        if any(link.start < end and start < link.end for start, end in taken):
            continue
        if link.dimension == "game" and pack.game_by_id(link.code) is not None:
            games.append(Mention(link.start, link.end, link.text, link.code))
        elif link.dimension in known:
            dims.append(
                Mention(link.start, link.end, link.text, f"{link.dimension}\x1f{link.code}")
            )
    return games, dims


def understand(
    text: str,
    pack: KnowledgePack,
    today: date,
    previous: QuestionSpec | None = None,
    *,
    values: ValueIndex | None = None,
) -> QuestionSpec:
    """Resolve ``text`` into a ``QuestionSpec`` against ``pack``.

    Args:
        text: the user's question.
        pack: the knowledge pack naming games, metrics, dimensions and terms.
        today: the date relative periods ("上个月") are anchored to.
        previous: the spec of the conversation's previous question; a question
            that names no game, metric or period inherits them from it.
        values: the warehouse's value index; links partial names, typos and
            stored values the pack does not list (optional).
    """
    game_mentions = pack.game_mentions(text)
    linked_games, linked_values = _value_links(text, values, pack, game_mentions)
    game_mentions = sorted([*game_mentions, *linked_games], key=lambda m: m.start)
    metric_mentions = pack.metric_mentions(text)
    dimension_mentions = pack.dimension_mentions(text)
    term_mentions = pack.term_mentions(text)
    periods = find_periods(text, today)
    period_spans = _period_spans(text, periods)

    games = [pack.game_by_id(m.target) for m in game_mentions]
    game_list = list(dict.fromkeys(g for g in games if g is not None))
    metrics = pack.match_metrics(text)
    terms = pack.match_terms(text)

    masked_metrics = _mask(text, [(m.start, m.end) for m in metric_mentions])
    intent = _base_intent(
        text,
        metrics=metrics,
        games=game_list,
        periods=periods,
        terms=terms,
        masked_metrics=masked_metrics,
    )

    blocked = [(m.start, m.end) for m in (*game_mentions, *metric_mentions, *dimension_mentions)]
    value_mentions = sorted([*pack.value_mentions(text), *linked_values], key=lambda m: m.start)
    picks, value_spans = _filters(pack, value_mentions, [*blocked, *period_spans], intent)

    dimensions = list(dict.fromkeys(m.target for m in dimension_mentions))
    all_games = bool(_ALL_GAMES.search(text))
    if all_games and not game_list and "game" not in dimensions:
        game_list = list(pack.games)

    masked = _mask(
        text,
        [
            *blocked,
            *period_spans,
            *value_spans,
            *[(m.start, m.end) for m in term_mentions],
        ],
    )
    anchors = [
        *metric_mentions,
        *dimension_mentions,
        *[Mention(a, b, text[a:b], "period") for a, b in period_spans],
        *[Mention(a, b, text[a:b], "value") for a, b in value_spans],
    ]
    unknown = (
        []
        if intent == "smalltalk"
        else _unknown_mentions(text, masked, pack, anchors, game_mentions)
    )
    unknown = [u for u in unknown if not _ALL_GAMES.fullmatch(u)]

    language: Language = detect_language(text)
    if previous is not None and not re.search(r"[A-Za-z\u4e00-\u9fff]", text):
        language = previous.language

    spec = QuestionSpec(
        text=text,
        intent=intent,
        games=tuple(game_list),
        metrics=tuple(metrics),
        period=None,
        compare_to=None,
        dimensions=tuple(dimensions),
        filters=_build_filters(pack, picks),
        terms=tuple(terms),
        unknown_mentions=tuple(unknown),
        language=language,
    )
    current, baseline = _order_periods(periods)
    spec = replace(spec, period=current)
    spec = _apply_followup(spec, previous, explicit_baseline=baseline)
    return _finish(spec, pack, text, explicit_baseline=baseline)


def _order_periods(periods: list[Period]) -> tuple[Period | None, Period | None]:
    """The period asked about and, when two are named, the baseline (the earlier one)."""
    if not periods:
        return None, None
    if len(periods) == 1:
        return periods[0], None
    first, second = periods[0], periods[1]
    if second.start > first.start:
        return second, first
    return first, second


def _apply_followup(
    spec: QuestionSpec, previous: QuestionSpec | None, *, explicit_baseline: Period | None
) -> QuestionSpec:
    if previous is None or spec.intent in ("smalltalk", "definition"):
        return spec
    if not (previous.games or previous.metrics or previous.period):
        return spec
    lacks_game = not spec.games and not spec.unknown_mentions and "game" not in spec.dimensions
    lacks_metric = not spec.metrics
    lacks_period = spec.period is None
    if not (lacks_game or lacks_metric or lacks_period):
        return spec
    changes: dict[str, Any] = {"is_followup": True}
    if lacks_game:
        changes["games"] = previous.games
    if lacks_metric:
        changes["metrics"] = previous.metrics
    if lacks_period:
        changes["period"] = previous.period
        if explicit_baseline is None:
            changes["compare_to"] = previous.compare_to
    new_grains = [d for d in spec.dimensions if d in _GRAIN_DIMENSIONS]
    kept = [d for d in previous.dimensions if not (new_grains and d in _GRAIN_DIMENSIONS)]
    changes["dimensions"] = tuple(dict.fromkeys([*kept, *spec.dimensions]))
    own = {f.dimension for f in spec.filters}
    changes["filters"] = (*[f for f in previous.filters if f.dimension not in own], *spec.filters)
    intent = spec.intent
    if intent in ("lookup", "unknown") and previous.intent in ANALYTIC_INTENTS:
        intent = previous.intent
    changes["intent"] = intent
    return replace(spec, **changes)


def _finish(
    spec: QuestionSpec, pack: KnowledgePack, text: str, *, explicit_baseline: Period | None
) -> QuestionSpec:
    """Derive what follows from the intent: default metric, grain, baseline period."""
    intent = spec.intent
    metrics = spec.metrics
    dimensions = list(spec.dimensions)
    if intent == "funnel" and not any(m.kind == "funnel" for m in metrics):
        metrics = metrics or (pack.metric("funnel_conversion"),)
    if intent in ("lookup", "unknown") and metrics and not spec.is_followup:
        intent = "lookup"
    if intent == "unknown" and metrics:
        intent = "lookup"
    if intent == "lookup" and not metrics:
        intent = "unknown"
    if intent == "trend" and not any(d in _GRAIN_DIMENSIONS for d in dimensions):
        dimensions.append("day")
    compare_to = spec.compare_to
    period = spec.period
    if explicit_baseline is not None:
        compare_to = explicit_baseline
    elif intent in ("compare", "why") and period is not None and compare_to is None:
        if _YOY.search(text):
            compare_to = period.year_ago()
        elif intent == "compare" and len(spec.games) >= 2 and not _MOM.search(text):
            compare_to = None
            if "game" not in dimensions:
                dimensions.append("game")
        else:
            compare_to = period.previous()
    if intent not in ("compare", "why"):
        compare_to = None
    return replace(
        spec,
        intent=intent,
        metrics=metrics,
        dimensions=tuple(dimensions),
        compare_to=compare_to,
    )
