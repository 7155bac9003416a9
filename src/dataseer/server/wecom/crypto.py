"""WeCom (企业微信) callback message crypto: signature, AES-256-CBC, receive-id.

The published scheme ("加解密方案说明"), which the intelligent bot (智能机器人)
uses for its JSON callbacks and the classic app callbacks use for XML:

* ``msg_signature = sha1(''.join(sorted([token, timestamp, nonce, encrypt])))``;
* the AES key is ``base64decode(EncodingAESKey + "=")`` (43 characters → 32
  bytes); the IV is the key's first 16 bytes; AES-256-CBC;
* plaintext = 16 random bytes + 4-byte big-endian message length + message +
  receive-id, padded PKCS#7 to a multiple of **32** bytes (not AES's 16);
* the receive-id is the corp id for app callbacks and the bot id (or the
  empty string, for internal intelligent bots) for bot callbacks; a message
  whose receive-id differs from ours was encrypted for someone else.

Every failure raises :class:`WeComCryptoError` with a ``reason`` the route
logs; the caller turns it into a 4xx without running anything.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import struct
from dataclasses import dataclass, field
from typing import Literal

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from dataseer.errors import DataseerError

__all__ = ["BLOCK", "WeComCrypto", "WeComCryptoError", "pkcs7_pad", "pkcs7_unpad", "signature"]

BLOCK = 32
"""WeCom pads to 32-byte blocks."""

Reason = Literal["signature", "receive_id", "decrypt", "padding", "key"]


class WeComCryptoError(DataseerError):
    """A callback that does not verify; ``reason`` says which check failed."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason


def signature(token: str, timestamp: str, nonce: str, encrypt: str) -> str:
    """WeCom's ``msg_signature``: SHA1 over the four values sorted and joined."""
    joined = "".join(sorted([token, timestamp, nonce, encrypt]))
    return hashlib.sha1(joined.encode("utf-8")).hexdigest()


def pkcs7_pad(data: bytes, block: int = BLOCK) -> bytes:
    """Pad to a multiple of ``block`` (a full block when already aligned)."""
    count = block - len(data) % block
    return data + bytes([count]) * count


def pkcs7_unpad(data: bytes, block: int = BLOCK) -> bytes:
    """Strip PKCS#7 padding, refusing malformed padding rather than guessing."""
    if not data or len(data) % block:
        raise WeComCryptoError("padding", "ciphertext is not a whole number of blocks")
    count = data[-1]
    if not 1 <= count <= block or data[-count:] != bytes([count]) * count:
        raise WeComCryptoError("padding", "bad PKCS#7 padding")
    return data[:-count]


@dataclass(frozen=True)
class WeComCrypto:
    """One bot's (or app's) token, EncodingAESKey and receive-id.

    Args:
        token: the callback Token set in the admin console.
        encoding_aes_key: the 43-character EncodingAESKey.
        receive_id: the corp id (apps) or bot id / '' (intelligent bots).
    """

    token: str
    encoding_aes_key: str
    receive_id: str = ""
    key: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.token:
            msg = "WeCom token must not be empty"
            raise ValueError(msg)
        if len(self.encoding_aes_key) != 43:
            msg = f"EncodingAESKey must have 43 characters, got {len(self.encoding_aes_key)}"
            raise ValueError(msg)
        try:
            key = base64.b64decode(self.encoding_aes_key + "=", validate=True)
        except binascii.Error as exc:
            msg = f"EncodingAESKey is not base64: {exc}"
            raise ValueError(msg) from exc
        object.__setattr__(self, "key", key)

    def _cipher(self) -> Cipher[modes.CBC]:
        return Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16]))

    def sign(self, timestamp: str, nonce: str, encrypt: str) -> str:
        """The signature of ``encrypt`` under our token."""
        return signature(self.token, timestamp, nonce, encrypt)

    def verify(self, msg_signature: str, timestamp: str, nonce: str, encrypt: str) -> None:
        """Raise unless ``msg_signature`` signs ``encrypt`` (constant-time compare)."""
        expected = self.sign(timestamp, nonce, encrypt)
        if not hmac.compare_digest(expected, msg_signature.lower()):
            raise WeComCryptoError("signature", "msg_signature does not match")

    def encrypt(self, plaintext: str, *, random: bytes | None = None) -> str:
        """Encrypt ``plaintext`` for our receive-id; base64 text as WeCom sends it."""
        body = plaintext.encode("utf-8")
        prefix = random if random is not None else os.urandom(16)
        if len(prefix) != 16:
            msg = "the random prefix must be 16 bytes"
            raise ValueError(msg)
        raw = prefix + struct.pack(">I", len(body)) + body + self.receive_id.encode("utf-8")
        encryptor = self._cipher().encryptor()
        sealed = encryptor.update(pkcs7_pad(raw)) + encryptor.finalize()
        return base64.b64encode(sealed).decode("ascii")

    def decrypt(self, encrypt: str) -> str:
        """Decrypt a base64 ciphertext and check its receive-id."""
        try:
            sealed = base64.b64decode(encrypt, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise WeComCryptoError("decrypt", "ciphertext is not base64") from exc
        if not sealed or len(sealed) % 16:
            raise WeComCryptoError("decrypt", "ciphertext is not a whole number of AES blocks")
        decryptor = self._cipher().decryptor()
        raw = pkcs7_unpad(decryptor.update(sealed) + decryptor.finalize())
        if len(raw) < 20:
            raise WeComCryptoError("decrypt", "plaintext too short")
        (length,) = struct.unpack(">I", raw[16:20])
        if 20 + length > len(raw):
            raise WeComCryptoError("decrypt", "message length exceeds the plaintext")
        body, receive_id = raw[20 : 20 + length], raw[20 + length :]
        if not hmac.compare_digest(receive_id, self.receive_id.encode("utf-8")):
            raise WeComCryptoError("receive_id", "message was encrypted for another receive-id")
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WeComCryptoError("decrypt", "message is not UTF-8") from exc

    def open(self, msg_signature: str, timestamp: str, nonce: str, encrypt: str) -> str:
        """Verify then decrypt: the whole check of one callback."""
        self.verify(msg_signature, timestamp, nonce, encrypt)
        return self.decrypt(encrypt)

    def seal(self, plaintext: str, timestamp: str, nonce: str) -> dict[str, str]:
        """Encrypt and sign a reply, as the intelligent bot's JSON envelope."""
        encrypt = self.encrypt(plaintext)
        return {
            "encrypt": encrypt,
            "msgsignature": self.sign(timestamp, nonce, encrypt),
            "timestamp": timestamp,
            "nonce": nonce,
        }
