"""What one user may read: the permission record the SQL guard decides against.

The permission store (YAML or PostgreSQL) resolves users and roles into this
one frozen record, so the guard never looks anything up while it decides:
tables as case-insensitive ``fnmatch`` patterns, allowed game ids (game base
ids already expanded into game ids by the store), the row-filter column of
each table and the columns hidden from the user.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

DEFAULT_FILTER_COLUMN = "game_id"
"""The row-filter column of a sensitive table unless ``row_filter_columns`` says otherwise."""

BASE_FILTER_COLUMN = "game_base_id"
"""A second permission column: a filter on allowed base ids also proves the rows allowed."""


def _frozen_map(value: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(value))


def matches(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``name`` matches any ``fnmatch`` pattern, ignoring case."""
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in patterns)


@dataclass(frozen=True)
class Permissions:
    """The resolved permissions of one user.

    Attributes:
        user_id: who the permissions belong to (for audit and messages).
        roles: the roles they were resolved from (informational).
        allowed_tables: table patterns the user may read (``dws_*``). A
            pattern without a dot matches tables in the default schema
            (``main``, ``public``, ``default``); a dotted one
            (``analytics.dws_*``) matches the qualified name.
        allowed_game_ids: game ids the user may see; ``None`` means every
            game (no row filter is needed).
        allowed_game_base_ids: base ids the user may see; a filter on
            ``game_base_id`` within these also proves a table's rows allowed.
        row_filter_columns: table pattern → its row-filter column (default
            ``game_id``).
        sensitive_tables: patterns of tables that carry the row filter; a
            table without the filter column is never sensitive.
        denied_columns: table pattern → column names hidden from the user.
        metadata_tables: system or metadata tables the user may read, such
            as ``information_schema.columns``.
    """

    user_id: str
    roles: tuple[str, ...] = ()
    allowed_tables: tuple[str, ...] = ("*",)
    allowed_game_ids: tuple[int, ...] | None = None
    allowed_game_base_ids: tuple[int, ...] | None = None
    row_filter_columns: Mapping[str, str] = field(default_factory=dict, hash=False)
    sensitive_tables: tuple[str, ...] = ("*",)
    denied_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    metadata_tables: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.user_id:
            msg = "Permissions need a user_id"
            raise ValueError(msg)
        for name in ("roles", "allowed_tables", "sensitive_tables", "metadata_tables"):
            value = getattr(self, name)
            if isinstance(value, str):
                msg = f"Permissions.{name} must be a tuple of strings, not a string"
                raise TypeError(msg)
            object.__setattr__(self, name, tuple(value))
        for name in ("allowed_game_ids", "allowed_game_base_ids"):
            ids = getattr(self, name)
            if ids is None:
                continue
            if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
                msg = f"Permissions.{name} must hold integers, got {ids!r}"
                raise TypeError(msg)
            object.__setattr__(self, name, tuple(sorted(set(ids))))
        object.__setattr__(self, "row_filter_columns", _frozen_map(self.row_filter_columns))
        denied = {k: tuple(c.lower() for c in v) for k, v in self.denied_columns.items()}
        object.__setattr__(self, "denied_columns", _frozen_map(denied))

    @property
    def row_filtered(self) -> bool:
        """Whether sensitive tables must be filtered to allowed games."""
        return self.allowed_game_ids is not None

    def table_allowed(self, name: str) -> bool:
        """Whether a table (bare or qualified name) is inside the table fence."""
        return matches(name, self.allowed_tables)

    def filter_column(self, table: str) -> str:
        """The row-filter column of ``table``."""
        for pattern, column in self.row_filter_columns.items():
            if fnmatch.fnmatchcase(table.lower(), pattern.lower()):
                return column.lower()
        return DEFAULT_FILTER_COLUMN

    def is_sensitive(self, table: str) -> bool:
        """Whether ``table`` matches a sensitive pattern (before checking its columns)."""
        return matches(table, self.sensitive_tables)

    def hidden_columns(self, table: str) -> frozenset[str]:
        """Columns of ``table`` the user may not read."""
        hidden: set[str] = set()
        for pattern, columns in self.denied_columns.items():
            if fnmatch.fnmatchcase(table.lower(), pattern.lower()):
                hidden.update(columns)
        return frozenset(hidden)

    def games_text(self) -> str:
        """Allowed games in a short form for messages (``1001, 1002`` or ``all``)."""
        if self.allowed_game_ids is None:
            return "全部 / all"
        if not self.allowed_game_ids:
            return "无 / none"
        return ", ".join(str(g) for g in self.allowed_game_ids)

    def describe(self) -> str:
        """What the user may access, for the model and for people (中文 / English)."""
        tables = ", ".join(self.allowed_tables) or "无 / none"
        lines = [
            f"用户 / user: {self.user_id}"
            + (f"（角色 / roles: {', '.join(self.roles)}）" if self.roles else ""),
            f"可查询的表 / tables you may query: {tables}",
        ]
        if self.allowed_game_ids is None:
            lines.append(
                "可查看的游戏 / games: 全部游戏，无需按游戏过滤 / all games, no game filter"
            )
        else:
            bases = ""
            if self.allowed_game_base_ids:
                bases = f"; game_base_id IN ({', '.join(map(str, self.allowed_game_base_ids))})"
            ids = ", ".join(map(str, self.allowed_game_ids))
            lines.append(
                f"可查看的游戏 / games: game_id IN ({ids}){bases}。每个带 game_id 的表都必须在"
                f"读取它的那一层查询中用 `game_id IN ({ids})` 过滤 / every table with game_id "
                f"must be filtered with `game_id IN ({ids})` in the query level that reads it"
            )
        if self.denied_columns:
            hidden = "; ".join(f"{t}: {', '.join(c)}" for t, c in self.denied_columns.items())
            lines.append(
                f"隐藏的列（不可查询，也不能用 SELECT *）/ hidden columns (not readable, "
                f"no SELECT *): {hidden}"
            )
        if self.metadata_tables:
            lines.append(f"可读的元数据表 / metadata tables: {', '.join(self.metadata_tables)}")
        return "\n".join(lines)
