"""Token verification, dev mode, and the HTTP app's error shape and input limits (no server)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient

from dataseer.config import Settings
from dataseer.server.app import ROUTES, build_app
from dataseer.server.auth import AuthError, principal_from_header, verify_token

SECRET = "unit-test-secret-0123456789abcdef0123"


def settings(**kw: object) -> Settings:
    base = {"auth_secret": SECRET, "auth_issuer": "iss", "auth_audience": "aud"}
    return Settings(**{**base, **kw})  # type: ignore[arg-type]


def token(
    key: object = SECRET, alg: str = "HS256", headers: dict | None = None, **claims: object
) -> str:
    now = int(time.time())
    body = {
        "sub": "u1",
        "iss": "iss",
        "aud": "aud",
        "exp": now + 60,
        "roles": ["analyst"],
        **claims,
    }
    return jwt.encode(
        {k: v for k, v in body.items() if v is not None}, key, algorithm=alg, headers=headers
    )  # type: ignore[arg-type]


def test_a_good_hs256_token_names_the_user_and_roles() -> None:
    p = verify_token(token(roles=["analyst", "admin"]), settings())
    assert (p.user_id, p.roles, p.admin) == ("u1", ("analyst", "admin"), True)


@pytest.mark.parametrize(
    "bad",
    [
        token(key="x" * 40),
        token(exp=int(time.time()) - 3600),
        token(iss="other"),
        token(aud="other"),
        token(sub=None),
        token(exp=None),
        jwt.encode({"sub": "u1", "exp": int(time.time()) + 60}, None, algorithm="none"),
        "not-a-token",
    ],
    ids=["forged", "expired", "issuer", "audience", "no-sub", "no-exp", "alg-none", "garbage"],
)
def test_bad_tokens_are_refused(bad: str) -> None:
    with pytest.raises(AuthError):
        verify_token(bad, settings())


def test_rs256_with_a_jwks_file_and_no_algorithm_confusion(tmp_path: Path) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    s = settings(auth_secret=None, auth_jwks_file=jwks)
    assert verify_token(token(private, "RS256", {"kid": "k1"}), s).user_id == "u1"
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(AuthError):
        verify_token(token(other, "RS256", {"kid": "k1"}), s)
    with pytest.raises(AuthError):  # an HS256 token is refused where only RS256 is configured
        verify_token(token(), s)


def test_dev_mode_is_explicit() -> None:
    with pytest.raises(AuthError):
        principal_from_header(None, settings())
    dev = principal_from_header(None, settings(auth_dev=True, dev_user="analyst_1001"))
    assert (dev.user_id, dev.admin) == ("analyst_1001", True)
    with pytest.raises(AuthError):
        principal_from_header("Basic abc", settings())


@pytest.fixture
def app_client() -> TestClient:
    s = Settings(max_request_bytes=200, max_message_chars=10)
    return TestClient(build_app(list(ROUTES), settings=s))


def test_http_errors_have_one_shape_and_limits_hold(app_client: TestClient) -> None:
    assert app_client.get("/dataseer/health").json()["ok"] is True
    missing = app_client.get("/nope")
    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "not_found", "message": "Not Found"}}
    bad_json = app_client.post(
        "/dataseer/health", content=b"{x", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "bad_request"
    bad_utf8 = app_client.post(
        "/dataseer/health", content=b'"\xff"', headers={"content-type": "application/json"}
    )
    assert bad_utf8.status_code == 400 and "UTF-8" in bad_utf8.json()["error"]["message"]
    big = app_client.post(
        "/dataseer/health", content=b"1" * 500, headers={"content-type": "application/json"}
    )
    assert big.status_code == 413 and big.json()["error"]["code"] == "payload_too_large"
    long_msg = {"input": {"messages": [{"role": "user", "content": "x" * 11}]}}
    too_long = app_client.post("/threads/t1/runs", json=long_msg)
    assert too_long.status_code == 413
