"""The offline analyst's words: findings written from result rows, never invented.

Every number in the text is read from a query result of this run and
formatted without changing its value (thousands separators, percentages of
ratios), so the verify step and a reader can trace it back to a table.
"""

from __future__ import annotations

import statistics
from typing import Any

from dataseer.knowledge.understand import QuestionSpec
from dataseer.models.offline_plan import PlannedQuery

RATIO_KINDS = frozenset({"ratio", "retention", "funnel"})


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


def _rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(record["columns"], row, strict=False)) for row in record["rows"]]


def _say(spec: QuestionSpec, zh: str, en: str) -> str:
    return zh if spec.language == "zh" else en


def unresolved_reply(spec: QuestionSpec | None, question: str) -> str:
    """What the offline analyst says when it cannot resolve the question."""
    zh = spec is None or spec.language == "zh"
    if zh:
        return (
            f"离线分析器无法解析这个问题：「{question}」——没有识别出要查询的指标。"
            "请说明指标、游戏和时间（例如「星海远征上个月流水」），"
            "或配置大模型（DATASEER_MODEL 或 DATASEER_BASE_URL + DATASEER_API_KEY）。"
        )
    return (
        f"The offline analyst cannot resolve '{question}': no metric recognised. Name a metric, "
        "a game and a period, or configure a model (DATASEER_MODEL, or DATASEER_BASE_URL and "
        "DATASEER_API_KEY)."
    )


def narrate(spec: QuestionSpec, plan: list[PlannedQuery], records: list[dict[str, Any]]) -> str:
    """Findings for the whole run, key finding first."""
    lines: list[str] = []
    for step, record in zip(plan, records, strict=False):
        if not record.get("ok"):
            lines.append(_say(spec, f"「{step.purpose}」查询失败：{record.get('error')}",
                              f"'{step.purpose}' failed: {record.get('error')}"))
            continue
        rows = _rows(record)
        if not rows:
            lines.append(_say(spec, f"「{step.purpose}」没有数据（结果为空）。",
                              f"'{step.purpose}': no data (empty result)."))
            continue
        writer = _WRITERS.get(step.kind, _total)
        text = writer(spec, step, rows)
        if text:
            lines.append(text)
    if len(records) < len(plan):
        lines.append(_say(spec, "部分计划中的查询未完成（步数预算用尽），以上结论仅基于已完成的查询。",
                          "Some planned queries did not run (step budget spent); the findings "
                          "above rest only on the queries that did."))
    return "\n".join(f"- {line}" for line in lines) if len(lines) > 1 else "".join(lines)


def _metric_of(spec: QuestionSpec, step: PlannedQuery) -> tuple[str, bool]:
    for metric in spec.metrics:
        if metric.key == step.metric:
            return (metric.zh if spec.language == "zh" else metric.en), metric.kind in RATIO_KINDS
    return step.metric, False


def _label_of(row: dict[str, Any], value_col: str) -> str:
    skip = {value_col, "game_id", "channel_id"}
    parts = [str(v) for k, v in row.items() if k not in skip and not isinstance(v, int | float)]
    return " / ".join(parts) or str(row.get("game_id", ""))


def _total(spec: QuestionSpec, step: PlannedQuery, rows: list[dict[str, Any]]) -> str:
    name, ratio = _metric_of(spec, step)
    col = step.metric if step.metric in rows[0] else list(rows[0])[-1]
    if len(rows) == 1 and all(isinstance(v, int | float) or v is None for v in rows[0].values()):
        return _say(spec, f"{step.purpose}：{fmt(rows[0][col], ratio=ratio)}。",
                    f"{step.purpose}: {fmt(rows[0][col], ratio=ratio)}.")
    ranked = sorted(rows, key=lambda r: (r.get(col) is None, -(r.get(col) or 0)))
    top = "、".join(f"{_label_of(r, col)} {fmt(r.get(col), ratio=ratio)}" for r in ranked[:5])
    more = _say(spec, f"（共 {len(rows)} 项）", f" ({len(rows)} items)") if len(rows) > 5 else ""
    return _say(spec, f"{step.purpose}：{top}{more}。", f"{step.purpose}: {top}{more}.")


def _trend(spec: QuestionSpec, step: PlannedQuery, rows: list[dict[str, Any]]) -> str:
    name, ratio = _metric_of(spec, step)
    time_col = next((c for c in ("ds", "month", "week") if c in rows[0]), list(rows[0])[0])
    col = step.metric if step.metric in rows[0] else list(rows[0])[-1]
    series = [(r[time_col], r[col]) for r in rows if r.get(col) is not None]
    if not series:
        return ""
    peak = max(series, key=lambda p: p[1])
    low = min(series, key=lambda p: p[1])
    first, last = series[0], series[-1]
    text = _say(
        spec,
        f"{step.purpose}：从 {first[0]} 的 {fmt(first[1], ratio=ratio)} 到 {last[0]} 的 "
        f"{fmt(last[1], ratio=ratio)}；最高 {peak[0]}（{fmt(peak[1], ratio=ratio)}），"
        f"最低 {low[0]}（{fmt(low[1], ratio=ratio)}）。",
        f"{step.purpose}: from {fmt(first[1], ratio=ratio)} on {first[0]} to "
        f"{fmt(last[1], ratio=ratio)} on {last[0]}; peak {fmt(peak[1], ratio=ratio)} on {peak[0]}, "
        f"low {fmt(low[1], ratio=ratio)} on {low[0]}.",
    )
    values = [v for _, v in series]
    if len(values) >= 5:
        median = statistics.median(values)
        if median and low[1] < 0.6 * median:
            text += _say(
                spec,
                f" {low[0]} 明显异常：仅为中位数 {fmt(median, ratio=ratio)} 的 {low[1] / median:.0%}。",
                f" {low[0]} stands out: only {low[1] / median:.0%} of the median "
                f"{fmt(median, ratio=ratio)}.",
            )
    return text


def _compare(spec: QuestionSpec, step: PlannedQuery, rows: list[dict[str, Any]]) -> str:
    name, ratio = _metric_of(spec, step)
    period = spec.period.label if spec.period else ""
    other = spec.compare_to.label if spec.compare_to else ""
    parts = []
    for row in rows[:8]:
        label = _label_of(row, "current_value")
        label = label.replace(" / ", "") if label else ""
        pct = row.get("pct_change")
        change = fmt(row.get("delta"), ratio=ratio, signed=True)
        pct_text = f"，{fmt(pct, ratio=True, signed=True)}" if pct is not None and not ratio else ""
        pct_en = f", {fmt(pct, ratio=True, signed=True)}" if pct is not None and not ratio else ""
        parts.append(
            _say(
                spec,
                f"{(label + ' ') if label else ''}{name} {period} 为 {fmt(row.get('current_value'), ratio=ratio)}，"
                f"{other} 为 {fmt(row.get('previous_value'), ratio=ratio)}（变化 {change}{pct_text}）",
                f"{(label + ' ') if label else ''}{name} was {fmt(row.get('current_value'), ratio=ratio)} in "
                f"{period} vs {fmt(row.get('previous_value'), ratio=ratio)} in {other} "
                f"(change {change}{pct_en})",
            )
        )
    return _say(spec, "；".join(parts) + "。", "; ".join(parts) + ".")


def _contribution(spec: QuestionSpec, step: PlannedQuery, rows: list[dict[str, Any]]) -> str:
    name, ratio = _metric_of(spec, step)
    dim_col = next((c for c in rows[0] if c not in {
        "current_value", "previous_value", "delta", "share_of_delta", "contribution"}
        and not c.startswith(("current_", "previous_")) and not c.endswith("_id")), step.dimension)
    top = rows[0]
    share = top.get("share_of_delta")
    share_zh = f"，占总变化的 {fmt(share, ratio=True)}" if share is not None else ""
    share_en = f", {fmt(share, ratio=True)} of the total change" if share is not None else ""
    runner = ""
    if len(rows) > 1:
        second = rows[1]
        runner = _say(spec, f"；其次是 {second.get(dim_col)}（{fmt(second.get('delta'), ratio=ratio, signed=True)}）",
                      f"; next {second.get(dim_col)} ({fmt(second.get('delta'), ratio=ratio, signed=True)})")
    return _say(
        spec,
        f"{step.purpose}：贡献最大的是 {top.get(dim_col)}（{fmt(top.get('previous_value'), ratio=ratio)} → "
        f"{fmt(top.get('current_value'), ratio=ratio)}，变化 {fmt(top.get('delta'), ratio=ratio, signed=True)}"
        f"{share_zh}）{runner}。",
        f"{step.purpose}: the largest contributor is {top.get(dim_col)} "
        f"({fmt(top.get('previous_value'), ratio=ratio)} → {fmt(top.get('current_value'), ratio=ratio)}, "
        f"change {fmt(top.get('delta'), ratio=ratio, signed=True)}{share_en}){runner}.",
    )


def _events(spec: QuestionSpec, step: PlannedQuery, rows: list[dict[str, Any]]) -> str:
    items = [f"{r.get('game_name', '')}「{r.get('title')}」({r.get('start_ds')} ~ {r.get('end_ds')})" for r in rows[:6]]
    return _say(spec, f"期间的运营事件：{'；'.join(items)}。", f"Ops events in the period: {'; '.join(items)}.")


def _funnel(spec: QuestionSpec, step: PlannedQuery, rows: list[dict[str, Any]]) -> str:
    seg_cols = [c for c in rows[0] if c not in {
        "step_order", "step", "users", "step_conversion", "overall_conversion", "channel_id"}]
    if not seg_cols:
        steps = "，".join(
            f"{r['step']} {fmt(r['step_conversion'], ratio=True)}"
            for r in rows if r.get("step_conversion") is not None
        )
        last = rows[-1]
        return _say(spec, f"{step.purpose}：逐步转化率 {steps}；整体转化 {fmt(last.get('overall_conversion'), ratio=True)}。",
                    f"{step.purpose}: step conversion {steps}; overall {fmt(last.get('overall_conversion'), ratio=True)}.")
    by_step: dict[str, list[tuple[str, float]]] = {}
    for r in rows:
        if r.get("step_conversion") is None:
            continue
        seg = " / ".join(str(r[c]) for c in seg_cols)
        by_step.setdefault(str(r["step"]), []).append((seg, float(r["step_conversion"])))
    worst: tuple[float, str, str, float, float] | None = None
    for name, values in by_step.items():
        if len(values) < 3:
            continue
        median = statistics.median(v for _, v in values)
        seg, value = min(values, key=lambda p: p[1])
        gap = value - median
        if worst is None or gap < worst[0]:
            worst = (gap, name, seg, value, median)
    if worst is None or worst[0] > -0.1:
        return _say(spec, f"{step.purpose}：各分组转化率没有明显异常。",
                    f"{step.purpose}: no segment stands out.")
    _, name, seg, value, median = worst
    return _say(
        spec,
        f"{step.purpose}：{seg} 的 {name} 步转化率仅 {fmt(value, ratio=True)}，"
        f"明显低于各分组中位数 {fmt(median, ratio=True)}，是转化下降的主要来源。",
        f"{step.purpose}: {seg} converts only {fmt(value, ratio=True)} at step {name}, far below "
        f"the median of {fmt(median, ratio=True)} across segments: the main source of the drop.",
    )


_WRITERS = {
    "total": _total,
    "trend": _trend,
    "compare": _compare,
    "contribution": _contribution,
    "events": _events,
    "funnel": _funnel,
}
