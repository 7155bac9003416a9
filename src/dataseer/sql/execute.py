"""The one place where dataseer runs a query against the warehouse.

Every path (tools, lines, the offline analyst through the tools) ends here, so
limits, timeouts and the permission guard apply to all of them: ``run_query``
refuses to execute a statement without an allowed ``Decision`` from
``SqlGuard`` for the caller's ``Permissions`` (no permissions = no identity =
denied), and audits every decision before anything runs. The agent's
``SqlGuardMiddleware`` checks first and explains denials to the model; this
check is the floor for every other path.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

import pandas as pd

from dataseer.config import Settings
from dataseer.data.protocol import Datasource, QueryResult
from dataseer.sql.audit import audit_decision
from dataseer.sql.guard import Decision, DecisionCode, Permissions, SqlGuard

STORED_ROWS = 200
"""Rows of each result kept in graph state; the rest stays in the warehouse."""


DENIED_MARK = "⛔ 权限拒绝 / permission denied"
"""First words of every denial text: tools, narration and tests recognise a denial by it."""

NO_IDENTITY = (
    "本次运行没有可识别的用户身份，无法访问数据 / this run has no known identity "
    "(configurable.user_id), so it may not read data"
)

_ALLOWED_GAMES = "你的游戏范围 / games in your scope: "


@dataclass(frozen=True, eq=False)
class WarehouseFacts:
    """What the guard needs to know about a warehouse: columns and game names.

    Compared by identity, so it can key the decision cache.
    """

    schema: Mapping[str, tuple[str, ...]]
    game_names: Mapping[int, str]


_facts: weakref.WeakKeyDictionary[Any, WarehouseFacts] = weakref.WeakKeyDictionary()
_facts_lock = threading.Lock()


def warehouse_facts(datasource: Datasource) -> WarehouseFacts:
    """Columns of every table and the game names, read once per datasource (admin path)."""
    from dataseer.sql.permission_store import warehouse_games, warehouse_schema

    with _facts_lock:
        found = _facts.get(datasource)
    if found is not None:
        return found
    games = warehouse_games(datasource)
    facts = WarehouseFacts(warehouse_schema(datasource), {g: n for g, (_, n) in games.items()})
    with _facts_lock:
        _facts[datasource] = facts
    return facts


_CACHED = 1024
"""Decisions kept per process: the middleware and ``run_query`` check the same SQL."""

_decisions: OrderedDict[tuple[Any, ...], Decision] = OrderedDict()
_decisions_lock = threading.Lock()


def _decide(
    permissions: Permissions,
    datasource: Datasource,
    mode: Literal["check", "enforce"],
    sql: str,
) -> Decision:
    """``SqlGuard.check``, memoized on everything the decision depends on.

    The key holds the whole ``Permissions`` record (compared field by field),
    so a changed grant never reuses an old decision.
    """
    facts = warehouse_facts(datasource)
    key = (permissions, datasource.dialect, mode, facts, sql)
    with _decisions_lock:
        found = _decisions.get(key)
        if found is not None:
            _decisions.move_to_end(key)
            return found
    guard = SqlGuard(permissions, dialect=datasource.dialect, mode=mode, schema=facts.schema)
    decision = guard.check(sql)
    with _decisions_lock:
        _decisions[key] = decision
        while len(_decisions) > _CACHED:
            _decisions.popitem(last=False)
    return decision


def no_identity_decision(reason: str = NO_IDENTITY) -> Decision:
    """The decision for a run without usable permissions: deny everything."""
    return Decision(
        allowed=False,
        code=DecisionCode.FORBIDDEN_TABLE,
        reason=reason,
        tables=(),
        rewritten_sql=None,
        scope="无 / nothing: 请确认登录身份，或联系管理员开通数据权限 / "
        "check who is signed in, or ask an administrator for data access",
    )


def check_query(
    datasource: Datasource,
    sql: str,
    settings: Settings,
    *,
    permissions: Permissions | None,
    layer: str = "execute",
    mode: Literal["check", "enforce"] | None = None,
    denial_reason: str = "",
) -> Decision:
    """The guard's decision on one statement for these permissions, audited."""
    if permissions is None:
        decision = no_identity_decision(denial_reason or NO_IDENTITY)
    else:
        decision = _decide(permissions, datasource, mode or settings.guard_mode, sql)
    audit_decision(settings, permissions, sql, decision, layer=layer, dialect=datasource.dialect)
    return decision


def denial_message(
    decision: Decision,
    permissions: Permissions | None,
    game_names: Mapping[int, str] | None = None,
) -> str:
    """What a denied query tells the model: what, why, and what the user may access."""
    lines = [f"{DENIED_MARK} [{decision.code}]", f"原因 / why: {decision.reason}"]
    if decision.tables:
        lines.append(f"涉及的表 / tables: {', '.join(decision.tables)}")
    lines.append(f"你可以访问 / you may access:\n{decision.scope}")
    if permissions is not None and permissions.allowed_game_ids is not None:
        names = game_names or {}
        games = [f"{g} {names.get(g, '')}".strip() for g in permissions.allowed_game_ids]
        lines.append(_ALLOWED_GAMES + ("; ".join(games) or "无 / none"))
    lines.append(
        "请在以上范围内改写查询后重试，或建议用户向管理员申请权限。/ Rewrite the query "
        "within this scope and call run_sql again, or suggest the user request access."
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class Denial:
    """A denial read back from its text (for narration of failed records)."""

    code: str
    reason: str
    allowed_games: tuple[tuple[int, str], ...] | None


_CODE = re.compile(r"\[(\w+)\]")


def parse_denial(error: str | None) -> Denial | None:
    """The denial an error text holds, or ``None`` when it is another failure."""
    if not error or not error.startswith(DENIED_MARK):
        return None
    code_match = _CODE.search(error.splitlines()[0])
    reason, games = "", None
    for line in error.splitlines():
        if line.startswith("原因 / why: "):
            reason = line.removeprefix("原因 / why: ")
        elif line.startswith(_ALLOWED_GAMES):
            items = [i.partition(" ") for i in line.removeprefix(_ALLOWED_GAMES).split("; ")]
            games = tuple((int(head), name) for head, _, name in items if head.isdigit())
    return Denial(code_match.group(1) if code_match else "", reason, games)


def run_query(
    datasource: Datasource,
    sql: str,
    settings: Settings,
    *,
    permissions: Permissions | None,
    denial_reason: str = "",
) -> QueryResult:
    """Run one read-only query, if the guard allows it, with the row limit and timeout.

    Args:
        datasource: the warehouse.
        sql: one statement.
        settings: limits, timeout and the guard mode.
        permissions: what the caller may read; ``None`` (no identity) denies.
        denial_reason: why ``permissions`` is ``None``, for the denial text.

    A denial comes back as ``QueryResult.error`` starting with ``DENIED_MARK``;
    in enforce mode the rewritten statement is what runs (``QueryResult.sql``).
    """
    sql = sql.strip().rstrip(";").strip()
    if not sql:
        return QueryResult(sql=sql, error="空查询 / empty SQL")
    decision = check_query(
        datasource, sql, settings, permissions=permissions, denial_reason=denial_reason
    )
    if not decision.allowed:
        names = warehouse_facts(datasource).game_names if permissions is not None else None
        return QueryResult(sql=sql, error=denial_message(decision, permissions, names))
    to_run = decision.rewritten_sql or sql
    return datasource.execute(to_run, limit=settings.row_limit, timeout=settings.query_timeout)


def json_value(value: Any) -> Any:
    """A JSON-safe, exact rendering of one cell (dates as ISO text)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NaT:
        return None
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, pd.Timestamp):
        return value.date().isoformat() if value == value.normalize() else value.isoformat()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return value


def frame_rows(frame: pd.DataFrame, limit: int = STORED_ROWS) -> list[list[Any]]:
    """The first ``limit`` rows of a frame as JSON-safe lists."""
    head = frame.head(limit)
    return [[json_value(v) for v in row] for row in head.itertuples(index=False, name=None)]
