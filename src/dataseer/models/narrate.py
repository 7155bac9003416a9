"""The offline analyst's words: findings written from result rows, never invented.

Every number in the text is read from a query result of this run and
formatted without changing its value (thousands separators, percentages of
ratios), so the verify step and a reader can trace it back to a table. The
key finding comes first; each query's finding follows in plan order.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from dataseer.knowledge.understand import QuestionSpec
from dataseer.models.offline_plan import PlannedQuery
from dataseer.prompt import load_prompt, render
from dataseer.sql.execute import Denial, parse_denial

RATIO_KINDS = frozenset({"ratio", "retention", "funnel"})

Row = dict[str, Any]

TEXT: dict[str, dict[str, str]] = {
    "zh": {
        "failed": "「{purpose}」查询失败：{error}",
        "empty": "「{purpose}」没有数据（结果为空）。",
        "partial": "部分计划中的查询未完成（步数预算用尽），以上结论仅基于已完成的查询。",
        "kpi": "{purpose}：{value}。",
        "ranking": "{purpose}：{items}{more}。",
        "more": "（共 {n} 项）",
        "trend": "{purpose}：从 {t0} 的 {v0} 到 {t1} 的 {v1}；"
        "最高 {tp}（{vp}），最低 {tl}（{vl}）。",
        "outlier": " {t} 明显异常：仅为中位数 {median} 的 {share}。",
        "compare": "{label}{metric} {period} 为 {cur}，{other} 为 {prev}（变化 {delta}{pct}）",
        "pct": "，{pct}",
        "contribution": "{purpose}：贡献最大的是 {top}（{prev} → {cur}，"
        "变化 {delta}{share}）{runner}。",
        "share": "，占总变化的 {share}",
        "runner": "；其次是 {name}（{delta}）",
        "events": "期间的运营事件：{items}。",
        "no_events": "期间没有记录的运营事件。",
        "funnel": "{purpose}：逐步转化率 {steps}；整体转化 {overall}。",
        "funnel_flat": "{purpose}：各分组转化率没有明显异常。",
        "funnel_worst": "{purpose}：{segment} 的 {step} 步转化率仅 {value}，明显低于各分组中位数 "
        "{median}，是转化下降的主要来源。",
        "headline": "结论：{scope}{metric}{change}，主要由{dimension}「{driver}」驱动（占变化的 "
        "{share}）{event}。",
        "headline_event": "，与运营事件「{event}」（{start} ~ {end}）同期",
        "sep": "、",
        "join": "；",
    },
    "en": {
        "failed": "'{purpose}' failed: {error}",
        "empty": "'{purpose}': no data (empty result).",
        "partial": "Some planned queries did not run (step budget spent); the findings above "
        "rest only on the queries that did.",
        "kpi": "{purpose}: {value}.",
        "ranking": "{purpose}: {items}{more}.",
        "more": " ({n} items)",
        "trend": "{purpose}: from {v0} on {t0} to {v1} on {t1}; "
        "peak {vp} on {tp}, low {vl} on {tl}.",
        "outlier": " {t} stands out: only {share} of the median {median}.",
        "compare": "{label}{metric} was {cur} in {period} vs {prev} in {other} "
        "(change {delta}{pct})",
        "pct": ", {pct}",
        "contribution": "{purpose}: the largest contributor is {top} ({prev} → {cur}, change "
        "{delta}{share}){runner}.",
        "share": ", {share} of the total change",
        "runner": "; next {name} ({delta})",
        "events": "Ops events in the period: {items}.",
        "no_events": "No ops events are recorded in the period.",
        "funnel": "{purpose}: step conversion {steps}; overall {overall}.",
        "funnel_flat": "{purpose}: no segment stands out.",
        "funnel_worst": "{purpose}: {segment} converts only {value} at step {step}, far below "
        "the median of {median} across segments: the main source of the drop.",
        "headline": "Key finding: {scope}{metric}{change}, driven mostly by {dimension} "
        "'{driver}' ({share} of the change){event}.",
        "headline_event": ", during the ops event '{event}' ({start} ~ {end})",
        "sep": ", ",
        "join": "; ",
    },
}


def fmt(value: Any, *, ratio: bool = False, signed: bool = False) -> str:
    """A number as text: ratios as percentages, others with thousands separators."""
    if value is None:
        return "NULL"
    if not isinstance(value, int | float):
        return str(value)
    if ratio:
        return f"{value * 100:+.2f}%" if signed else f"{value * 100:.2f}%"
    if float(value).is_integer():
        return f"{int(value):+,}" if signed else f"{int(value):,}"
    return f"{value:+,.2f}" if signed else f"{value:,.2f}"


class _Writer:
    """Writes one run's findings in the question's language."""

    def __init__(self, spec: QuestionSpec) -> None:
        self.spec = spec
        self.text = TEXT["zh" if spec.language == "zh" else "en"]

    def say(self, key: str, **values: Any) -> str:
        return self.text[key].format(**values)

    def metric(self, step: PlannedQuery) -> tuple[str, bool]:
        for metric in self.spec.metrics:
            if metric.key == step.metric:
                name = metric.zh if self.spec.language == "zh" else metric.en
                return name, metric.kind in RATIO_KINDS
        return step.metric, False

    def value_column(self, step: PlannedQuery, row: Row) -> str:
        return step.metric if step.metric in row else list(row)[-1]

    def total(self, step: PlannedQuery, rows: list[Row]) -> str:
        _, ratio = self.metric(step)
        col = self.value_column(step, rows[0])
        if len(rows) == 1 and all(
            isinstance(v, int | float) or v is None for v in rows[0].values()
        ):
            return self.say("kpi", purpose=step.purpose, value=fmt(rows[0][col], ratio=ratio))
        ranked = sorted(rows, key=lambda r: (r.get(col) is None, -(r.get(col) or 0)))
        items = self.text["sep"].join(
            f"{_label(r, col)} {fmt(r.get(col), ratio=ratio)}" for r in ranked[:5]
        )
        more = self.say("more", n=len(rows)) if len(rows) > 5 else ""
        return self.say("ranking", purpose=step.purpose, items=items, more=more)

    def trend(self, step: PlannedQuery, rows: list[Row]) -> str:
        _, ratio = self.metric(step)
        time_col = next((c for c in ("ds", "month", "week") if c in rows[0]), next(iter(rows[0])))
        col = self.value_column(step, rows[0])
        series = [(r[time_col], r[col]) for r in rows if r.get(col) is not None]
        if not series:
            return ""
        peak, low = max(series, key=lambda p: p[1]), min(series, key=lambda p: p[1])
        text = self.say(
            "trend",
            purpose=step.purpose,
            t0=series[0][0],
            v0=fmt(series[0][1], ratio=ratio),
            t1=series[-1][0],
            v1=fmt(series[-1][1], ratio=ratio),
            tp=peak[0],
            vp=fmt(peak[1], ratio=ratio),
            tl=low[0],
            vl=fmt(low[1], ratio=ratio),
        )
        median = statistics.median(v for _, v in series) if len(series) >= 5 else 0
        if median and low[1] < 0.6 * median:
            share = f"{low[1] / median:.0%}"
            text += self.say("outlier", t=low[0], median=fmt(median, ratio=ratio), share=share)
        return text

    def compare(self, step: PlannedQuery, rows: list[Row]) -> str:
        name, ratio = self.metric(step)
        parts = []
        for row in rows[:8]:
            label = _label(row, "current_value")
            pct = row.get("pct_change")
            parts.append(
                self.say(
                    "compare",
                    label=f"{label} " if label else f"{_games(self.spec)} ",
                    metric=name,
                    period=self.spec.period.label if self.spec.period else "",
                    other=self.spec.compare_to.label if self.spec.compare_to else "",
                    cur=fmt(row.get("current_value"), ratio=ratio),
                    prev=fmt(row.get("previous_value"), ratio=ratio),
                    delta=fmt(row.get("delta"), ratio=ratio, signed=True),
                    pct=""
                    if pct is None or ratio
                    else self.say("pct", pct=fmt(pct, ratio=True, signed=True)),
                )
            )
        return self.text["join"].join(parts) + ("。" if self.spec.language == "zh" else ".")

    def contribution(self, step: PlannedQuery, rows: list[Row]) -> str:
        _, ratio = self.metric(step)
        dim_col = _dimension_column(rows[0], step.dimension)
        top = rows[0]
        share = top.get("share_of_delta")
        runner = ""
        if len(rows) > 1:
            runner = self.say(
                "runner",
                name=rows[1].get(dim_col),
                delta=fmt(rows[1].get("delta"), ratio=ratio, signed=True),
            )
        return self.say(
            "contribution",
            purpose=step.purpose,
            top=top.get(dim_col),
            prev=fmt(top.get("previous_value"), ratio=ratio),
            cur=fmt(top.get("current_value"), ratio=ratio),
            delta=fmt(top.get("delta"), ratio=ratio, signed=True),
            share="" if share is None else self.say("share", share=fmt(share, ratio=True)),
            runner=runner,
        )

    def events(self, step: PlannedQuery, rows: list[Row]) -> str:
        items = self.text["join"].join(
            f"{r.get('game_name', '')}「{r.get('title')}」({r.get('start_ds')} ~ {r.get('end_ds')})"
            for r in rows[:6]
        )
        return self.say("events", items=items)

    def funnel(self, step: PlannedQuery, rows: list[Row]) -> str:
        fixed = {"step_order", "step", "users", "step_conversion", "overall_conversion"}
        segments = [c for c in rows[0] if c not in fixed and not c.endswith("_id")]
        if not segments:
            steps = self.text["join"].join(
                f"{r['step']} {fmt(r['step_conversion'], ratio=True)}"
                for r in rows
                if r.get("step_conversion") is not None
            )
            overall = fmt(rows[-1].get("overall_conversion"), ratio=True)
            return self.say("funnel", purpose=step.purpose, steps=steps, overall=overall)
        by_step: dict[str, list[tuple[str, float]]] = {}
        for r in rows:
            if r.get("step_conversion") is not None:
                segment = " / ".join(str(r[c]) for c in segments)
                by_step.setdefault(str(r["step"]), []).append(
                    (segment, float(r["step_conversion"]))
                )
        worst: tuple[float, str, str, float, float] | None = None
        for name, values in by_step.items():
            if len(values) < 3:
                continue
            median = statistics.median(v for _, v in values)
            segment, value = min(values, key=lambda p: p[1])
            if worst is None or value - median < worst[0]:
                worst = (value - median, name, segment, value, median)
        if worst is None or worst[0] > -0.1:
            return self.say("funnel_flat", purpose=step.purpose)
        _, name, segment, value, median = worst
        return self.say(
            "funnel_worst",
            purpose=step.purpose,
            segment=segment,
            step=name,
            value=fmt(value, ratio=True),
            median=fmt(median, ratio=True),
        )

    def headline(self, plan: list[PlannedQuery], records: list[dict[str, Any]]) -> str:
        """For why-questions: the change, its main driver and the coinciding event."""
        pairs = [(s, _rows(r)) for s, r in zip(plan, records, strict=False) if r.get("ok")]
        compare = next((rows for s, rows in pairs if s.kind == "compare" and rows), None)
        drivers = [(s, rows[0]) for s, rows in pairs if s.kind == "contribution" and rows]
        if compare is None or not drivers:
            return ""
        step, top = max(drivers, key=lambda p: abs(p[1].get("share_of_delta") or 0))
        name, ratio = self.metric(step)
        row = compare[0]
        pct = row.get("pct_change")
        change = f" {fmt(row.get('delta'), ratio=ratio, signed=True)}"
        if pct is not None and not ratio:
            change += f" ({fmt(pct, ratio=True, signed=True)})"
        events = next((rows for s, rows in pairs if s.kind == "events" and rows), [])
        event = ""
        if events:
            e = events[0]
            event = self.say(
                "headline_event", event=e.get("title"), start=e.get("start_ds"), end=e.get("end_ds")
            )
        period = self.spec.period.label if self.spec.period else ""
        return self.say(
            "headline",
            scope=f"{_games(self.spec)} {period} ",
            metric=name,
            change=change,
            dimension=_dimension_name(self.spec, step.dimension),
            driver=top.get(_dimension_column(top, step.dimension)),
            share=fmt(top.get("share_of_delta"), ratio=True),
            event=event,
        )


def _rows(record: dict[str, Any]) -> list[Row]:
    return [dict(zip(record["columns"], row, strict=False)) for row in record["rows"]]


def _label(row: Row, value_col: str) -> str:
    skip = {value_col, "game_id", "channel_id"}
    parts = [str(v) for k, v in row.items() if k not in skip and not isinstance(v, int | float)]
    return " / ".join(parts)


def _games(spec: QuestionSpec) -> str:
    if not spec.games:
        return "全部游戏" if spec.language == "zh" else "all games"
    if spec.language == "zh":
        return "、".join(g.name for g in spec.games)
    return ", ".join(g.en_name or g.name for g in spec.games)


def _dimension_column(row: Row, fallback: str) -> str:
    values = {"current_value", "previous_value", "delta", "share_of_delta", "contribution"}
    for column in row:
        if column in values or column.startswith(("current_", "previous_")):
            continue
        if not column.endswith("_id"):
            return column
    return fallback


def _dimension_name(spec: QuestionSpec, key: str) -> str:
    from dataseer.services import get_services

    for dim in get_services().pack.dimensions:
        if dim.key == key:
            return dim.zh if spec.language == "zh" else dim.en
    return key


def unresolved_reply(spec: QuestionSpec | None, question: str) -> str:
    """What the offline analyst says when it cannot resolve the question."""
    from dataseer.config import get_settings

    lang = "en" if spec is not None and spec.language == "en" else "zh"
    template = load_prompt(f"quick/unresolved.{lang}", get_settings().resolved_prompts_dir)
    return render(template, {"question": question})


def denial_reply(spec: QuestionSpec, denial: Denial) -> str:
    """A polite, precise reply to a query the user may not run: what, and what they may see.

    The games of the question outside the user's scope are named; the games
    in scope come from the denial itself (the guard's view, not a guess).
    """
    zh = spec.language == "zh"
    allowed = denial.allowed_games
    allowed_ids = {g for g, _ in allowed or ()}
    outside = [g for g in spec.games if allowed is not None and g.id not in allowed_ids]
    if zh:
        if outside:
            names = "、".join(f"「{g.name}」（game_id {g.id}）" for g in outside)
            text = f"抱歉，{names}不在您的数据权限范围内，所以这个查询没有执行。"
        else:
            text = f"抱歉，这个查询没有通过权限检查，所以没有执行：{denial.reason}"
        if allowed:
            text += "您目前可以查看的游戏：" + "、".join(f"{n}（{g}）" for g, n in allowed) + "。"
        elif allowed is not None:
            text += "您目前没有任何游戏的数据权限。"
        wanted = "、".join(g.name for g in outside)
        text += (
            f"如需查看{wanted}的数据，请联系数据管理员申请权限；也可以就权限范围内的游戏提问。"
            if outside
            else "如需访问，请联系数据管理员申请权限。"
        )
        return text
    if outside:
        names = ", ".join(f"'{g.en_name or g.name}' (game_id {g.id})" for g in outside)
        text = f"Sorry, {names} is outside your data permissions, so the query did not run. "
    else:
        text = f"Sorry, the query did not pass the permission check: {denial.reason} "
    if allowed:
        text += "You may query: " + ", ".join(f"{n} ({g})" for g, n in allowed) + ". "
    elif allowed is not None:
        text += "You currently have access to no game's data. "
    return text + "To see more, ask a data administrator for access."


def narrate(
    spec: QuestionSpec,
    plan: list[PlannedQuery],
    records: list[dict[str, Any]],
    *,
    planned: int | None = None,
) -> str:
    """Findings for the whole run, key finding first.

    ``plan`` and ``records`` pair up one to one; ``planned`` is how many
    queries the full plan had, so a run cut short says so.
    """
    writer = _Writer(spec)
    methods: dict[str, Callable[[PlannedQuery, list[Row]], str]] = {
        "total": writer.total,
        "trend": writer.trend,
        "compare": writer.compare,
        "contribution": writer.contribution,
        "events": writer.events,
        "funnel": writer.funnel,
    }
    lines: list[str] = []
    denied = False
    for step, record in zip(plan, records, strict=False):
        denial = None if record.get("ok") else parse_denial(record.get("error"))
        if denial is not None:
            if not denied:
                lines.append(denial_reply(spec, denial))
            denied = True
        elif not record.get("ok"):
            lines.append(writer.say("failed", purpose=step.purpose, error=record.get("error")))
        elif not record["rows"]:
            key = "no_events" if step.kind == "events" else "empty"
            lines.append(writer.say(key, purpose=step.purpose))
        else:
            lines.append(methods[step.kind](step, _rows(record)))
    if len(records) < (planned if planned is not None else len(plan)) and not denied:
        lines.append(writer.say("partial"))
    lines = [line for line in lines if line]
    headline = writer.headline(plan, records) if spec.intent == "why" else ""
    if len(lines) == 1 and not headline:
        return lines[0]
    body = "\n".join(f"- {line}" for line in lines)
    return f"{headline}\n\n{body}" if headline else body
