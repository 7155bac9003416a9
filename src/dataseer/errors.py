"""The one error base of dataseer.

Every error the project raises on purpose derives from ``DataseerError`` so
that servers and the CLI can tell our own failures (with messages meant for
people) from bugs.
"""

from __future__ import annotations


class DataseerError(Exception):
    """Base of every error dataseer raises on purpose."""


class ConfigError(DataseerError):
    """A setting is missing or invalid."""


class DatasourceError(DataseerError):
    """A datasource could not be opened or answered outside a query result."""


class KnowledgeError(DataseerError):
    """The knowledge pack is missing or malformed."""


class ModelError(DataseerError):
    """A chat model could not be built or failed in a way the run cannot absorb."""
