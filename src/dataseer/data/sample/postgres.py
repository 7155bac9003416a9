"""Copy the sample warehouse from its DuckDB file into PostgreSQL.

The loader is generic over the DuckDB catalog: every base table is recreated
in PostgreSQL with matching types (DECIMAL stays NUMERIC so revenue sums are
exact on both backends) and the same table and column comments, then filled
with text COPY fed from Arrow record batches rendered to CSV in C. All tables
are replaced in one transaction, so readers see the old set or the new one.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import duckdb
import psycopg
import pyarrow.csv as pa_csv
from psycopg import sql

from dataseer.errors import DatasourceError

_BATCH_ROWS = 200_000

_SIMPLE_TYPES = {
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "HUGEINT": "numeric(38, 0)",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
    "VARCHAR": "text",
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def pg_type(duckdb_type: str) -> str:
    """Map a DuckDB column type to the PostgreSQL type that answers the same.

    Raises:
        DatasourceError: for a type the sample warehouse does not use.
    """
    upper = duckdb_type.upper()
    if upper in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[upper]
    match = _DECIMAL.fullmatch(upper)
    if match:
        return f"numeric({match.group(1)}, {match.group(2)})"
    msg = f"no PostgreSQL type for DuckDB type {duckdb_type!r}"
    raise DatasourceError(msg)


def _catalog(
    con: duckdb.DuckDBPyConnection,
) -> list[tuple[str, str | None, list[tuple[str, str, str | None]]]]:
    tables = con.execute(
        "SELECT table_name, comment FROM duckdb_tables() "
        "WHERE schema_name = 'main' AND NOT temporary ORDER BY table_name"
    ).fetchall()
    out = []
    for name, comment in tables:
        cols = con.execute(
            "SELECT column_name, data_type, comment FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND table_name = ? ORDER BY column_index",
            [name],
        ).fetchall()
        out.append((name, comment, [(c, t, m) for c, t, m in cols]))
    return out


def load_to_postgres(duckdb_path: Path, url: str, *, schema: str = "public") -> None:
    """Load every table of the DuckDB sample warehouse into PostgreSQL.

    Existing tables of the same names in ``schema`` are dropped and replaced,
    with the same column types and comments, so that the same question gives
    the same answer on both backends.

    Raises:
        DatasourceError: when the DuckDB file does not exist.
    """
    duckdb_path = Path(duckdb_path)
    if not duckdb_path.exists():
        msg = f"sample warehouse not found: {duckdb_path}"
        raise DatasourceError(msg)
    write_opts = pa_csv.WriteOptions(include_header=False, quoting_style="needed")
    with (
        duckdb.connect(str(duckdb_path), read_only=True) as src,
        psycopg.connect(url) as conn,
    ):
        catalog = _catalog(src)
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            for table, comment, columns in catalog:
                target = sql.Identifier(schema, table)
                cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(target))
                col_defs = sql.SQL(", ").join(
                    sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(pg_type(t)))
                    for c, t, _ in columns
                )
                cur.execute(sql.SQL("CREATE TABLE {} ({})").format(target, col_defs))
                if comment:
                    cur.execute(
                        sql.SQL("COMMENT ON TABLE {} IS {}").format(target, sql.Literal(comment))
                    )
                for col, _, col_comment in columns:
                    if col_comment:
                        cur.execute(
                            sql.SQL("COMMENT ON COLUMN {} IS {}").format(
                                sql.Identifier(schema, table, col), sql.Literal(col_comment)
                            )
                        )
                names = sql.SQL(", ").join(sql.Identifier(c) for c, _, _ in columns)
                copy_stmt = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(target, names)
                reader = src.sql(f'SELECT * FROM "{table}"').to_arrow_reader(_BATCH_ROWS)
                with cur.copy(copy_stmt) as copy:
                    for batch in reader:
                        if batch.num_rows == 0:
                            continue
                        buf = io.BytesIO()
                        pa_csv.write_csv(batch, buf, write_opts)
                        copy.write(buf.getbuffer())
            for table, _, _ in catalog:
                cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, table)))
