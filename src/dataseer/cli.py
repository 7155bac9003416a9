"""The ``dataseer`` command: ask, sample, serve, doctor.

``ask`` runs the router graph in-process with a durable checkpointer (SQLite
in the cache folder, or PostgreSQL with ``DATASEER_DATABASE_URL``) so that
``--thread`` continues a conversation across invocations.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from dataseer.config import PROJECT_ROOT, Settings
from dataseer.errors import DataseerError
from dataseer.prompt import markdown_table


@contextlib.contextmanager
def open_checkpointer(settings: Settings) -> Iterator[Any]:
    """The CLI's checkpointer: PostgreSQL when configured, else a SQLite file."""
    if settings.database_url:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(settings.database_url) as saver:
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    settings.home.mkdir(parents=True, exist_ok=True)
    with SqliteSaver.from_conn_string(str(settings.home / "checkpoints.sqlite")) as saver:
        yield saver


@contextlib.contextmanager
def open_store(settings: Settings) -> Iterator[Any]:
    """The CLI's LangGraph store (notebook notes): PostgreSQL when configured, else SQLite."""
    if settings.database_url:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(settings.database_url) as store:
            store.setup()
            yield store
        return
    from langgraph.store.sqlite import SqliteStore

    settings.home.mkdir(parents=True, exist_ok=True)
    with SqliteStore.from_conn_string(str(settings.home / "store.sqlite")) as store:
        store.setup()
        yield store


def _print(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _pending_interrupt(graph: Any, config: RunnableConfig) -> Any:
    snapshot = graph.get_state(config)
    for task in snapshot.tasks:
        for intr in task.interrupts:
            return intr
    return None


class _Printer:
    """Renders stream events for a terminal."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.phase = ""

    def set_phase(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            _print(f"▸ {phase}")

    def custom(self, event: dict[str, Any]) -> None:
        if event.get("type") in {"chart", "python"}:
            self._artifact(event)
            return
        if event.get("type") != "sql":
            return
        self.set_phase("执行 / executing")
        mark = "✓" if event.get("ok") else "✗"
        purpose = event.get("purpose") or ""
        rows, elapsed = event.get("row_count", 0), event.get("elapsed", 0.0)
        _print(f"\n{mark} [task {event.get('task_id')}] {purpose} ({rows} rows, {elapsed:.3f}s)")
        _print(f"```sql\n{event.get('sql')}\n```")
        if event.get("ok"):
            _print(markdown_table(event.get("columns") or [], event.get("rows") or [], max_rows=20))
        else:
            _print(f"  error: {event.get('error')}")

    def _artifact(self, event: dict[str, Any]) -> None:
        """Python runs and the figures they drew (saved as PNG under DATASEER_HOME)."""
        self.set_phase("执行 / executing")
        if event.get("type") == "chart":
            _print(f"  📈 figure / 图表: {event.get('path')}")
            return
        mark = "✓" if event.get("ok") else "✗"
        _print(f"\n{mark} [python] ({event.get('elapsed', 0.0):.3f}s)")
        _print(f"```python\n{event.get('code')}\n```")
        for key in ("stdout", "value", "error"):
            if event.get(key):
                _print(f"  {key}: {str(event[key])[:1500]}")

    def update(self, node: str, data: Any) -> None:
        if node == "route" and isinstance(data, dict) and data.get("route"):
            self.set_phase(f"规划 / planning → {data['route']}")
        elif node == "tools" and self.phase.startswith("规划"):
            self.set_phase("执行 / executing")


def _stream(graph: Any, payload: Any, config: RunnableConfig, printer: _Printer) -> None:
    for chunk in graph.stream(payload, config, stream_mode=["updates", "custom"], subgraphs=True):
        _namespace, mode, data = chunk
        if mode == "custom" and isinstance(data, dict):
            printer.custom(data)
        elif mode == "updates" and isinstance(data, dict):
            for node, update in data.items():
                printer.update(node, update)


def cli_user(flag: str | None, settings: Settings) -> str:
    """Who ``dataseer ask`` acts for: ``--user``, else ``DATASEER_USER``, else the dev user.

    The local CLI runs with the rights of whoever can read the warehouse file,
    so it falls back to ``admin``; a server never does (no identity, no data).
    """
    return flag or os.environ.get("DATASEER_USER") or settings.dev_user or "admin"


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer one question (or a clarification reply) on a thread."""
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    from dataseer.graph import build_graph

    settings = Settings()
    if args.today:
        settings = settings.model_copy(update={"today": date.fromisoformat(args.today)})
        os.environ["DATASEER_TODAY"] = args.today
    thread = args.thread or uuid.uuid4().hex[:12]
    config: RunnableConfig = {
        "configurable": {"thread_id": thread, "user_id": cli_user(args.user, settings)},
        "recursion_limit": 200,
    }
    printer = _Printer()
    with open_checkpointer(settings) as saver, open_store(settings) as store:
        graph = build_graph(settings=settings, checkpointer=saver, store=store)
        payload: Any
        if args.thread and _pending_interrupt(graph, config) is not None:
            payload = Command(resume=args.question)
        else:
            payload = {"messages": [HumanMessage(args.question)], "deep": bool(args.deep)}
        while True:
            _stream(graph, payload, config, printer)
            pending = _pending_interrupt(graph, config)
            if pending is None:
                break
            value = (
                pending.value if isinstance(pending.value, dict) else {"question": pending.value}
            )
            _print(f"\n? {value.get('question')}")
            if not sys.stdin.isatty():
                _print(f'(reply with: dataseer ask "<your answer>" --thread {thread})')
                return 0
            payload = Command(resume=input("> ").strip())
        state = graph.get_state(config).values
    _print("\n" + "─" * 60)
    _print(str(state.get("summary") or state.get("answer") or ""))
    if args.stats:
        turn = int(state.get("turn") or 0)
        _print("\n" + loop_stats([e for e in state.get("loops") or [] if e.get("turn") == turn]))
    _print(f"\n(thread {thread} · {time.perf_counter() - printer.started:.2f}s)")
    return 0


def loop_stats(entries: list[dict[str, Any]]) -> str:
    """Per loop: prompt tokens, tools called, time split into model/SQL/sandbox/framework."""
    models = sorted((e for e in entries if e.get("kind") == "model"), key=lambda e: e["at"])
    tools = [e for e in entries if e.get("kind") != "model"]
    end = max((e["at"] + e["seconds"] for e in entries), default=0.0)
    rows = []
    for i, model in enumerate(models):
        stop = models[i + 1]["at"] if i + 1 < len(models) else end
        inside = [t for t in tools if model["at"] <= t["at"] < stop]
        sql = sum(t["seconds"] for t in inside if t["kind"] == "sql")
        sandbox = sum(t["seconds"] for t in inside if t["kind"] == "sandbox")
        other = sum(t["seconds"] for t in inside if t["kind"] == "tool")
        framework = max(0.0, stop - model["at"] - model["seconds"] - sql - sandbox - other)
        rows.append(
            [
                i + 1,
                model.get("prompt_tokens", 0),
                ", ".join(model.get("tools") or []) or "(answer)",
                f"{model['seconds'] * 1000:.1f}",
                f"{sql * 1000:.1f}",
                f"{sandbox * 1000:.1f}",
                f"{(other + framework) * 1000:.1f}",
            ]
        )
    columns = ["loop", "prompt tokens", "tools", "model ms", "SQL ms", "sandbox ms", "framework ms"]
    return markdown_table(columns, rows)


def cmd_sample(args: argparse.Namespace) -> int:
    """Build the sample warehouse (and optionally load it into PostgreSQL)."""
    from dataseer.data.sample import build_sample, load_to_postgres

    settings = Settings()
    scale = args.scale if args.scale is not None else settings.sample_scale
    out = (
        Path(args.out)
        if args.out
        else settings.model_copy(update={"sample_scale": scale}).sample_path
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    kwargs: dict[str, Any] = {"scale": scale, "seed": args.seed}
    if args.end_date:
        kwargs["end_date"] = date.fromisoformat(args.end_date)
    build_sample(out, **kwargs)
    if args.catalog_size:
        from dataseer.knowledge.catalog import add_catalog, eval_path

        questions = add_catalog(out, args.catalog_size, seed=args.seed)
        _print(
            f"added a {args.catalog_size}+ table catalog; {len(questions)} evaluation "
            f"questions in {eval_path(out)}"
        )
    _print(
        f"built {out} ({out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - started:.1f}s"
    )
    if args.to:
        started = time.perf_counter()
        load_to_postgres(out, args.to)
        _print(f"loaded into PostgreSQL in {time.perf_counter() - started:.1f}s")
    return 0


def cmd_skills_lint(args: argparse.Namespace) -> int:
    """Check the skills folder; exit 1 when any skill has a problem (CI runs this)."""
    from dataseer.knowledge.skills import lint_skills

    folder = Path(args.dir) if args.dir else Settings().resolved_prompts_dir / "skills"
    problems = lint_skills(folder)
    for problem in problems:
        _print(f"✗ {problem}")
    if problems:
        _print(f"{len(problems)} problem(s) in {folder}")
        return 1
    count = len(list(folder.glob("*/SKILL.md")))
    _print(f"✓ {count} skills OK in {folder}")
    return 0


def serve_command(port: int, host: str, config: Path) -> list[str]:
    """The ``langgraph dev`` command line for ``dataseer serve``."""
    exe = Path(sys.executable).with_name("langgraph")
    return [
        str(exe),
        "dev",
        "--config",
        str(config),
        "--host",
        host,
        "--port",
        str(port),
        "--no-browser",
        "--no-reload",
    ]


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the LangGraph dev server on the project's langgraph.json, offline.

    The server runs in ``DATASEER_HOME/server`` so that its state folder and
    logs never land in the project folder.
    """
    from dataseer.server.devserver import QUIET_ENV, prepare_workdir
    from dataseer.services import get_services

    settings = Settings()
    get_services(settings)  # build the sample warehouse before the server starts
    workdir = settings.home / "server"
    config = prepare_workdir(Path(args.config), workdir)
    command = serve_command(args.port, args.host, config)
    if getattr(args, "dev_auth", False):
        os.environ["DATASEER_AUTH_DEV"] = "1"
        _print("! dev auth: requests without a token act as the local dev user")
    _print("$ " + " ".join(command))
    os.chdir(workdir)
    os.execvpe(command[0], command, {**os.environ, **QUIET_ENV})
    return 0  # pragma: no cover - exec does not return


def cmd_doctor(args: argparse.Namespace) -> int:
    """Show the settings in force and check the warehouse and model."""
    from dataseer.models.tiers import is_offline
    from dataseer.services import get_services

    settings = Settings()
    _print(f"home:       {settings.home}")
    _print(f"warehouse:  {settings.warehouse or settings.sample_path}")
    _print(f"today:      {settings.resolved_today}")
    for tier in ("router", "analyst", "summarizer"):
        name = "offline analyst" if is_offline(settings, tier) else settings.model_for(tier)
        _print(f"model/{tier:<10} {name}")
    services = get_services(settings)
    tables = services.datasource.list_tables()
    _print(f"tables:     {len(tables)} ({services.datasource.dialect})")
    _print(f"knowledge:  {len(services.pack.metrics)} metrics, {len(services.pack.games)} games")
    from dataseer.sandbox import detect_mechanism

    _print(f"sandbox:    {detect_mechanism(settings.sandbox_mechanism).describe()}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``dataseer`` command."""
    p = argparse.ArgumentParser(prog="dataseer", description="dataseer data-analysis agent")
    sub = p.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="ask a question (streams the work)")
    ask.add_argument("question")
    ask.add_argument("--deep", action="store_true", help="force the analysis line")
    ask.add_argument("--thread", help="continue this thread (a follow-up or a clarification reply)")
    ask.add_argument("--today", help="anchor date for relative periods (YYYY-MM-DD)")
    ask.add_argument(
        "--user",
        help="act as this user of the permission store "
        "(default: $DATASEER_USER, else $DATASEER_DEV_USER, else admin)",
    )
    ask.add_argument("--stats", action="store_true", help="print per-loop tokens, tools and time")
    ask.set_defaults(func=cmd_ask)
    sample = sub.add_parser("sample", help="build the sample DuckDB warehouse")
    sample.add_argument("--scale", type=float)
    sample.add_argument("--out")
    sample.add_argument("--seed", type=int, default=7)
    sample.add_argument("--end-date")
    sample.add_argument("--to", help="also load it into this postgresql:// URL")
    sample.add_argument(
        "--catalog-size",
        type=int,
        default=0,
        help="also add a synthetic catalog of this many tables (ods/dwd/dws/ads/dim)",
    )
    sample.set_defaults(func=cmd_sample)
    skills = sub.add_parser("skills", help="manage Markdown skills")
    skills_sub = skills.add_subparsers(dest="skills_command", required=True)
    lint = skills_sub.add_parser("lint", help="check every prompts/skills/*/SKILL.md")
    lint.add_argument("--dir", help="skills folder (default: <prompts>/skills)")
    lint.set_defaults(func=cmd_skills_lint)
    serve = sub.add_parser("serve", help="run the LangGraph API server (langgraph dev)")
    serve.add_argument("--port", type=int, default=8123)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--config", default=str(PROJECT_ROOT / "langgraph.json"))
    serve.add_argument(
        "--dev-auth",
        action="store_true",
        help="development only: requests without a token act as one fixed local user",
    )
    serve.set_defaults(func=cmd_serve)
    doctor = sub.add_parser("doctor", help="show settings and check the setup")
    doctor.set_defaults(func=cmd_doctor)
    from dataseer.observe.graph_draw import add_parser as add_graph_parser
    from dataseer.server.ops import add_parsers as add_ops_parsers

    add_ops_parsers(sub)
    add_graph_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dataseer`` console script."""
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except DataseerError as exc:
        sys.stderr.write(f"dataseer: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
