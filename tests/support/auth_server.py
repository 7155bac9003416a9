"""One authenticated dataseer server (JWT, PostgreSQL) shared by the server test modules.

Each module declares a session fixture that calls ``shared_auth_server``; the
first call starts ``langgraph dev`` on the real ``langgraph.json`` (auth, http
app, PostgreSQL checkpointer and store) plus a ``slow`` graph
(``support.slow_graph``), later calls reuse it, and it stops at session end.
Tokens are HS256 with a test secret, a fixed issuer and audience.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataseer.server.auth import issue_token
from support.langgraph_server import start_langgraph_dev

PROJECT_DIR = Path(__file__).resolve().parents[2]
SLOW_GRAPH = f"{Path(__file__).resolve().parent / 'slow_graph.py'}:graph"
SECRET = "dataseer-test-secret-0123456789abcdef"
ISSUER = "https://sso.test.invalid"
AUDIENCE = "dataseer"
RUN_TIMEOUT = 20
MAX_REQUEST_BYTES = 200_000
MAX_MESSAGE_CHARS = 2_000


@dataclass
class AuthServer:
    """A running server and how to speak to it."""

    url: str
    warehouse: Path
    database_url: str
    env: dict[str, str] = field(default_factory=dict)

    def token(self, user: str, roles: tuple[str, ...] = ("analyst",), **kwargs: Any) -> str:
        """A valid token for ``user`` (override ``ttl``, ``issuer``, ``secret``... to break it)."""
        return issue_token(
            user,
            secret=kwargs.pop("secret", SECRET),
            roles=roles,
            issuer=kwargs.pop("issuer", ISSUER),
            audience=kwargs.pop("audience", AUDIENCE),
            **kwargs,
        )

    def headers(self, user: str, roles: tuple[str, ...] = ("analyst",)) -> dict[str, str]:
        """``Authorization`` headers for ``user``."""
        return {"Authorization": f"Bearer {self.token(user, roles)}"}


def server_env(warehouse: Path, database_url: str) -> dict[str, str]:
    """The server's environment: JWT auth, PostgreSQL, short limits for tests."""
    return {
        "DATASEER_HOME": str(warehouse.parent),
        "DATASEER_SAMPLE_SCALE": "0.05",
        "DATASEER_TODAY": "2026-11-29",
        "DATASEER_AUTH_SECRET": SECRET,
        "DATASEER_AUTH_ISSUER": ISSUER,
        "DATASEER_AUTH_AUDIENCE": AUDIENCE,
        "DATASEER_DATABASE_URL": database_url,
        "DATASEER_KEEPALIVE_SECONDS": "1",
        "DATASEER_RUN_TIMEOUT": str(RUN_TIMEOUT),
        "DATASEER_MAX_REQUEST_BYTES": str(MAX_REQUEST_BYTES),
        "DATASEER_MAX_MESSAGE_CHARS": str(MAX_MESSAGE_CHARS),
        "BG_JOB_MAX_RETRIES": "3",
    }


@contextlib.contextmanager
def clean_environ() -> Iterator[None]:
    """No developer ``DATASEER_*`` setting leaks into a child server."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("DATASEER_")}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


_shared: dict[str, Any] = {}


@contextlib.contextmanager
def shared_auth_server(warehouse: Path, database_url: str) -> Iterator[AuthServer]:
    """Start the shared server on first use; stop it when the last user leaves."""
    if "server" not in _shared:
        stack = contextlib.ExitStack()
        env = server_env(warehouse, database_url)
        with clean_environ():
            url = stack.enter_context(
                start_langgraph_dev(
                    PROJECT_DIR,
                    env=env,
                    timeout=240,
                    overrides={"graphs": {"slow": SLOW_GRAPH}},
                    allow_blocking=os.environ.get("DS_TEST_ALLOW_BLOCKING") == "1",
                )
            )
        _shared.update(server=AuthServer(url, warehouse, database_url, env), stack=stack, users=0)
    _shared["users"] += 1
    try:
        yield _shared["server"]
    finally:
        _shared["users"] -= 1
        if _shared["users"] == 0:
            _shared.pop("stack").close()
            _shared.clear()
