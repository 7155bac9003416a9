"""Verify: every number in the final answer must trace back to a query result.

Before the answer leaves the loop, the numbers it states are checked against
the values of this question's query results, allowing rounding, thousands
separators, 万/亿 units, percentages of ratios, and simple derived figures
(differences and ratios of two results, column totals, means and medians).
Ungrounded numbers send the model back once with the list; if they remain,
the answer says so instead of pretending.
"""

from __future__ import annotations

import itertools
import re
import statistics
from typing import Any, NotRequired

from langchain.agents.middleware.types import AgentMiddleware, AgentState, hook_config
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.runtime import Runtime

from dataseer.middleware._partitions import current_turn

_NUMBER = re.compile(
    r"(?<![\w.])([-+]?\d[\d,]*(?:\.\d+)?)\s*(%|‰|万亿|亿|万|千|k|K|M|B|bn)?(?![\w.-]*\d)"
)
_DATE = re.compile(
    r"\d{4}-\d{1,2}(?:-\d{1,2})?|\d{4}/\d{1,2}(?:/\d{1,2})?|\d{4}年|\d{1,2}月\d{0,2}日?|Q[1-4]"
)
_UNITS = {
    "%": 0.01,
    "‰": 0.001,
    "万": 1e4,
    "亿": 1e8,
    "万亿": 1e12,
    "千": 1e3,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "B": 1e9,
    "bn": 1e9,
}
SMALL = 31
"""Integers up to this are counts, ranks and day numbers in prose; not checked."""


class VerifyState(AgentState[Any]):
    """Verification of the answer being written."""

    verify_note: NotRequired[str | None]
    verify_attempts: NotRequired[int]


def stated_numbers(text: str) -> list[tuple[str, float]]:
    """Numbers a text states, as (as written, value in base units); dates left out."""
    cleaned = _DATE.sub(" ", re.sub(r"```.*?```", " ", text, flags=re.S))
    cleaned = re.sub(r"\btask \d+|任务\s*\d+", " ", cleaned)
    found = []
    for match in _NUMBER.finditer(cleaned):
        raw, unit = match.group(1), match.group(2) or ""
        try:
            value = float(raw.replace(",", ""))
        except ValueError:
            continue
        found.append((match.group(0).strip(), value * _UNITS.get(unit, 1.0)))
    return found


def grounded_values(records: list[dict[str, Any]], question: str = "") -> list[float]:
    """Every value an answer may state, from the results (and the question)."""
    values: set[float] = {v for _, v in stated_numbers(question)}
    for rec in records:
        if not rec.get("ok"):
            # a refusal or an error names ids and limits the answer may repeat
            values.update(v for _, v in stated_numbers(str(rec.get("error") or "")))
            continue
        columns: dict[int, list[float]] = {}
        for row in rec.get("rows") or []:
            numbers = [
                float(v) for v in row if isinstance(v, int | float) and not isinstance(v, bool)
            ]
            values.update(numbers)
            for a, b in itertools.combinations(numbers, 2):
                values.update({a - b, b - a})
                if b:
                    values.add(a / b - 1)
                    values.add(a / b)
                if a:
                    values.add(b / a - 1)
                    values.add(b / a)
            for i, v in enumerate(row):
                if isinstance(v, int | float) and not isinstance(v, bool):
                    columns.setdefault(i, []).append(float(v))
        for column in columns.values():
            values.update({sum(column), statistics.fmean(column), statistics.median(column)})
            values.update({max(column), min(column)})
    return sorted(values)


def is_grounded(value: float, grounded: list[float]) -> bool:
    """Whether a stated value equals a grounded one up to rounding and units."""
    if value.is_integer() and abs(value) <= SMALL:
        return True
    for g in grounded:
        for candidate in (g, g * 100):
            tolerance = max(0.0051, abs(candidate) * 0.0005)
            if abs(abs(value) - abs(candidate)) <= tolerance:
                return True
    return False


def ungrounded(text: str, records: list[dict[str, Any]], question: str = "") -> list[str]:
    """The numbers of ``text`` no query result supports."""
    grounded = grounded_values(records, question)
    return [raw for raw, value in stated_numbers(text) if not is_grounded(value, grounded)]


class VerifyMiddleware(AgentMiddleware[VerifyState, Any]):
    """Checks the final answer's numbers; one correction loop, then a warning."""

    state_schema = VerifyState
    partition = "verification"

    def __init__(self, *, corrections: int = 1) -> None:
        super().__init__()
        if corrections < 0:
            msg = f"corrections must be >= 0, got {corrections}"
            raise ValueError(msg)
        self.corrections = corrections

    def render(self, state: dict[str, Any]) -> str:
        """The correction request, while one is pending."""
        return str(state.get("verify_note") or "")

    def before_agent(self, state: VerifyState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A new run starts with a clean slate."""
        return {"verify_note": None, "verify_attempts": 0}

    async def abefore_agent(
        self, state: VerifyState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``before_agent``."""
        return self.before_agent(state, runtime)

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: VerifyState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Check a final answer; send it back once if numbers are ungrounded."""
        last = state["messages"][-1] if state["messages"] else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None
        data: dict[str, Any] = dict(state)
        turn = current_turn(data)
        records = [r for r in data.get("sql_history") or [] if r.get("turn") == turn]
        spec = data.get("spec") or {}
        ids = " ".join(str(g.get("id", "")) for g in spec.get("games") or [])
        question = f"{data.get('question') or _question(state)} {ids}"
        missing = ungrounded(str(last.content), records, question)
        if not missing:
            return {"verify_note": None} if state.get("verify_note") else None
        attempts = int(state.get("verify_attempts") or 0)
        if attempts < self.corrections:
            note = (
                "你的回答中这些数字无法在本轮查询结果中找到："
                f"{', '.join(missing)}。请改为结果中的准确数字，或删除它们。 / These numbers in "
                "your answer are not in any query result of this question: "
                f"{', '.join(missing)}. Use the exact figures from the results or remove them."
            )
            return {
                "messages": [RemoveMessage(id=str(last.id))],
                "verify_note": note,
                "verify_attempts": attempts + 1,
                "jump_to": "model",
            }
        warning = (
            f"\n\n⚠ 以下数字未能在查询结果中核实 / not verified against the query results: "
            f"{', '.join(missing)}"
        )
        fixed = AIMessage(str(last.content) + warning, id=last.id, name=last.name)
        return {"messages": [fixed], "verify_note": None}

    async def aafter_model(
        self, state: VerifyState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``after_model``; it awaits nothing."""
        return self.after_model(state, runtime)


def _question(state: Any) -> str:
    for message in reversed(state["messages"]):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""
