"""Time expressions → periods: the case table in tests/fixtures/periods.yaml, plus invariants."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dataseer.knowledge.periods import Period, find_periods, parse_period

TABLE: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parents[1] / "fixtures" / "periods.yaml").read_text(encoding="utf-8")
)
DEFAULT_TODAY: date = TABLE["default_today"]


def _case_id(case: dict[str, Any]) -> str:
    return f"{case['expr']}@{case.get('today', DEFAULT_TODAY)}"


def test_table_is_large_enough() -> None:
    assert len(TABLE["single"]) >= 60


@pytest.mark.parametrize("case", TABLE["single"], ids=_case_id)
def test_single_expression(case: dict[str, Any]) -> None:
    today = case.get("today", DEFAULT_TODAY)
    found = find_periods(str(case["expr"]), today)
    assert len(found) == 1, found
    period = found[0]
    assert (period.start, period.end, period.grain) == (case["start"], case["end"], case["grain"])
    assert period.text == str(case.get("text", case["expr"]))
    if "label" in case:
        assert period.label == str(case["label"])
    assert parse_period(str(case["expr"]), today) == period


@pytest.mark.parametrize("text", TABLE["none"])
def test_no_period(text: str) -> None:
    assert find_periods(str(text), DEFAULT_TODAY) == []
    assert parse_period(str(text), DEFAULT_TODAY) is None


@pytest.mark.parametrize("case", TABLE["multi"], ids=lambda c: c["expr"])
def test_several_periods_in_order(case: dict[str, Any]) -> None:
    found = find_periods(case["expr"], case.get("today", DEFAULT_TODAY))
    got = [(p.text, p.start, p.end, p.grain) for p in found]
    want = [(str(p["text"]), p["start"], p["end"], p["grain"]) for p in case["periods"]]
    assert got == want


@pytest.mark.parametrize(
    "case", TABLE["shifts"], ids=lambda c: f"{c['grain']}:{c['start']}~{c['end']}"
)
def test_previous_and_year_ago(case: dict[str, Any]) -> None:
    period = Period(case["start"], case["end"], case["grain"])
    previous, year_ago = period.previous(), period.year_ago()
    assert [previous.start, previous.end] == case["previous"]
    assert [year_ago.start, year_ago.end] == case["year_ago"]
    assert previous.grain == year_ago.grain == period.grain
    assert previous.text == year_ago.text == ""


def test_labels_and_days() -> None:
    assert Period(date(2026, 8, 1), date(2026, 8, 31), "month").label == "2026-08"
    assert Period(date(2026, 7, 1), date(2026, 9, 30), "quarter").label == "2026Q3"
    assert Period(date(2025, 1, 1), date(2025, 12, 31), "year").label == "2025"
    assert Period(date(2026, 7, 1), date(2026, 12, 31), "range").label == "2026H2"
    week = Period(date(2026, 11, 16), date(2026, 11, 22), "week")
    assert week.label == "2026-11-16 ~ 2026-11-22"
    assert week.days() == 7
    assert Period(date(2026, 8, 1), date(2026, 8, 1), "day", label="x").label == "x"
    assert Period(date(2028, 2, 1), date(2028, 2, 29), "month").days() == 29


def test_invalid_period_is_rejected() -> None:
    with pytest.raises(ValueError, match="after its end"):
        Period(date(2026, 8, 2), date(2026, 8, 1), "day")
    with pytest.raises(ValueError, match="unknown grain"):
        Period(date(2026, 8, 1), date(2026, 8, 1), "fortnight")  # type: ignore[arg-type]


RELATIVE = [
    "昨天",
    "上周",
    "本周",
    "上个月",
    "本月",
    "近7天",
    "近三个月",
    "8月",
    "12月",
    "今年",
    "去年",
    "Q1",
    "Q4",
    "上季度",
    "本季度",
    "上半年",
    "国庆",
    "春节",
    "9月3日",
    "last 30 days",
]


NAMED = {"8月", "12月", "Q1", "Q4", "国庆", "春节", "9月3日"}


@given(
    today=st.dates(min_value=date(2021, 1, 1), max_value=date(2034, 12, 31)),
    expr=st.sampled_from(RELATIVE),
)
def test_relative_periods_never_reach_past_yesterday(today: date, expr: str) -> None:
    found = find_periods(expr, today)
    assert len(found) == 1
    period = found[0]
    if expr in NAMED:
        following = parse_period(f"{period.start.year + 1}年{expr}", today)
        assert following is not None
        assert following.start > today, "a year-less name means its most recent occurrence"
    assert period.end < today or period.start == period.end == today
    assert period.start.year >= today.year - 2


@st.composite
def _calendar_periods(draw: st.DrawFn) -> Period:
    """Periods of the shapes the parser makes: aligned starts, ends within the unit."""
    grain = draw(st.sampled_from(["day", "week", "month", "quarter", "year", "range"]))
    anchor = draw(st.dates(min_value=date(2001, 1, 1), max_value=date(2098, 12, 31)))
    if grain == "day":
        return Period(anchor, anchor, "day")
    if grain == "range":
        return Period(anchor, anchor + timedelta(days=draw(st.integers(0, 400))), "range")
    if grain == "week":
        start = anchor - timedelta(days=anchor.weekday())
        unit_end = start + timedelta(days=6)
    elif grain == "month":
        start = anchor.replace(day=1)
        unit_end = (start + timedelta(days=32)).replace(day=1) - timedelta(days=1)
    elif grain == "quarter":
        start = date(anchor.year, (anchor.month - 1) // 3 * 3 + 1, 1)
        unit_end = (start + timedelta(days=95)).replace(day=1) - timedelta(days=1)
    else:
        start = date(anchor.year, 1, 1)
        unit_end = date(anchor.year, 12, 31)
    end = draw(st.dates(min_value=start, max_value=unit_end))
    return Period(start, end, grain)  # type: ignore[arg-type]


@given(period=_calendar_periods())
def test_previous_precedes_and_year_ago_is_a_year_back(period: Period) -> None:
    previous = period.previous()
    assert previous.end < period.start
    assert previous.grain == period.grain
    if period.grain in ("day", "week"):
        assert previous.days() == period.days()
    if period.grain == "range" and period.start.day != 1:
        assert previous.days() == period.days()
        assert previous.end == period.start - timedelta(days=1)
    if period.grain in ("month", "quarter", "year"):
        assert previous.start.day == 1
        assert previous.days() <= period.days() + 3
    year_ago = period.year_ago()
    assert 363 <= (period.start - year_ago.start).days <= 366
    assert abs(year_ago.days() - period.days()) <= 1
