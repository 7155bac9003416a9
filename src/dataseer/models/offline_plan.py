"""What the offline analyst queries for each kind of question.

The plan is the multi-SQL strategy table of the analysis prompt, made
deterministic: a lookup is one query per metric; a trend is one daily (or
monthly) series; a comparison puts two periods side by side; a why-question
confirms the change, decomposes it across every dimension the metric allows
and lists the ops events of the period; a funnel question reads the funnel
overall and split by channel and SDK version.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from dataseer.knowledge.metrics import (
    compile_comparison_sql,
    compile_contribution_sql,
    compile_funnel_sql,
    compile_metric_sql,
    compile_ops_events_sql,
)
from dataseer.knowledge.pack import Metric
from dataseer.knowledge.understand import QuestionSpec

Grain = Literal["total", "day", "week", "month"]
QueryKind = Literal["total", "trend", "compare", "contribution", "events", "funnel"]

DECOMPOSE = ("channel", "region", "item_category", "sdk_version")
"""Dimensions a change is decomposed over, in the order they are reported."""


@dataclass(frozen=True)
class PlannedQuery:
    """One query of the plan, with the purpose and chart that travel with it."""

    kind: QueryKind
    purpose: str
    sql: str
    chart: str
    metric: str = ""
    dimension: str = ""


def _label(spec: QuestionSpec, metric: Metric) -> str:
    return metric.zh if spec.language == "zh" else metric.en


def _games_label(spec: QuestionSpec) -> str:
    if not spec.games:
        return "全部游戏" if spec.language == "zh" else "all games"
    return (
        "、".join(g.name for g in spec.games)
        if spec.language == "zh"
        else ", ".join(g.en_name or g.name for g in spec.games)
    )


def _dims(spec: QuestionSpec, metric: Metric) -> tuple[str, ...]:
    dims = tuple(
        d for d in spec.dimensions if d in metric.dimensions or d in {"day", "week", "month"}
    )
    if len(spec.games) != 1 and "game" not in dims and "game" in metric.dimensions:
        dims = ("game", *dims)
    return dims


def deepen(spec: QuestionSpec, line: str) -> QuestionSpec:
    """A lookup forced down the analysis line (``deep``) becomes an explanation.

    It gets the analysis a person would do: the change against the previous
    period, where it came from, and what happened meanwhile.
    """
    if line != "analysis" or spec.intent != "lookup" or spec.period is None:
        return spec
    return replace(spec, intent="why", compare_to=spec.compare_to or spec.period.previous())


def plan_queries(spec: QuestionSpec, *, line: str = "lookup") -> list[PlannedQuery]:
    """The queries that answer ``spec``, in order.

    Raises:
        ValueError: the spec has no metric or no period (the router asks first).
    """
    if not spec.metrics or spec.period is None:
        msg = "the offline analyst needs a resolved metric and period"
        raise ValueError(msg)
    zh = spec.language == "zh"
    period = spec.period
    games = spec.games
    if spec.intent == "funnel" or any(m.kind == "funnel" for m in spec.metrics):
        return _funnel_plan(spec)
    plan: list[PlannedQuery] = []
    for metric in spec.metrics:
        name = _label(spec, metric)
        dims = _dims(spec, metric)
        scope = f"{_games_label(spec)} {period.label}"
        if spec.intent == "trend":
            grain: Grain = "day" if period.days() <= 62 else "month"
            plan.append(
                PlannedQuery(
                    "trend",
                    f"{scope} {name}{'每日走势' if zh else ' daily trend'}"
                    if grain == "day"
                    else f"{scope} {name}{'月度走势' if zh else ' monthly trend'}",
                    compile_metric_sql(
                        metric,
                        games=games,
                        period=period,
                        dimensions=dims,
                        grain=grain,
                        filters=spec.filters,
                    ),
                    "line",
                    metric.key,
                )
            )
        elif spec.intent in {"compare", "why"} and spec.compare_to is not None:
            other = spec.compare_to
            plan.append(
                PlannedQuery(
                    "compare",
                    f"{_games_label(spec)} {name}：{period.label} 对比 {other.label}"
                    if zh
                    else f"{_games_label(spec)} {name}: {period.label} vs {other.label}",
                    compile_comparison_sql(
                        metric, games=games, period=period, compare_to=other, dimensions=dims
                    ),
                    "bar",
                    metric.key,
                )
            )
            if spec.intent == "why" or line == "analysis":
                for dim in DECOMPOSE:
                    if dim in metric.dimensions and dim not in dims:
                        plan.append(
                            PlannedQuery(
                                "contribution",
                                f"{name}变化按{_dim_label(spec, dim)}拆解"
                                if zh
                                else f"{name} change by {_dim_label(spec, dim)}",
                                compile_contribution_sql(
                                    metric,
                                    games=games,
                                    period=period,
                                    compare_to=other,
                                    dimension=dim,
                                ),
                                "bar",
                                metric.key,
                                dim,
                            )
                        )
        else:
            plan.append(
                PlannedQuery(
                    "total",
                    f"{scope} {name}",
                    compile_metric_sql(
                        metric,
                        games=games,
                        period=period,
                        dimensions=dims,
                        grain="total",
                        filters=spec.filters,
                    ),
                    "bar" if dims else "kpi",
                    metric.key,
                )
            )
    if spec.intent == "why" or (line == "analysis" and spec.intent in {"compare", "trend"}):
        plan.append(
            PlannedQuery(
                "events",
                f"{period.label} 期间的运营事件" if zh else f"ops events in {period.label}",
                compile_ops_events_sql(games=games, period=period),
                "table",
            )
        )
    return plan


def _dim_label(spec: QuestionSpec, key: str) -> str:
    from dataseer.services import get_services

    for dim in get_services().pack.dimensions:
        if dim.key == key:
            return dim.zh if spec.language == "zh" else dim.en
    return key


def _funnel_plan(spec: QuestionSpec) -> list[PlannedQuery]:
    assert spec.period is not None
    zh = spec.language == "zh"
    scope = f"{_games_label(spec)} {spec.period.label}"
    plan = [
        PlannedQuery(
            "funnel",
            f"{scope} SDK 漏斗" if zh else f"{scope} SDK funnel",
            compile_funnel_sql(
                games=spec.games,
                period=spec.period,
                dimensions=spec.dimensions,
                filters=spec.filters,
            ),
            "funnel",
        )
    ]
    if spec.intent in {"why", "funnel"} and not spec.dimensions:
        dims = ("channel", "sdk_version")
        plan.append(
            PlannedQuery(
                "funnel",
                f"{scope} 漏斗按渠道 × SDK 版本拆分"
                if zh
                else f"{scope} funnel by channel x SDK version",
                compile_funnel_sql(
                    games=spec.games, period=spec.period, dimensions=dims, filters=spec.filters
                ),
                "bar",
                dimension="channel,sdk_version",
            )
        )
    return plan
