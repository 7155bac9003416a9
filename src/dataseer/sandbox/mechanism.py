"""Which isolation this machine offers, detected once and reported.

Strongest first:

1. ``namespaces+seccomp+rlimits`` — ``unshare`` (util-linux) puts the worker
   in new user, mount, pid, network, IPC and UTS namespaces; the worker then
   switches to a private root holding only the interpreter, its libraries and
   its own working folder, drops every capability and installs a seccomp
   filter (no sockets, mounts, namespaces, tracing), over the rlimits floor.
2. ``rlimits+seccomp`` — no namespaces (user namespaces disabled, no
   ``unshare``): a scrubbed environment, rlimits and the seccomp filter.
   Files readable by the server stay readable: weaker, and reported so.
3. ``rlimits`` — the floor: CPU, memory, processes, file size, open files.

``dataseer doctor`` prints the mechanism in force; every ``run_python``
result names it too.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass

from dataseer.sandbox import _isolate

UNSHARE_FLAGS = (
    "--user",
    "--map-root-user",
    "--mount",
    "--pid",
    "--fork",
    "--net",
    "--ipc",
    "--uts",
    "--kill-child",
)
NAMESPACES = ("user", "mount", "pid", "net", "ipc", "uts")


@dataclass(frozen=True)
class Mechanism:
    """The isolation in force for sandbox workers."""

    name: str
    namespaces: tuple[str, ...]
    seccomp: bool
    unshare: str | None
    note: str = ""

    @property
    def isolates_files(self) -> bool:
        """Whether the worker sees only its own folder (and the interpreter)."""
        return bool(self.namespaces)

    def describe(self) -> str:
        """One line for ``dataseer doctor`` and logs."""
        parts = [self.name]
        if self.namespaces:
            parts.append("namespaces: " + ",".join(self.namespaces) + " + private root")
        parts.append("seccomp: " + ("on" if self.seccomp else "off"))
        parts.append("rlimits: cpu,as,nproc,fsize,nofile")
        if self.note:
            parts.append(self.note)
        return " · ".join(parts)


def _unshare_works(unshare: str) -> bool:
    try:
        done = subprocess.run(  # fixed argv, no shell
            [unshare, *UNSHARE_FLAGS, "--", "true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.lru_cache(maxsize=4)
def detect_mechanism(preference: str = "auto") -> Mechanism:
    """The strongest mechanism available, or the one asked for.

    Args:
        preference: ``auto``, ``namespaces`` (fail if unavailable) or
            ``rlimits`` (skip namespaces, e.g. inside a container that forbids them).

    Raises:
        ValueError: an unknown preference, or ``namespaces`` where they do not work.
    """
    if preference not in {"auto", "namespaces", "rlimits"}:
        msg = f"unknown sandbox mechanism {preference!r}; expected auto, namespaces or rlimits"
        raise ValueError(msg)
    seccomp = _isolate.seccomp_supported()
    unshare = shutil.which("unshare")
    if preference != "rlimits" and unshare and _unshare_works(unshare):
        name = "namespaces+seccomp+rlimits" if seccomp else "namespaces+rlimits"
        return Mechanism(name, NAMESPACES, seccomp, unshare)
    if preference == "namespaces":
        msg = "sandbox namespaces unavailable: `unshare --user ...` fails on this machine"
        raise ValueError(msg)
    note = (
        "no namespaces: files readable by the server are readable by the sandbox"
        if preference == "auto"
        else "namespaces disabled by DATASEER_SANDBOX_MECHANISM=rlimits"
    )
    return Mechanism("rlimits+seccomp" if seccomp else "rlimits", (), seccomp, None, note)
