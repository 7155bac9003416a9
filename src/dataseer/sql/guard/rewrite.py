"""Enforce mode: add the missing game filter to each scope, as AST nodes.

Only queries whose sole problem is a missing filter are rewritten; a
tautology, an OR bypass, a fuzzy comparison or a filter on forbidden games is
always denied, because adding a filter there would hide a mistake (or an
attack) instead of fixing it. Each unfiltered table gets
``alias.game_id IN (allowed ids)``: in the ON clause when it is the joined
side of a LEFT JOIN (so the join keeps its meaning), otherwise ANDed to the
WHERE of the scope that reads it. The result is checked again from scratch,
so a rewrite can never widen access.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dataseer.sql.guard.analysis import Analysis
from dataseer.sql.guard.rules import DecisionCode, RowProblem


class RewriteError(ValueError):
    """The query cannot be rewritten safely (the original denial stands)."""


def filter_predicate(key: str, column: str, ids: Sequence[int]) -> exp.In:
    """``key.column IN (ids...)`` as a sqlglot node."""
    if not ids:
        msg = "no allowed game ids to filter on"
        raise RewriteError(msg)
    target = exp.Column(this=exp.to_identifier(column), table=exp.to_identifier(key))
    return exp.In(this=target, expressions=[exp.Literal.number(i) for i in ids])


def rewritable(problems: Sequence[RowProblem]) -> bool:
    """Whether every problem is a plain missing filter that enforce mode may add."""
    return bool(problems) and all(
        p.fixable and p.code == DecisionCode.MISSING_ROW_FILTER for p in problems
    )


def inject_filters(analysis: Analysis, problems: Sequence[RowProblem], ids: Sequence[int]) -> str:
    """Return the analysed SQL with a game filter for every problem, in its dialect.

    Raises:
        RewriteError: a problem is not a plain missing filter, or its scope
            is not a SELECT.
    """
    if not rewritable(problems) or analysis.tree is None:
        msg = "only queries that merely lack a game filter can be rewritten"
        raise RewriteError(msg)
    tree = analysis.tree
    for problem in problems:
        select = analysis.selects[problem.table.scope]
        if not isinstance(select, exp.Select):
            msg = "the table is not read by a SELECT"
            raise RewriteError(msg)
        predicate = filter_predicate(problem.source.key, problem.column, ids)
        source = problem.source
        join = None
        if source.position > 0:
            joins = select.args.get("joins") or []
            if source.position - 1 < len(joins):
                join = joins[source.position - 1]
        on_side = source.join_side == "left" or source.join_kind in ("semi", "anti")
        if join is not None and on_side and not join.args.get("using"):
            current = join.args.get("on")
            join.set("on", exp.and_(current, predicate) if current is not None else predicate)
        else:
            select.where(predicate, append=True, copy=False)
    return tree.sql(dialect=analysis.dialect)
