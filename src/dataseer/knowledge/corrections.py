"""Hints for SQL that failed or matched nothing: the closest real names and values.

A model that writes ``channel_name = 'huawie'`` gets zero rows and, without
help, often concludes there is no data. This module reads the query's syntax
tree (sqlglot), finds the filter literals and identifiers, and compares them
with the warehouse: a literal that is not a stored value gets the closest
stored values; an unknown table or column gets the closest real names. The
hints are appended to the ``run_sql`` observation; the decision to retry is
the model's.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from dataseer.knowledge.retrieval import TableEntry
from dataseer.knowledge.values import ValueIndex

MAX_HINTS = 5


def _tables(tree: exp.Expr) -> dict[str, str]:
    """Alias (or name) → table name of every table the query reads, CTEs excluded."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: dict[str, str] = {}
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if name and name not in ctes:
            out[(t.alias or t.name).lower()] = name
            out[name] = name
    return out


def _column_tables(col: exp.Column, aliases: dict[str, str]) -> list[str]:
    if col.table:
        found = aliases.get(col.table.lower())
        return [found] if found else []
    return sorted(set(aliases.values()))


def _literal_filters(tree: exp.Expr) -> list[tuple[exp.Column, str]]:
    found: list[tuple[exp.Column, str]] = []
    for node in tree.find_all(exp.EQ, exp.In):
        col = node.this
        if not isinstance(col, exp.Column):
            continue
        literals = node.expressions if isinstance(node, exp.In) else [node.expression]
        for lit in literals:
            if isinstance(lit, exp.Literal) and lit.is_string:
                found.append((col, lit.this))
    return found


def suggest_fixes(
    sql: str,
    *,
    catalog: Sequence[TableEntry],
    values: ValueIndex | None,
    empty: bool,
    dialect: str = "duckdb",
) -> list[str]:
    """Hints for ``sql``: unknown tables/columns always, unmatched literals when ``empty``.

    Args:
        sql: the query that failed or returned no rows.
        catalog: the warehouse tables with their columns.
        values: the value index; without it, literals are not checked.
        empty: the query ran and returned no rows (check filter literals).
        dialect: the sqlglot dialect to parse with.
    """
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return []
    by_name = {e.name.lower(): e for e in catalog}
    aliases = _tables(tree)
    hints: list[str] = []
    for table in dict.fromkeys(aliases.values()):
        if table not in by_name:
            close = difflib.get_close_matches(table, list(by_name), n=3, cutoff=0.6)
            hint = f"表 `{table}` 不存在 / unknown table `{table}`"
            if close:
                hint += "; closest: " + ", ".join(f"`{c}`" for c in close)
            hints.append(hint)
    selected = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
    for col in tree.find_all(exp.Column):
        name = col.name.lower()
        tables = [t for t in _column_tables(col, aliases) if t in by_name]
        if not tables or not name or name in selected:
            continue
        known = {c.lower() for t in tables for c, _ in by_name[t].columns}
        if not known or name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
        hint = f"列 `{name}` 不在 {', '.join(tables)} 中 / unknown column `{name}`"
        if close:
            hint += "; closest: " + ", ".join(f"`{c}`" for c in close)
        if hint not in hints:
            hints.append(hint)
    if empty and values is not None:
        for col, literal in _literal_filters(tree):
            for table in _column_tables(col, aliases):
                stored = values.values(table, col.name)
                if not stored or literal in stored:
                    continue
                entry = values.find(table, col.name, literal)
                close = [entry.value] if entry else values.closest_values(table, col.name, literal)
                hint = (
                    f"`{table}.{col.name}` 没有值 '{literal}' / no row has {col.name} = '{literal}'"
                )
                if close:
                    hint += "; closest stored values: " + ", ".join(f"'{v}'" for v in close)
                hints.append(hint)
                break
    return hints[:MAX_HINTS]
