"""Catalog tools: find tables for a question and read one table's schema."""

from __future__ import annotations

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from dataseer.prompt import markdown_table
from dataseer.services import services_for


@tool
def search_tables(query: str, runtime: ToolRuntime) -> str:  # noqa: D417  # runtime is injected
    """Find the warehouse tables most relevant to a question or keywords.

    Args:
        query: the question or keywords, Chinese or English (e.g. "星海远征 流水 渠道").
    """
    services = services_for(runtime.config)
    catalog = [(t.name, t.comment) for t in services.datasource.list_tables()]
    comments = dict(catalog)
    hits = services.index.search_tables(query, catalog, k=8)
    if not hits:
        return "没有找到相关的表 / no matching tables. Try other keywords."
    rows = [[name, comments.get(name, ""), f"{score:.2f}"] for name, score in hits]
    return markdown_table(["table", "comment", "score"], rows)


@tool
def table_info(table: str, runtime: ToolRuntime) -> str:  # noqa: D417  # runtime is injected
    """Columns, types, comments, time column and three preview rows of one table.

    Args:
        table: the table name, as listed by search_tables.
    """
    info = services_for(runtime.config).datasource.table_info(table)
    if info.error:
        return info.error
    cols = markdown_table(
        ["column", "type", "comment"], [[c.name, c.type, c.comment] for c in info.columns]
    )
    parts = [f"## {info.name}", info.comment, cols]
    if info.time_column:
        parts.append(f"time/partition column: `{info.time_column}`")
    if not info.preview.empty:
        preview_rows = [list(r) for r in info.preview.itertuples(index=False, name=None)]
        parts.append("preview:\n" + markdown_table(list(info.preview.columns), preview_rows))
    return "\n\n".join(p for p in parts if p)
