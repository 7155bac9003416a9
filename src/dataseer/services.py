"""The composition root: one datasource, knowledge pack and index per process.

Tools, lines and middlewares ask for ``get_services(settings)`` instead of
opening connections themselves, so a server process keeps one connection
pool and one retrieval index however many runs it serves.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dataseer.config import Settings, get_settings
from dataseer.data.protocol import Datasource
from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.retrieval import KnowledgeIndex
from dataseer.sql.permission_store import PermissionStore


@dataclass
class Services:
    """What every run of one process shares."""

    settings: Settings
    datasource: Datasource
    pack: KnowledgePack
    index: KnowledgeIndex
    permission_store: PermissionStore
    """Who may read what (``Settings.permissions``: YAML file or PostgreSQL)."""


_lock = threading.Lock()
_cache: dict[tuple[str, str, str], Services] = {}


def _permission_store(
    settings: Settings, datasource: Datasource, pack: KnowledgePack
) -> PermissionStore:
    """The permission store, with base games resolved through ``dim_game`` (else the pack)."""
    from dataseer.sql.permission_store import open_permission_store, warehouse_games

    bases = {g: b for g, (b, _) in warehouse_games(datasource).items() if b is not None}
    if not bases:
        bases = {int(g.id): int(g.base_id) for g in pack.games}
    return open_permission_store(settings.permissions, game_bases=bases)


def _warehouse_spec(settings: Settings) -> str:
    if settings.warehouse:
        return settings.warehouse
    from dataseer.data.sample import ensure_sample

    return str(ensure_sample(settings.sample_path, scale=settings.sample_scale))


def get_services(settings: Settings | None = None) -> Services:
    """The shared services for these settings, built on first use.

    The sample warehouse is generated here on first use when no warehouse is
    configured, so ``dataseer ask`` works on a fresh machine.
    """
    settings = settings or get_settings()
    key = (
        settings.warehouse or str(settings.sample_path),
        str(settings.knowledge_dir or ""),
        str(settings.permissions or ""),
    )
    with _lock:
        found = _cache.get(key)
        if found is not None:
            return Services(
                settings, found.datasource, found.pack, found.index, found.permission_store
            )
        from dataseer.data.open import open_datasource

        datasource = open_datasource(_warehouse_spec(settings))
        pack = KnowledgePack.load(settings.knowledge_dir)
        store = _permission_store(settings, datasource, pack)
        services = Services(settings, datasource, pack, KnowledgeIndex(pack), store)
        _cache[key] = services
        return services


def services_for(config: Mapping[str, Any] | None) -> Services:
    """Services with the per-run settings of a LangGraph run config applied."""
    return get_services(get_settings(config))


def reset_services() -> None:
    """Close and forget every cached datasource (tests, reloads)."""
    with _lock:
        for services in _cache.values():
            services.datasource.close()
        _cache.clear()
