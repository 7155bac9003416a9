"""``run_python``: analysis code over the thread's frames, in the sandbox.

The tool is thin: it finds the thread, hands the code to the sandbox pool and
shapes what came back into an observation (text the model reads), an
artifact (everything, figures as base64) and stream events (one ``python``
event, one ``chart`` event per figure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from dataseer.config import get_settings
from dataseer.data.datalayer import Datalayer, DatalayerError, FrameInfo, frame_name
from dataseer.sandbox import PythonResult, SandboxError, get_pool
from dataseer.state import SqlRecord

DEFAULT_THREAD = "default"
"""Frames of runs without a thread id (one-off CLI and tests) live here."""
MAX_CODE_CHARS = 20_000


def thread_of(config: Mapping[str, Any] | None) -> str:
    """The thread whose frames a run may use: ``configurable.thread_id``."""
    configurable = (config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or DEFAULT_THREAD)


def store_query_frame(
    config: Mapping[str, Any] | None, record: SqlRecord, frame: pd.DataFrame
) -> str:
    """Register a query result in the datalayer; returns the note for the observation.

    The record gains ``frame`` (the variable name) and ``frame_path``. A
    frame over a limit is not an error of the query: the rows are still in
    the observation, and the note tells the model why no variable exists.
    """
    if not len(frame.columns):
        return ""
    settings = get_settings(config)
    name = frame_name(record["task_id"], record.get("purpose") or "", record["columns"])
    try:
        info = Datalayer.from_settings(settings).put(
            thread_of(config), name, frame, source="sql", task_id=record["task_id"]
        )
    except DatalayerError as exc:
        return f"\n(no run_python variable for this result: {exc})"
    record["frame"] = info.name
    record["frame_path"] = str(info.path)
    more = " (only the rows up to the row limit)" if record.get("truncated") else ""
    return f"\nrun_python variable: {info.describe()}{more}"


def frames_listing(frames: list[FrameInfo]) -> str:
    """The frames a snippet may use, one line each (names, shapes, columns)."""
    return "\n".join(f"- {f.describe()}" for f in frames)


def python_observation(result: PythonResult, available: list[FrameInfo]) -> str:
    """What the model reads after a run: outcome, output, value, new frames, figures."""
    parts: list[str] = []
    if result.ok:
        parts.append(f"✓ python ran in {result.elapsed:.2f}s")
    else:
        parts.append(f"✗ python failed / 运行失败:\n{result.error}")
    if result.stdout:
        parts.append(f"stdout:\n{result.stdout.rstrip()}")
    if result.stderr:
        parts.append(f"stderr:\n{result.stderr.rstrip()}")
    if result.value is not None:
        parts.append(f"value:\n{result.value}")
    if result.frames:
        parts.append(
            "frames stored (usable in later run_python calls):\n" + frames_listing(result.frames)
        )
    if result.figures:
        parts.append(
            f"{len(result.figures)} figure(s) sent to the user as PNG: "
            + ", ".join(f.path.name for f in result.figures)
        )
    for warning in result.warnings:
        parts.append(f"warning: {warning}")
    if not result.ok and available:
        parts.append("frames of this thread:\n" + frames_listing(available))
    return "\n\n".join(parts)


@tool
def run_python(code: str, runtime: ToolRuntime) -> Command:  # noqa: D417  # runtime is injected
    """Run Python (pandas, numpy, matplotlib) over this conversation's query results.

    Every successful run_sql result is a pandas DataFrame named in its
    observation (e.g. ``df_3_monthly_revenue``); use those names directly.
    ``pd``, ``np`` and ``plt`` are imported. The value of the last expression
    is returned; print() output too. DataFrames you assign to new names are
    stored for later calls; matplotlib figures are sent to the user as PNG.
    No network, no files outside the working folder, limited CPU and memory.

    Args:
        code: the Python source to run.
    """
    thread = thread_of(runtime.config)
    settings = get_settings(runtime.config)
    if len(code) > MAX_CODE_CHARS:
        text = f"code is {len(code)} characters; keep snippets under {MAX_CODE_CHARS}"
        message = ToolMessage(text, tool_call_id=runtime.tool_call_id, status="error")
        return Command(update={"messages": [message]})
    try:
        result = get_pool(settings).run(thread, code)
    except SandboxError as exc:
        text = f"✗ the Python sandbox is unavailable on this server / 沙箱不可用: {exc}"
        message = ToolMessage(text, tool_call_id=runtime.tool_call_id, status="error")
        return Command(update={"messages": [message]})
    available = Datalayer.from_settings(settings).frames(thread) if not result.ok else []
    artifact = {"code": code, **result.to_dict()}
    runtime.stream_writer(
        {
            "type": "python",
            "code": code,
            "ok": result.ok,
            "stdout": result.stdout,
            "value": result.value,
            "error": result.error,
            "frames": [f.to_dict() for f in result.frames],
            "figures": [str(f.path) for f in result.figures],
            "elapsed": result.elapsed,
        }
    )
    for figure in result.figures:
        runtime.stream_writer({"type": "chart", **figure.to_dict()})
    message = ToolMessage(
        python_observation(result, available),
        tool_call_id=runtime.tool_call_id,
        artifact=artifact,
        status="success" if result.ok else "error",
    )
    return Command(update={"messages": [message]})
