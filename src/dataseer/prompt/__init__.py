"""Prompt files, XML partitions and compact tables.

Prompts live as Markdown files under ``prompts/`` (or ``DATASEER_PROMPTS_DIR``)
so that they can be reviewed and changed without touching code; this module
only loads and assembles them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from dataseer.errors import ConfigError

BUDGET_TAG = "budget_exhausted"
"""The partition that tells the model its step budget is spent (no tools this call)."""


@lru_cache(maxsize=256)
def _read(path: Path, mtime: float) -> str:
    return path.read_text(encoding="utf-8").strip()


def load_prompt(name: str, prompts_dir: Path) -> str:
    """Load ``prompts/<name>.md``.

    The cache is keyed on the file's mtime, so an edited prompt is picked up by
    a running server without a restart.

    Raises:
        ConfigError: the prompt file does not exist.
    """
    path = (prompts_dir / f"{name}.md").resolve()
    if not path.is_file():
        msg = f"prompt file not found: {path}"
        raise ConfigError(msg)
    return _read(path, path.stat().st_mtime)


class _Blank(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(template: str, values: Mapping[str, Any]) -> str:
    """Fill ``{name}`` placeholders; unknown placeholders stay as they are."""
    return template.format_map(_Blank(values))


def partition(tag: str, body: str) -> str:
    """One XML partition of a prompt; empty bodies render as nothing."""
    body = body.strip()
    if not body:
        return ""
    return f"<{tag}>\n{body}\n</{tag}>"


def join_partitions(parts: Sequence[str]) -> str:
    """Join the non-empty partitions with one blank line between them."""
    return "\n\n".join(p for p in parts if p)


def format_cell(value: Any) -> str:
    """One value as table text: exact, compact, and stable across backends."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value):
            return "NULL"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        if abs(value) < 1e-4:
            return f"{value:.4g}"
        return f"{value:.4f}".rstrip("0").rstrip(".")
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, max_rows: int | None = None
) -> str:
    """A compact markdown table (``|-|-|`` rule), cut at ``max_rows`` with a note."""
    if not columns:
        return "(no columns)"
    shown = rows if max_rows is None else rows[:max_rows]
    lines = [
        "|" + "|".join(format_cell(c) for c in columns) + "|",
        "|" + "|".join("-" for _ in columns) + "|",
    ]
    lines += ["|" + "|".join(format_cell(v) for v in row) + "|" for row in shown]
    if max_rows is not None and len(rows) > max_rows:
        lines.append(f"…(+{len(rows) - max_rows} rows)")
    return "\n".join(lines)
