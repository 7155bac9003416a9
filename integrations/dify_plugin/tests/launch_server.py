"""Start a real dataseer server for the plugin tests; run with the SERVER's Python.

The plugin's venv cannot import dataseer, so the tests run this script with
``../../.venv/bin/python``: it builds the small sample warehouse, starts
``langgraph dev`` through ``tests/support/langgraph_server.py`` with JWT auth
on, prints one JSON line (URL and bearer tokens), and stops the server when
its stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from dataseer.data.sample import build_sample  # noqa: E402
from dataseer.server.auth import issue_token  # noqa: E402
from support.langgraph_server import start_langgraph_dev  # noqa: E402

SECRET = "dify-plugin-test-secret-0123456789"

for key in [k for k in os.environ if k.startswith("DATASEER_")]:
    del os.environ[key]
home = Path(tempfile.mkdtemp(prefix="dify-plugin-server-"))
build_sample(home / "sample-s0_05.duckdb", scale=0.05)
env = {
    "DATASEER_HOME": str(home),
    "DATASEER_SAMPLE_SCALE": "0.05",
    "DATASEER_TODAY": "2026-11-29",
    "DATASEER_AUTH_SECRET": SECRET,
}
with start_langgraph_dev(ROOT, env=env, timeout=240) as url:
    tokens = {
        "admin": issue_token("admin", secret=SECRET, roles=["admin"], ttl=7200),
        "analyst_1001": issue_token("analyst_1001", secret=SECRET, ttl=7200),
    }
    sys.stdout.write(json.dumps({"url": url, "tokens": tokens, "home": str(home)}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()
