"""The guard's wiring: identity, the execution floor, audit, and the middleware on tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from dataseer.cli import cli_user
from dataseer.config import Settings
from dataseer.data.duckdb_source import DuckDBSource
from dataseer.lines.agents import middleware_stack
from dataseer.middleware import MessageCleanupMiddleware
from dataseer.middleware.sql_guard import REWRITE_NOTE, SqlGuardError, SqlGuardMiddleware
from dataseer.models.narrate import denial_reply
from dataseer.sql.audit import read_audit
from dataseer.sql.execute import DENIED_MARK, denial_message, parse_denial, run_query
from dataseer.sql.guard import Decision, DecisionCode
from dataseer.sql.identity import Identity, IdentityError, identity_from_config
from dataseer.sql.permission_store import YamlPermissionStore
from dataseer.tools.sql import run_sql

FILTERED = (
    "SELECT ROUND(SUM(revenue), 2) AS revenue FROM dws_game_pay_di "
    "WHERE game_id IN (1001) AND ds BETWEEN DATE '2026-10-01' AND DATE '2026-10-31'"
)
UNFILTERED = (
    "SELECT ROUND(SUM(revenue), 2) AS revenue FROM dws_game_pay_di "
    "WHERE ds BETWEEN DATE '2026-10-01' AND DATE '2026-10-31'"
)
OTHER_GAME = FILTERED.replace("IN (1001)", "IN (1002)")


@pytest.fixture
def source(sample_path: Path) -> Iterator[DuckDBSource]:
    ds = DuckDBSource(sample_path)
    yield ds
    ds.close()


@pytest.fixture
def store() -> YamlPermissionStore:
    return YamlPermissionStore(game_bases={1001: 100, 1002: 200, 1006: 100})


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home")


# --- identity -----------------------------------------------------------------------------


def test_identity_comes_from_the_run_config_first() -> None:
    dev = Settings(dev_user="admin")
    config = {"configurable": {"user_id": "analyst_1001", "roles": "analyst, ops"}}
    identity = identity_from_config(config, dev)
    assert identity == Identity("analyst_1001", ("analyst", "ops"), None, "config")
    assert identity_from_config({"configurable": {}}, dev) == Identity("admin", None, None, "dev")
    assert identity_from_config({"configurable": {}}, Settings(dev_user=None)) is None
    assert identity_from_config(None, None) is None


def test_credentials_alone_are_an_identity_and_secrets_stay_hidden() -> None:
    creds = {"warehouse": "postgresql://reader_1001:pw@h:5432/dw", "token": "t0k"}
    identity = identity_from_config({"configurable": {"credentials": creds}}, None)
    assert identity is not None and identity.source == "credentials"
    assert identity.user_id == "credential:reader_1001"
    assert "pw" not in repr(identity) and "t0k" not in repr(identity)


@pytest.mark.parametrize(
    "configurable",
    [
        {"user_id": 42},
        {"user_id": "u", "roles": [1, 2]},
        {"credentials": "postgresql://x"},
        {"credentials": {"warehouse": "/tmp/x.duckdb"}},
    ],
)
def test_malformed_identity_is_refused(configurable: dict[str, Any]) -> None:
    with pytest.raises(IdentityError):
        identity_from_config({"configurable": configurable}, None)


def test_cli_user_default_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATASEER_USER", raising=False)
    assert cli_user("ops_limited", Settings(dev_user="admin")) == "ops_limited"
    assert cli_user(None, Settings(dev_user="analyst_all")) == "analyst_all"
    assert cli_user(None, Settings(dev_user=None)) == "admin"
    monkeypatch.setenv("DATASEER_USER", "analyst_1001")
    assert cli_user(None, Settings(dev_user="admin")) == "analyst_1001"


# --- the execution floor and audit ---------------------------------------------------------


def test_run_query_without_identity_runs_nothing(source: DuckDBSource, settings: Settings) -> None:
    result = run_query(source, FILTERED, settings, permissions=None)
    assert not result.ok and result.frame.empty
    assert (result.error or "").startswith(DENIED_MARK)
    assert "no known identity" in (result.error or "")
    [line] = read_audit(settings)
    assert line["user_id"] == "-" and line["allowed"] is False and line["layer"] == "execute"
    assert line["sql"] == FILTERED


def test_run_query_enforces_the_users_games(
    source: DuckDBSource, settings: Settings, store: YamlPermissionStore
) -> None:
    perms = store.for_user("analyst_1001")
    allowed = run_query(source, FILTERED, settings, permissions=perms)
    assert allowed.ok and allowed.row_count == 1
    denied = run_query(source, OTHER_GAME, settings, permissions=perms)
    assert not denied.ok
    denial = parse_denial(denied.error)
    assert denial is not None and denial.code != DecisionCode.OK
    assert denial.allowed_games == ((1001, "星海远征"),)
    unfiltered = run_query(source, UNFILTERED, settings, permissions=perms)
    assert parse_denial(unfiltered.error) is not None
    lines = read_audit(settings)
    assert [(x["user_id"], x["allowed"]) for x in lines] == [
        ("analyst_1001", True),
        ("analyst_1001", False),
        ("analyst_1001", False),
    ]
    assert lines[0]["tables"] == ["dws_game_pay_di"] and lines[0]["code"] == "OK"
    assert lines[1]["roles"] == ["analyst"] and lines[1]["at"]


def test_enforce_mode_runs_the_rewritten_query(
    source: DuckDBSource, settings: Settings, store: YamlPermissionStore
) -> None:
    perms = store.for_user("analyst_1001")
    enforce = settings.model_copy(update={"guard_mode": "enforce"})
    rewritten = run_query(source, UNFILTERED, enforce, permissions=perms)
    reference = run_query(source, FILTERED, settings, permissions=perms)
    assert rewritten.ok, rewritten.error
    assert rewritten.sql != UNFILTERED and "1001" in rewritten.sql
    assert rewritten.frame.equals(reference.frame)
    assert read_audit(enforce)[0]["rewritten_sql"] == rewritten.sql


@pytest.mark.postgres
def test_decisions_are_audited_to_postgres(
    pg_scratch: str, source: DuckDBSource, tmp_path: Path, store: YamlPermissionStore
) -> None:
    import psycopg

    settings = Settings(home=tmp_path / "pg-audit", audit_url=pg_scratch)
    marker = f"/* {tmp_path.name} */ "
    perms = store.for_user("ops_limited")
    run_query(source, marker + FILTERED, settings, permissions=perms)
    run_query(source, marker + "SELECT uid FROM dwd_user_login_di", settings, permissions=perms)
    with psycopg.connect(pg_scratch) as conn:
        rows = conn.execute(
            "SELECT user_id, roles, allowed, code, tables, layer FROM dataseer_sql_audit "
            "WHERE sql LIKE %s ORDER BY id",
            (marker + "%",),
        ).fetchall()
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [
        ("ops_limited", ["ops"], True, "execute"),
        ("ops_limited", ["ops"], False, "execute"),
    ]
    assert rows[0][3] == "OK" and rows[1][3] != "OK"
    assert len(read_audit(settings)) == 2


# --- the middleware on hand-built tool calls ----------------------------------------------


def _request(sql: str, configurable: dict[str, Any], name: str = "run_sql") -> ToolCallRequest:
    call = {
        "name": name,
        "args": {"sql": sql, "purpose": "上个月流水"},
        "id": "c1",
        "type": "tool_call",
    }
    state: dict[str, Any] = {"messages": [], "turn": 1}
    events: list[Any] = []
    runtime = ToolRuntime(
        state=state,
        context=None,
        config={"configurable": configurable},
        stream_writer=events.append,
        tool_call_id="c1",
        store=None,
    )
    return ToolCallRequest(tool_call=call, tool=run_sql, state=state, runtime=runtime)  # type: ignore[arg-type]


class _Handler:
    """The inner layers: records what reached the tool."""

    def __init__(self) -> None:
        self.seen: list[ToolCallRequest] = []

    def __call__(self, request: ToolCallRequest) -> ToolMessage:
        self.seen.append(request)
        return ToolMessage("ran", tool_call_id=str(request.tool_call["id"]))


def _denial(result: Any) -> tuple[ToolMessage, dict[str, Any]]:
    assert isinstance(result, Command) and isinstance(result.update, dict)
    [message] = result.update["messages"]
    [record] = result.update["sql_history"]
    return message, record


def test_middleware_denial_says_what_why_and_scope(sample_path: Path) -> None:
    handler = _Handler()
    result = SqlGuardMiddleware().wrap_tool_call(
        _request(OTHER_GAME, {"user_id": "analyst_1001"}), handler
    )
    assert handler.seen == []
    message, record = _denial(result)
    assert message.status == "error" and message.tool_call_id == "c1"
    text = str(message.content)
    assert DENIED_MARK in text and "game_id IN (1001)" in text and "1001 星海远征" in text
    assert "申请权限" in text
    assert record["ok"] is False and record["sql"] == OTHER_GAME and message.artifact == record
    audit = read_audit(Settings())
    assert audit[-1]["layer"] == "middleware" and audit[-1]["allowed"] is False


def test_middleware_lets_allowed_queries_through_unchanged(sample_path: Path) -> None:
    handler = _Handler()
    request = _request(FILTERED, {"user_id": "analyst_1001"})
    result = SqlGuardMiddleware().wrap_tool_call(request, handler)
    assert isinstance(result, ToolMessage) and result.content == "ran"
    assert handler.seen == [request]


def test_middleware_leaves_other_tools_alone(sample_path: Path) -> None:
    handler = _Handler()
    request = _request("DROP TABLE dim_game", {}, name="table_info")
    assert SqlGuardMiddleware().wrap_tool_call(request, handler).content == "ran"  # type: ignore[union-attr]
    assert handler.seen == [request]


def test_middleware_denies_runs_without_a_known_identity(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATASEER_DEV_USER")
    handler = _Handler()
    message, _ = _denial(SqlGuardMiddleware().wrap_tool_call(_request(FILTERED, {}), handler))
    assert "no known identity" in str(message.content) or "no identity" in str(message.content)
    message, _ = _denial(
        SqlGuardMiddleware().wrap_tool_call(_request(FILTERED, {"user_id": "mallory"}), handler)
    )
    assert "mallory" in str(message.content)
    assert handler.seen == []


def test_middleware_enforce_mode_runs_the_rewrite_and_says_so(sample_path: Path) -> None:
    handler = _Handler()
    result = SqlGuardMiddleware("enforce").wrap_tool_call(
        _request(UNFILTERED, {"user_id": "analyst_1001"}), handler
    )
    [seen] = handler.seen
    ran = seen.tool_call["args"]["sql"]
    assert ran != UNFILTERED and "1001" in ran
    assert isinstance(result, ToolMessage)
    assert str(result.content).startswith(REWRITE_NOTE) and ran in str(result.content)


def test_async_twin_decides_the_same(sample_path: Path) -> None:
    seen: list[ToolCallRequest] = []

    async def handler(request: ToolCallRequest) -> ToolMessage:
        seen.append(request)
        return ToolMessage("ran", tool_call_id="c1")

    mw = SqlGuardMiddleware()
    user = {"user_id": "analyst_1001"}
    denied = asyncio.run(mw.awrap_tool_call(_request(OTHER_GAME, user), handler))
    _denial(denied)
    allowed = asyncio.run(mw.awrap_tool_call(_request(FILTERED, user), handler))
    assert isinstance(allowed, ToolMessage) and len(seen) == 1


def test_middleware_validates_its_mode() -> None:
    with pytest.raises(SqlGuardError, match="unknown guard mode"):
        SqlGuardMiddleware("lenient")  # type: ignore[arg-type]


@pytest.mark.parametrize("line", ["lookup", "analysis"])
def test_guard_sits_just_outside_cleanup(line: Any) -> None:
    kinds = [type(m) for m in middleware_stack(line)]
    assert kinds[-2:] == [SqlGuardMiddleware, MessageCleanupMiddleware]
    assert kinds.count(SqlGuardMiddleware) == 1


# --- narration of a denial -----------------------------------------------------------------


def test_denial_reply_names_the_game_and_the_scope() -> None:
    from dataseer.config import get_settings
    from dataseer.knowledge.pack import KnowledgePack
    from dataseer.knowledge.understand import understand

    spec = understand("幻境物语上个月流水", KnowledgePack.load(), get_settings().resolved_today)
    perms = YamlPermissionStore().for_user("analyst_1001")
    decision = Decision(
        allowed=False,
        code=DecisionCode.MISSING_ROW_FILTER,
        reason="game 1002 is not allowed\n可查看的游戏 / allowed games: game_id IN (1001)",
        tables=("dws_game_pay_di",),
        rewritten_sql=None,
        scope=perms.describe(),
    )
    error = denial_message(decision, perms, {1001: "星海远征", 1002: "幻境物语"})
    denial = parse_denial(error)
    assert denial is not None and denial.code == "MISSING_ROW_FILTER"
    assert denial.reason == "game 1002 is not allowed"
    assert denial.allowed_games == ((1001, "星海远征"),)
    reply = denial_reply(spec, denial)
    assert "「幻境物语」（game_id 1002）不在您的数据权限范围内" in reply
    assert "星海远征（1001）" in reply and "申请权限" in reply
    assert parse_denial("Binder Error: no column revenu") is None


def test_remembered_decisions_never_outlive_a_grant_change(
    source: DuckDBSource, settings: Settings, store: YamlPermissionStore
) -> None:
    from dataclasses import replace

    perms = store.for_user("analyst_1001")
    assert run_query(source, FILTERED, settings, permissions=perms).ok
    assert run_query(source, FILTERED, settings, permissions=perms).ok
    revoked = replace(perms, allowed_game_ids=(1002,))
    assert not run_query(source, FILTERED, settings, permissions=revoked).ok
    assert [x["allowed"] for x in read_audit(settings)] == [True, True, False]
