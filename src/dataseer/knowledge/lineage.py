"""Table lineage: where a table comes from and how, compressed for a prompt.

Lineage rows (``meta_table_lineage``: table, upstream table, ETL SQL) answer
"where does this number come from?". Raw ETL SQL is long; the model needs
its gist, so each statement is summarised from its syntax tree: the
sources it reads, the joins, the filters, the grouping keys and the
aggregates, with the SQL itself cut to a short excerpt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from dataseer.data.protocol import Datasource

LINEAGE_TABLE = "meta_table_lineage"
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
_EXCERPT = 240


@dataclass(frozen=True)
class LineageEdge:
    """One (table, upstream table) row with its ETL SQL."""

    table: str
    upstream: str
    etl_sql: str


def summarise_sql(sql: str) -> str:
    """A one-paragraph gist of an ETL statement: reads, joins, filters, keys, aggregates."""
    text = _PLACEHOLDER.sub(r"__\1__", sql.strip())
    if not text or text.startswith("--"):
        return text.lstrip("- ").strip()[:_EXCERPT]
    try:
        tree = sqlglot.parse_one(text, read="hive")
    except sqlglot.errors.SqlglotError:
        return " ".join(text.split())[:_EXCERPT]
    select = tree.find(exp.Select)
    if select is None:
        return " ".join(text.split())[:_EXCERPT]
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    sources = list(dict.fromkeys(t.name for t in select.find_all(exp.Table) if t.name not in ctes))
    parts = [f"reads {', '.join(sources)}"] if sources else []
    joins = [j.sql(dialect="hive") for j in select.args.get("joins") or []]
    if joins:
        parts.append("joins " + "; ".join(" ".join(j.split()[:8]) for j in joins))
    where = select.args.get("where")
    if where is not None:
        parts.append("where " + where.this.sql(dialect="hive"))
    group = select.args.get("group")
    if group is not None:
        parts.append("group by " + ", ".join(e.sql(dialect="hive") for e in group.expressions))
    aggs = [e.sql(dialect="hive") for e in select.expressions if e.find(exp.AggFunc) is not None]
    if aggs:
        parts.append("computes " + ", ".join(aggs))
    return _PLACEHOLDER.sub(r"${\1}", "; ".join(parts).replace("__ds__", "${ds}"))


def lineage_edges(datasource: Datasource, table: str) -> list[LineageEdge]:
    """The lineage rows of ``table`` (case-insensitive); [] when there are none."""
    literal = "'" + table.strip().lower().replace("'", "''") + "'"
    result = datasource.execute(
        f"SELECT table_name, upstream_table, etl_sql FROM {LINEAGE_TABLE} "
        f"WHERE lower(table_name) = {literal} ORDER BY upstream_table",
        limit=200,
    )
    if not result.ok:
        return []
    return [
        LineageEdge(str(t), str(u), str(s or ""))
        for t, u, s in result.frame.itertuples(index=False)
    ]


def describe_lineage(datasource: Datasource, table: str, *, depth: int = 2) -> str:
    """Markdown: the upstream tree of ``table`` to ``depth`` levels, each edge summarised.

    Raises:
        ValueError: ``depth`` is not positive.
    """
    if depth < 1:
        msg = f"depth must be >= 1, got {depth}"
        raise ValueError(msg)
    lines: list[str] = []
    seen: set[str] = set()
    frontier = [(table.strip().lower(), 0)]
    while frontier:
        current, level = frontier.pop(0)
        if current in seen or level >= depth:
            continue
        seen.add(current)
        for edge in lineage_edges(datasource, current):
            indent = "  " * level
            lines.append(
                f"{indent}- `{edge.table}` ← `{edge.upstream}`: {summarise_sql(edge.etl_sql)}"
            )
            frontier.append((edge.upstream.lower(), level + 1))
    if not lines:
        return (
            f"没有 `{table}` 的血缘记录 / no lineage recorded for `{table}` "
            f"(it may be a source table, or lineage is not collected)."
        )
    return f"## lineage of `{table}` (upstream, {depth} levels)\n" + "\n".join(lines)
