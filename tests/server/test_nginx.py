"""The shipped ``nginx/nginx.conf`` in front of the real server, streaming unbuffered.

The real nginx binary runs the shipped config, rewritten only where a test
must (upstream and listen address on loopback, temp paths in a temp folder),
in front of the shared authenticated server. A slow run streams through it:
the first event arrives long before the run ends, and keepalive comments
pass through while the model is silent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.auth_server import AuthServer, shared_auth_server
from support.langgraph_server import free_port

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.postgres]

CONF = Path(__file__).resolve().parents[2] / "nginx" / "nginx.conf"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
USER = "analyst_all"
SSE_DIRECTIVES = [
    "proxy_buffering off;",
    "proxy_cache off;",
    "proxy_request_buffering off;",
    "chunked_transfer_encoding on;",
    "proxy_http_version 1.1;",
    "proxy_read_timeout 3600s;",
    "proxy_send_timeout 3600s;",
    "client_max_body_size",
]


def require_nginx() -> str:
    if NGINX is None:
        pytest.skip("nginx is not installed (apt-get install nginx)")
    return NGINX


def render(upstream: str, port: int, folder: Path) -> Path:
    """The shipped config with loopback addresses and temp paths, nothing else changed."""
    text = CONF.read_text(encoding="utf-8")
    text = text.replace("server api:8123;", f"server {upstream};")
    text = re.sub(r"listen 80;", f"listen 127.0.0.1:{port};", text)
    text = text.replace("pid /tmp/nginx-dataseer.pid;", f"pid {folder}/nginx.pid;")
    temp = "".join(
        f"    {name}_temp_path {folder}/{name};\n"
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    text = text.replace("http {\n", "http {\n" + temp, 1)
    target = folder / "nginx.conf"
    target.write_text(text, encoding="utf-8")
    return target


@pytest.fixture(scope="session")
def auth_server(server_warehouse: Path, pg_state_database: str) -> Iterator[AuthServer]:
    with shared_auth_server(server_warehouse, pg_state_database) as server:
        yield server


@pytest.fixture(scope="module")
def proxy_url(auth_server: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    nginx = require_nginx()
    folder = tmp_path_factory.mktemp("nginx")
    port = free_port()
    upstream = auth_server.url.removeprefix("http://")
    conf = render(upstream, port, folder)
    process = subprocess.Popen(
        [nginx, "-p", str(folder), "-c", str(conf), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=(folder / "stderr.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, (folder / "stderr.log").read_text()
            assert time.monotonic() < deadline, "nginx did not come up"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_shipped_config_is_sse_safe_and_passes_nginx_t(tmp_path: Path) -> None:
    nginx = require_nginx()
    text = CONF.read_text(encoding="utf-8")
    for directive in SSE_DIRECTIVES:
        assert directive in text, directive
    conf = render("127.0.0.1:9", free_port(), tmp_path)
    done = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(conf)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()


def test_compose_publishes_only_nginx() -> None:
    import yaml

    compose = yaml.safe_load((CONF.parents[1] / "docker" / "compose.yaml").read_text("utf-8"))
    published = {name for name, svc in compose["services"].items() if svc.get("ports")}
    assert published == {"nginx"}
    for name in ("postgres", "redis", "api", "nginx"):
        assert "healthcheck" in compose["services"][name], name


def test_a_run_streams_through_nginx_event_by_event(
    auth_server: AuthServer, proxy_url: str
) -> None:
    headers = auth_server.headers(USER)
    with httpx.Client(base_url=proxy_url, timeout=120, headers=headers) as http:
        tid = http.post("/threads", json={}).json()["thread_id"]
        body = {
            "assistant_id": "slow",
            "input": {
                "messages": [{"role": "user", "content": "星海远征上个月流水多少？ [sleep=2]"}]
            },
            "stream_mode": ["updates", "custom"],
        }
        started = time.monotonic()
        seen: list[tuple[float, str]] = []
        with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                seen.append((time.monotonic() - started, line))
        ended = time.monotonic() - started
        error = http.post(
            "/threads", content=b"{nope", headers={"content-type": "application/json"}
        )

    events = [(t, line) for t, line in seen if line.startswith("event:")]
    first_event = events[0][0]
    assert events[0][1] == "event: metadata"
    assert any(line == "event: updates" for _, line in events)
    assert first_event < ended - 3.0, (first_event, ended)
    updates = [t for t, line in events if line == "event: updates"]
    assert updates[0] < ended - 1.5
    assert any(line.startswith(":") for _, line in seen)  # keepalive passed through
    assert error.status_code == 400
    assert set(error.json()) == {"error"}
