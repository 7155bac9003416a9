"""Observability helpers: stream events (tracing and token accounting come later)."""

from __future__ import annotations

from typing import Any

from langgraph.config import get_stream_writer

PHASES = ("planning", "execution", "sub_agent", "reporting", "done")
"""Phases a run's custom stream marks, so clients can fold thinking away."""


def emit(event: dict[str, Any]) -> None:
    """Send a custom stream event; a no-op outside a running graph."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(event)


def phase(name: str, **detail: Any) -> None:
    """Mark the run's current phase (one of ``PHASES``)."""
    if name not in PHASES:
        msg = f"unknown phase {name!r}; expected one of {', '.join(PHASES)}"
        raise ValueError(msg)
    emit({"type": "phase", "phase": name, **detail})
