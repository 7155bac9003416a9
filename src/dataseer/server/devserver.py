"""Run ``langgraph dev`` without writing into the project folder.

``langgraph dev`` (in-memory runtime) keeps its state in ``.langgraph_api/``
relative to its working directory (``langgraph_runtime_inmem`` hard-codes the
path; no flag moves it), and resolves graph paths and ``dependencies`` in
``langgraph.json`` against the working directory too. So dataseer runs the
server in a working folder of its own (under ``DATASEER_HOME``) with a copy of
the config whose relative paths are made absolute against the project.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

QUIET_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
"""No analytics, no version check, no tracing: the server never calls out."""


def _absolute_spec(spec: str, base: Path) -> str:
    """Make ``./file.py:var`` absolute; leave module specs (``pkg.mod:var``) alone."""
    path, sep, variable = spec.partition(":")
    if "/" not in path or Path(path).is_absolute():
        return spec
    return f"{(base / path).resolve()}{sep}{variable}"


def absolute_config(config: dict[str, Any], base: Path) -> dict[str, Any]:
    """A copy of ``langgraph.json`` that does not depend on the working directory."""
    out: dict[str, Any] = json.loads(json.dumps(config))
    out["dependencies"] = [
        str((base / dep).resolve()) if dep.startswith(".") or "/" in dep else dep
        for dep in out.get("dependencies", [])
    ]
    graphs = out.get("graphs", {})
    for key, value in graphs.items():
        if isinstance(value, str):
            graphs[key] = _absolute_spec(value, base)
        elif isinstance(value, dict) and isinstance(value.get("path"), str):
            value["path"] = _absolute_spec(value["path"], base)
    if isinstance(out.get("env"), str):
        out["env"] = str((base / out["env"]).resolve())
    for section, key in (
        ("http", "app"),
        ("auth", "path"),
        ("checkpointer", "path"),
        ("store", "path"),
    ):
        part = out.get(section)
        if isinstance(part, dict) and isinstance(part.get(key), str):
            part[key] = _absolute_spec(part[key], base)
    return out


def prepare_workdir(config_path: Path, workdir: Path) -> Path:
    """Write the absolute copy of ``config_path`` into ``workdir``; return its path."""
    config_path = config_path.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    target = workdir / "langgraph.json"
    target.write_text(json.dumps(absolute_config(raw, config_path.parent), indent=2), "utf-8")
    return target
