"""Langfuse tracing, on when its keys are set and silent and off without them.

``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY`` and ``LANGFUSE_HOST`` (a
self-hosted Langfuse inside the company network) must all be set; with any of
them missing nothing is imported, nothing is logged and nothing reaches the
network. ``dataseer.graph`` attaches the handler to the served graph.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["LANGFUSE_KEYS", "langfuse_enabled", "tracing_callbacks"]

LANGFUSE_KEYS = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST")


def langfuse_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether all three Langfuse settings are present."""
    env = os.environ if environ is None else environ
    return all((env.get(key) or "").strip() for key in LANGFUSE_KEYS)


def tracing_callbacks(environ: Mapping[str, str] | None = None) -> list[Any]:
    """The callback handlers to attach to runs: Langfuse's, or none."""
    if not langfuse_enabled(environ):
        return []
    from langfuse.langchain import CallbackHandler

    return [CallbackHandler()]
