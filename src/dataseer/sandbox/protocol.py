"""The wire between the server and a sandbox worker: framed JSON plus file descriptors.

A ``socketpair`` (inherited by the worker, so the worker never needs to
create a socket) carries one request and one reply per call. Frames travel
as open, read-only file descriptors attached to the request
(``SCM_RIGHTS``): the worker memory-maps them, so a frame is never copied
through the socket, and the worker sees exactly the frames it was handed and
nothing else of the datalayer.

The parent treats every reply as untrusted input: sizes are bounded and a
malformed reply is a crashed worker.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

HEADER = struct.Struct("!Q")
MAX_MESSAGE = 16_000_000
"""Replies carry truncated text and file names, never data: anything larger is an attack."""
MAX_FDS = 250
"""Below the kernel's SCM_MAX_FD (253) per message."""


class ProtocolError(ConnectionError):
    """The other side closed the channel or sent something malformed."""


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send one framed JSON message, with file descriptors attached to its header."""
    body = json.dumps(message, ensure_ascii=False, default=str).encode()
    header = HEADER.pack(len(body))
    if fds:
        if len(fds) > MAX_FDS:
            msg = f"at most {MAX_FDS} frames per call, got {len(fds)}"
            raise ProtocolError(msg)
        socket.send_fds(sock, [header], fds)
    else:
        sock.sendall(header)
    sock.sendall(body)


def _recv_exact(sock: socket.socket, size: int, into: bytearray) -> None:
    while len(into) < size:
        chunk = sock.recv(min(size - len(into), 1 << 20))
        if not chunk:
            msg = "the sandbox channel closed"
            raise ProtocolError(msg)
        into += chunk


def recv(
    sock: socket.socket, *, max_fds: int = 0, max_bytes: int = MAX_MESSAGE
) -> tuple[dict[str, Any], list[int]]:
    """Receive one framed message and the descriptors that came with it."""
    fds: list[int] = []
    head = bytearray()
    if max_fds:
        data, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size, max_fds)
        if not data:
            msg = "the sandbox channel closed"
            raise ProtocolError(msg)
        head += data
    _recv_exact(sock, HEADER.size, head)
    (size,) = HEADER.unpack(bytes(head))
    if size > max_bytes:
        msg = f"message of {size} bytes exceeds the limit of {max_bytes}"
        raise ProtocolError(msg)
    body = bytearray()
    _recv_exact(sock, size, body)
    try:
        message = json.loads(body)
    except ValueError as exc:
        msg = "malformed message from the sandbox"
        raise ProtocolError(msg) from exc
    if not isinstance(message, dict):
        msg = "malformed message from the sandbox"
        raise ProtocolError(msg)
    return message, fds
