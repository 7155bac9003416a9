"""The deterministic sample game warehouse (DuckDB) and its PostgreSQL loader.

``build_sample`` generates six games' worth of logins, payments, SDK funnels
and an operations calendar, with three injected anomalies that the offline
analyst and the tests know about through ``manifest.yaml``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

from dataseer.data.sample.generator import DEFAULT_END_DATE, build_sample, ensure_sample
from dataseer.data.sample.postgres import load_to_postgres
from dataseer.data.sample.schema import TABLE_NAMES, TABLES

__all__ = [
    "DEFAULT_END_DATE",
    "TABLES",
    "TABLE_NAMES",
    "build_sample",
    "ensure_sample",
    "load_manifest",
    "load_to_postgres",
]


@cache
def _manifest_text() -> str:
    return resources.files(__name__).joinpath("manifest.yaml").read_text(encoding="utf-8")


def load_manifest() -> dict[str, Any]:
    """Return the parsed ``manifest.yaml``: tables, row counts and injected anomalies.

    A fresh dict is returned on each call so callers may modify it freely.
    """
    data = yaml.safe_load(_manifest_text())
    if not isinstance(data, dict):
        msg = "sample manifest.yaml must be a mapping"
        raise ValueError(msg)
    return data
