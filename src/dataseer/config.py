"""The one configuration object of dataseer.

Settings come from three places. Precedence, highest first:

1. per-run values in ``config["configurable"]`` (a LangGraph run, ``dataseer
   ask`` flags) for the fields in ``RUN_OVERRIDABLE``;
2. ``DATASEER_*`` environment variables (and a ``.env`` file is *not* read:
   secrets stay in the environment of the process that owns them);
3. the embedded defaults below: the sample DuckDB warehouse in the cache
   folder and the offline analyst.

The rule is that a run may narrow what it does (another date, a scene, a
model tier already configured) but a run may never point the server at a
different warehouse or database: those fields are process-wide.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dataseer.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""The source checkout (``src/dataseer/../..``); prompts live here."""

RUN_OVERRIDABLE = frozenset({"today", "deep", "user_id", "roles", "scene", "max_steps"})


def _default_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dataseer"


class Settings(BaseSettings):
    """Process-wide settings, read from ``DATASEER_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="DATASEER_", extra="ignore")

    home: Path = Field(default_factory=_default_home)
    """Cache folder for the sample warehouse, the CLI checkpointer and frames."""

    warehouse: str | None = None
    """A DuckDB file path or a ``postgresql://`` URL; unset = the sample warehouse."""

    sample_scale: float = 1.0
    """Scale of the sample warehouse built on first use."""

    database_url: str | None = None
    """PostgreSQL URL for the CLI checkpointer and store; unset = SQLite in ``home``."""

    today: date | None = None
    """The date relative periods are anchored to; unset = the real date."""

    knowledge_dir: Path | None = None
    """A folder replacing the embedded knowledge pack."""

    prompts_dir: Path | None = None
    """A folder replacing ``prompts/``."""

    model: str | None = None
    """Default chat model for every tier (``openai:gpt-4o``, ``deepseek:deepseek-chat``...)."""

    model_router: str | None = None
    model_analyst: str | None = None
    model_summarizer: str | None = None

    base_url: str | None = None
    """An OpenAI-compatible endpoint; with it, model names are sent as-is."""

    api_key: str | None = None

    dev_user: str | None = None
    """Development fallback identity when a run names no ``configurable.user_id``.

    Unset in production: a run without an identity then gets no data at all.
    Set it (``DATASEER_DEV_USER=admin``) on a developer machine or in tests.
    """

    permissions: str | None = None
    """Permission store: a YAML file or a ``postgresql://`` URL; unset = the shipped sample."""

    audit_url: str | None = None
    """PostgreSQL URL for the SQL audit table; unset = ``database_url`` when it is PostgreSQL."""

    guard_mode: Literal["check", "enforce"] = "check"
    """``check`` denies queries lacking the row filter; ``enforce`` injects it when it can."""

    skills_enabled: str = ""
    """Skills to enable beyond their ``enabled`` flag (``name`` or ``name@version``, comma list)."""

    skills_disabled: str = ""
    """Skills to disable here (``name`` or ``name@version``, comma-separated); wins over enabled."""

    row_limit: int = 1000
    query_timeout: float = 30.0
    max_steps: int = 30
    deep: bool = False

    frame_ttl_hours: float = 72.0
    """Datalayer frames unused for this long are deleted (they outlive runs, not weeks)."""

    frame_max_mb: float = 256.0
    """Largest single frame (Arrow IPC file) a query or the sandbox may store."""

    thread_frames_max_mb: float = 1024.0
    """All frames of one thread together; past it new frames are refused with a message."""

    thread_max_frames: int = 200
    """Frames one thread may hold (also bounds the descriptors handed to the sandbox)."""

    sandbox_mechanism: Literal["auto", "namespaces", "rlimits"] = "auto"
    """Isolation of ``run_python``: ``auto`` = the strongest this machine offers."""

    sandbox_pool_size: int = 2
    """Pre-warmed idle sandbox workers kept ready, so start-up is off the critical path."""

    sandbox_max_workers: int = 8
    """Workers bound to threads at once; the least recently used is retired past it."""

    sandbox_wall_seconds: float = 30.0
    """Wall time of one ``run_python`` call before the parent kills the worker."""

    sandbox_cpu_seconds: int = 20
    """CPU seconds of one ``run_python`` call (RLIMIT_CPU, checked per call)."""

    sandbox_memory_mb: int = 4096
    """Address-space limit of a worker (RLIMIT_AS), frames' memory maps included."""

    sandbox_max_processes: int = 64
    """Processes and threads a worker may have (RLIMIT_NPROC): stops fork bombs."""

    sandbox_output_chars: int = 8000
    """stdout, stderr and the last value are each truncated to this many characters."""

    auth_dev: bool = False
    """Development auth (``DATASEER_AUTH_DEV=1`` / ``dataseer serve --dev-auth``).

    Every request without a token acts as one fixed local user (``dev_user``,
    else ``admin``, with the admin role). Never set it on a shared server.
    """

    auth_secret: str | None = None
    """HS256 shared secret of the trusted token issuer; unset = no HS256 tokens."""

    auth_jwks_file: Path | None = None
    """A JWKS file with the issuer's RS256 public keys; unset = no RS256 tokens."""

    auth_issuer: str | None = None
    """Required ``iss`` of every token (checked when set)."""

    auth_audience: str | None = None
    """Required ``aud`` of every token (checked when set)."""

    auth_roles_claim: str = "roles"
    """Token claim holding the user's roles (a list or a comma-separated string)."""

    auth_admin_role: str = "admin"
    """The role that sees every user's threads, runs, crons and store items."""

    auth_leeway: float = 10.0
    """Seconds of clock skew tolerated on ``exp`` / ``nbf`` / ``iat``."""

    max_request_bytes: int = 1_000_000
    """Largest HTTP request body the server accepts (413 beyond)."""

    max_message_chars: int = 20_000
    """Longest single input message of a run (413 beyond): a question, not a document."""

    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "reject"
    """What a second run on a busy thread does when the request names no strategy."""

    run_timeout: float = 1800.0
    """Seconds one server run may take before it is stopped (``DATASEER_RUN_TIMEOUT``)."""

    keepalive_seconds: float = 25.0
    """Seconds between SSE keepalive comments while a run streams nothing."""

    state_flush_seconds: float = 1.0
    """Dev runtime only: how often thread and run records are written to disk.

    Checkpoints go to the configured checkpointer synchronously; this bounds
    what a killed ``langgraph dev`` process can lose of its thread list.
    """

    @field_validator("sample_scale")
    @classmethod
    def _positive_scale(cls, value: float) -> float:
        if value <= 0:
            msg = f"DATASEER_SAMPLE_SCALE must be positive, got {value}"
            raise ValueError(msg)
        return value

    @property
    def sample_path(self) -> Path:
        """Where the embedded sample warehouse lives."""
        scale = f"{self.sample_scale:g}".replace(".", "_")
        return self.home / f"sample-s{scale}.duckdb"

    @property
    def resolved_today(self) -> date:
        """The anchor date for relative periods."""
        return self.today or date.today()

    @property
    def resolved_prompts_dir(self) -> Path:
        """The prompts folder in force."""
        return self.prompts_dir or PROJECT_ROOT / "prompts"

    def model_for(self, tier: str) -> str | None:
        """The model name for a semantic tier, falling back to ``model``."""
        if tier not in {"router", "analyst", "summarizer"}:
            msg = f"unknown model tier {tier!r}; expected router, analyst or summarizer"
            raise ConfigError(msg)
        specific: str | None = getattr(self, f"model_{tier}")
        return specific or self.model


def env_settings() -> Settings:
    """Settings from the environment, parsed once per distinct environment.

    Parsing costs about a millisecond, and every agent loop asks for settings;
    keying the cache on the ``DATASEER_*`` variables keeps it correct when the
    environment changes (tests, reloads).
    """
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)))
    return _settings_for(key)


_ENV_PREFIXES = ("DATASEER_", "XDG_CACHE_HOME", "HOME")


@lru_cache(maxsize=16)
def _settings_for(key: tuple[tuple[str, str], ...]) -> Settings:
    return Settings()


def get_settings(config: Mapping[str, Any] | None = None) -> Settings:
    """Settings for one run: environment first, then per-run overrides.

    Args:
        config: a LangGraph ``RunnableConfig`` (or ``None``); only keys in
            ``RUN_OVERRIDABLE`` under ``configurable`` are applied.
    """
    settings = env_settings()
    configurable = (config or {}).get("configurable") or {}
    overrides = {k: v for k, v in configurable.items() if k in RUN_OVERRIDABLE and v is not None}
    if "today" in overrides and isinstance(overrides["today"], str):
        overrides["today"] = date.fromisoformat(overrides["today"])
    known = {k: v for k, v in overrides.items() if k in Settings.model_fields}
    return settings.model_copy(update=known) if known else settings
