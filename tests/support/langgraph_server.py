"""Run a real ``langgraph dev`` server on a free port for server-level tests.

``langgraph dev`` (in-memory runtime) keeps its state in ``.langgraph_api/``
*relative to its working directory*: ``langgraph_runtime_inmem`` hard-codes
``os.path.join(".langgraph_api", ...)`` for the checkpoint, ops, retry
counter and store pickles (``store.py`` even creates the folder at import
time), and no flag or environment variable moves it. Graph file paths and
``dependencies`` in ``langgraph.json`` are also resolved against the working
directory, not against the config file.

So, to keep test runs out of the project folder, ``start_langgraph_dev`` by
default runs the server in a throwaway working directory with a copy of the
config whose relative paths (graph files, ``dependencies``, ``env`` file,
``http.app``, ``auth.path``) are made absolute against ``project_dir``. The
server log goes to the same throwaway directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from dataseer.server.devserver import QUIET_ENV, prepare_workdir

__all__ = ["LanggraphDevError", "free_port", "start_langgraph_dev"]

_FORBIDDEN_PORT = 2024
_QUIET_ENV = QUIET_ENV


class LanggraphDevError(RuntimeError):
    """The dev server did not come up; the message carries the log tail."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1, never the langgraph default 2024."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != _FORBIDDEN_PORT:
            return port


def _langgraph_executable() -> Path:
    path = Path(sys.executable).parent / "langgraph"
    if not path.exists():
        msg = f"`langgraph` not found next to the interpreter at {path}; install langgraph-cli"
        raise FileNotFoundError(msg)
    return path


def _tail(log_path: Path, lines: int = 60) -> str:
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "<no log written>"
    return "\n".join(text.splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Terminate the server's whole process group, escalating to SIGKILL."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)


def _wait_ready(
    process: subprocess.Popen[bytes], base_url: str, log_path: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                msg = (
                    f"langgraph dev exited with code {process.returncode} before it was ready;"
                    f" log tail:\n{_tail(log_path)}"
                )
                raise LanggraphDevError(msg)
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"{base_url}/ok").status_code == 200:
                    return
            time.sleep(0.25)
    msg = f"langgraph dev not ready at {base_url} after {timeout:.0f}s; log:\n{_tail(log_path)}"
    raise LanggraphDevError(msg)


@contextlib.contextmanager
def start_langgraph_dev(
    project_dir: Path,
    *,
    env: dict[str, str] | None = None,
    config: str = "langgraph.json",
    timeout: float = 90.0,
    isolate_state: bool = True,
    keep_workdir: bool = False,
    overrides: dict[str, Any] | None = None,
    workdir: Path | None = None,
    port: int | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    allow_blocking: bool = False,
) -> Iterator[str]:
    """Run ``langgraph dev`` for ``project_dir`` and yield its base URL.

    Args:
        project_dir: Folder holding the ``langgraph.json``.
        env: Extra environment for the server, on top of this process's
            environment and the quiet defaults (no analytics, no version
            check, no LangSmith tracing); these values win.
        config: Config file name, relative to ``project_dir``.
        timeout: Seconds to wait for ``GET /ok``.
        isolate_state: Run in a throwaway working directory so that
            ``.langgraph_api/`` is not written into ``project_dir`` (see the
            module docstring). With ``False`` the server runs in
            ``project_dir`` exactly as a developer would run it.
        keep_workdir: Keep the throwaway directory (log and state) after exit.
        overrides: Top-level ``langgraph.json`` keys to replace in the copy
            (``graphs`` is merged); paths in them must be absolute. Needs
            ``isolate_state``.
        workdir: Run in this directory (its ``.langgraph_api/`` state and
            log are reused and kept): restart a killed server on its state.
        port: Listen here instead of a fresh free port (a restart keeps it).
        on_start: Called with the server process once it is ready (tests
            that kill it).
        allow_blocking: Pass ``--allow-blocking`` (blocking calls in the
            event loop are then not errors); for diagnosis only.

    Yields:
        ``http://127.0.0.1:<port>`` of the running server.

    Raises:
        LanggraphDevError: The server exited early or was not ready in time;
            the message includes the tail of its log.
    """
    project_dir = Path(project_dir).resolve()
    config_path = project_dir / config
    if not config_path.is_file():
        msg = f"no {config} in {project_dir}"
        raise FileNotFoundError(msg)
    executable = _langgraph_executable()
    keep_workdir = keep_workdir or workdir is not None
    workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="langgraph-dev-"))
    if isolate_state:
        run_config = prepare_workdir(config_path, workdir)
        if overrides:
            merged = json.loads(run_config.read_text(encoding="utf-8"))
            for key, value in overrides.items():
                if key == "graphs":
                    merged.setdefault("graphs", {}).update(value)
                else:
                    merged[key] = value
            run_config.write_text(json.dumps(merged, indent=2), encoding="utf-8")
        cwd = workdir
    else:
        run_config = config_path
        cwd = project_dir
    log_path = workdir / "langgraph-dev.log"
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = [
        str(executable),
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--config",
        str(run_config),
    ]
    if allow_blocking:
        command.append("--allow-blocking")
    process_env = {**os.environ, **_QUIET_ENV, **(env or {})}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=process_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_ready(process, base_url, log_path, timeout)
        if on_start is not None:
            on_start(process)
        yield base_url
    finally:
        _stop(process)
        if not keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
