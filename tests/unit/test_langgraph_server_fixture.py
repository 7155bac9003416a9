"""``start_langgraph_dev`` runs a real server; drive a throwaway graph through the SDK."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from dataseer.server.devserver import absolute_config as _absolute_config
from support.langgraph_server import free_port, start_langgraph_dev

pytestmark = [pytest.mark.server, pytest.mark.slow]

GRAPH_MODULE = '''
"""A trivial graph for the fixture test."""
import os
import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from helper_mod import shout


class State(TypedDict):
    text: str
    steps: Annotated[list[str], operator.add]


def greet(state: State) -> dict:
    return {"text": os.environ["ECHO_PREFIX"] + state["text"], "steps": ["greet"]}


def loud(state: State) -> dict:
    return {"text": shout(state["text"]), "steps": ["loud"]}


builder = StateGraph(State)
builder.add_node("greet", greet)
builder.add_node("loud", loud)
builder.add_edge(START, "greet")
builder.add_edge("greet", "loud")
builder.add_edge("loud", END)
graph = builder.compile()
'''


@pytest.fixture
def echo_project(tmp_path: Path) -> Path:
    project = tmp_path / "echo project"
    (project / "graphs").mkdir(parents=True)
    (project / "graphs" / "echo.py").write_text(GRAPH_MODULE, encoding="utf-8")
    (project / "helper_mod.py").write_text(
        "def shout(text: str) -> str:\n    return text.upper() + '!'\n", encoding="utf-8"
    )
    config = {"dependencies": ["."], "graphs": {"echo": "./graphs/echo.py:graph"}, "env": {}}
    (project / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    return project


async def _run(url: str) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    client = get_client(url=url)
    thread = await client.threads.create()
    parts = [
        (part.event, part.data)
        async for part in client.runs.stream(
            thread["thread_id"], "echo", input={"text": "hi"}, stream_mode="values"
        )
    ]
    state = await client.threads.get_state(thread["thread_id"])
    values = state["values"]
    assert isinstance(values, dict)
    return parts, values


def test_dev_server_runs_a_graph_and_keeps_state_out_of_the_project(
    echo_project: Path,
) -> None:
    with start_langgraph_dev(echo_project, env={"ECHO_PREFIX": "hello "}) as url:
        assert url.startswith("http://127.0.0.1:")
        assert not url.endswith(":2024")
        assert httpx.get(f"{url}/ok").status_code == 200
        parts, values = asyncio.run(_run(url))
    events = [event for event, _ in parts]
    assert events[0] == "metadata"
    values_seen = [data for event, data in parts if event == "values"]
    assert values_seen[-1] == {"text": "HELLO HI!", "steps": ["greet", "loud"]}
    assert values == {"text": "HELLO HI!", "steps": ["greet", "loud"]}
    assert not (echo_project / ".langgraph_api").exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/ok")


def test_a_broken_graph_fails_fast_with_the_log_tail(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("raise RuntimeError('boom at import')\n", encoding="utf-8")
    config = {"dependencies": ["."], "graphs": {"bad": "./bad.py:graph"}}
    (tmp_path / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    with (
        pytest.raises(RuntimeError, match="boom at import"),
        start_langgraph_dev(tmp_path, timeout=60),
    ):
        pytest.fail("the server should not have started")


def test_config_paths_are_made_absolute(tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "dependencies": [".", "./lib", "langchain_openai"],
        "graphs": {
            "a": "./src/a.py:graph",
            "b": "dataseer.graph:graph",
            "c": {"path": "./c.py:make", "description": "c"},
        },
        "env": ".env",
        "http": {"app": "./app.py:app"},
    }
    out = _absolute_config(config, tmp_path)
    assert out["dependencies"] == [str(tmp_path), str(tmp_path / "lib"), "langchain_openai"]
    assert out["graphs"]["a"] == f"{tmp_path / 'src' / 'a.py'}:graph"
    assert out["graphs"]["b"] == "dataseer.graph:graph"
    assert out["graphs"]["c"]["path"] == f"{tmp_path / 'c.py'}:make"
    assert out["env"] == str(tmp_path / ".env")
    assert out["http"]["app"] == f"{tmp_path / 'app.py'}:app"
    assert config["dependencies"][0] == "."
    assert free_port() != 2024


def test_without_isolation_dev_mode_writes_state_into_the_project(echo_project: Path) -> None:
    with start_langgraph_dev(echo_project, env={"ECHO_PREFIX": ""}, isolate_state=False) as url:
        _, values = asyncio.run(_run(url))
    assert values["text"] == "HI!"
    assert (echo_project / ".langgraph_api").is_dir()
