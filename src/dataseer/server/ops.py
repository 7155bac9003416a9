"""Operating a running server: threads, time travel and the store, over its API.

The client side of ``dataseer threads list|show|history|replay|fork|patch|delete``
and ``dataseer store ls|get|rm``. Everything goes through the LangGraph server
API (``langgraph_sdk`` sync client) with the operator's token, so the same
ownership rules apply as for any user; an admin token sees every thread.

Time travel: ``history`` lists a thread's checkpoints; ``replay`` re-runs
from one of them with the code the server runs now; ``fork`` writes patched
values onto a past checkpoint (a new branch; the old one stays in history)
and runs on from there; ``patch`` repairs the head of a stuck thread (cancel
its runs, write values) so the next question starts clean.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from dataseer.errors import DataseerError

__all__ = [
    "DEFAULT_URL",
    "OpsError",
    "connect",
    "fork",
    "patch",
    "replay",
    "store_get",
    "store_ls",
    "store_rm",
    "thread_delete",
    "thread_history",
    "thread_show",
    "threads_list",
]

DEFAULT_URL = "http://127.0.0.1:8123"
GRAPH = "dataseer"


class OpsError(DataseerError):
    """An operation could not be carried out (no such checkpoint, bad values)."""


def connect(url: str | None = None, token: str | None = None) -> SyncLangGraphClient:
    """A client for ``url`` (``DATASEER_SERVER_URL``) with ``token`` (``DATASEER_TOKEN``)."""
    url = url or os.environ.get("DATASEER_SERVER_URL") or DEFAULT_URL
    token = token or os.environ.get("DATASEER_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return get_sync_client(url=url, headers=headers, timeout=300)


def _summary(values: Mapping[str, Any] | None) -> str:
    messages = (values or {}).get("messages") or []
    for message in messages:
        if isinstance(message, Mapping) and message.get("type") == "human":
            return str(message.get("content") or "")[:60]
    return ""


def threads_list(
    client: SyncLangGraphClient, *, limit: int = 20, status: str | None = None
) -> list[dict[str, Any]]:
    """Recent threads the caller may see, newest first."""
    search: Any = client.threads.search
    found = search(
        limit=limit,
        status=status,
        sort_by="updated_at",
        sort_order="desc",
    )
    return [
        {
            "thread_id": t["thread_id"],
            "status": t["status"],
            "owner": (t.get("metadata") or {}).get("owner", ""),
            "updated_at": str(t["updated_at"]),
            "question": _summary(t.get("values")),
        }
        for t in found
    ]


def thread_show(client: SyncLangGraphClient, thread_id: str) -> dict[str, Any]:
    """A thread, its latest state and its runs."""
    thread = client.threads.get(thread_id)
    state = client.threads.get_state(thread_id)
    runs = client.runs.list(thread_id, limit=20)
    return {
        "thread": dict(thread),
        "checkpoint_id": (state.get("checkpoint") or {}).get("checkpoint_id"),
        "next": list(state.get("next") or []),
        "values": state.get("values"),
        "runs": [{"run_id": r["run_id"], "status": r["status"]} for r in runs],
    }


def thread_history(
    client: SyncLangGraphClient, thread_id: str, *, limit: int = 50
) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first: id, step, source, writer and next nodes."""
    rows = []
    for found in client.threads.get_history(thread_id, limit=limit):
        state: dict[str, Any] = dict(found)
        metadata: dict[str, Any] = dict(state.get("metadata") or {})
        writes = metadata.get("writes") or {}
        rows.append(
            {
                "checkpoint_id": (state.get("checkpoint") or {}).get("checkpoint_id"),
                "parent_id": (state.get("parent_checkpoint") or {}).get("checkpoint_id"),
                "step": metadata.get("step"),
                "source": metadata.get("source"),
                "wrote": ",".join(writes) if isinstance(writes, Mapping) else "",
                "next": ",".join(state.get("next") or []),
            }
        )
    return rows


def _checkpoint(client: SyncLangGraphClient, thread_id: str, checkpoint_id: str) -> Any:
    for state in client.threads.get_history(thread_id, limit=1000):
        if (state.get("checkpoint") or {}).get("checkpoint_id") == checkpoint_id:
            return state
    msg = f"thread {thread_id} has no checkpoint {checkpoint_id}"
    raise OpsError(msg)


def replay(
    client: SyncLangGraphClient,
    thread_id: str,
    checkpoint_id: str,
    *,
    assistant: str = GRAPH,
) -> dict[str, Any]:
    """Re-run the thread from a past checkpoint with the server's current code.

    Returns the final values of the new branch.
    """
    _checkpoint(client, thread_id, checkpoint_id)
    result = client.runs.wait(thread_id, assistant, input=None, checkpoint_id=checkpoint_id)
    return dict(result) if isinstance(result, Mapping) else {"result": result}


def fork(
    client: SyncLangGraphClient,
    thread_id: str,
    checkpoint_id: str,
    values: Mapping[str, Any],
    *,
    as_node: str | None = None,
    assistant: str = GRAPH,
    run: bool = True,
) -> dict[str, Any]:
    """Write ``values`` onto a past checkpoint (a new branch) and, by default, run on.

    Returns ``{"checkpoint_id": <the fork>, "values": <final values or the fork's>}``.
    """
    if not isinstance(values, Mapping) or not values:
        msg = "fork needs a non-empty JSON object of state values to write"
        raise OpsError(msg)
    _checkpoint(client, thread_id, checkpoint_id)
    written = client.threads.update_state(
        thread_id, dict(values), as_node=as_node, checkpoint_id=checkpoint_id
    )
    forked = str(written["checkpoint"]["checkpoint_id"])
    if not run:
        return {"checkpoint_id": forked, "values": client.threads.get_state(thread_id)["values"]}
    result = client.runs.wait(thread_id, assistant, input=None, checkpoint_id=forked)
    final = dict(result) if isinstance(result, Mapping) else {"result": result}
    return {"checkpoint_id": forked, "values": final}


def patch(
    client: SyncLangGraphClient,
    thread_id: str,
    values: Mapping[str, Any] | None = None,
    *,
    as_node: str | None = None,
    cancel: bool = False,
) -> dict[str, Any]:
    """Repair a thread's head: cancel its unfinished runs, then write ``values``.

    Returns the cancelled run ids and the new head checkpoint id.
    """
    cancelled: list[str] = []
    if cancel:
        for run in client.runs.list(thread_id, limit=100):
            if run["status"] in {"pending", "running"}:
                client.runs.cancel(thread_id, run["run_id"], wait=True)
                cancelled.append(str(run["run_id"]))
    head = None
    if values:
        written = client.threads.update_state(thread_id, dict(values), as_node=as_node)
        head = written["checkpoint"]["checkpoint_id"]
    thread = client.threads.get(thread_id)
    return {"cancelled": cancelled, "checkpoint_id": head, "status": thread["status"]}


def thread_delete(client: SyncLangGraphClient, thread_id: str) -> None:
    """Delete a thread with its runs and checkpoints."""
    client.threads.delete(thread_id)


def _namespace(path: str | Sequence[str]) -> list[str]:
    if isinstance(path, str):
        return [p for p in path.split("/") if p]
    return [str(p) for p in path]


def store_ls(client: SyncLangGraphClient, prefix: str = "", *, limit: int = 100) -> dict[str, Any]:
    """Namespaces under ``prefix`` (``a/b``) and the items directly in it."""
    ns = _namespace(prefix)
    namespaces = client.store.list_namespaces(prefix=ns or None, limit=limit)["namespaces"]
    items = client.store.search_items(ns, limit=limit)["items"] if ns else []
    return {
        "namespaces": ["/".join(n) for n in namespaces],
        "items": [
            {
                "namespace": "/".join(i["namespace"]),
                "key": i["key"],
                "updated_at": str(i["updated_at"]),
            }
            for i in items
        ],
    }


def store_get(client: SyncLangGraphClient, namespace: str, key: str) -> dict[str, Any] | None:
    """One store item (``None`` when missing or not yours)."""
    item = client.store.get_item(_namespace(namespace), key)
    return dict(item) if item else None


def store_rm(client: SyncLangGraphClient, namespace: str, key: str) -> None:
    """Delete one store item."""
    client.store.delete_item(_namespace(namespace), key)


# --- the `dataseer threads` and `dataseer store` commands -------------------------------


def _print_json(value: Any) -> None:
    import json
    import sys

    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


def _print_rows(rows: list[dict[str, Any]]) -> None:
    import sys

    from dataseer.prompt import markdown_table

    if not rows:
        sys.stdout.write("(none)\n")
        return
    columns = list(rows[0])
    sys.stdout.write(markdown_table(columns, [[r[c] for c in columns] for r in rows]) + "\n")


def _values(text: str | None) -> dict[str, Any]:
    import json

    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"--values must be a JSON object: {exc}"
        raise OpsError(msg) from exc
    if not isinstance(value, dict):
        msg = "--values must be a JSON object"
        raise OpsError(msg)
    return value


def cmd_threads(args: Any) -> int:
    """``dataseer threads <action>``."""
    client = connect(args.url, args.token)
    action = args.threads_command
    if action == "list":
        _print_rows(threads_list(client, limit=args.limit, status=args.status))
    elif action == "show":
        _print_json(thread_show(client, args.thread_id))
    elif action == "history":
        _print_rows(thread_history(client, args.thread_id, limit=args.limit))
    elif action == "replay":
        _print_json(replay(client, args.thread_id, args.checkpoint, assistant=args.assistant))
    elif action == "fork":
        result = fork(
            client,
            args.thread_id,
            args.checkpoint,
            _values(args.values),
            as_node=args.as_node,
            assistant=args.assistant,
            run=not args.no_run,
        )
        _print_json(result)
    elif action == "patch":
        values = _values(args.values)
        _print_json(patch(client, args.thread_id, values, as_node=args.as_node, cancel=args.cancel))
    elif action == "delete":
        thread_delete(client, args.thread_id)
        _print_json({"deleted": args.thread_id})
    return 0


def cmd_store(args: Any) -> int:
    """``dataseer store <action>``."""
    client = connect(args.url, args.token)
    action = args.store_command
    if action == "ls":
        _print_json(store_ls(client, args.prefix or "", limit=args.limit))
    elif action == "get":
        item = store_get(client, args.namespace, args.key)
        if item is None:
            msg = f"no item {args.key!r} in {args.namespace!r}"
            raise OpsError(msg)
        _print_json(item)
    elif action == "rm":
        store_rm(client, args.namespace, args.key)
        _print_json({"deleted": f"{args.namespace}:{args.key}"})
    return 0


def add_parsers(sub: Any) -> None:
    """Register ``threads`` and ``store`` on the ``dataseer`` sub-parsers."""
    import argparse

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", help=f"server URL (default: $DATASEER_SERVER_URL or {DEFAULT_URL})"
    )
    common.add_argument("--token", help="bearer token (default: $DATASEER_TOKEN)")

    threads = sub.add_parser("threads", help="inspect, time-travel and repair server threads")
    tsub = threads.add_subparsers(dest="threads_command", required=True)
    p = tsub.add_parser("list", parents=[common], help="recent threads")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--status", choices=["idle", "busy", "interrupted", "error"])
    p = tsub.add_parser("show", parents=[common], help="a thread, its state and runs")
    p.add_argument("thread_id")
    p = tsub.add_parser("history", parents=[common], help="a thread's checkpoints, newest first")
    p.add_argument("thread_id")
    p.add_argument("--limit", type=int, default=50)
    p = tsub.add_parser("replay", parents=[common], help="re-run from a checkpoint (current code)")
    p.add_argument("thread_id")
    p.add_argument("checkpoint")
    p.add_argument("--assistant", default=GRAPH)
    p = tsub.add_parser("fork", parents=[common], help="patch a past checkpoint and run on")
    p.add_argument("thread_id")
    p.add_argument("checkpoint")
    p.add_argument("--values", required=True, help="state values as JSON, e.g. '{\"deep\": true}'")
    p.add_argument("--as-node", help="write as if this node had produced the values")
    p.add_argument("--assistant", default=GRAPH)
    p.add_argument("--no-run", action="store_true", help="only write the fork, do not run")
    p = tsub.add_parser("patch", parents=[common], help="repair the head of a thread")
    p.add_argument("thread_id")
    p.add_argument("--values", help="state values to write, as JSON")
    p.add_argument("--as-node")
    p.add_argument("--cancel", action="store_true", help="cancel pending and running runs first")
    p = tsub.add_parser("delete", parents=[common], help="delete a thread")
    p.add_argument("thread_id")
    threads.set_defaults(func=cmd_threads)

    store = sub.add_parser("store", help="the server's long-term store")
    ssub = store.add_subparsers(dest="store_command", required=True)
    p = ssub.add_parser("ls", parents=[common], help="namespaces and items under a prefix (a/b)")
    p.add_argument("prefix", nargs="?", default="")
    p.add_argument("--limit", type=int, default=100)
    p = ssub.add_parser("get", parents=[common], help="one item")
    p.add_argument("namespace")
    p.add_argument("key")
    p = ssub.add_parser("rm", parents=[common], help="delete one item")
    p.add_argument("namespace")
    p.add_argument("key")
    store.set_defaults(func=cmd_store)
