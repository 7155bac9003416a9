"""DuckDB datasource: a read-only warehouse file behind the ``Datasource`` protocol.

One base connection is opened per source; every call works on its own
``cursor()`` (a fresh DuckDB connection to the same database) so that calls
from several threads never share statement state, and a timed-out query can be
interrupted without touching the others.

The helpers at the top (name resolution, time column choice, error trimming)
are shared with the PostgreSQL source so that both backends answer the same
way; they carry no DuckDB specifics.
"""

from __future__ import annotations

import difflib
import math
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from dataseer.data.protocol import (
    DEFAULT_ROW_LIMIT,
    DEFAULT_TIMEOUT_S,
    Closing,
    ColumnInfo,
    Datasource,
    QueryResult,
    TableInfo,
    TableSummary,
)
from dataseer.errors import DatasourceError

PREVIEW_ROWS = 3
TIME_COLUMN_NAME = "ds"
METADATA_TIMEOUT_S = 10.0
_ERROR_MAX_LINES = 6
_ERROR_MAX_CHARS = 800
_DUCKDB_VECTOR = 2048


@dataclass(frozen=True)
class CatalogEntry:
    """One queryable relation as a backend's catalog knows it.

    ``name`` is what users see and pass back (``table`` in the default schema,
    ``schema.table`` elsewhere); ``schema`` and ``table`` are the exact stored
    names used, quoted, in generated SQL.
    """

    name: str
    schema: str
    table: str
    comment: str = ""


def quote_ident(name: str) -> str:
    """Quote one identifier for DuckDB or PostgreSQL (both follow the SQL standard)."""
    return '"' + name.replace('"', '""') + '"'


def split_name(name: str) -> list[str]:
    """Split a possibly schema-qualified, possibly quoted table name into parts.

    Dots inside double quotes or backticks do not split, so ``"a.b".c`` is two
    parts; a doubled quote inside quotes is one quote character. Surrounding
    quotes are dropped.

    >>> split_name('ods."Weird ""T"".x"')
    ['ods', 'Weird "T".x']
    """
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    text = name.strip()
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if quote is not None:
            if char != quote:
                current.append(char)
            elif index < len(text) and text[index] == quote:
                current.append(char)
                index += 1
            else:
                quote = None
            continue
        if char in {'"', "`"}:
            quote = char
        elif char == ".":
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts


def resolve_name(
    name: str, entries: Sequence[CatalogEntry], *, qualifiers: Iterable[str] = ()
) -> CatalogEntry | None:
    """Find the catalog entry a user-given table name means, ignoring case.

    Why case-insensitive: the model and users write ``DWS_Game_DAU`` as often as
    ``dws_game_dau``. An exact display-name match wins; then ``schema.table``;
    then a bare table name that is unique across schemas. ``qualifiers`` are
    extra leading parts accepted and ignored (the DuckDB database name).
    """
    parts = split_name(name)
    allowed = {q.casefold() for q in qualifiers}
    while len(parts) > 2 and parts[0].casefold() in allowed:
        parts = parts[1:]
    if not parts or not all(parts) or len(parts) > 2:
        return None
    wanted = ".".join(parts).casefold()
    for entry in entries:
        if entry.name.casefold() == wanted:
            return entry
    if len(parts) == 2:
        schema, table = (p.casefold() for p in parts)
        for entry in entries:
            if entry.schema.casefold() == schema and entry.table.casefold() == table:
                return entry
        return None
    bare = [e for e in entries if e.table.casefold() == wanted]
    return bare[0] if len(bare) == 1 else None


def unknown_table_info(name: str, entries: Sequence[CatalogEntry]) -> TableInfo:
    """The ``TableInfo`` for a name that matches nothing, naming close real tables."""
    by_key: dict[str, str] = {}
    for entry in entries:
        by_key.setdefault(entry.name.casefold(), entry.name)
        by_key.setdefault(entry.table.casefold(), entry.name)
    query = ".".join(split_name(name)).casefold()
    close = difflib.get_close_matches(query, list(by_key), n=6, cutoff=0.6)
    similar = list(dict.fromkeys(by_key[key] for key in close))[:3]
    message = f"表不存在 / unknown table `{name}`"
    if similar:
        message += "; similar: " + ", ".join(similar)
    return TableInfo(name=name, error=message)


def pick_time_column(columns: Sequence[ColumnInfo]) -> str | None:
    """The partition column: ``ds`` if present, else the first date/timestamp column."""
    for column in columns:
        if column.name.casefold() == TIME_COLUMN_NAME:
            return column.name
    for column in columns:
        kind = column.type.strip().upper()
        if kind == "DATE" or kind.startswith("TIMESTAMP"):
            return column.name
    return None


def preview_sql(entry: CatalogEntry, time_column: str | None, *, qualify: bool = True) -> str:
    """SQL for up to three rows of the latest partition, every identifier quoted."""
    table = quote_ident(entry.table)
    if qualify:
        table = f"{quote_ident(entry.schema)}.{table}"
    if time_column is None:
        return f"SELECT * FROM {table} LIMIT {PREVIEW_ROWS}"
    col = quote_ident(time_column)
    return (
        f"SELECT * FROM {table} WHERE {col} = (SELECT max({col}) FROM {table}) LIMIT {PREVIEW_ROWS}"
    )


def trim_error(exc: BaseException) -> str:
    """The database's own message, first lines only, without any Python traceback."""
    text = str(exc).strip() or type(exc).__name__
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    message = "\n".join(lines[:_ERROR_MAX_LINES])
    if len(message) > _ERROR_MAX_CHARS:
        message = message[: _ERROR_MAX_CHARS - 1].rstrip() + "…"
    return message


def timeout_message(timeout: float) -> str:
    """The one wording both backends use for a query that ran out of time."""
    return f"查询超时 / query timed out after {timeout:g}s"


def check_limits(limit: int, timeout: float) -> None:
    """Reject nonsensical limits before touching the database."""
    if limit < 0:
        msg = f"limit must be >= 0, got {limit}"
        raise ValueError(msg)
    if not timeout > 0:
        msg = f"timeout must be > 0 seconds, got {timeout}"
        raise ValueError(msg)


def build_table_info(
    source: Datasource, entry: CatalogEntry, rows: Iterable[tuple[str, str, str]]
) -> TableInfo:
    """A table's info from its catalog entry and (name, type, comment) column rows.

    Shared by every backend: the time column choice and the latest-partition
    preview are the same rules whatever the catalog looks like.
    """
    columns = tuple(ColumnInfo(n, t, c) for n, t, c in rows)
    time_column = pick_time_column(columns)
    preview = source.execute(
        preview_sql(entry, time_column), limit=PREVIEW_ROWS, timeout=METADATA_TIMEOUT_S
    )
    return TableInfo(
        name=entry.name,
        comment=entry.comment,
        columns=columns,
        time_column=time_column,
        preview=preview.frame,
    )


class DuckDBSource(Closing):
    """A DuckDB warehouse file, read-only by default, safe to share across threads.

    Args:
        path: The ``.duckdb`` file.
        read_only: Open the file read-only (the default), so any write fails
            with an error result instead of changing the warehouse.
        external_access: Allow SQL to read and write other files
            (``read_csv``, ``COPY ... TO``, ``ATTACH``). Off by default: the
            agent should see the warehouse, not the server's file system. The
            switch is per database file and cannot be turned back on while the
            file is open in this process.
    """

    dialect = "duckdb"

    def __init__(
        self, path: Path | str, *, read_only: bool = True, external_access: bool = False
    ) -> None:
        self.path = Path(path)
        if read_only and not self.path.is_file():
            msg = f"DuckDB 文件不存在 / DuckDB file not found: {self.path}"
            raise DatasourceError(msg)
        try:
            self._conn = duckdb.connect(str(self.path), read_only=read_only)
            if not external_access:
                # A runtime SET, not a connect() config: DuckDB refuses a second
                # connect() to the same file with a different config.
                self._conn.execute("SET enable_external_access = false")
        except duckdb.Error as exc:
            msg = f"无法打开 DuckDB / cannot open DuckDB file {self.path}: {trim_error(exc)}"
            raise DatasourceError(msg) from exc
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"DuckDBSource({str(self.path)!r})"

    def close(self) -> None:
        """Close the base connection; later calls raise ``DatasourceError``."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._closed:
                msg = f"datasource is closed: {self.path}"
                raise DatasourceError(msg)
            return self._conn.cursor()

    def _catalog(self) -> list[CatalogEntry]:
        sql = """
            SELECT schema_name, table_name, coalesce(comment, '')
            FROM duckdb_tables()
            WHERE database_name = current_database() AND NOT internal AND NOT temporary
            UNION ALL
            SELECT schema_name, view_name, coalesce(comment, '')
            FROM duckdb_views()
            WHERE database_name = current_database() AND NOT internal AND NOT temporary
        """
        cur = self._cursor()
        try:
            rows = cur.execute(sql).fetchall()
            default_schema = cur.execute("SELECT current_schema()").fetchall()[0][0]
        finally:
            cur.close()
        entries = [
            CatalogEntry(
                name=table if schema == default_schema else f"{schema}.{table}",
                schema=schema,
                table=table,
                comment=comment,
            )
            for schema, table, comment in rows
        ]
        return sorted(entries, key=lambda e: e.name)

    def _database_name(self) -> str:
        cur = self._cursor()
        try:
            return str(cur.execute("SELECT current_database()").fetchall()[0][0])
        finally:
            cur.close()

    def list_tables(self) -> list[TableSummary]:
        """Every user table and view with its comment, sorted by name."""
        return [TableSummary(e.name, e.comment) for e in self._catalog()]

    def table_info(self, name: str) -> TableInfo:
        """Columns, comments, time column and latest-partition preview of one table."""
        entries = self._catalog()
        entry = resolve_name(name, entries, qualifiers=[self._database_name()])
        if entry is None:
            return unknown_table_info(name, entries)
        cur = self._cursor()
        try:
            rows = cur.execute(
                """
                SELECT column_name, data_type, coalesce(comment, '')
                FROM duckdb_columns()
                WHERE database_name = current_database() AND schema_name = ? AND table_name = ?
                ORDER BY column_index
                """,
                [entry.schema, entry.table],
            ).fetchall()
        finally:
            cur.close()
        return build_table_info(self, entry, rows)

    def execute(
        self,
        sql: str,
        *,
        limit: int = DEFAULT_ROW_LIMIT,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> QueryResult:
        """Run one query as written; keep at most ``limit`` rows.

        ``limit + 1`` rows are fetched so ``truncated`` is exact without a
        second count query. A watchdog timer interrupts this call's cursor
        (and only it) when ``timeout`` seconds pass.
        """
        check_limits(limit, timeout)
        start = time.perf_counter()
        cur = self._cursor()
        watchdog = _Watchdog(cur, timeout)
        try:
            cur.execute(sql)
            frame, truncated = _fetch_frame(cur, limit)
        except duckdb.Error as exc:
            error = timeout_message(timeout) if watchdog.fired else trim_error(exc)
            return QueryResult(sql=sql, elapsed=time.perf_counter() - start, error=error)
        finally:
            watchdog.stop()
            cur.close()
        return QueryResult(
            sql=sql,
            columns=[str(c) for c in frame.columns],
            frame=frame,
            row_count=len(frame),
            truncated=truncated,
            elapsed=time.perf_counter() - start,
        )


class _Watchdog:
    """Interrupts one cursor after ``timeout`` seconds unless stopped first.

    The lock makes ``stop`` wait for an interrupt already under way, so the
    cursor is never interrupted while (or after) it is being closed.
    """

    def __init__(self, cur: duckdb.DuckDBPyConnection, timeout: float) -> None:
        self._cur = cur
        self._lock = threading.Lock()
        self._done = False
        self.fired = False
        self._timer = threading.Timer(timeout, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                self.fired = True
                self._cur.interrupt()

    def stop(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True


def _fetch_frame(cur: duckdb.DuckDBPyConnection, limit: int) -> tuple[pd.DataFrame, bool]:
    """Fetch up to ``limit + 1`` rows as DuckDB's own DataFrame chunks."""
    if cur.description is None:
        return pd.DataFrame(), False
    wanted = limit + 1
    vectors = max(1, math.ceil(wanted / _DUCKDB_VECTOR))
    parts: list[pd.DataFrame] = []
    got = 0
    first: Any = None
    while got < wanted:
        chunk = cur.fetch_df_chunk(vectors)
        if first is None:
            first = chunk
        if chunk.empty:
            break
        parts.append(chunk)
        got += len(chunk)
    if not parts:
        return first if first is not None else pd.DataFrame(), False
    frame = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    truncated = len(frame) > limit
    if truncated:
        frame = frame.iloc[:limit].reset_index(drop=True)
    return frame, truncated
