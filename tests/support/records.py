"""Hand-built SQL history records for middleware tests."""

from __future__ import annotations

from typing import Any


def record(
    task_id: int, *, ok: bool = True, turn: int = 1, purpose: str = "", **extra: Any
) -> dict[str, Any]:
    """One ``SqlRecord`` with a one-cell result (``x = task_id``)."""
    return {
        "task_id": task_id,
        "turn": turn,
        "purpose": purpose or f"purpose {task_id}",
        "sql": f"SELECT {task_id} AS x",
        "ok": ok,
        "error": None if ok else "boom",
        "columns": ["x"],
        "rows": [[task_id]],
        "row_count": 1,
        "truncated": False,
        "elapsed": 0.0,
        **extra,
    }
