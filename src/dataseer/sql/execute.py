"""The one place where dataseer runs a query against the warehouse.

Every path (tools, lines, the offline analyst through the tools) ends here, so
limits, timeouts and, later, the permission guard apply to all of them.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pandas as pd

from dataseer.config import Settings
from dataseer.data.protocol import Datasource, QueryResult

STORED_ROWS = 200
"""Rows of each result kept in graph state; the rest stays in the warehouse."""


def run_query(datasource: Datasource, sql: str, settings: Settings) -> QueryResult:
    """Run one read-only query with the configured row limit and timeout."""
    sql = sql.strip().rstrip(";").strip()
    if not sql:
        return QueryResult(sql=sql, error="空查询 / empty SQL")
    return datasource.execute(sql, limit=settings.row_limit, timeout=settings.query_timeout)


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
