"""Who is calling, and what they may touch: bearer JWTs and ownership rules.

A trusted upstream (the company SSO, a gateway) issues the tokens; dataseer
only verifies them. Two kinds are accepted, each pinned to its algorithm so a
token can never pick a weaker one (``alg: none``, HS256 signed with a public
key): HS256 with a shared secret (``DATASEER_AUTH_SECRET``) and RS256 with the
public keys of a JWKS file (``DATASEER_AUTH_JWKS_FILE``). ``exp`` and ``sub``
are required; ``iss`` and ``aud`` are checked when configured.

The token's subject and roles become ``configurable.user_id`` and
``configurable.roles`` of every run the caller starts (overwriting anything the
request said), so the SQL guard sees the same person the server
authenticated. Ownership is metadata: every thread, run, cron and assistant a
user creates carries ``metadata.owner``; reads, streams, updates, forks and
deletes are filtered to the caller's own, except for the admin role. Store
items live under a namespace whose first part is the owner.

Dev mode (``DATASEER_AUTH_DEV=1``, ``dataseer serve --dev-auth``) lets requests
without a token act as one fixed local user; it is never implied.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from langgraph_sdk import Auth

from dataseer.config import Settings, env_settings
from dataseer.errors import DataseerError

__all__ = [
    "OWNER_KEY",
    "AuthError",
    "Principal",
    "auth",
    "dev_principal",
    "issue_token",
    "principal_from_header",
    "verify_token",
]

OWNER_KEY = "owner"
"""Metadata key naming the user who created a thread, run, cron or assistant."""


class AuthError(DataseerError):
    """A request carries no usable credentials (HTTP 401)."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    user_id: str
    roles: tuple[str, ...] = ()
    admin: bool = False

    def as_user(self) -> dict[str, Any]:
        """The user dict handed to the LangGraph server (roles travel as permissions)."""
        return {
            "identity": self.user_id,
            "display_name": self.user_id,
            "is_authenticated": True,
            "permissions": list(self.roles),
            "roles": list(self.roles),
        }


def _roles(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(r.strip() for r in value.split(",") if r.strip())
    if isinstance(value, list | tuple) and all(isinstance(r, str) for r in value):
        return tuple(r for r in value if r)
    msg = "the roles claim must be a list of names or a comma-separated string"
    raise AuthError(msg)


def _jwks_key(path: Path, kid: str | None) -> Any:
    """The RS256 public key of ``kid`` (or the only key) from a JWKS file."""
    try:
        keyset = jwt.PyJWKSet.from_json(path.read_text(encoding="utf-8"))
    except (OSError, jwt.PyJWKSetError, json.JSONDecodeError) as exc:
        msg = f"cannot read the JWKS file {path}: {exc}"
        raise AuthError(msg) from exc
    keys = [k for k in keyset.keys if kid is None or k.key_id == kid]
    if len(keys) != 1:
        msg = f"no single key with kid {kid!r} in the JWKS file"
        raise AuthError(msg)
    return keys[0].key


def verify_token(token: str, settings: Settings) -> Principal:
    """Verify one bearer token and return who it names.

    Raises:
        AuthError: malformed, forged, expired, wrong issuer or audience, no
            subject, or no key configured for its algorithm.
    """
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError as exc:
        msg = f"malformed token: {exc}"
        raise AuthError(msg) from exc
    algorithm = header.get("alg")
    key: Any
    if algorithm == "HS256" and settings.auth_secret:
        key = settings.auth_secret
    elif algorithm == "RS256" and settings.auth_jwks_file:
        key = _jwks_key(settings.auth_jwks_file, header.get("kid"))
    else:
        msg = f"tokens signed with {algorithm!r} are not accepted here"
        raise AuthError(msg)
    required = ["exp", "sub"]
    if settings.auth_issuer:
        required.append("iss")
    if settings.auth_audience:
        required.append("aud")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            issuer=settings.auth_issuer,
            audience=settings.auth_audience,
            leeway=settings.auth_leeway,
            options={"require": required, "verify_aud": bool(settings.auth_audience)},
        )
    except jwt.ExpiredSignatureError as exc:
        msg = "token expired"
        raise AuthError(msg) from exc
    except jwt.InvalidTokenError as exc:
        msg = f"invalid token: {exc}"
        raise AuthError(msg) from exc
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject.strip():
        msg = "the token names no subject"
        raise AuthError(msg)
    roles = _roles(claims.get(settings.auth_roles_claim))
    return Principal(subject.strip(), roles, settings.auth_admin_role in roles)


def dev_principal(settings: Settings) -> Principal:
    """The fixed local user of dev mode: ``DATASEER_DEV_USER``, else ``admin``."""
    user = settings.dev_user or "admin"
    return Principal(user, (settings.auth_admin_role,), True)


def principal_from_header(authorization: str | None, settings: Settings) -> Principal:
    """The caller named by an ``Authorization`` header (or the dev user).

    Raises:
        AuthError: no bearer token outside dev mode, or a bad token.
    """
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        if settings.auth_dev and not (settings.auth_secret or settings.auth_jwks_file):
            return dev_principal(settings)
        return verify_token(token.strip(), settings)
    if authorization and authorization.strip():
        msg = "the Authorization header must be 'Bearer <token>'"
        raise AuthError(msg)
    if settings.auth_dev:
        return dev_principal(settings)
    msg = "missing bearer token"
    raise AuthError(msg)


def issue_token(
    user_id: str,
    *,
    secret: str,
    roles: Sequence[str] = (),
    ttl: float = 3600.0,
    issuer: str | None = None,
    audience: str | None = None,
    roles_claim: str = "roles",
) -> str:
    """An HS256 token, for tests, benchmarks and local tools (the upstream issues real ones)."""
    import time

    now = int(time.time())
    claims: dict[str, Any] = {"sub": user_id, "iat": now, "exp": now + int(ttl)}
    claims[roles_claim] = list(roles)
    if issuer:
        claims["iss"] = issuer
    if audience:
        claims["aud"] = audience
    return jwt.encode(claims, secret, algorithm="HS256")


# --- the LangGraph server hooks -------------------------------------------------------

auth = Auth()


def _principal(ctx: Auth.types.AuthContext) -> Principal:
    roles = tuple(str(p) for p in ctx.permissions or ())
    settings = env_settings()
    return Principal(str(ctx.user.identity), roles, settings.auth_admin_role in roles)


def _tag_owner(value: Any, me: Principal) -> None:
    # In place: the server keeps its own reference to the metadata dict.
    if not isinstance(value, dict):
        return
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        metadata[OWNER_KEY] = me.user_id
    else:
        value["metadata"] = {OWNER_KEY: me.user_id}


def _inject_identity(holder: Any, me: Principal) -> None:
    """Put the caller into ``config.configurable`` (and ``context``) of a run payload."""
    if not isinstance(holder, dict):
        return
    config = holder.get("config")
    if not isinstance(config, dict):
        config = {}
        holder["config"] = config
    configurable = config.get("configurable")
    if not isinstance(configurable, dict):
        configurable = {}
        config["configurable"] = configurable
    configurable["user_id"] = me.user_id
    configurable["roles"] = list(me.roles)
    context = holder.get("context")
    if isinstance(context, dict):
        context["user_id"] = me.user_id
        context["roles"] = list(me.roles)


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """Verify the bearer token; 401 in the one error shape otherwise."""
    try:
        principal = principal_from_header(authorization, env_settings())
    except AuthError as exc:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail=str(exc), headers={"WWW-Authenticate": "Bearer"}
        ) from exc
    user: Any = principal.as_user()
    return user


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Threads and their runs: the owner's, or anyone's for an admin."""
    me = _principal(ctx)
    if ctx.action == "create_run":
        _inject_identity(value.get("kwargs") if isinstance(value, dict) else None, me)
        _tag_owner(value, me)
    elif ctx.action == "create" or (ctx.action == "update" and not me.admin):
        _tag_owner(value, me)
    return None if me.admin else {OWNER_KEY: me.user_id}


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Crons: owned like threads; the runs they start act as their creator."""
    me = _principal(ctx)
    if ctx.action == "create":
        _inject_identity(value.get("payload") if isinstance(value, dict) else None, me)
        _tag_owner(value, me)
    elif ctx.action == "update" and not me.admin:
        _tag_owner(value, me)
    return None if me.admin else {OWNER_KEY: me.user_id}


@auth.on.assistants
async def shared_assistants(
    ctx: Auth.types.AuthContext, value: Any
) -> Auth.types.FilterType | None:
    """Assistants are shared to read; only their creator (or an admin) changes them."""
    me = _principal(ctx)
    if ctx.action in {"read", "search"} or me.admin:
        if ctx.action == "create":
            _tag_owner(value, me)
        return None
    if ctx.action == "create":
        _tag_owner(value, me)
    return {OWNER_KEY: me.user_id}


@auth.on.store
async def own_store(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Store items live under ``(owner, ...)``; an admin addresses any namespace."""
    me = _principal(ctx)
    if me.admin or not isinstance(value, dict):
        return
    namespace = tuple(value.get("namespace") or ())
    if not namespace or namespace[0] != me.user_id:
        value["namespace"] = (me.user_id, *namespace)
