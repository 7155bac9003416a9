"""Catalog tools: find tables for a question and read one table's schema."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from dataseer.knowledge.retrieval import catalog_entries, is_deprecated
from dataseer.knowledge.values import value_index_for
from dataseer.observe.track import track_tool
from dataseer.prompt import markdown_table
from dataseer.services import services_for
from dataseer.sql.permission_store import allowed_games


def scoped_preview(preview: pd.DataFrame, allowed: tuple[int, ...] | bool | None) -> pd.DataFrame:
    """Preview rows the user may see: the schema is metadata, the rows are data.

    A user without data access sees no rows; a user scoped to some games sees
    only those games' rows of a table that has ``game_id``.
    """
    if allowed is False or allowed is True:
        return preview.iloc[0:0]
    if allowed is None or "game_id" not in preview.columns:
        return preview
    return preview[preview["game_id"].isin(list(allowed))]


@tool
@track_tool(name="search_tables")
def search_tables(query: str, runtime: ToolRuntime) -> str:  # noqa: D417  # runtime is injected
    """Find the warehouse tables most relevant to a question or keywords.

    Args:
        query: the question or keywords, Chinese or English (e.g. "星海远征 流水 渠道").
    """
    services = services_for(runtime.config)
    catalog = catalog_entries(services.datasource)
    comments = {e.name.lower(): e.comment for e in catalog}
    hits = services.index.search_tables(query, catalog, k=8)
    if not hits:
        return "没有找到相关的表 / no matching tables. Try other keywords."
    allowed = table_permission_check(services, runtime.config)
    lines = []
    for name, _score in hits:
        comment = comments.get(name, "")
        marks = ""
        if is_deprecated(comment, name):
            marks += " ⚠️deprecated/已废弃"
        if not allowed(name):
            marks += " 🔒no access/无权限"
        lines.append(f"- `{name}`{marks} — {comment}")
    links = value_index_for(services.datasource, services.pack).link(query)
    if links:
        lines.append("\nvalues named in the query / 问题中的取值:")
        lines += [
            f"- {lk.text} → `{lk.column}` = '{lk.value}'"
            + (f" (game_id {lk.code})" if lk.dimension == "game" else "")
            + f" [{lk.match}]"
            for lk in links
        ]
    return "\n".join(lines)


def table_permission_check(
    services: Any, config: Mapping[str, Any] | None
) -> Callable[[str], bool]:
    """Whether the run's user may query a table (fnmatch on ``allowed_tables`` patterns).

    Search still lists forbidden tables, marked, so the model can tell the
    user what exists and ask for access instead of hunting for a substitute.
    """
    try:
        from dataseer.sql.permission_store import permissions_for_config

        permissions, _problem = permissions_for_config(
            services.permission_store, config, services.settings
        )
    except (ImportError, AttributeError):
        return lambda _name: True
    if permissions is None:
        return lambda _name: False
    return lambda name: any(
        fnmatch.fnmatchcase(name.lower(), p.lower()) for p in permissions.allowed_tables
    )


@tool
@track_tool(name="table_info")
def table_info(table: str, runtime: ToolRuntime) -> str:  # noqa: D417  # runtime is injected
    """Columns, types, comments, time column and three preview rows of one table.

    Args:
        table: the table name, as listed by search_tables.
    """
    services = services_for(runtime.config)
    info = services.datasource.table_info(table)
    if info.error:
        return info.error
    cols = markdown_table(
        ["column", "type", "comment"], [[c.name, c.type, c.comment] for c in info.columns]
    )
    parts = [f"## {info.name}", info.comment, cols]
    if info.time_column:
        parts.append(f"time/partition column: `{info.time_column}`")
    preview = scoped_preview(info.preview, allowed_games(services, runtime.config))
    if not preview.empty:
        preview_rows = [list(r) for r in preview.itertuples(index=False, name=None)]
        parts.append("preview:\n" + markdown_table(list(preview.columns), preview_rows))
    return "\n\n".join(p for p in parts if p)
