"""Dialect names → sqlglot dialects, so every warehouse is checked by the same rules.

MaxCompute (ODPS) comes from the ``sqlglot-maxcompute`` plugin, registered
with sqlglot through an entry point; when the plugin is missing or does not
load, MaxCompute SQL is read with Hive semantics, which it is derived from.
"""

from __future__ import annotations

from functools import cache

from sqlglot.dialects.dialect import Dialect

_ALIASES = {
    "duckdb": "duckdb",
    "postgres": "postgres",
    "postgresql": "postgres",
    "pg": "postgres",
    "hive": "hive",
    "spark": "spark",
    "spark2": "spark2",
    "sparksql": "spark",
    "databricks": "databricks",
    "mysql": "mysql",
    "mariadb": "mysql",
    "clickhouse": "clickhouse",
    "maxcompute": "maxcompute",
    "odps": "maxcompute",
    "sqlite": "sqlite",
    "trino": "trino",
    "presto": "presto",
}

SUPPORTED = ("duckdb", "postgres", "hive", "spark", "mysql", "clickhouse", "maxcompute", "odps")
"""The dialects the guard is tested with; other sqlglot dialect names are accepted too."""


@cache
def maxcompute_available() -> bool:
    """Whether the ``sqlglot-maxcompute`` plugin is installed and loads."""
    try:
        Dialect.get_or_raise("maxcompute")
    except Exception:
        return False
    return True


@cache
def sqlglot_dialect(name: str) -> str:
    """The sqlglot dialect name for a dataseer dialect name (case-insensitive).

    Raises:
        ValueError: the name is neither a known alias nor a sqlglot dialect.
    """
    key = (name or "").strip().lower()
    resolved = _ALIASES.get(key, key)
    if resolved == "maxcompute" and not maxcompute_available():
        return "hive"
    try:
        Dialect.get_or_raise(resolved)
    except (ValueError, KeyError) as exc:
        msg = f"unknown SQL dialect {name!r}; use one of {', '.join(SUPPORTED)}"
        raise ValueError(msg) from exc
    return resolved
