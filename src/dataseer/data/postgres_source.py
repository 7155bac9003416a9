"""PostgreSQL datasource: one schema of a database behind the ``Datasource`` protocol.

Connections come from a ``psycopg_pool.ConnectionPool``. Every call runs in its
own ``READ ONLY`` transaction with ``SET LOCAL statement_timeout`` and is
always rolled back, so a query can neither write nor leave settings behind for
the next borrower of the connection.

Frames are built to match what DuckDB's ``df()`` gives for the same SQL types
(dates as ``datetime64[us]``, decimals as ``float64``, integers as ``int64`` or
the nullable ``Int64`` when NULLs are present), so the tools and the analyst
see the same dtypes whichever warehouse is configured.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from contextlib import closing
from typing import Any, cast

import numpy as np
import pandas as pd
import psycopg
import psycopg_pool
from psycopg import errors as pg_errors
from psycopg.types.numeric import FloatLoader

from dataseer.data.duckdb_source import (
    METADATA_TIMEOUT_S,
    CatalogEntry,
    build_table_info,
    check_limits,
    resolve_name,
    timeout_message,
    trim_error,
    unknown_table_info,
)
from dataseer.data.protocol import (
    DEFAULT_ROW_LIMIT,
    DEFAULT_TIMEOUT_S,
    Closing,
    QueryResult,
    TableInfo,
    TableSummary,
)
from dataseer.errors import DatasourceError

OPEN_TIMEOUT_S = 10.0
_STREAM_CHUNK = 1000
_CHUNKED_STREAM = psycopg.pq.version() >= 170000

_BOOL = 16
_INTS = {21: "int16", 23: "int32", 20: "int64", 26: "int64"}
_FLOATS = {700: "float32", 701: "float64", 1700: "float64"}
_DATETIMES = {1082, 1114}
_TIMESTAMPTZ = 1184
_INTERVAL = 1186
_STRINGS = {19, 25, 1042, 1043}


class PostgresSource(Closing):
    """One schema of a PostgreSQL database, read-only, safe to share across threads.

    Args:
        url: A ``postgresql://`` URL or libpq conninfo string.
        schema: The only schema ``list_tables`` and ``table_info`` show; it
            is also first on the ``search_path`` of every query.
        min_size: Connections the pool keeps open.
        max_size: Most connections the pool opens (concurrent queries).
        open_timeout: Seconds to wait for the first connection before giving up
            with ``DatasourceError``.
    """

    dialect = "postgres"

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 8,
        open_timeout: float = OPEN_TIMEOUT_S,
    ) -> None:
        if not schema:
            msg = "schema must not be empty"
            raise ValueError(msg)
        if min_size < 0 or max_size < max(min_size, 1):
            msg = f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}"
            raise ValueError(msg)
        self.url = url
        self.schema = schema
        self._closed = False
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = (
            psycopg_pool.ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                configure=_configure,
                reset=_reset,
                name="dataseer-postgres",
                open=False,
            )
        )
        try:
            self._pool.open(wait=True, timeout=open_timeout)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            msg = f"无法连接 PostgreSQL / cannot connect to PostgreSQL at {_safe_url(url)}"
            raise DatasourceError(msg) from exc

    def __repr__(self) -> str:
        return f"PostgresSource({_safe_url(self.url)!r}, schema={self.schema!r})"

    def close(self) -> None:
        """Close every pooled connection; later calls raise ``DatasourceError``."""
        self._closed = True
        self._pool.close()

    def _check_open(self) -> None:
        if self._closed:
            msg = f"datasource is closed: {self!r}"
            raise DatasourceError(msg)

    def _metadata(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        self._check_open()
        try:
            with (
                self._pool.connection(timeout=METADATA_TIMEOUT_S) as conn,
                conn.transaction(force_rollback=True),
                conn.cursor() as cur,
            ):
                _set_locals(cur, self.schema, METADATA_TIMEOUT_S)
                cur.execute(sql, params)
                return cur.fetchall()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            msg = f"PostgreSQL 目录查询失败 / catalog query failed: {trim_error(exc)}"
            raise DatasourceError(msg) from exc

    def _catalog(self) -> list[tuple[CatalogEntry, int]]:
        rows = self._metadata(
            """
            SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class'), ''), c.oid
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
            ORDER BY c.relname
            """,
            [self.schema],
        )
        return [
            (CatalogEntry(name, self.schema, name, comment), oid) for name, comment, oid in rows
        ]

    def list_tables(self) -> list[TableSummary]:
        """Every table and view of ``schema`` with its comment, sorted by name."""
        return [TableSummary(e.name, e.comment) for e, _ in self._catalog()]

    def table_info(self, name: str) -> TableInfo:
        """Columns, comments, time column and latest-partition preview of one table."""
        catalog = self._catalog()
        entries = [e for e, _ in catalog]
        entry = resolve_name(name, entries)
        if entry is None:
            return unknown_table_info(name, entries)
        oid = next(o for e, o in catalog if e is entry)
        rows = self._metadata(
            """
            SELECT a.attname, format_type(a.atttypid, a.atttypmod),
                   coalesce(col_description(a.attrelid, a.attnum), '')
            FROM pg_attribute a
            WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum
            """,
            [oid],
        )
        return build_table_info(self, entry, rows)

    def execute(
        self,
        sql: str,
        *,
        limit: int = DEFAULT_ROW_LIMIT,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> QueryResult:
        """Run one query as written in a read-only transaction; keep at most ``limit`` rows.

        Rows are streamed and the statement is cancelled once ``limit + 1``
        rows arrived, so a huge result costs no more than the rows kept.
        """
        check_limits(limit, timeout)
        self._check_open()
        start = time.perf_counter()
        try:
            with (
                self._pool.connection(timeout=timeout) as conn,
                conn.transaction(force_rollback=True),
                conn.cursor() as cur,
            ):
                _set_locals(cur, self.schema, timeout)
                rows: list[tuple[Any, ...]] = []
                size = min(limit + 1, _STREAM_CHUNK) if _CHUNKED_STREAM else 1
                stream = cast(Generator[Any, None, None], cur.stream(sql, size=size))
                with closing(stream):
                    for row in stream:
                        rows.append(row)
                        if len(rows) > limit:
                            break
                description = cur.description
        except pg_errors.QueryCanceled as exc:
            error = timeout_message(timeout) if "timeout" in str(exc) else trim_error(exc)
            return QueryResult(sql=sql, elapsed=time.perf_counter() - start, error=error)
        except psycopg_pool.PoolTimeout:
            error = f"{timeout_message(timeout)} (no free connection)"
            return QueryResult(sql=sql, elapsed=time.perf_counter() - start, error=error)
        except psycopg.Error as exc:
            return QueryResult(sql=sql, elapsed=time.perf_counter() - start, error=trim_error(exc))
        truncated = len(rows) > limit
        frame = _frame(description, rows[:limit])
        return QueryResult(
            sql=sql,
            columns=[str(c) for c in frame.columns],
            frame=frame,
            row_count=len(frame),
            truncated=truncated,
            elapsed=time.perf_counter() - start,
        )


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.read_only = True
    conn.adapters.register_loader("numeric", FloatLoader)


def _reset(conn: psycopg.Connection[Any]) -> None:
    conn.execute("RESET ALL")


def _set_locals(cur: psycopg.Cursor[Any], schema: str, timeout: float) -> None:
    cur.execute(
        "SELECT set_config('statement_timeout', %s, true), set_config('search_path', %s, true)",
        [f"{max(1, round(timeout * 1000))}ms", f'"{schema.replace(chr(34), chr(34) * 2)}"'],
    )


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<invalid conninfo>"
    params.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in params.items())


def _frame(
    description: Sequence[psycopg.Column] | None, rows: list[tuple[Any, ...]]
) -> pd.DataFrame:
    """Build a DataFrame with the dtypes DuckDB's ``df()`` gives for the same types."""
    if description is None:
        return pd.DataFrame()
    data: dict[str, pd.Series[Any]] = {}
    names = _unique([col.name for col in description])
    for index, (name, col) in enumerate(zip(names, description, strict=True)):
        values = [row[index] for row in rows]
        data[name] = _series(col.type_code, values)
    return pd.DataFrame(data)


def _series(oid: int, values: list[Any]) -> pd.Series[Any]:
    has_null = any(v is None for v in values)
    if oid in _INTS:
        dtype = _INTS[oid]
        return pd.Series(values, dtype=dtype.capitalize() if has_null else dtype)
    if oid in _FLOATS:
        return pd.Series(
            [np.nan if v is None else v for v in values], dtype=_FLOATS[oid], copy=False
        )
    if oid == _BOOL:
        return pd.Series(values, dtype="boolean" if has_null else "bool")
    if oid in _DATETIMES:
        return pd.Series(np.array(values, dtype="datetime64[us]"))
    if oid == _TIMESTAMPTZ:
        return pd.Series(pd.to_datetime(values, utc=True)).astype("datetime64[us, UTC]")
    if oid == _INTERVAL:
        return pd.Series(pd.to_timedelta(values)).astype("timedelta64[us]")
    if oid in _STRINGS:
        return pd.Series(values, dtype="str")
    return pd.Series(values, dtype=object)


def _unique(names: list[str]) -> list[str]:
    """Column names made unique the way DuckDB does (``a``, ``a_1``...)."""
    seen: dict[str, int] = {}
    result: list[str] = []
    for name in names:
        if name in seen:
            seen[name] += 1
            candidate = f"{name}_{seen[name]}"
            while candidate in seen:
                seen[name] += 1
                candidate = f"{name}_{seen[name]}"
            seen[candidate] = 0
            result.append(candidate)
        else:
            seen[name] = 0
            result.append(name)
    return result
