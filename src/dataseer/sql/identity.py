"""Who is asking: the identity of one run, read from its trusted config.

Identity comes from upstream, never from the conversation: the server (or
the CLI) puts ``configurable.user_id`` (and optionally ``roles`` and personal
``credentials``) into the run config. Resolution order:

1. ``configurable.user_id`` — the normal case;
2. ``configurable.credentials`` alone — the credential's principal is the
   identity (``credential:<principal>``);
3. ``Settings.dev_user`` (``DATASEER_DEV_USER``) — a development fallback;
4. nothing — ``identity_from_config`` returns ``None`` and the run gets no
   data: ``run_query`` denies every statement.

``configurable.roles`` can only narrow what the permission store grants the
user (a session may act with fewer roles, never more), because a run config
is easier to forge than the store.

Personal credentials (``configurable.credentials = {"warehouse": url-or-path,
"user": name, ...}``) carry their own permissions: the permission store maps
the credential's *principal* (``user``, else the user name in the warehouse
URL) to a permission profile, and the guard applies that profile instead of
the user's own. Secrets (passwords, tokens) are never printed or audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from dataseer.config import Settings
from dataseer.errors import DataseerError

IdentitySource = Literal["config", "credentials", "dev"]


class IdentityError(DataseerError):
    """The run config carries an identity in a shape we cannot trust."""


def _redact(url: str) -> str:
    """A warehouse URL without its password (safe to log and match)."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}"))


@dataclass(frozen=True, repr=False)
class Credentials:
    """Personal datasource credentials supplied for one session.

    ``principal`` is the login the warehouse knows (``user``, else the user
    name in the ``warehouse`` URL); the permission store maps it to a profile.
    """

    warehouse: str = ""
    user: str = ""
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:
        return f"Credentials(warehouse={self.warehouse_redacted!r}, user={self.user!r})"

    @property
    def principal(self) -> str:
        """The login these credentials act as ('' when none can be told)."""
        if self.user:
            return self.user
        if "://" in self.warehouse:
            return urlsplit(self.warehouse).username or ""
        return ""

    @property
    def warehouse_redacted(self) -> str:
        """The warehouse without any password, for matching and audit."""
        return _redact(self.warehouse) if self.warehouse else ""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Credentials:
        """Validate ``configurable.credentials``."""
        if not isinstance(data, Mapping):
            msg = f"configurable.credentials must be a mapping, got {type(data).__name__}"
            raise IdentityError(msg)
        warehouse = data.get("warehouse") or ""
        user = data.get("user") or ""
        if not isinstance(warehouse, str) or not isinstance(user, str):
            msg = "configurable.credentials: 'warehouse' and 'user' must be strings"
            raise IdentityError(msg)
        secrets = {str(k): str(v) for k, v in data.items() if k not in {"warehouse", "user"}}
        creds = cls(warehouse=warehouse, user=user, secrets=secrets)
        if not creds.principal:
            msg = "configurable.credentials names no principal: give 'user' or a URL with a user"
            raise IdentityError(msg)
        return creds


@dataclass(frozen=True)
class Identity:
    """The person (or principal) a run acts for.

    ``roles`` is ``None`` when the run does not narrow the store's roles.
    """

    user_id: str
    roles: tuple[str, ...] | None = None
    credentials: Credentials | None = None
    source: IdentitySource = "config"

    def __post_init__(self) -> None:
        if not self.user_id or not self.user_id.strip():
            msg = "an identity needs a non-empty user_id"
            raise IdentityError(msg)


def _roles(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(r.strip() for r in value.split(",") if r.strip())
    if isinstance(value, list | tuple) and all(isinstance(r, str) for r in value):
        return tuple(r.strip() for r in value if r.strip())
    msg = f"configurable.roles must be a list of names or a comma-separated string, got {value!r}"
    raise IdentityError(msg)


def identity_from_config(
    config: Mapping[str, Any] | None, settings: Settings | None = None
) -> Identity | None:
    """The identity of a run, or ``None`` when it has none (no data access).

    Args:
        config: a LangGraph run config; only ``configurable`` is read.
        settings: supplies the ``dev_user`` fallback; ``None`` = no fallback.
    """
    configurable = (config or {}).get("configurable") or {}
    raw_creds = configurable.get("credentials")
    credentials = Credentials.from_mapping(raw_creds) if raw_creds else None
    roles = _roles(configurable.get("roles"))
    user_id = configurable.get("user_id")
    if user_id is not None and not isinstance(user_id, str):
        msg = f"configurable.user_id must be a string, got {type(user_id).__name__}"
        raise IdentityError(msg)
    if user_id and user_id.strip():
        return Identity(user_id.strip(), roles, credentials, "config")
    if credentials is not None:
        return Identity(f"credential:{credentials.principal}", roles, credentials, "credentials")
    if settings is not None and settings.dev_user:
        return Identity(settings.dev_user, roles, None, "dev")
    return None
