"""Who a WeCom user is in dataseer, and which thread their messages continue.

WeCom names people by their corp-wide ``userid``; the SQL guard knows
dataseer users (``analyst_1001``, ``admin`` …). The mapping is a YAML file
named by ``DATASEER_WECOM_USERS``::

    users:
      zhangsan: analyst_1001            # a dataseer user, with the store's roles
      lisi: {user_id: ops_limited, roles: [ops]}   # roles may only narrow
    default: null                        # unmapped users get no run (the default)

An unmapped WeCom user is told so and nothing runs: chat membership is not a
data permission. ``default`` may name a low-privilege user for everyone else.

Threads: a private chat (``chattype: single``) is one thread per WeCom user.
In a group chat (``chattype: group``) each member gets their own thread in that
group — ``per_user`` (the default) — because each asker has their own
permissions and follow-ups ("按渠道拆开看看") belong to their own question;
``per_chat`` makes the whole group share one thread, and is only allowed to
carry one identity at a time (each run still uses the asker's identity).
Thread ids are UUID5 of (receive-id, chat id, user), so the same conversation
always lands on the same LangGraph thread, across restarts, without a table.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from dataseer.errors import ConfigError

__all__ = ["THREAD_NAMESPACE", "DataseerUser", "UserMap", "WeComSettings", "thread_id_for"]

THREAD_NAMESPACE = uuid.UUID("5b1f4f3e-8f5e-4d59-9a3a-77e6c1d0a8b2")
"""Fixed namespace of WeCom thread ids (never change it: threads would be lost)."""

ThreadScope = Literal["per_user", "per_chat"]
ReplyMode = Literal["stream", "markdown"]


@dataclass(frozen=True)
class DataseerUser:
    """A dataseer identity: ``user_id`` and optional narrowing ``roles``."""

    user_id: str
    roles: tuple[str, ...] | None = None

    def configurable(self) -> dict[str, Any]:
        """The identity part of a run's ``configurable``."""
        out: dict[str, Any] = {"user_id": self.user_id}
        if self.roles is not None:
            out["roles"] = list(self.roles)
        return out


def _user(value: Any, where: str) -> DataseerUser:
    if isinstance(value, str) and value.strip():
        return DataseerUser(value.strip())
    if isinstance(value, Mapping) and isinstance(value.get("user_id"), str):
        roles = value.get("roles")
        if roles is not None and not (
            isinstance(roles, list) and all(isinstance(r, str) for r in roles)
        ):
            msg = f"{where}: roles must be a list of names"
            raise ConfigError(msg)
        return DataseerUser(value["user_id"].strip(), tuple(roles) if roles is not None else None)
    msg = f"{where}: expected a dataseer user id or {{user_id, roles}}, got {value!r}"
    raise ConfigError(msg)


@dataclass(frozen=True)
class UserMap:
    """WeCom ``userid`` → dataseer user; ``default`` for everyone else (or ``None``)."""

    users: Mapping[str, DataseerUser] = field(default_factory=dict)
    default: DataseerUser | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> UserMap:
        """Validate the parsed YAML."""
        data = data or {}
        raw = data.get("users") or {}
        if not isinstance(raw, Mapping):
            msg = "WeCom user map: 'users' must be a mapping of WeCom userid → dataseer user"
            raise ConfigError(msg)
        users = {str(k): _user(v, f"users.{k}") for k, v in raw.items()}
        default = data.get("default")
        return cls(users, _user(default, "default") if default else None)

    @classmethod
    def load(cls, path: Path) -> UserMap:
        """Read the YAML file."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            msg = f"cannot read the WeCom user map {path}: {exc}"
            raise ConfigError(msg) from exc
        return cls.from_mapping(data)

    def resolve(self, wecom_user: str) -> DataseerUser | None:
        """The dataseer user for a WeCom ``userid`` (``None``: not allowed to ask)."""
        return self.users.get(wecom_user, self.default)


def thread_id_for(
    receive_id: str, chat_id: str, wecom_user: str, scope: ThreadScope = "per_user"
) -> str:
    """The LangGraph thread of one conversation (deterministic; see the module docstring)."""
    key = f"{receive_id}\x1f{chat_id or 'single'}"
    if scope == "per_user" or not chat_id:
        key += f"\x1f{wecom_user}"
    return str(uuid.uuid5(THREAD_NAMESPACE, key))


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


@dataclass(frozen=True)
class WeComSettings:
    """The bot's secrets and behaviour, from ``DATASEER_WECOM_*``.

    ``DATASEER_WECOM_TOKEN`` and ``DATASEER_WECOM_AES_KEY`` (43 chars) are the
    callback Token and EncodingAESKey; ``DATASEER_WECOM_RECEIVE_ID`` the corp id
    or bot id ('' for an internal intelligent bot); ``DATASEER_WECOM_USERS`` the
    user map; ``DATASEER_WECOM_REPLY`` ``stream`` (default) or ``markdown``;
    ``DATASEER_WECOM_THREADS`` ``per_user`` (default) or ``per_chat``;
    ``DATASEER_WECOM_WINDOW`` the accepted clock skew in seconds (300).
    """

    token: str
    aes_key: str
    receive_id: str = ""
    users: UserMap = field(default_factory=UserMap)
    reply: ReplyMode = "stream"
    threads: ThreadScope = "per_user"
    window: float = 300.0
    assistant: str = "dataseer"

    def __post_init__(self) -> None:
        if self.reply not in ("stream", "markdown"):
            msg = f"DATASEER_WECOM_REPLY must be 'stream' or 'markdown', got {self.reply!r}"
            raise ConfigError(msg)
        if self.threads not in ("per_user", "per_chat"):
            msg = f"DATASEER_WECOM_THREADS must be 'per_user' or 'per_chat', got {self.threads!r}"
            raise ConfigError(msg)
        if self.window <= 0:
            msg = "DATASEER_WECOM_WINDOW must be positive"
            raise ConfigError(msg)

    @classmethod
    def from_env(cls) -> WeComSettings | None:
        """The configured bot, or ``None`` when no token is set (route disabled)."""
        token = _env("DATASEER_WECOM_TOKEN")
        if not token:
            return None
        users_path = _env("DATASEER_WECOM_USERS")
        return cls(
            token=token,
            aes_key=_env("DATASEER_WECOM_AES_KEY"),
            receive_id=_env("DATASEER_WECOM_RECEIVE_ID"),
            users=UserMap.load(Path(users_path)) if users_path else UserMap(),
            reply=_env("DATASEER_WECOM_REPLY", "stream"),  # type: ignore[arg-type]
            threads=_env("DATASEER_WECOM_THREADS", "per_user"),  # type: ignore[arg-type]
            window=float(_env("DATASEER_WECOM_WINDOW", "300")),
        )
