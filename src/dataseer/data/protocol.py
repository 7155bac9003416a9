"""The one protocol every datasource implements, and its result records.

Tools, lines and the offline analyst only ever talk to a ``Datasource``; the
DuckDB and PostgreSQL implementations are interchangeable behind it. Query
failures are data (``QueryResult.error``), not exceptions, because the agent
feeds them back to the model as observations.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import pandas as pd

DEFAULT_ROW_LIMIT = 1000
DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ColumnInfo:
    """One column of a table, with the comment the warehouse keeps for it."""

    name: str
    type: str
    comment: str = ""


@dataclass(frozen=True)
class TableSummary:
    """A table's name and comment, as listed in the catalog."""

    name: str
    comment: str = ""


@dataclass(frozen=True)
class TableInfo:
    """What the model needs to write SQL against one table.

    ``time_column`` is the partition/date column (``ds`` in the sample
    warehouse) or ``None``; ``preview`` holds up to three rows of the latest
    partition. ``error`` is set (and the rest empty) when the table is unknown.
    """

    name: str
    comment: str = ""
    columns: tuple[ColumnInfo, ...] = ()
    time_column: str | None = None
    preview: pd.DataFrame = field(default_factory=pd.DataFrame)
    error: str | None = None


@dataclass
class QueryResult:
    """The outcome of one read-only query.

    ``truncated`` says the row limit cut the result; ``row_count`` counts the
    rows returned (after the limit). ``elapsed`` is wall seconds.
    """

    sql: str
    columns: list[str] = field(default_factory=list)
    frame: pd.DataFrame = field(default_factory=pd.DataFrame)
    row_count: int = 0
    truncated: bool = False
    elapsed: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the query ran without error."""
        return self.error is None


@runtime_checkable
class Datasource(Protocol):
    """A read-only warehouse connection.

    Implementations must be safe to call from several threads at once.
    """

    dialect: str
    """The sqlglot dialect name of the backend (``duckdb``, ``postgres``, ...)."""

    def list_tables(self) -> list[TableSummary]:
        """Every queryable table with its comment, sorted by name."""
        ...

    def table_info(self, name: str) -> TableInfo:
        """Columns, types, comments, time column and a preview of one table."""
        ...

    def execute(
        self,
        sql: str,
        *,
        limit: int = DEFAULT_ROW_LIMIT,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> QueryResult:
        """Run one read-only query; failures come back in ``QueryResult.error``."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class Closing(abc.ABC):
    """``with source:`` support for datasources: the block ends with ``close()``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
