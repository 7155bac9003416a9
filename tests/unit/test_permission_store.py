"""The permission store: YAML and PostgreSQL resolve users to the same Permissions."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dataseer.data.duckdb_source import DuckDBSource
from dataseer.sql.guard import Permissions
from dataseer.sql.identity import Credentials, Identity
from dataseer.sql.permission_store import (
    SAMPLE_PERMISSIONS,
    PermissionConfigError,
    PermissionModel,
    PermissionStore,
    PostgresPermissionStore,
    UnknownUserError,
    YamlPermissionStore,
    load_yaml_model,
    open_permission_store,
    permissions_for,
    warehouse_games,
)

CASES = yaml.safe_load(
    (Path(__file__).parents[1] / "fixtures" / "permission_store.yaml").read_text(encoding="utf-8")
)


@pytest.fixture(scope="module")
def game_bases(sample_path: Path) -> dict[int, int]:
    source = DuckDBSource(sample_path)
    try:
        games = warehouse_games(source)
    finally:
        source.close()
    return {g: b for g, (b, _) in games.items() if b is not None}


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "permissions.yaml"
    path.write_text(yaml.safe_dump(CASES["model"], allow_unicode=True), encoding="utf-8")
    return path


def _expected(user: str, spec: dict[str, Any]) -> dict[str, Any]:
    def ids(value: Any) -> tuple[int, ...] | None:
        return None if value is None else tuple(value)

    return {
        "user_id": user,
        "allowed_tables": tuple(spec["allowed_tables"]),
        "allowed_game_ids": ids(spec["allowed_game_ids"]),
        "allowed_game_base_ids": ids(spec["allowed_game_base_ids"]),
        "denied_columns": {k: tuple(v) for k, v in spec["denied_columns"].items()},
    }


def _actual(perms: Permissions) -> dict[str, Any]:
    return {
        "user_id": perms.user_id,
        "allowed_tables": perms.allowed_tables,
        "allowed_game_ids": perms.allowed_game_ids,
        "allowed_game_base_ids": perms.allowed_game_base_ids,
        "denied_columns": dict(perms.denied_columns),
    }


@pytest.mark.parametrize("user", sorted(CASES["sample_users"]))
def test_sample_users_resolve_as_documented(user: str, game_bases: dict[int, int]) -> None:
    store = YamlPermissionStore(game_bases=game_bases)
    perms = store.for_user(user)
    spec = CASES["sample_users"][user]
    assert _actual(perms) == _expected(user, spec)
    assert perms.roles == tuple(spec["roles"])
    assert perms.sensitive_tables == ("dws_*", "dwd_*", "ads_*", "ops_events")
    assert isinstance(store, PermissionStore)


@pytest.mark.parametrize("case", CASES["cases"], ids=[c["user"] for c in CASES["cases"]])
def test_grants_roles_and_denies_combine(
    case: dict[str, Any], model_file: Path, game_bases: dict[int, int]
) -> None:
    perms = YamlPermissionStore(model_file, game_bases=game_bases).for_user(case["user"])
    assert _actual(perms) == _expected(case["user"], case)
    assert perms.row_filter_columns == {"dws_sdk_funnel_di": "game_id"}


def test_run_roles_only_narrow_the_store_roles(model_file: Path) -> None:
    store = YamlPermissionStore(model_file)
    narrowed = store.for_user("ops_and_analyst", roles=["analyst"])
    assert narrowed.roles == ("analyst",)
    assert narrowed.allowed_tables == ("dim_*", "dws_*")
    # asking for a role the user does not hold grants nothing
    forged = store.for_user("base_100", roles=["ops", "admin"])
    assert forged.roles == ()
    assert forged.allowed_tables == ()


def test_unknown_and_disabled_users_are_refused(model_file: Path) -> None:
    store = YamlPermissionStore(model_file)
    with pytest.raises(UnknownUserError, match="nobody"):
        store.for_user("nobody")
    with pytest.raises(UnknownUserError, match="retired"):
        store.for_user("retired")


def test_credentials_carry_their_profile(model_file: Path, game_bases: dict[int, int]) -> None:
    store = YamlPermissionStore(model_file, game_bases=game_bases)
    pg = Credentials(warehouse="postgresql://reader:s3cret@dw.example:5432/games")
    assert pg.principal == "reader" and "s3cret" not in pg.warehouse_redacted
    perms = store.for_credentials(pg, "alice")
    assert perms.user_id == "alice"
    assert perms.allowed_game_ids == (1001, 1006)
    local = Credentials(warehouse="/data/games.duckdb", user="reader")
    assert store.for_credentials(local, "alice").allowed_game_ids == (1003,)
    with pytest.raises(UnknownUserError, match="reader"):
        store.for_credentials(Credentials(warehouse="mysql://x/y", user="reader"), "alice")
    with pytest.raises(UnknownUserError, match="stranger"):
        store.for_credentials(Credentials(user="stranger"), "alice")


def test_personal_credentials_win_over_the_users_own_grants(model_file: Path) -> None:
    store = YamlPermissionStore(model_file)
    identity = Identity("own_deny", credentials=Credentials(warehouse="x.duckdb", user="reader"))
    perms = permissions_for(store, identity)
    assert perms is not None
    assert perms.user_id == "own_deny"
    assert perms.allowed_game_ids == (1003,)
    assert permissions_for(store, None) is None


def test_yaml_store_reloads_a_changed_file(model_file: Path) -> None:
    store = YamlPermissionStore(model_file)
    assert store.for_user("base_100").allowed_game_base_ids == (100,)
    data = dict(CASES["model"])
    data["users"] = {**data["users"], "base_100": {"roles": ["analyst"], "game_ids": [1004]}}
    model_file.write_text(yaml.safe_dump(data), encoding="utf-8")
    later = time.time() + 5
    os.utime(model_file, (later, later))
    assert store.for_user("base_100").allowed_game_ids == (1004,)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"users": {"u": {"roles": ["ghost"]}}}, "unknown roles"),
        ({"users": {"u": {"game_ids": ["x"]}}}, "integer ids"),
        ({"roles": {"r": {"deny_columns": ["uid"]}}}, "table pattern"),
        ({"credentials": [{"principal": "p", "as_user": "ghost"}]}, "unknown user"),
        (["not", "a", "mapping"], "must be a mapping"),
    ],
)
def test_malformed_permissions_fail_with_a_named_message(data: Any, message: str) -> None:
    with pytest.raises(PermissionConfigError, match=message):
        PermissionModel.from_mapping(data)


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    assert isinstance(open_permission_store(None), YamlPermissionStore)
    assert open_permission_store(None).path == SAMPLE_PERMISSIONS  # type: ignore[attr-defined]
    with pytest.raises(PermissionConfigError, match="not found"):
        open_permission_store(str(tmp_path / "missing.yaml"))
    store = open_permission_store("postgresql://nobody@127.0.0.1:1/none")
    assert isinstance(store, PostgresPermissionStore)


@pytest.mark.postgres
def test_postgres_store_resolves_like_the_yaml_store(
    pg_scratch: str, model_file: Path, game_bases: dict[int, int]
) -> None:
    yaml_sample = YamlPermissionStore(game_bases=game_bases)
    pg = PostgresPermissionStore(pg_scratch, game_bases=game_bases, ttl=0)
    pg.save(load_yaml_model())
    for user in CASES["sample_users"]:
        assert pg.for_user(user) == yaml_sample.for_user(user), user
    with pytest.raises(UnknownUserError):
        pg.for_user("nobody")
    creds = Credentials(user="reader_1001")
    assert pg.for_credentials(creds, "bob") == yaml_sample.for_credentials(creds, "bob")

    yaml_model = YamlPermissionStore(model_file, game_bases=game_bases)
    pg.save(load_yaml_model(model_file))
    for user in ["base_100", "ops_and_analyst", "ops_and_auditor", "own_deny"]:
        assert pg.for_user(user) == yaml_model.for_user(user), user
    with pytest.raises(UnknownUserError, match="retired"):
        pg.for_user("retired")
    url_creds = Credentials(warehouse="postgresql://reader@dw.example:5432/games")
    assert pg.for_credentials(url_creds, "a") == yaml_model.for_credentials(url_creds, "a")


@pytest.mark.postgres
def test_postgres_grants_take_effect_without_restart(pg_scratch: str, model_file: Path) -> None:
    import psycopg

    pg = PostgresPermissionStore(pg_scratch, ttl=0)
    pg.save(load_yaml_model(model_file))
    assert pg.for_user("ops_and_analyst").allowed_game_ids == (1003,)
    with psycopg.connect(pg_scratch, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO dataseer_grants (user_id, kind, value) "
            "VALUES ('ops_and_analyst', 'game', '1004')"
        )
        conn.execute(
            "DELETE FROM dataseer_user_roles WHERE user_id = 'ops_and_analyst' AND role = 'analyst'"
        )
    perms = pg.for_user("ops_and_analyst")
    assert perms.allowed_game_ids == (1003, 1004)
    assert perms.roles == ("ops",)
    assert perms.denied_columns == {"*": ("uid",), "dwd_*": ("region",)}
