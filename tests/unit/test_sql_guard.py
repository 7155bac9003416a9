"""SqlGuard against the fixture case tables, the knowledge pack and the metric compiler.

The case tables live in ``tests/fixtures/guard/`` (one file per rule family;
``users.yaml`` holds the permission profiles). Each case names a user, a
dialect (or a list, or ``all``), the expected code and, in enforce mode,
the expected rewritten SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest
import sqlglot
import yaml
from sqlglot import exp

from dataseer.data.sample.schema import TABLES
from dataseer.knowledge.metrics import (
    compile_comparison_sql,
    compile_contribution_sql,
    compile_funnel_sql,
    compile_metric_sql,
    compile_ops_events_sql,
)
from dataseer.knowledge.pack import KnowledgePack
from dataseer.sql.guard import Decision, DecisionCode, Permissions, SqlGuard
from dataseer.sql.guard.dialects import maxcompute_available, sqlglot_dialect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "guard"
ALL_DIALECTS = ("duckdb", "postgres", "mysql", "hive", "spark", "clickhouse", "maxcompute")
SCHEMA = {t.name: [c.name for c in t.columns] for t in TABLES}


def load_users() -> dict[str, Permissions]:
    raw = yaml.safe_load((FIXTURES / "users.yaml").read_text(encoding="utf-8"))["users"]
    users = {}
    for name, spec in raw.items():
        spec = dict(spec)
        for key in (
            "roles",
            "allowed_tables",
            "allowed_game_ids",
            "allowed_game_base_ids",
            "metadata_tables",
        ):
            if spec.get(key) is not None:
                spec[key] = tuple(spec[key])
        spec["denied_columns"] = {
            k: tuple(v) for k, v in (spec.get("denied_columns") or {}).items()
        }
        users[name] = Permissions(user_id=name, **spec)
    return users


USERS = load_users()


@dataclass(frozen=True)
class Case:
    family: str
    id: str
    user: str
    dialect: str
    mode: str
    sql: str
    code: DecisionCode
    spec: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.family}:{self.id}:{self.dialect}"


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        if path.name == "users.yaml":
            continue
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        defaults = doc.get("defaults", {})
        for raw in doc["cases"]:
            spec = {**defaults, **raw}
            dialects = [spec["dialect"]] if "dialect" in raw else spec.get("dialects", ["duckdb"])
            if dialects == "all":
                dialects = list(ALL_DIALECTS)
            for dialect in dialects:
                cases.append(
                    Case(
                        family=path.stem,
                        id=spec["id"],
                        user=spec["user"],
                        dialect=dialect,
                        mode=spec.get("mode", "check"),
                        sql=spec["sql"],
                        code=DecisionCode(spec["code"]),
                        spec=spec,
                    )
                )
    return cases


CASES = load_cases()


def guard(user: str, dialect: str = "duckdb", mode: str = "check") -> SqlGuard:
    return SqlGuard(USERS[user], dialect, mode, schema=SCHEMA)  # type: ignore[arg-type]


def test_case_tables_are_large_and_cover_every_family() -> None:
    assert len(CASES) >= 300
    assert len({(c.family, c.id) for c in CASES}) >= 300
    codes = {c.code for c in CASES}
    assert codes == set(DecisionCode)
    assert {c.dialect for c in CASES} == set(ALL_DIALECTS)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixture_case(case: Case) -> None:
    decision = guard(case.user, case.dialect, case.mode).check(case.sql)
    assert decision.code == case.code, decision.reason
    assert decision.allowed == (case.code == DecisionCode.OK)
    assert decision.scope == USERS[case.user].describe()
    assert decision.reason
    if case.mode == "enforce" and "rewritten" in case.spec:
        assert decision.rewritten_sql == case.spec["rewritten"]
    if decision.rewritten_sql is not None:
        again = guard(case.user, case.dialect).check(decision.rewritten_sql)
        assert again.code == DecisionCode.OK, again.reason
    if case.mode == "check":
        assert decision.rewritten_sql is None


def test_denial_reason_is_bilingual_and_names_what_is_allowed() -> None:
    decision = guard("analyst_1001").check(
        "SELECT SUM(revenue) FROM dws_game_pay_di WHERE game_id = 1002"
    )
    assert not decision.allowed
    assert "1002" in decision.reason and "1001" in decision.reason
    assert "无权访问" in decision.reason and "not access" in decision.reason
    assert decision.tables == ("dws_game_pay_di",)
    fence = guard("ops_limited").check("SELECT * FROM ops_events WHERE game_id = 1001")
    assert "ops_events" in fence.reason and "dws_*" in fence.reason


def test_tables_are_physical_tables_only() -> None:
    decision = guard("analyst_all").check(
        "WITH dws_game_pay_di AS (SELECT * FROM Dws_Game_Active_Di) "
        "SELECT * FROM dws_game_pay_di JOIN main.dim_game g ON g.game_id = dws_game_pay_di.game_id"
    )
    assert decision.allowed
    assert decision.tables == ("dws_game_active_di", "main.dim_game")


def test_schema_unknown_tables_are_assumed_sensitive() -> None:
    bare = SqlGuard(USERS["analyst_1001"])
    assert bare.check("SELECT * FROM dim_channel").code == DecisionCode.MISSING_ROW_FILTER
    assert guard("analyst_1001").check("SELECT * FROM dim_channel").code == DecisionCode.OK


def test_permissions_validate_and_describe() -> None:
    with pytest.raises(ValueError, match="user_id"):
        Permissions("")
    with pytest.raises(TypeError, match="allowed_tables"):
        Permissions("u", allowed_tables="dws_*")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="integers"):
        Permissions("u", allowed_game_ids=("1001",))  # type: ignore[arg-type]
    text = USERS["ops_limited"].describe()
    assert "dws_*" in text and "1001, 1002" in text and "uid" in text
    assert "全部" in USERS["analyst_all"].describe()
    assert hash(USERS["ops_limited"]) == hash(load_users()["ops_limited"])


def test_guard_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="mode"):
        SqlGuard(USERS["admin"], mode="audit")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dialect"):
        SqlGuard(USERS["admin"], dialect="cobol")


def test_dialect_names() -> None:
    assert sqlglot_dialect("PostgreSQL") == "postgres"
    assert sqlglot_dialect("odps") == ("maxcompute" if maxcompute_available() else "hive")
    assert maxcompute_available()


# --- the knowledge pack and the metric compiler -----------------------------------


PACK_CASES = [{"id": c.id, "sql": c.sql} for c in KnowledgePack.load().cases]
NEEDS_FILTER = {"new_users_all_games", "arpu_by_game", "weekly_revenue_by_game"}


def to_game(sql: str, game_id: int) -> str:
    """The same SQL with every literal game filter pointed at ``game_id`` (on the AST)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for node in list(tree.find_all(exp.In, exp.EQ)):
        column = node.this
        if isinstance(column, exp.Column) and column.name == "game_id":
            if isinstance(node, exp.In) and node.expressions:
                node.set("expressions", [exp.Literal.number(game_id)])
            elif isinstance(node, exp.EQ) and isinstance(node.expression, exp.Literal):
                node.set("expression", exp.Literal.number(game_id))
    return tree.sql(dialect="duckdb")


@pytest.mark.parametrize("case", PACK_CASES, ids=lambda c: c["id"])
def test_pack_cases_pass_for_analyst_all(case: dict[str, Any]) -> None:
    decision = guard("analyst_all").check(case["sql"])
    assert decision.code == DecisionCode.OK, decision.reason


@pytest.mark.parametrize("case", PACK_CASES, ids=lambda c: c["id"])
def test_pack_cases_for_analyst_1001(case: dict[str, Any], sample_path: Path) -> None:
    sql = to_game(case["sql"], 1001)
    decision = guard("analyst_1001").check(sql)
    if case["id"] in NEEDS_FILTER:
        assert decision.code == DecisionCode.MISSING_ROW_FILTER, decision.reason
        enforced = guard("analyst_1001", mode="enforce").check(sql)
        assert enforced.allowed and enforced.rewritten_sql, enforced.reason
        with duckdb.connect(str(sample_path), read_only=True) as con:
            con.execute(enforced.rewritten_sql).fetchall()
    else:
        assert decision.code == DecisionCode.OK, decision.reason


class _Period:
    def __init__(self, start: date, end: date) -> None:
        self.start, self.end = start, end


def compiled_sql() -> list[tuple[str, str]]:
    pack = KnowledgePack.load()
    oct_, sep = (
        _Period(date(2026, 10, 1), date(2026, 10, 31)),
        _Period(date(2026, 9, 1), date(2026, 9, 30)),
    )
    out: list[tuple[str, str]] = []
    for metric in pack.metrics:
        if metric.kind == "funnel":
            continue
        for dims, grain in (
            ((), "total"),
            ((), "day"),
            (("channel",), "total"),
            (("region",), "month"),
        ):
            try:
                sql = compile_metric_sql(
                    metric, games=[1001], period=oct_, dimensions=dims, grain=grain, pack=pack
                )  # type: ignore[arg-type]
            except ValueError:
                continue
            out.append((f"{metric.key}-{'-'.join(dims) or 'all'}-{grain}", sql))
        try:
            out.append(
                (
                    f"{metric.key}-cmp",
                    compile_comparison_sql(
                        metric, games=[1001], period=oct_, compare_to=sep, pack=pack
                    ),
                )
            )
            out.append(
                (
                    f"{metric.key}-contrib",
                    compile_contribution_sql(
                        metric,
                        games=[1001],
                        period=oct_,
                        compare_to=sep,
                        dimension="channel",
                        pack=pack,
                    ),
                )
            )
        except ValueError:
            pass
    out.append(("funnel", compile_funnel_sql(games=[1001], period=oct_, pack=pack)))
    out.append(("ops_events", compile_ops_events_sql(games=[1001], period=oct_)))
    return out


COMPILED = compiled_sql()


def test_compiled_metric_sql_covers_every_kind() -> None:
    assert len(COMPILED) >= 20


@pytest.mark.parametrize(("name", "sql"), COMPILED, ids=[n for n, _ in COMPILED])
def test_compiled_metric_sql_passes_for_analyst_1001(name: str, sql: str) -> None:
    decision: Decision = guard("analyst_1001").check(sql)
    assert decision.code == DecisionCode.OK, f"{decision.reason}\n{sql}"
