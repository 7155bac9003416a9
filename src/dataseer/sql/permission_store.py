"""Who may see what: users, roles and grants, from a YAML file or PostgreSQL.

Both backends load the same declarative ``PermissionModel`` and resolve it
the same way, so a user gets identical ``Permissions`` whichever backend
holds the grants:

- tables: the union of the table patterns of the user's roles and the user's
  own (``dws_*``, ``dim_game``, ``*``);
- games: ``all_games`` anywhere → every game (``allowed_game_ids=None``);
  otherwise the union of granted ``game_ids`` plus every game of each granted
  ``game_base_id`` (resolved through ``dim_game`` of the warehouse, else the
  knowledge pack's games). No game grant at all means no game rows;
- column deny lists: a user's own deny list always applies; a role's deny
  list applies only when *every* role of the user denies that column, since
  roles add grants (an ``ops`` + ``analyst`` user sees what an analyst sees);
- roles named in the run config can only narrow the user's roles.

Personal credentials map to a profile: a ``credentials`` entry names the
login (``principal``), the warehouse pattern it applies to, and the user
whose permissions it carries (``as_user``). The guard then applies that
profile's permissions to the session.
"""

from __future__ import annotations

import abc
import fnmatch
import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import yaml

from dataseer.config import Settings
from dataseer.data.protocol import Datasource
from dataseer.errors import DataseerError
from dataseer.sql.guard import Permissions
from dataseer.sql.identity import Credentials, Identity, IdentityError, identity_from_config

SAMPLE_PERMISSIONS = Path(__file__).with_name("sample_permissions.yaml")
"""The shipped sample: admin, analyst_all, analyst_1001, ops_limited."""

DEFAULT_SENSITIVE = ("*",)


class AccessError(DataseerError):
    """A permission lookup failed in a way that must deny access."""


class UnknownUserError(AccessError):
    """The user (or credential principal) is not in the permission store."""


class PermissionConfigError(AccessError):
    """The permission file or tables are malformed."""


@dataclass(frozen=True)
class Grant:
    """What one role or user is granted beyond its roles."""

    tables: tuple[str, ...] = ()
    all_games: bool = False
    game_ids: tuple[int, ...] = ()
    game_base_ids: tuple[int, ...] = ()
    denied_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class UserSpec:
    """A user: roles plus the user's own grants."""

    user_id: str
    roles: tuple[str, ...] = ()
    grant: Grant = field(default_factory=Grant)
    enabled: bool = True


@dataclass(frozen=True)
class CredentialSpec:
    """A personal-credential login and the profile (user) whose permissions it carries."""

    principal: str
    as_user: str
    warehouse: str = "*"


def _strs(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    msg = f"{where}: expected a list of names, got {value!r}"
    raise PermissionConfigError(msg)


def _ints(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else [value]
    try:
        return tuple(int(v) for v in items)
    except (TypeError, ValueError):
        msg = f"{where}: expected a list of integer ids, got {value!r}"
        raise PermissionConfigError(msg) from None


def _denies(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        msg = f"{where}: expected a mapping of table pattern → columns, got {value!r}"
        raise PermissionConfigError(msg)
    return {str(k): tuple(sorted(_strs(v, f"{where}.{k}"))) for k, v in value.items()}


def _grant(data: Mapping[str, Any], where: str) -> Grant:
    return Grant(
        tables=_strs(data.get("tables"), f"{where}.tables"),
        all_games=bool(data.get("all_games", False)),
        game_ids=_ints(data.get("game_ids"), f"{where}.game_ids"),
        game_base_ids=_ints(data.get("game_base_ids"), f"{where}.game_base_ids"),
        denied_columns=_denies(data.get("deny_columns"), f"{where}.deny_columns"),
    )


def _sorted_unique(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(sorted(set(items)))


@dataclass(frozen=True)
class PermissionModel:
    """The whole declarative permission set, as either backend stores it."""

    roles: Mapping[str, Grant] = field(default_factory=dict)
    users: Mapping[str, UserSpec] = field(default_factory=dict)
    credentials: tuple[CredentialSpec, ...] = ()
    row_filter_columns: Mapping[str, str] = field(default_factory=dict)
    sensitive_tables: tuple[str, ...] = DEFAULT_SENSITIVE
    metadata_tables: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for user in self.users.values():
            missing = [r for r in user.roles if r not in self.roles]
            if missing:
                msg = f"user {user.user_id!r} has unknown roles {missing}"
                raise PermissionConfigError(msg)
        for cred in self.credentials:
            if cred.as_user not in self.users:
                msg = f"credential {cred.principal!r} maps to unknown user {cred.as_user!r}"
                raise PermissionConfigError(msg)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PermissionModel:
        """Validate the YAML shape (see ``sample_permissions.yaml``)."""
        if not isinstance(data, Mapping):
            msg = "a permission file must be a mapping with 'roles' and 'users'"
            raise PermissionConfigError(msg)
        roles = {
            str(name): _grant(spec or {}, f"roles.{name}")
            for name, spec in (data.get("roles") or {}).items()
        }
        users = {}
        for name, spec in (data.get("users") or {}).items():
            spec = spec or {}
            users[str(name)] = UserSpec(
                user_id=str(name),
                roles=_strs(spec.get("roles"), f"users.{name}.roles"),
                grant=_grant(spec, f"users.{name}"),
                enabled=bool(spec.get("enabled", True)),
            )
        credentials = tuple(
            CredentialSpec(
                principal=str(item["principal"]),
                as_user=str(item["as_user"]),
                warehouse=str(item.get("warehouse", "*")),
            )
            for item in data.get("credentials") or []
        )
        row_filter = data.get("row_filter_columns") or {}
        if not isinstance(row_filter, Mapping):
            msg = "row_filter_columns must map table → column"
            raise PermissionConfigError(msg)
        sensitive = data.get("sensitive_tables")
        return cls(
            roles=roles,
            users=users,
            credentials=credentials,
            row_filter_columns={str(k): str(v) for k, v in row_filter.items()},
            sensitive_tables=DEFAULT_SENSITIVE
            if sensitive is None
            else _strs(sensitive, "sensitive_tables"),
            metadata_tables=_strs(data.get("metadata_tables"), "metadata_tables"),
        )

    def resolve(
        self,
        user_id: str,
        roles: Sequence[str] | None = None,
        game_bases: Mapping[int, int] | None = None,
    ) -> Permissions:
        """The effective permissions of one user (see the module docstring).

        Raises:
            UnknownUserError: the user is not in the store or is disabled.
        """
        user = self.users.get(user_id)
        if user is None or not user.enabled:
            msg = f"user {user_id!r} is not in the permission store / 用户 {user_id} 没有权限配置"
            raise UnknownUserError(msg)
        active = user.roles if roles is None else tuple(r for r in user.roles if r in roles)
        grants = [self.roles[r] for r in active]
        everything = [user.grant, *grants]
        tables = _sorted_unique(t for g in everything for t in g.tables)
        all_games = any(g.all_games for g in everything)
        game_ids: tuple[int, ...] | None = None
        base_ids: tuple[int, ...] | None = None
        if not all_games:
            base_ids = _sorted_unique(b for g in everything for b in g.game_base_ids)
            from_bases = [g for g, b in (game_bases or {}).items() if b in base_ids]
            game_ids = _sorted_unique([*(i for g in everything for i in g.game_ids), *from_bases])
        return Permissions(
            user_id=user_id,
            roles=tuple(sorted(active)),
            allowed_tables=tables,
            allowed_game_ids=game_ids,
            allowed_game_base_ids=base_ids,
            row_filter_columns=dict(self.row_filter_columns),
            sensitive_tables=tuple(self.sensitive_tables),
            denied_columns=_effective_denies(user.grant, grants),
            metadata_tables=tuple(self.metadata_tables),
        )

    def profile_for(self, credentials: Credentials) -> str:
        """The user whose permissions these credentials carry.

        Raises:
            UnknownUserError: no entry maps this principal (on this warehouse).
        """
        warehouse = credentials.warehouse_redacted
        for cred in self.credentials:
            if cred.principal == credentials.principal and fnmatch.fnmatchcase(
                warehouse, cred.warehouse
            ):
                return cred.as_user
        msg = (
            f"credential principal {credentials.principal!r} has no permission profile / "
            f"个人凭据 {credentials.principal} 未配置权限"
        )
        raise UnknownUserError(msg)


def _effective_denies(own: Grant, roles: Sequence[Grant]) -> dict[str, tuple[str, ...]]:
    """A user's own denies, plus role denies that every role of the user shares."""

    def denies(grant: Grant, pattern: str, column: str) -> bool:
        return column in grant.denied_columns.get(pattern, ()) or column in (
            grant.denied_columns.get("*", ())
        )

    out: dict[str, set[str]] = {p: set(cols) for p, cols in own.denied_columns.items()}
    for grant in roles:
        for pattern, columns in grant.denied_columns.items():
            for column in columns:
                if all(denies(other, pattern, column) for other in roles):
                    out.setdefault(pattern, set()).add(column)
    return {p: tuple(sorted(cols)) for p, cols in sorted(out.items()) if cols}


@runtime_checkable
class PermissionStore(Protocol):
    """Where permissions live. Implementations must be thread-safe."""

    def for_user(self, user_id: str, roles: Sequence[str] | None = None) -> Permissions:
        """The permissions of a user, optionally narrowed to some of their roles.

        Raises:
            UnknownUserError: the user is unknown or disabled.
        """
        ...

    def for_credentials(self, credentials: Credentials, user_id: str) -> Permissions:
        """The permissions attached to personal credentials, reported as ``user_id``.

        Raises:
            UnknownUserError: the credential principal maps to no profile.
        """
        ...


class _ModelStore(abc.ABC):
    """Resolution shared by every backend: subclasses only load the model."""

    def __init__(self, game_bases: Mapping[int, int] | None = None) -> None:
        self.game_bases: dict[int, int] = dict(game_bases or {})

    @abc.abstractmethod
    def model(self) -> PermissionModel:
        """The current permission model."""

    def for_user(self, user_id: str, roles: Sequence[str] | None = None) -> Permissions:
        """See ``PermissionStore.for_user``."""
        return self.model().resolve(user_id, roles, self.game_bases)

    def for_credentials(self, credentials: Credentials, user_id: str) -> Permissions:
        """See ``PermissionStore.for_credentials``."""
        model = self.model()
        profile = model.profile_for(credentials)
        return replace(model.resolve(profile, None, self.game_bases), user_id=user_id)


class YamlPermissionStore(_ModelStore):
    """Permissions from a YAML file (the default), reloaded when the file changes."""

    def __init__(
        self, path: Path | str | None = None, *, game_bases: Mapping[int, int] | None = None
    ):
        super().__init__(game_bases)
        self.path = Path(path) if path else SAMPLE_PERMISSIONS
        if not self.path.is_file():
            msg = f"permission file not found: {self.path}"
            raise PermissionConfigError(msg)
        self._lock = threading.Lock()
        self._loaded: tuple[float, PermissionModel] | None = None

    def model(self) -> PermissionModel:
        """The parsed file, cached until its modification time changes."""
        mtime = self.path.stat().st_mtime
        with self._lock:
            if self._loaded is None or self._loaded[0] != mtime:
                data = yaml.safe_load(self.path.read_text(encoding="utf-8")) or {}
                self._loaded = (mtime, PermissionModel.from_mapping(data))
            return self._loaded[1]


POSTGRES_SCHEMA = """
CREATE TABLE IF NOT EXISTS dataseer_roles (
    name text PRIMARY KEY,
    description text NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS dataseer_users (
    user_id text PRIMARY KEY,
    enabled boolean NOT NULL DEFAULT true
);
CREATE TABLE IF NOT EXISTS dataseer_user_roles (
    user_id text NOT NULL REFERENCES dataseer_users ON DELETE CASCADE,
    role text NOT NULL REFERENCES dataseer_roles ON DELETE CASCADE,
    PRIMARY KEY (user_id, role)
);
CREATE TABLE IF NOT EXISTS dataseer_grants (
    id bigserial PRIMARY KEY,
    role text REFERENCES dataseer_roles ON DELETE CASCADE,
    user_id text REFERENCES dataseer_users ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('table', 'game', 'game_base', 'all_games')),
    value text NOT NULL DEFAULT '',
    CHECK ((role IS NULL) <> (user_id IS NULL))
);
CREATE TABLE IF NOT EXISTS dataseer_column_denies (
    id bigserial PRIMARY KEY,
    role text REFERENCES dataseer_roles ON DELETE CASCADE,
    user_id text REFERENCES dataseer_users ON DELETE CASCADE,
    table_pattern text NOT NULL,
    column_name text NOT NULL,
    CHECK ((role IS NULL) <> (user_id IS NULL))
);
CREATE TABLE IF NOT EXISTS dataseer_credentials (
    principal text NOT NULL,
    warehouse text NOT NULL DEFAULT '*',
    user_id text NOT NULL REFERENCES dataseer_users ON DELETE CASCADE,
    PRIMARY KEY (principal, warehouse)
);
CREATE TABLE IF NOT EXISTS dataseer_guard_settings (
    key text PRIMARY KEY CHECK (key IN ('row_filter_columns', 'sensitive_tables',
                                        'metadata_tables')),
    value jsonb NOT NULL
);
"""
"""Tables of the PostgreSQL store: users, roles, user_roles, grants, column denies,
credential profiles and the guard-wide settings (row-filter columns, sensitive
and metadata tables)."""

_TABLES = (
    "dataseer_guard_settings",
    "dataseer_credentials",
    "dataseer_column_denies",
    "dataseer_grants",
    "dataseer_user_roles",
    "dataseer_users",
    "dataseer_roles",
)


class PostgresPermissionStore(_ModelStore):
    """Permissions in PostgreSQL tables (see ``POSTGRES_SCHEMA``).

    The model is re-read at most every ``ttl`` seconds, so a grant or a
    revocation takes effect within that delay without a restart.
    """

    def __init__(
        self, url: str, *, game_bases: Mapping[int, int] | None = None, ttl: float = 5.0
    ) -> None:
        super().__init__(game_bases)
        if not url.startswith(("postgresql://", "postgres://")):
            msg = f"PostgresPermissionStore needs a postgresql:// URL, got {url!r}"
            raise PermissionConfigError(msg)
        if ttl < 0:
            msg = f"ttl must be >= 0, got {ttl}"
            raise ValueError(msg)
        self.url = url
        self.ttl = ttl
        self._lock = threading.Lock()
        self._loaded: tuple[float, PermissionModel] | None = None

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=False, connect_timeout=10)

    def setup(self) -> None:
        """Create the permission tables when they do not exist."""
        with self._connect() as conn:
            conn.execute(POSTGRES_SCHEMA)

    def save(self, model: PermissionModel) -> None:
        """Replace every stored grant with ``model`` in one transaction."""
        self.setup()
        with self._connect() as conn:
            for table in _TABLES:
                conn.execute(f"DELETE FROM {table}")
            for name in model.roles:
                conn.execute("INSERT INTO dataseer_roles (name) VALUES (%s)", (name,))
            for user in model.users.values():
                conn.execute(
                    "INSERT INTO dataseer_users (user_id, enabled) VALUES (%s, %s)",
                    (user.user_id, user.enabled),
                )
                for role in user.roles:
                    conn.execute(
                        "INSERT INTO dataseer_user_roles (user_id, role) VALUES (%s, %s)",
                        (user.user_id, role),
                    )
            owners: list[tuple[str | None, str | None, Grant]] = [
                (name, None, grant) for name, grant in model.roles.items()
            ]
            owners += [(None, u.user_id, u.grant) for u in model.users.values()]
            for owner_role, owner_user, grant in owners:
                rows = [("table", t) for t in grant.tables]
                rows += [("game", str(i)) for i in grant.game_ids]
                rows += [("game_base", str(i)) for i in grant.game_base_ids]
                rows += [("all_games", "")] if grant.all_games else []
                for kind, value in rows:
                    conn.execute(
                        "INSERT INTO dataseer_grants (role, user_id, kind, value) "
                        "VALUES (%s, %s, %s, %s)",
                        (owner_role, owner_user, kind, value),
                    )
                for pattern, columns in grant.denied_columns.items():
                    for column in columns:
                        conn.execute(
                            "INSERT INTO dataseer_column_denies "
                            "(role, user_id, table_pattern, column_name) VALUES (%s, %s, %s, %s)",
                            (owner_role, owner_user, pattern, column),
                        )
            for cred in model.credentials:
                conn.execute(
                    "INSERT INTO dataseer_credentials (principal, warehouse, user_id) "
                    "VALUES (%s, %s, %s)",
                    (cred.principal, cred.warehouse, cred.as_user),
                )
            guard_settings: dict[str, Any] = {
                "row_filter_columns": dict(model.row_filter_columns),
                "sensitive_tables": list(model.sensitive_tables),
                "metadata_tables": list(model.metadata_tables),
            }
            for key, setting in guard_settings.items():
                conn.execute(
                    "INSERT INTO dataseer_guard_settings (key, value) VALUES (%s, %s::jsonb)",
                    (key, json.dumps(setting)),
                )
        with self._lock:
            self._loaded = None

    def _read(self) -> PermissionModel:
        with self._connect() as conn:
            users = conn.execute("SELECT user_id, enabled FROM dataseer_users").fetchall()
            roles = [r for (r,) in conn.execute("SELECT name FROM dataseer_roles").fetchall()]
            user_roles = conn.execute(
                "SELECT user_id, role FROM dataseer_user_roles ORDER BY user_id, role"
            ).fetchall()
            grants = conn.execute(
                "SELECT role, user_id, kind, value FROM dataseer_grants ORDER BY id"
            ).fetchall()
            denies = conn.execute(
                "SELECT role, user_id, table_pattern, column_name FROM dataseer_column_denies"
            ).fetchall()
            creds = conn.execute(
                "SELECT principal, warehouse, user_id FROM dataseer_credentials "
                "ORDER BY principal, warehouse"
            ).fetchall()
            settings = dict(conn.execute("SELECT key, value FROM dataseer_guard_settings"))

        def grant_of(role: str | None, user_id: str | None) -> Grant:
            mine = [(k, v) for r, u, k, v in grants if r == role and u == user_id]
            deny: dict[str, list[str]] = {}
            for r, u, pattern, column in denies:
                if r == role and u == user_id:
                    deny.setdefault(pattern, []).append(column)
            return Grant(
                tables=tuple(v for k, v in mine if k == "table"),
                all_games=any(k == "all_games" for k, _ in mine),
                game_ids=tuple(int(v) for k, v in mine if k == "game"),
                game_base_ids=tuple(int(v) for k, v in mine if k == "game_base"),
                denied_columns={p: tuple(sorted(c)) for p, c in deny.items()},
            )

        sensitive = settings.get("sensitive_tables")
        return PermissionModel(
            roles={name: grant_of(name, None) for name in roles},
            users={
                user_id: UserSpec(
                    user_id=user_id,
                    roles=tuple(r for u, r in user_roles if u == user_id),
                    grant=grant_of(None, user_id),
                    enabled=bool(enabled),
                )
                for user_id, enabled in users
            },
            credentials=tuple(CredentialSpec(p, u, w) for p, w, u in creds),
            row_filter_columns=dict(settings.get("row_filter_columns") or {}),
            sensitive_tables=DEFAULT_SENSITIVE if sensitive is None else tuple(sensitive),
            metadata_tables=tuple(settings.get("metadata_tables") or ()),
        )

    def model(self) -> PermissionModel:
        """The stored model, re-read when older than ``ttl`` seconds."""
        with self._lock:
            now = time.monotonic()
            if self._loaded is None or now - self._loaded[0] > self.ttl:
                self._loaded = (now, self._read())
            return self._loaded[1]


def load_yaml_model(path: Path | str | None = None) -> PermissionModel:
    """A permission model from a YAML file (default: the shipped sample)."""
    return YamlPermissionStore(path).model()


def open_permission_store(
    spec: str | None, *, game_bases: Mapping[int, int] | None = None
) -> PermissionStore:
    """The store named by ``Settings.permissions``: a YAML path or a PostgreSQL URL."""
    if spec and spec.startswith(("postgresql://", "postgres://")):
        return PostgresPermissionStore(spec, game_bases=game_bases)
    return YamlPermissionStore(spec, game_bases=game_bases)


def permissions_for(store: PermissionStore, identity: Identity | None) -> Permissions | None:
    """The permissions a run acts with; ``None`` when it has no identity.

    Personal credentials win over the user's own grants: the session runs
    with the permissions attached to the credentials.

    Raises:
        UnknownUserError: the user or the credential principal is unknown.
    """
    if identity is None:
        return None
    if identity.credentials is not None:
        perms = store.for_credentials(identity.credentials, identity.user_id)
        if identity.roles is not None:
            perms = replace(perms, roles=tuple(r for r in perms.roles if r in identity.roles))
        return perms
    return store.for_user(identity.user_id, identity.roles)


def permissions_for_config(
    store: PermissionStore, config: Mapping[str, Any] | None, settings: Settings
) -> tuple[Permissions | None, str]:
    """Permissions for a run config, and why there are none ('' when there are).

    Never raises for a bad or unknown identity: the caller denies instead,
    with the reason given here.
    """
    try:
        identity = identity_from_config(config, settings)
        if identity is None:
            return None, (
                "本次运行没有用户身份，无法访问数据 / this run has no identity "
                "(configurable.user_id), so it may not read data"
            )
        return permissions_for(store, identity), ""
    except (IdentityError, AccessError) as exc:
        return None, str(exc)


def allowed_games(
    services: Any, config: Mapping[str, Any] | None
) -> tuple[int, ...] | Literal[False] | None:
    """The run's game scope: ``None`` for every game, a tuple of ids, or ``False`` for no access.

    For reads outside ``run_query`` (prompt partitions, the research
    subagent) that must stay inside the same scope as the SQL guard.
    """
    permissions, _reason = permissions_for_config(
        services.permission_store, config, services.settings
    )
    if permissions is None:
        return False
    if permissions.allowed_game_ids is None:
        return None
    return tuple(permissions.allowed_game_ids)


def warehouse_games(datasource: Datasource) -> dict[int, tuple[int | None, str]]:
    """``game_id → (game_base_id, game_name)`` from ``dim_game`` (admin path), or {}."""
    result = datasource.execute(
        "SELECT game_id, game_base_id, game_name FROM dim_game", limit=100_000, timeout=10.0
    )
    if not result.ok:
        return {}
    out: dict[int, tuple[int | None, str]] = {}
    for game_id, base_id, name in result.frame.itertuples(index=False, name=None):
        out[int(game_id)] = (None if base_id is None else int(base_id), str(name))
    return out


def warehouse_schema(datasource: Datasource) -> dict[str, tuple[str, ...]]:
    """Every table's columns (admin path), for expanding ``SELECT *`` in the guard."""
    result = datasource.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
        limit=1_000_000,
        timeout=30.0,
    )
    schema: dict[str, list[str]] = {}
    if result.ok:
        for table, column in result.frame.itertuples(index=False, name=None):
            schema.setdefault(str(table), []).append(str(column))
    return {t: tuple(cols) for t, cols in schema.items()}
