"""One real ``langgraph dev`` server on the real project, shared by the server tests.

The server runs the project's ``langgraph.json`` in a throwaway working
directory (see ``support.langgraph_server``) with its own ``DATASEER_HOME``
holding a prebuilt scale-0.05 sample, a fixed "today", and no model
configured, so the offline analyst answers and the numbers are exact.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.langgraph_server import start_langgraph_dev

PROJECT_DIR = Path(__file__).resolve().parents[2]
SERVER_SCALE = 0.05
SERVER_TODAY = "2026-11-29"


@pytest.fixture(scope="session")
def server_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The DuckDB file the server answers from, built before the server starts.

    Built here rather than on the server's first run so that no test pays for it.
    """
    from dataseer.data.sample import build_sample

    home = tmp_path_factory.mktemp("server-home")
    return build_sample(home / "sample-s0_05.duckdb", scale=SERVER_SCALE)


@pytest.fixture(scope="session")
def server_url(server_warehouse: Path) -> Iterator[str]:
    """Start ``langgraph dev`` once per session and yield its base URL."""
    env = {
        "DATASEER_HOME": str(server_warehouse.parent),
        "DATASEER_SAMPLE_SCALE": str(SERVER_SCALE),
        "DATASEER_TODAY": SERVER_TODAY,
        # the issue-2 server tests drive the API as one local user (explicit dev mode)
        "DATASEER_AUTH_DEV": "1",
        "DATASEER_DEV_USER": "admin",
    }
    with contextlib.ExitStack() as stack:
        # The child inherits this process's environment; any DATASEER_* set by
        # the developer (a model, a warehouse, a database) must not leak in.
        with pytest.MonkeyPatch.context() as mp:
            for key in [k for k in os.environ if k.startswith("DATASEER_")]:
                mp.delenv(key)
            url = stack.enter_context(start_langgraph_dev(PROJECT_DIR, env=env, timeout=120))
        yield url
