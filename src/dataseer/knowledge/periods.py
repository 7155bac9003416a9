"""Time expressions in questions, Chinese and English, turned into date periods.

Analysts say "上个月", "近7天", "8月", "Q3 2026", "8月5日至8月20日" or
"last 30 days"; SQL needs two dates. This module finds every such expression
in a question and resolves it against a reference ``today`` (the configured
``DATASEER_TODAY`` in tests, the real date otherwise).

Choices, because each expression admits more than one reading:

* **Today is incomplete.** A warehouse is loaded up to yesterday, so rolling
  windows end yesterday: "近7天" / "last 7 days" is the 7 days ending
  yesterday, "近一个月" is ``today - 1 month`` to yesterday (calendar months,
  not 30 days), "近半年" is six calendar months.
* **Calendar periods that contain today run to yesterday**: "本月", "本周",
  "今年", "本季度", and likewise "11月" or "2026年" asked in November 2026,
  so that "11月" and "本月" mean the same thing. When today is the first day of
  such a period (the 1st, a Monday, 1 January) there is no complete day yet,
  and the period is just today (``start == end == today``) rather than empty
  or silently the previous period. Periods wholly in the future stay whole.
  Explicit dates and explicit date ranges are taken literally.
* **A month, quarter, date or holiday without a year is the most recent one
  that is not in the future**: on 2026-11-29 "8月" is 2026-08 and "12月" is
  2025-12; "Q4" is 2026 Q4 (to yesterday). A year stated just before carries
  to the next year-less expression joined by "和/与/、/and/vs": "2025年7月和8月"
  is 2025-07 and 2025-08.
* Weeks run Monday to Sunday. "上半年/下半年" without a year are the current
  year's halves. Holidays: 国庆 (Oct 1-7), 春节 (eve to the fifth day, 7 days,
  2020-2035), 五一 (May 1-5), 元旦, 双十一, 双十二 (single days), 暑假 (Jul-Aug).
* Bare numbers with a day unit are metric names, not periods: "7日留存" and
  "30天LTV" are left alone; only "近/最近/过去/前" make them windows. "周日均"
  and "周日活" are read as week + 日均/日活, not as Sunday. Dotted forms such
  as "9.3" are ambiguous with decimals and are not read.

``Period.previous`` returns the comparable preceding period (same length for
windows; the same part of the previous month/quarter/year for a period that
runs to yesterday) and ``Period.year_ago`` the same period a year earlier
(52 weeks earlier for a week, so it still starts on a Monday).

>>> p = parse_period("上个月流水多少", date(2026, 11, 29))
>>> (p.label, p.text, p.previous().label)
('2026-10', '上个月', '2026-09')
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Literal, get_args

from dateutil.relativedelta import relativedelta

__all__ = ["Grain", "Period", "find_periods", "parse_period"]

Grain = Literal["day", "week", "month", "quarter", "year", "range"]
_GRAINS = frozenset(get_args(Grain))
_ONE_DAY = timedelta(days=1)


def _month_end(d: date) -> date:
    return d.replace(day=calendar.monthrange(d.year, d.month)[1])


def _shift_months(start: date, end: date, months: int) -> tuple[date, date]:
    """Shift both ends by whole months, keeping an end that is a month's last day."""
    new_start = start + relativedelta(months=months)
    new_end = end + relativedelta(months=months)
    if end == _month_end(end):
        new_end = _month_end(new_end)
    return new_start, new_end


def _label(grain: Grain, start: date, end: date) -> str:
    """A human label: canonical names for whole calendar periods, dates otherwise."""
    if grain == "day" and start == end:
        return start.isoformat()
    whole_months = start.day == 1 and end == _month_end(end)
    months = (end.year - start.year) * 12 + end.month - start.month + 1
    if whole_months and start.year == end.year:
        if grain == "month" and months == 1:
            return f"{start:%Y-%m}"
        if grain == "quarter" and months == 3 and start.month % 3 == 1:
            return f"{start.year}Q{(start.month - 1) // 3 + 1}"
        if grain == "year" and months == 12:
            return str(start.year)
        if grain == "range" and months == 6 and start.month in (1, 7):
            return f"{start.year}H{1 if start.month == 1 else 2}"
    return f"{start.isoformat()} ~ {end.isoformat()}"


@dataclass(frozen=True)
class Period:
    """An inclusive date range with the grain it was named at.

    Attributes:
        start: First day, inclusive.
        end: Last day, inclusive.
        grain: What the expression named; drives ``previous`` and labels.
        label: Human label such as ``2026-08`` or ``2026-11-16 ~ 2026-11-22``;
            computed from the dates when left empty.
        text: The source text that was matched, e.g. ``上个月``; empty for
            periods derived with ``previous`` or ``year_ago``.
    """

    start: date
    end: date
    grain: Grain
    label: str = field(default="")
    text: str = field(default="")

    def __post_init__(self) -> None:
        if self.grain not in _GRAINS:
            msg = f"unknown grain {self.grain!r}; expected one of {sorted(_GRAINS)}"
            raise ValueError(msg)
        if self.start > self.end:
            msg = f"period start {self.start} is after its end {self.end}"
            raise ValueError(msg)
        if not self.label:
            object.__setattr__(self, "label", _label(self.grain, self.start, self.end))

    def days(self) -> int:
        """Number of days in the period, both ends counted."""
        return (self.end - self.start).days + 1

    def previous(self) -> Period:
        """The comparable preceding period, for 环比 (period-over-period).

        A whole month gives the whole previous month; a month to yesterday
        (Nov 1-28) gives the same days of the previous month (Oct 1-28), and
        likewise for quarters and years. A week gives the week before (same
        weekdays), a day the day before. A window of N days gives the N days
        before it, unless it is made of whole months (e.g. 上半年), which gives
        the same number of whole months before it.
        """
        if self.grain in ("day", "week"):
            step = timedelta(days=1 if self.grain == "day" else 7)
            return Period(self.start - step, self.end - step, self.grain)
        if self.grain in ("month", "quarter", "year"):
            months = {"month": 1, "quarter": 3, "year": 12}[self.grain]
            return Period(*_shift_months(self.start, self.end, -months), self.grain)
        if self.start.day == 1 and self.end == _month_end(self.end):
            months = (self.end.year - self.start.year) * 12 + self.end.month - self.start.month + 1
            return Period(*_shift_months(self.start, self.end, -months), self.grain)
        step = timedelta(days=self.days())
        return Period(self.start - step, self.end - step, self.grain)

    def year_ago(self) -> Period:
        """The same period one year earlier, for 同比 (year-over-year).

        Weeks move back 52 weeks so they still start on a Monday; everything
        else moves back 12 calendar months (29 February becomes the 28th, and
        a period ending on a month's last day still does).
        """
        if self.grain == "week":
            step = timedelta(weeks=52)
            return Period(self.start - step, self.end - step, self.grain)
        return Period(*_shift_months(self.start, self.end, -12), self.grain)


# --------------------------------------------------------------------------- numbers

_CN_DIGIT = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_EN_NUMBER = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fourteen": 14,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "sixty": 60,
    "ninety": 90,
}
_EN_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_MONTH_EN = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}


def _number(text: str) -> int:
    """Read Arabic digits, Chinese numerals (up to 百), English words or 半 (=0)."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    if text in _EN_NUMBER:
        return _EN_NUMBER[text]
    if text[:1].isdigit():
        return int(re.match(r"\d+", text).group())  # type: ignore[union-attr]
    if text in _EN_ORDINAL:
        return _EN_ORDINAL[text]
    total = current = 0
    pending = False
    for ch in text:
        if ch in _CN_DIGIT:
            if pending:
                msg = f"not a number: {text!r}"
                raise ValueError(msg)
            current, pending = _CN_DIGIT[ch], True
        elif ch == "十":
            total += (current or 1) * 10
            current, pending = 0, False
        elif ch == "百":
            total += (current or 1) * 100
            current, pending = 0, False
        else:
            msg = f"not a number: {text!r}"
            raise ValueError(msg)
    return total + current


# --------------------------------------------------------------------------- regex pieces

_FULLWIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
_YP = r"(?:(?:\d{4}|\d{2})\s*年(?:度)?|今年|去年|前年|明年)"
_YEAR_PREFIX = rf"(?:(?P<yp>{_YP})\s*(?:的\s*)?)?"
_MD = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
_CN_N = r"(?:\d{1,4}|[零〇一二两三四五六七八九十百]{1,5})"
_EN_N = r"(?:\d{1,4}|" + "|".join(sorted(_EN_NUMBER, key=len, reverse=True)) + ")"
_MON_EN = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ORD = r"(?:st|nd|rd|th)?"
_ISO_DATE = r"\d{4}\s*[-/.]\s*\d{1,2}\s*[-/.]\s*\d{1,2}"
_COMPACT_DATE = r"(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
_CN_DATE = rf"(?:{_YP}\s*(?:的\s*)?)?{_MD}\s*月\s*{_MD}\s*[日号號]"
_EN_DATE = (
    rf"\b{_MON_EN}\.?\s+\d{{1,2}}{_ORD}(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}{_ORD}\s+(?:of\s+)?{_MON_EN}\.?(?:,?\s+\d{{4}})?\b"
)
_DATE = rf"(?:{_ISO_DATE}|{_COMPACT_DATE}|{_CN_DATE}|{_EN_DATE})"
_MONTH_TOKEN = (
    rf"(?:(?:{_YP}\s*(?:的\s*)?)?{_MD}\s*月(?:份)?|\d{{4}}\s*[-/]\s*\d{{1,2}}"
    rf"|\b{_MON_EN}\.?(?:,?\s+\d{{4}})?\b)"
)
_SEP = r"\s*(?:到|至|~|～|-|—|–|－|——|to|until|till|through|thru)\s*"
_JOINER = re.compile(
    r"\s*(?:和|与|跟|及|以及|、|,|，|/|还有|对比|比|vs\.?|versus|and|&|or|或)?\s*", re.IGNORECASE
)

_Span = tuple[date, date, Grain]
_Build = Callable[[int | None], _Span | None]


@dataclass(frozen=True)
class _Candidate:
    """A regex hit before overlaps are resolved; ``build`` takes a carried year."""

    start: int
    end: int
    order: int
    build: _Build
    year: int | None
    inherits: bool


# --------------------------------------------------------------------------- resolution helpers


def _year_of(prefix: str | None, today: date) -> int | None:
    if not prefix:
        return None
    prefix = prefix.strip()
    relative = {"今年": 0, "去年": -1, "前年": -2, "明年": 1}
    if prefix in relative:
        return today.year + relative[prefix]
    digits = re.match(r"\d+", prefix)
    if digits is None:
        return None
    value = int(digits.group())
    return value + 2000 if value < 100 else value


def _clamp(start: date, end: date, today: date) -> tuple[date, date]:
    """Cut a calendar period that contains today at yesterday (see module docs)."""
    if end < today or start > today:
        return start, end
    if start == today:
        return today, today
    return start, today - _ONE_DAY


def _month_span(year: int, month: int) -> tuple[date, date]:
    start = date(year, month, 1)
    return start, _month_end(start)


def _recent_year(month: int, day: int, today: date) -> int:
    """The year in which (month, day) last happened, today included."""
    return today.year if (month, day) <= (today.month, today.day) else today.year - 1


def _week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


# Chinese New Year's Day; the 春节 holiday is taken as the eve plus six days.
_CNY = {
    2020: date(2020, 1, 25),
    2021: date(2021, 2, 12),
    2022: date(2022, 2, 1),
    2023: date(2023, 1, 22),
    2024: date(2024, 2, 10),
    2025: date(2025, 1, 29),
    2026: date(2026, 2, 17),
    2027: date(2027, 2, 6),
    2028: date(2028, 1, 26),
    2029: date(2029, 2, 13),
    2030: date(2030, 2, 3),
    2031: date(2031, 1, 23),
    2032: date(2032, 2, 11),
    2033: date(2033, 1, 31),
    2034: date(2034, 2, 19),
    2035: date(2035, 2, 8),
}


def _holiday(name: str, year: int) -> tuple[date, date] | None:
    name = name.lower()
    if name.startswith(("国庆", "national")):
        return date(year, 10, 1), date(year, 10, 7)
    if name.startswith(("春节", "spring", "chinese", "lunar")):
        if year not in _CNY:
            return None
        eve = _CNY[year] - _ONE_DAY
        return eve, eve + timedelta(days=6)
    if name.startswith(("五一", "劳动")):
        return date(year, 5, 1), date(year, 5, 5)
    if name.startswith("元旦"):
        return date(year, 1, 1), date(year, 1, 1)
    if name in ("双十一", "双11"):
        return date(year, 11, 11), date(year, 11, 11)
    if name in ("双十二", "双12"):
        return date(year, 12, 12), date(year, 12, 12)
    return date(year, 7, 1), date(year, 8, 31)


def _parse_date(token: str, today: date) -> tuple[int | None, int, int, bool] | None:
    """Read one date token into (year or None, month, day, day_only)."""
    token = token.strip()
    lower = token.lower()
    if m := re.fullmatch(r"(\d{4})\s*[-/.]\s*(\d{1,2})\s*[-/.]\s*(\d{1,2})", token):
        return int(m[1]), int(m[2]), int(m[3]), False
    if re.fullmatch(r"\d{8}", token):
        return int(token[:4]), int(token[4:6]), int(token[6:]), False
    if m := re.fullmatch(
        rf"(?:(?P<yp>{_YP})\s*(?:的\s*)?)?({_MD})\s*月\s*({_MD})\s*[日号號]", token
    ):
        return _year_of(m["yp"], today), _number(m[2]), _number(m[3]), False
    if m := re.fullmatch(rf"({_MD})\s*[日号號]", token):
        return None, 0, _number(m[1]), True
    if m := re.fullmatch(rf"({_MON_EN})\.?\s+(\d{{1,2}}){_ORD}(?:,?\s+(\d{{4}}))?", lower):
        return (int(m[3]) if m[3] else None), _MONTH_EN[m[1][:3]], int(m[2]), False
    if m := re.fullmatch(
        rf"(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MON_EN})\.?(?:,?\s+(\d{{4}}))?", lower
    ):
        return (int(m[3]) if m[3] else None), _MONTH_EN[m[2][:3]], int(m[1]), False
    return None


def _parse_month(token: str, today: date) -> tuple[int | None, int] | None:
    """Read one month token into (year or None, month)."""
    token = token.strip()
    lower = token.lower()
    if m := re.fullmatch(rf"(?:(?P<yp>{_YP})\s*(?:的\s*)?)?({_MD})\s*月(?:份)?", token):
        return _year_of(m["yp"], today), _number(m[2])
    if m := re.fullmatch(r"(\d{4})\s*[-/]\s*(\d{1,2})", token):
        return int(m[1]), int(m[2])
    if m := re.fullmatch(rf"({_MON_EN})\.?(?:,?\s+(\d{{4}}))?", lower):
        return (int(m[2]) if m[2] else None), _MONTH_EN[m[1][:3]]
    if m := re.fullmatch(_MD, token):
        return None, _number(token)
    return None


# --------------------------------------------------------------------------- rules

_Factory = Callable[["re.Match[str]", date], "tuple[_Build, int | None, bool] | None"]
_RULES: list[tuple[re.Pattern[str], _Factory]] = []


def _rule(pattern: str) -> Callable[[_Factory], _Factory]:
    """Register a factory that turns a regex hit into a period builder."""

    def register(factory: _Factory) -> _Factory:
        _RULES.append((re.compile(pattern, re.IGNORECASE), factory))
        return factory

    return register


def _fixed(span: _Span) -> tuple[_Build, int | None, bool]:
    return (lambda _ctx: span), None, False


def _calendar(start: date, end: date, grain: Grain, today: date, *, clamp: bool = True) -> _Span:
    if clamp:
        start, end = _clamp(start, end, today)
    return start, end, grain


# Relative days.
@_rule(r"今天|今日|\btoday\b")
def _today(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    return _fixed((today, today, "day"))


_DAYS_BACK = {"大前天": 3, "前天": 2, "前日": 2, "昨天": 1, "昨日": 1, "yesterday": 1}


@_rule(r"大前天|前天|前日|昨天|昨日|\b(?:the\s+)?day\s+before\s+yesterday\b|\byesterday\b")
def _yesterday(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    day = today - timedelta(days=_DAYS_BACK.get(m[0].lower(), 2))
    return _fixed((day, day, "day"))


@_rule(rf"(?P<n>{_CN_N})\s*(?:天|日)(?:之|以)?前|\b(?P<en>{_EN_N})\s+days?\s+ago\b")
def _days_ago(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    n = _number(m["n"] or m["en"])
    if not 0 < n <= 3660:
        return None
    day = today - timedelta(days=n)
    return _fixed((day, day, "day"))


# Rolling windows ending yesterday.
@_rule(
    rf"(?:最近|近|过去|前)\s*(?:的\s*)?(?P<n>{_CN_N}|半)\s*(?:个)?\s*(?P<u>天|日|周|星期|礼拜|月|年)"
    rf"|\b(?:in\s+)?(?:the\s+)?(?:last|past|previous|prior|trailing|recent)\s+"
    rf"(?P<en>{_EN_N})\s+(?P<eu>days?|weeks?|months?|years?)\b"
    r"|\b(?:in\s+)?(?:the\s+)?(?:past|trailing)\s+(?P<one>week|month|year)\b"
)
def _rolling(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    unit = (m["u"] or m["eu"] or m["one"]).lower().rstrip("s")
    unit = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week"}.get(unit, unit)
    unit = {"月": "month", "年": "year"}.get(unit, unit)
    raw = m["n"] or m["en"] or "1"
    end = today - _ONE_DAY
    if raw == "半":
        if unit == "year":
            start = today - relativedelta(months=6)
        elif unit == "month":
            start = today - timedelta(days=15)
        else:
            return None
        return _fixed((start, end, "range"))
    n = _number(raw)
    if n <= 0:
        return None
    if unit == "day":
        start = today - timedelta(days=n)
    elif unit == "week":
        start = today - timedelta(weeks=n)
    elif unit == "month":
        start = today - relativedelta(months=n)
    else:
        start = today - relativedelta(years=n)
    if start.year < 1900:
        return None
    return _fixed((start, end, "range"))


# Weeks and weekdays.
@_rule(
    r"(?P<cn>上上|上|本|这)\s*(?:一|个)?\s*(?:周|星期|礼拜)|上週|本週"
    r"|\b(?P<en>last|previous|prior|this|current)\s+week\b|\b(?:the\s+)?week\s+before\s+last\b"
    r"|\bweek\s+to\s+date\b|\bwtd\b"
)
def _week(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    text = m[0].lower()
    if text.startswith("上上") or "before last" in text:
        back = 2
    elif text.startswith("上") or (m["en"] or "").lower() in ("last", "previous", "prior"):
        back = 1
    else:
        back = 0
    start = _week_start(today) - timedelta(weeks=back)
    return _fixed(_calendar(start, start + timedelta(days=6), "week", today))


_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}


@_rule(
    r"(?<!每)(?P<pre>上上|上|本|这个?)?\s*(?:周|星期|礼拜)"
    r"(?P<wd>一(?![共起样般些直])|[二三四五六1-7]|[日天](?![均活留新增付流收注登在充]))(?!\d)"
)
def _weekday(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    weekday = _WEEKDAY[m["wd"]] if m["wd"] in _WEEKDAY else int(m["wd"]) - 1
    pre = m["pre"] or ""
    if pre:
        back = {"上上": 2, "上": 1}.get(pre, 0)
        day = _week_start(today) - timedelta(weeks=back) + timedelta(days=weekday)
    else:
        day = today - timedelta(days=(today.weekday() - weekday) % 7)
    return _fixed((day, day, "day"))


@_rule(r"(?<!\d)(?:(?P<y>\d{4})\s*-?\s*W|(?P<cy>\d{4})\s*年\s*第)\s*(?P<w>\d{1,2})(?:\s*周)?(?!\d)")
def _iso_week(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    if m["cy"] and not m[0].endswith("周"):
        return None
    year = int(m["y"] or m["cy"])
    try:
        start = date.fromisocalendar(year, int(m["w"]), 1)
    except ValueError:
        return None
    return (lambda _ctx: _calendar(start, start + timedelta(days=6), "week", today)), year, False


# Months.
@_rule(
    r"(?P<back>上上|上一?)\s*个?\s*月(?:份)?|(?:本|这一?个?)\s*月(?:份)?"
    r"|月初至今|月初以来|本月至今|本月以来"
    r"|\b(?P<en>last|previous|prior|this|current)\s+month\b|\b(?:the\s+)?month\s+before\s+last\b"
    r"|\bmonth\s+to\s+date\b|\bmtd\b"
)
def _relative_month(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    text = m[0].lower()
    if (m["back"] or "").startswith("上上") or "before last" in text:
        back = 2
    elif m["back"] or (m["en"] or "").lower() in ("last", "previous", "prior"):
        back = 1
    else:
        back = 0
    start = today.replace(day=1) - relativedelta(months=back)
    return _fixed(_calendar(start, _month_end(start), "month", today))


def _month_builder(year: int | None, month: int, today: date) -> _Build:
    def build(ctx: int | None) -> _Span | None:
        y = year if year is not None else ctx
        if y is None:
            y = _recent_year(month, 1, today)
        start, end = _month_span(y, month)
        return _calendar(start, end, "month", today)

    return build


@_rule(
    rf"(?<!\d){_YEAR_PREFIX}(?P<m>{_MD})\s*月(?:份)?"
    r"|(?<!\d)(?P<y>\d{4})\s*[-/]\s*(?P<nm>\d{1,2})(?!\d)(?!\s*[-/.]\s*\d)"
)
def _month(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    month = _number(m["m"] or m["nm"])
    if not 1 <= month <= 12:
        return None
    year = int(m["y"]) if m["y"] else _year_of(m["yp"], today)
    return _month_builder(year, month, today), year, year is None


_THIRDS = {"上旬": (1, 10), "中旬": (11, 20), "下旬": (21, 31)}


@_rule(rf"(?<!\d){_YEAR_PREFIX}(?P<m>{_MD})\s*月(?:份)?\s*(?P<part>上旬|中旬|下旬)")
def _month_third(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    """上旬 / 中旬 / 下旬: days 1-10, 11-20 and 21 to the month's end."""
    month = _number(m["m"])
    if not 1 <= month <= 12:
        return None
    year = _year_of(m["yp"], today)
    first_day, last_day = _THIRDS[m["part"]]

    def build(ctx: int | None) -> _Span | None:
        y = year if year is not None else ctx
        if y is None:
            y = _recent_year(month, first_day, today)
        first, last = _month_span(y, month)
        end = last if last_day == 31 else first.replace(day=last_day)
        return _calendar(first.replace(day=first_day), end, "range", today)

    return build, year, year is None


@_rule(
    rf"\b(?P<mon>{_MON_EN})\b\.?(?:,?\s+(?:of\s+)?(?P<y>\d{{4}})(?!\d))?"
    rf"|\b(?P<y2>\d{{4}})\s+(?P<mon2>{_MON_EN})\b"
)
def _month_en(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    name = (m["mon"] or m["mon2"]).lower()
    y = m["y"] or m["y2"]
    if name == "may" and not y:
        before = m.string[: m.start()].lower()
        if not re.search(r"\b(?:in|during|for|of|since|until)\s+$", before):
            return None
    year = int(y) if y else None
    return _month_builder(year, _MONTH_EN[name[:3]], today), year, year is None


@_rule(rf"(?<!\d)(?P<a>{_MONTH_TOKEN}|{_MD}){_SEP}(?P<b>{_MONTH_TOKEN})")
def _month_range(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    first = _parse_month(m["a"], today)
    last = _parse_month(m["b"], today)
    if first is None or last is None or not (1 <= first[1] <= 12 and 1 <= last[1] <= 12):
        return None
    y1, m1 = first
    y2, m2 = last
    explicit = y1 if y1 is not None else y2

    def build(ctx: int | None) -> _Span | None:
        a_year, b_year = y1, y2
        if a_year is None and b_year is not None:
            a_year = b_year if m1 <= m2 else b_year - 1
        if a_year is None:
            a_year = ctx if ctx is not None else _recent_year(m1, 1, today)
        if b_year is None:
            b_year = a_year if m2 >= m1 else a_year + 1
        start = date(a_year, m1, 1)
        end = _month_end(date(b_year, m2, 1))
        if start > end:
            return None
        return _calendar(start, end, "range", today)

    return build, explicit, explicit is None


# Quarters.
@_rule(
    r"(?P<back>上上|上)\s*(?:个|一)?\s*季(?:度)?|(?:本|这一?个?|当前)\s*季(?:度)?"
    r"|\b(?P<en>last|previous|prior|this|current)\s+quarter\b"
    r"|\b(?:the\s+)?quarter\s+before\s+last\b|\bquarter\s+to\s+date\b|\bqtd\b"
)
def _relative_quarter(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    text = m[0].lower()
    if (m["back"] or "") == "上上" or "before last" in text:
        back = 2
    elif m["back"] or (m["en"] or "").lower() in ("last", "previous", "prior"):
        back = 1
    else:
        back = 0
    this_quarter = date(today.year, (today.month - 1) // 3 * 3 + 1, 1)
    start = this_quarter - relativedelta(months=3 * back)
    end = _month_end(start + relativedelta(months=2))
    return _fixed(_calendar(start, end, "quarter", today))


def _quarter_builder(year: int | None, quarter: int, today: date) -> _Build:
    def build(ctx: int | None) -> _Span | None:
        y = year if year is not None else ctx
        if y is None:
            current = (today.month - 1) // 3 + 1
            y = today.year if quarter <= current else today.year - 1
        start = date(y, 3 * quarter - 2, 1)
        end = _month_end(date(y, 3 * quarter, 1))
        return _calendar(start, end, "quarter", today)

    return build


@_rule(
    r"(?<![a-z0-9])(?:(?P<y>\d{4})\s*(?:-|年)?\s*)?Q(?P<q>[1-4])(?![0-9a-z])"
    r"(?:\s*(?:of\s+|,\s*)?(?P<y2>\d{4})(?!\d))?"
    rf"|(?<!\d){_YEAR_PREFIX}(?:第\s*(?P<q1>[一二三四1-4])\s*季(?:度)?|(?P<q2>[一二三四1-4])\s*季度)"
    r"|\b(?:the\s+)?(?P<qen>first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter"
    r"(?:\s+(?:of\s+)?(?P<y3>\d{4}))?\b"
)
def _quarter(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    raw = m["q"] or m["q1"] or m["q2"] or m["qen"]
    quarter = int(raw) if raw.isdigit() else _number(raw)
    y = m["y"] or m["y2"] or m["y3"]
    year = int(y) if y else _year_of(m["yp"], today)
    return _quarter_builder(year, quarter, today), year, year is None


# Halves and years.
@_rule(
    rf"(?<!\d){_YEAR_PREFIX}(?P<h>[上下])半年"
    r"|(?<![a-z0-9])(?:(?P<y>\d{4})\s*)?H(?P<hn>[12])(?![0-9a-z])(?:\s*(?P<y2>\d{4})(?!\d))?"
    r"|\b(?:the\s+)?(?P<hen>first|second)\s+half(?:\s+of\s+(?:the\s+year|(?P<y3>\d{4})))?\b"
)
def _half(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    first = m["h"] == "上" or m["hn"] == "1" or (m["hen"] or "").lower() == "first"
    y = m["y"] or m["y2"] or m["y3"]
    year = int(y) if y else _year_of(m["yp"], today)

    def build(ctx: int | None) -> _Span | None:
        y = year if year is not None else (ctx if ctx is not None else today.year)
        start = date(y, 1 if first else 7, 1)
        end = date(y, 6, 30) if first else date(y, 12, 31)
        return _calendar(start, end, "range", today)

    return build, year, year is None


@_rule(
    r"(?P<rel>今年以来|今年|本年至今|本年度?|年初至今|年初以来|去年|上一?年度?|前年)"
    r"|\b(?P<en>this|current|last|previous|prior)\s+year\b|\b(?:the\s+)?year\s+before\s+last\b"
    r"|\byear\s+to\s+date\b|\bytd\b"
)
def _relative_year(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    text = m[0].lower()
    if text == "前年" or "before last" in text:
        back = 2
    elif text.startswith(("去年", "上")) or (m["en"] or "").lower() in (
        "last",
        "previous",
        "prior",
    ):
        back = 1
    else:
        back = 0
    year = today.year - back
    span = _calendar(date(year, 1, 1), date(year, 12, 31), "year", today)
    return _fixed(span)


@_rule(
    r"(?<!\d)(?P<y>\d{4})\s*年(?:度)?(?:\s*全年)?"
    r"|(?:(?<=\bin\s)|(?<=\bduring\s)|(?<=\bfor\s)|(?<=\bof\s)|(?<=\bsince\s)|(?<=\byear\s)"
    r"|(?<=\bfy)|(?<=\bfy\s))(?P<en>(?:19|20)\d{2})\b(?!\s*[-/.]\s*\d)"
)
def _year(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool]:
    year = int(m["y"] or m["en"])
    span = _calendar(date(year, 1, 1), date(year, 12, 31), "year", today)
    return _fixed(span)


# Holidays.
@_rule(
    rf"(?<!\d){_YEAR_PREFIX}(?P<h>国庆(?:节|假期|长假|黄金周)?|春节(?:假期|长假)?|五一(?:假期|长假)?"
    r"|劳动节|元旦|双十一|双11|双十二|双12|暑假|暑期)"
    r"|\b(?P<en>national\s+day|spring\s+festival|(?:chinese|lunar)\s+new\s+year)"
    r"(?:\s+(?:of\s+)?(?P<y>\d{4}))?\b"
)
def _holiday_rule(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    name = m["h"] or m["en"]
    year = int(m["y"]) if m["y"] else _year_of(m["yp"], today)

    def build(ctx: int | None) -> _Span | None:
        y = year if year is not None else ctx
        if y is None:
            this_year = _holiday(name, today.year)
            y = today.year if this_year is not None and this_year[0] <= today else today.year - 1
        span = _holiday(name, y)
        if span is None:
            return None
        grain: Grain = "day" if span[0] == span[1] else "range"
        return _calendar(span[0], span[1], grain, today)

    return build, year, year is None


# Dates and date ranges, taken literally.
def _date_builder(
    first: tuple[int | None, int, int, bool],
    last: tuple[int | None, int, int, bool] | None,
    today: date,
) -> _Build:
    def build(ctx: int | None) -> _Span | None:
        y1, m1, d1, _ = first
        if last is None:
            y = y1 if y1 is not None else ctx
            day = date(y if y is not None else _recent_year(m1, d1, today), m1, d1)
            return day, day, "day"
        y2, m2, d2, day_only = last
        if day_only:
            y2, m2 = y1, m1
        if y1 is None and y2 is not None:
            y1 = y2 if (m1, d1) <= (m2, d2) else y2 - 1
        if y1 is None:
            y1 = ctx if ctx is not None else _recent_year(m1, d1, today)
        if y2 is None:
            y2 = y1 if (m2, d2) >= (m1, d1) else y1 + 1
        start, end = date(y1, m1, d1), date(y2, m2, d2)
        if start > end:
            return None
        return start, end, "range"

    return build


@_rule(
    rf"(?:(?:from|since)\s+|从|自|由)?(?<!\d)(?P<a>{_DATE})(?!\d){_SEP}"
    rf"(?P<b>{_DATE}|{_MD}\s*[日号號])(?!\d)(?:\s*(?:之间|为止|止))?"
    rf"|\bbetween\s+(?P<a2>{_DATE})\s+and\s+(?P<b2>{_DATE})(?!\d)"
)
def _date_range(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    first = _parse_date(m["a"] or m["a2"], today)
    last = _parse_date(m["b"] or m["b2"], today)
    if first is None or last is None:
        return None
    explicit = first[0] if first[0] is not None else last[0]
    return _date_builder(first, last, today), explicit, explicit is None


@_rule(rf"(?<!\d)(?P<d>{_DATE})(?!\d)")
def _single_date(m: re.Match[str], today: date) -> tuple[_Build, int | None, bool] | None:
    parsed = _parse_date(m["d"], today)
    if parsed is None:
        return None
    return _date_builder(parsed, None, today), parsed[0], parsed[0] is None


# --------------------------------------------------------------------------- public API


def _candidates(text: str, today: date) -> list[_Candidate]:
    found: list[_Candidate] = []
    for order, (pattern, factory) in enumerate(_RULES):
        for m in pattern.finditer(text):
            try:
                made = factory(m, today)
                if made is None or made[0](None) is None:
                    continue
            except ValueError:
                continue
            build, year, inherits = made
            found.append(_Candidate(m.start(), m.end(), order, build, year, inherits))
    return found


def find_periods(text: str, today: date) -> list[Period]:
    """Find every time expression in ``text``, in order of appearance.

    Overlapping hits are resolved leftmost first, then longest ("2026年8月"
    beats "8月", "上上个月" beats "上个月"). A year stated in one expression
    carries to the next year-less one when only a joiner ("和", "、", "and",
    "vs") separates them.

    Args:
        text: The question, in Chinese, English or both.
        today: The reference date; usually the first day without complete data.

    Returns:
        Non-overlapping periods; ``text`` on each is the matched source text.
    """
    normalized = text.translate(_FULLWIDTH)
    ranked = sorted(
        _candidates(normalized, today), key=lambda c: (c.start, -(c.end - c.start), c.order)
    )
    periods: list[Period] = []
    position = 0
    carried: int | None = None
    previous_end = -1
    for cand in ranked:
        if cand.start < position:
            continue
        joined = previous_end >= 0 and _JOINER.fullmatch(normalized[previous_end : cand.start])
        context = carried if cand.inherits and joined else None
        try:
            span = cand.build(context)
        except ValueError:
            span = None
        if span is None:
            continue
        start, end, grain = span
        periods.append(Period(start, end, grain, text=text[cand.start : cand.end].strip()))
        carried = cand.year if cand.year is not None else context
        position = previous_end = cand.end
    return periods


def parse_period(text: str, today: date) -> Period | None:
    """The first time expression in ``text``, or ``None`` when there is none."""
    found = find_periods(text, today)
    return found[0] if found else None
