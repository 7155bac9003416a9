"""Escape attempts against the sandbox: each contained, with a clear error, server unaffected.

The case table lives in ``tests/fixtures/sandbox_escapes.yaml``; resource
attacks (fork bomb, memory bomb, endless loops) and the environment check
need their own limits and assertions and are written out below.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from dataseer.config import PROJECT_ROOT
from dataseer.data.datalayer import Datalayer
from dataseer.sandbox import SandboxConfig, SandboxPool, detect_mechanism

CASES = yaml.safe_load(
    (Path(__file__).parents[1] / "fixtures" / "sandbox_escapes.yaml").read_text(encoding="utf-8")
)

pytestmark = pytest.mark.skipif(
    not detect_mechanism().isolates_files and os.environ.get("CI") != "true",
    reason="this machine offers no namespaces; escapes are only contained by rlimits",
)


@pytest.fixture(scope="module")
def sentinel() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the server's, which no sandboxed code may reach."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxPool]:
    home = tmp_path_factory.mktemp("escape-home")
    layer = Datalayer(home / "frames")
    layer.put("victim", "df_1_secret", pd.DataFrame({"secret": ["s3cr3t"]}))
    layer.put("attacker", "df_1_mine", pd.DataFrame({"x": [1, 2, 3]}))
    config = SandboxConfig(
        home=home,
        pool_size=1,
        wall_seconds=15,
        cpu_seconds=2,
        memory_mb=1024,
        max_processes=32,
    )
    pool = SandboxPool(config, layer)
    pool.start()
    yield pool
    pool.close()


def _home_file() -> str:
    home = Path.home()
    for entry in sorted(home.iterdir()):
        if entry.is_file() and not entry.is_symlink():
            return str(entry)
    return str(home / ".bashrc")


def _fill(code: str, pool: SandboxPool) -> str:
    values = {
        "project": str(PROJECT_ROOT),
        "home_file": _home_file(),
        "other_frame": str(pool.datalayer.path("victim", "df_1_secret")),
        "frames_root": str(pool.datalayer.root),
        "server_pid": str(os.getpid()),
    }
    return code.format(**values)


def _still_fine(pool: SandboxPool, sentinel: subprocess.Popen[bytes]) -> None:
    """The server, its other processes and the sandbox itself all survive."""
    assert sentinel.poll() is None
    after = pool.run("attacker", "int(df_1_mine.x.sum()) + 1")
    assert after.ok, after.error
    assert after.value == "7"


def test_mechanism_is_the_strongest_available() -> None:
    mechanism = detect_mechanism()
    assert mechanism.namespaces == ("user", "mount", "pid", "net", "ipc", "uts")
    assert mechanism.seccomp
    assert mechanism.name == "namespaces+seccomp+rlimits"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_escape_is_contained(
    case: dict[str, Any], pool: SandboxPool, sentinel: subprocess.Popen[bytes]
) -> None:
    result = pool.run("attacker", _fill(case["code"], pool))
    assert not result.ok, f"escape {case['id']} succeeded: {result.value!r} {result.stdout!r}"
    assert result.error and re.search(case["error"], result.error), result.error
    assert "s3cr3t" not in (result.error + result.stdout + (result.value or ""))
    _still_fine(pool, sentinel)


def test_only_its_own_folder_and_the_interpreter_are_visible(pool: SandboxPool) -> None:
    result = pool.run(
        "attacker",
        "import os\n"
        "top = sorted(os.listdir('/'))\n"
        "open('/sandbox/mine.txt', 'w').write('ok')\n"
        "open('/tmp/dataseer-escape-scratch.txt', 'w').write('ok')\n"
        "(top, os.getcwd(), os.listdir('/dev'), open('/proc/net/dev').read().count(':'),"
        " os.listdir('/etc'))",
    )
    assert result.ok, result.error
    top, cwd, devices, interfaces, etc = eval(result.value or "")  # our own repr
    assert etc == ["ld.so.cache"]
    assert cwd == "/sandbox"
    assert sorted(devices) == ["null", "random", "urandom", "zero"]
    assert interfaces == 1  # only the loopback of a fresh network namespace
    venv_top = Path(sys.prefix).resolve().parts[1]
    assert "home" not in top or venv_top == "home"
    assert venv_top in top  # the top folder of the venv holds only its mount point
    assert not Path("/tmp/dataseer-escape-scratch.txt").exists()  # the host's /tmp


def test_environment_is_scrubbed(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value")
    monkeypatch.setenv("DATASEER_API_KEY", "ds-secret-value")
    fresh = SandboxPool(SandboxConfig(home=tmp_path, pool_size=0), Datalayer(tmp_path / "f"))
    try:
        result = fresh.run(
            "t",
            "import os\n"
            "env = dict(os.environ)\n"
            "init = open('/proc/1/environ', 'rb').read().decode()\n"
            "(sorted(env), 'secret' in repr(env) + init, 'DATASEER' in repr(env) + init)",
        )
    finally:
        fresh.close()
    assert result.ok, result.error
    assert result.value == (
        "(['HOME', 'LANG', 'MPLBACKEND', 'MPLCONFIGDIR', 'TMPDIR'], False, False)"
    )


def test_fork_bomb_is_contained(pool: SandboxPool, sentinel: subprocess.Popen[bytes]) -> None:
    result = pool.run("attacker", "import os\nwhile True:\n    os.fork()")
    assert not result.ok
    assert result.error and re.search(
        r"BlockingIOError: \[Errno 11\] Resource temporarily unavailable|wall time", result.error
    ), result.error
    _still_fine(pool, sentinel)


def test_memory_bomb_is_contained(pool: SandboxPool, sentinel: subprocess.Popen[bytes]) -> None:
    result = pool.run("attacker", "blob = bytearray(8 * 1024 ** 3)")
    assert not result.ok
    assert result.error and "MemoryError" in result.error and "memory limit" in result.error
    result = pool.run(
        "attacker", "chunks = []\nwhile True:\n    chunks.append(np.empty(50 * 1024 ** 2, 'uint8'))"
    )
    assert not result.ok
    assert result.error and re.search(r"MemoryError|process died", result.error), result.error
    _still_fine(pool, sentinel)


def test_infinite_loop_hits_the_cpu_limit(
    pool: SandboxPool, sentinel: subprocess.Popen[bytes]
) -> None:
    assert pool.run("attacker", "1").ok  # the worker is warm: only the loop is timed
    result = pool.run("attacker", "n = 0\nwhile True:\n    n += 1")
    assert not result.ok
    assert result.error and "CpuLimitExceeded" in result.error, result.error
    assert result.elapsed < pool.config.wall_seconds
    _still_fine(pool, sentinel)


def test_sleeping_loop_hits_the_wall_time(
    pool: SandboxPool, sentinel: subprocess.Popen[bytes]
) -> None:
    result = pool.run("attacker", "import time\nwhile True:\n    time.sleep(1)")
    assert not result.ok
    assert result.error and "wall time limit of 15s exceeded" in result.error
    assert pool.config.wall_seconds <= result.elapsed < pool.config.wall_seconds + 5
    _still_fine(pool, sentinel)


def test_background_process_dies_with_the_worker(
    pool: SandboxPool, sentinel: subprocess.Popen[bytes]
) -> None:
    result = pool.run(
        "attacker",
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    time.sleep(600)\n"
        "    os._exit(0)\n"
        "import os; os._exit(5)",
    )
    assert not result.ok and result.error and "process died (exit 5)" in result.error
    _still_fine(pool, sentinel)
