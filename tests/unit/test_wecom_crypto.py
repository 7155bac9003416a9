"""WeCom callback crypto checked against ``wechatpy`` (an independent implementation).

``wechatpy.enterprise.crypto`` implements the published scheme separately
(its own signer, PKCS#7 encoder and layout code), so agreement in both
directions — it encrypts, we decrypt; we encrypt, it decrypts — tests the
protocol, not our own round trip. wechatpy is a test-only dependency.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from wechatpy.crypto import _get_signature
from wechatpy.enterprise.crypto import PrpCrypto as RefPrp
from wechatpy.enterprise.crypto import WeChatCrypto as RefCrypto
from wechatpy.enterprise.exceptions import InvalidCorpIdException
from wechatpy.exceptions import InvalidSignatureException

from dataseer.server.wecom.crypto import (
    WeComCrypto,
    WeComCryptoError,
    pkcs7_pad,
    pkcs7_unpad,
    signature,
)

CASES = yaml.safe_load(
    (Path(__file__).parents[1] / "fixtures" / "wecom_crypto.yaml").read_text("utf-8")
)
KEYS: list[dict[str, str]] = CASES["keys"]
MESSAGES: list[str] = CASES["messages"]


def ours(key: dict[str, str]) -> WeComCrypto:
    return WeComCrypto(key["token"], key["aes_key"], key["receive_id"])


def ref_prp(key: dict[str, str]) -> Any:
    return RefPrp(RefCrypto(key["token"], key["aes_key"], key["receive_id"]).key)


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k["token"])
@pytest.mark.parametrize("message", MESSAGES)
def test_wechatpy_ciphertext_decrypts_with_ours(key: dict[str, str], message: str) -> None:
    encrypt = ref_prp(key).encrypt(message, key["receive_id"]).decode()
    assert ours(key).decrypt(encrypt) == message


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k["token"])
@pytest.mark.parametrize("message", MESSAGES)
def test_our_ciphertext_decrypts_with_wechatpy(key: dict[str, str], message: str) -> None:
    encrypt = ours(key).encrypt(message)
    assert ref_prp(key).decrypt(encrypt, key["receive_id"]) == message


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k["token"])
def test_same_random_prefix_gives_the_same_ciphertext_as_wechatpy(key: dict[str, str]) -> None:
    prefix = "0123456789ABCDEF"
    prp = ref_prp(key)
    prp.get_random_string = lambda: prefix
    expected = prp.encrypt(MESSAGES[1], key["receive_id"]).decode()
    assert ours(key).encrypt(MESSAGES[1], random=prefix.encode()) == expected


@settings(max_examples=60, deadline=None)
@given(message=st.text(max_size=300), nonce=st.text("abcdef0123456789", min_size=1, max_size=16))
def test_signature_and_round_trip_agree_on_arbitrary_text(message: str, nonce: str) -> None:
    key = KEYS[0]
    crypto = ours(key)
    encrypt = crypto.encrypt(message)
    assert crypto.sign("1700000000", nonce, encrypt) == _get_signature(
        key["token"], "1700000000", nonce, encrypt
    )
    assert ref_prp(key).decrypt(encrypt, key["receive_id"]) == message


def test_wechatpy_url_verification_echo_opens_with_ours() -> None:
    key = KEYS[0]
    echo = ref_prp(key).encrypt("echo-4242", key["receive_id"]).decode()
    sig = _get_signature(key["token"], "1700000000", "n1", echo)
    ref = RefCrypto(key["token"], key["aes_key"], key["receive_id"])
    assert ref.check_signature(sig, "1700000000", "n1", echo) == "echo-4242"
    assert ours(key).open(sig, "1700000000", "n1", echo) == "echo-4242"


def test_our_sealed_reply_verifies_with_wechatpy() -> None:
    key = KEYS[0]
    reply = json.dumps({"msgtype": "markdown", "markdown": {"content": "**42**"}})
    sealed = ours(key).seal(reply, "1700000001", "n2")
    ref = RefCrypto(key["token"], key["aes_key"], key["receive_id"])
    xml = f"<xml><Encrypt><![CDATA[{sealed['encrypt']}]]></Encrypt></xml>"
    assert ref.decrypt_message(xml, sealed["msgsignature"], "1700000001", "n2") == reply


def test_forged_signature_fails_in_both() -> None:
    key = KEYS[0]
    encrypt = ours(key).encrypt("x")
    forged = signature("not-the-token", "1700000000", "n", encrypt)
    with pytest.raises(WeComCryptoError) as caught:
        ours(key).open(forged, "1700000000", "n", encrypt)
    assert caught.value.reason == "signature"
    ref = RefCrypto(key["token"], key["aes_key"], key["receive_id"])
    with pytest.raises(InvalidSignatureException):
        ref.check_signature(forged, "1700000000", "n", encrypt)


def test_wrong_receive_id_fails_in_both() -> None:
    key = KEYS[0]
    other = ref_prp(key).encrypt("for someone else", "wwOTHERCORP").decode()
    with pytest.raises(WeComCryptoError) as caught:
        ours(key).decrypt(other)
    assert caught.value.reason == "receive_id"
    with pytest.raises(InvalidCorpIdException):
        ref_prp(key).decrypt(other, key["receive_id"])


@pytest.mark.parametrize("size", [0, 1, 31, 32, 33, 64])
def test_padding_fills_to_32_byte_blocks(size: int) -> None:
    padded = pkcs7_pad(b"a" * size)
    assert len(padded) % 32 == 0 and len(padded) > size
    assert pkcs7_unpad(padded) == b"a" * size


@pytest.mark.parametrize(
    "data", [b"", b"a" * 31, b"a" * 31 + b"\x00", b"a" * 30 + b"\x03\x02"], ids=repr
)
def test_malformed_padding_is_refused(data: bytes) -> None:
    with pytest.raises(WeComCryptoError):
        pkcs7_unpad(data)


@pytest.mark.parametrize("bad", ["not base64!!", "QUJD", ""], ids=["junk", "short", "empty"])
def test_garbage_ciphertext_is_refused(bad: str) -> None:
    with pytest.raises(WeComCryptoError):
        ours(KEYS[0]).decrypt(bad)


@pytest.mark.parametrize("aes_key", ["short", "!" * 43])
def test_bad_key_is_refused_early(aes_key: str) -> None:
    with pytest.raises(ValueError, match="EncodingAESKey"):
        WeComCrypto("t", aes_key, "")
