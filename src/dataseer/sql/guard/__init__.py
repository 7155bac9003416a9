"""The SQL permission guard: every query is checked on its syntax tree before it runs.

``SqlGuard(permissions, dialect, mode).check(sql)`` parses the SQL with
sqlglot, turns it into frozen records (:mod:`.analysis`), decides with
declarative rules (:mod:`.rules`) and, in enforce mode, adds missing game
filters as AST nodes and checks the result again (:mod:`.rewrite`).

>>> guard = SqlGuard(Permissions("u", allowed_game_ids=(1001,)), schema={"t": ["game_id", "x"]})
>>> guard.check("SELECT x FROM t WHERE game_id = 1001").code
<DecisionCode.OK: 'OK'>
>>> guard.check("SELECT x FROM t WHERE game_id = 1001 OR 1=1").code
<DecisionCode.TAUTOLOGY: 'TAUTOLOGY'>
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

from dataseer.sql.guard.analysis import Analysis, analyze
from dataseer.sql.guard.dialects import sqlglot_dialect
from dataseer.sql.guard.permissions import Permissions
from dataseer.sql.guard.rewrite import RewriteError, inject_filters, rewritable
from dataseer.sql.guard.rules import Decision, DecisionCode, RowProblem, decide

__all__ = ["Decision", "DecisionCode", "Permissions", "SqlGuard"]

Mode = Literal["check", "enforce"]


class SqlGuard:
    """Checks SQL against one user's permissions.

    Args:
        permissions: what the user may read.
        dialect: the warehouse dialect (``duckdb``, ``postgres``, ``hive``,
            ``spark``, ``mysql``, ``clickhouse``, ``maxcompute``/``odps``, or
            any sqlglot dialect name).
        mode: ``check`` only decides; ``enforce`` also adds missing game
            filters to queries that lack nothing else, and returns the
            rewritten SQL in ``Decision.rewritten_sql``.
        schema: table → column names. It expands ``*`` for column deny
            lists and tells which tables carry the row-filter column; a table
            missing from it is assumed to carry it (least privilege).
    """

    def __init__(
        self,
        permissions: Permissions,
        dialect: str = "duckdb",
        mode: Mode = "check",
        *,
        schema: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        if mode not in ("check", "enforce"):
            msg = f"mode must be 'check' or 'enforce', got {mode!r}"
            raise ValueError(msg)
        if not isinstance(permissions, Permissions):
            msg = f"permissions must be a Permissions record, got {type(permissions).__name__}"
            raise TypeError(msg)
        self.permissions = permissions
        self.dialect = dialect
        self.mode: Mode = mode
        self._dialect = sqlglot_dialect(dialect)
        self._schema = {k.lower(): tuple(c.lower() for c in v) for k, v in (schema or {}).items()}

    def analyze(self, sql: str) -> Analysis:
        """The records the decision is made on (for tests and debugging)."""
        return analyze(sql, self._dialect, schema=self._schema)

    def check(self, sql: str) -> Decision:
        """Decide whether ``sql`` may run for this user (and rewrite it in enforce mode)."""
        if not isinstance(sql, str) or not sql.strip():
            analysis = Analysis(sql=str(sql), dialect=self._dialect, parse_error="empty SQL")
            return decide(analysis, self.permissions)[0]
        analysis = self.analyze(sql)
        decision, problems = decide(analysis, self.permissions)
        if self.mode == "check" or decision.allowed or not rewritable(problems):
            return decision
        ids = self.permissions.allowed_game_ids or ()
        added: list[str] = []
        current, pending = analysis, problems
        for _ in range(len(analysis.tables) + 1):
            first = _first_per_scope(pending)
            try:
                rewritten = inject_filters(current, first, ids)
            except RewriteError:
                return decision
            added += [f"{p.source.key}.{p.column}" for p in first]
            current = analyze(rewritten, self._dialect, schema=self._schema)
            again, pending = decide(current, self.permissions)
            if again.allowed:
                break
            if not rewritable(pending):
                return decision
        else:
            return decision
        tables = ", ".join(added)
        reason = (
            f"已自动加上游戏过滤（{tables} IN ({self.permissions.games_text()})），执行改写后的 SQL"
            f" / added the game filter ({tables} IN ({self.permissions.games_text()})) and runs "
            f"the rewritten SQL"
        )
        return replace(
            again,
            code=DecisionCode.OK,
            reason=reason,
            rewritten_sql=rewritten,
            tables=decision.tables,
        )


def _first_per_scope(problems: Sequence[RowProblem]) -> list[RowProblem]:
    """The first unfiltered table of each scope: filtering it often proves the others."""
    first: dict[int, RowProblem] = {}
    for problem in sorted(problems, key=lambda p: (p.table.scope, p.source.position)):
        first.setdefault(problem.table.scope, problem)
    return list(first.values())
