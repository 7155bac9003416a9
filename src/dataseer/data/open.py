"""Open the datasource a settings string names.

``DATASEER_WAREHOUSE`` (and the CLI flag) is one string: a PostgreSQL URL or a
DuckDB file path. This is the one place that tells them apart, so callers
never import a backend directly.
"""

from __future__ import annotations

from pathlib import Path

from dataseer.data.protocol import Datasource
from dataseer.errors import DatasourceError

_PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(spec: str | Path) -> bool:
    """Whether ``spec`` is a PostgreSQL URL rather than a file path."""
    return isinstance(spec, str) and spec.strip().lower().startswith(_PG_SCHEMES)


def open_datasource(spec: str | Path) -> Datasource:
    """Open a PostgreSQL URL as ``PostgresSource``, anything else as a DuckDB file.

    Raises:
        DatasourceError: the DuckDB file does not exist, or the database
            cannot be opened or reached.
    """
    if is_postgres_url(spec):
        from dataseer.data.postgres_source import PostgresSource

        return PostgresSource(str(spec).strip())
    from dataseer.data.duckdb_source import DuckDBSource

    path = Path(spec).expanduser()
    if not path.is_file():
        msg = (
            f"数据仓库文件不存在 / warehouse file not found: {path} "
            "(expected a DuckDB file or a postgresql:// URL)"
        )
        raise DatasourceError(msg)
    return DuckDBSource(path)
