"""Sandbox workers and the pool that keeps some warm: the server's side of ``run_python``.

A worker takes a second or so to start (numpy, pandas and matplotlib
imports), so the pool keeps ``pool_size`` idle workers warmed in the
background. On its first call a thread takes an idle worker and keeps it for
life: the worker never serves another thread, so nothing a snippet leaves in
the process can reach another conversation. Past ``max_workers`` bound
workers, the least recently used one is retired.

A worker that crashes, breaks the protocol or runs past its wall time is
killed (its whole pid namespace with it) and the call returns the error; the
server process is never touched.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataseer.config import Settings
from dataseer.data.datalayer import Datalayer, DatalayerError, FrameInfo, thread_key
from dataseer.errors import DataseerError
from dataseer.sandbox import protocol
from dataseer.sandbox.mechanism import UNSHARE_FLAGS, Mechanism, detect_mechanism

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_FIGURE_BYTES = 10_000_000
READY_TIMEOUT = 90.0
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/sandbox",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "ARROW_DEFAULT_MEMORY_POOL": "system",
}
"""The worker's whole environment: nothing of the server's (no DATASEER_*, no keys)."""


class SandboxError(DataseerError):
    """A worker could not be started (the sandbox is unusable on this machine)."""


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and sizes of the sandbox, from ``Settings``."""

    home: Path
    pool_size: int = 2
    max_workers: int = 8
    wall_seconds: float = 30.0
    cpu_seconds: int = 20
    memory_mb: int = 4096
    max_processes: int = 64
    output_chars: int = 8000
    file_mb: int = 512
    max_calls: int = 500
    mechanism: str = "auto"

    def __post_init__(self) -> None:
        if self.pool_size < 0 or self.max_workers < 1 or self.wall_seconds <= 0:
            msg = (
                f"invalid sandbox sizes: pool_size={self.pool_size}, "
                f"max_workers={self.max_workers}, wall_seconds={self.wall_seconds}"
            )
            raise ValueError(msg)
        if self.cpu_seconds < 1 or self.memory_mb < 256 or self.max_processes < 4:
            msg = (
                f"sandbox limits too small: cpu_seconds={self.cpu_seconds} (>=1), "
                f"memory_mb={self.memory_mb} (>=256), max_processes={self.max_processes} (>=4)"
            )
            raise ValueError(msg)

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxConfig:
        """The sandbox configuration of these settings."""
        return cls(
            home=settings.home,
            pool_size=settings.sandbox_pool_size,
            max_workers=settings.sandbox_max_workers,
            wall_seconds=settings.sandbox_wall_seconds,
            cpu_seconds=settings.sandbox_cpu_seconds,
            memory_mb=settings.sandbox_memory_mb,
            max_processes=settings.sandbox_max_processes,
            output_chars=settings.sandbox_output_chars,
            file_mb=max(16, int(settings.frame_max_mb) + 16),
            mechanism=settings.sandbox_mechanism,
        )


@dataclass(frozen=True)
class Figure:
    """A chart drawn by a snippet: a PNG file kept with the thread, and its bytes."""

    path: Path
    png_base64: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form for the tool artifact and the stream."""
        return {"path": str(self.path), "format": "png", "base64": self.png_base64}


@dataclass
class PythonResult:
    """What one ``run_python`` call produced."""

    ok: bool
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: str | None = None
    frames: list[FrameInfo] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    mechanism: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form for the tool artifact."""
        return {
            "ok": self.ok,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "value": self.value,
            "error": self.error,
            "frames": [f.to_dict() for f in self.frames],
            "figures": [f.to_dict() for f in self.figures],
            "warnings": self.warnings,
            "elapsed": self.elapsed,
            "mechanism": self.mechanism,
        }


class WorkerFailure(Exception):  # noqa: N818  # a state of the worker, not a bug
    """The worker died, broke the protocol or ran out of wall time; it is gone."""


def _signal_name(code: int) -> str:
    with contextlib.suppress(ValueError):
        return signal.Signals(-code).name
    return f"exit {code}"


class WorkerProcess:
    """One sandboxed Python process and its channel."""

    def __init__(self, config: SandboxConfig, mechanism: Mechanism) -> None:
        self.config = config
        self.mechanism = mechanism
        self.id = uuid.uuid4().hex[:12]
        self.dir = config.home / "sandbox" / "workers" / f"w-{self.id}"
        self.work = self.dir / "work"
        self.thread: str | None = None
        self.calls = 0
        self.last_used = time.monotonic()
        self.started = time.perf_counter()
        self.ready_seconds = 0.0
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None

    @property
    def out_dir(self) -> Path:
        """Where the worker leaves frames and figures of the last call (host path)."""
        return self.work / "out"

    def spawn(self) -> None:
        """Start the process; ``wait_ready`` completes the start."""
        (self.dir / "root").mkdir(parents=True, exist_ok=True)
        self.work.mkdir(exist_ok=True)
        mpl_cache = self.config.home / "sandbox" / "mpl-cache"
        mpl_cache.mkdir(parents=True, exist_ok=True)
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        src = str(Path(__file__).resolve().parents[2])
        read_only = {
            "/usr",
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            sys.base_exec_prefix,
            str(Path(sys.executable).resolve().parent.parent),
            "/etc/ld.so.cache",
        }
        spec = {
            "fd": child_sock.fileno(),
            "namespaces": bool(self.mechanism.namespaces),
            "seccomp": self.mechanism.seccomp,
            "root": str(self.dir / "root"),
            "work": str(self.work),
            "read_only": sorted(read_only),
            "mpl_cache": str(mpl_cache),
            "memory_mb": self.config.memory_mb,
            "cpu_seconds": self.config.cpu_seconds,
            "lifetime_cpu_seconds": self.config.cpu_seconds * 20,
            "max_processes": self.config.max_processes,
            "file_mb": self.config.file_mb,
            "output_chars": self.config.output_chars,
        }
        boot = (
            f"import sys; sys.path.insert(0, {src!r}); "
            "from dataseer.sandbox.worker import main; main()"
        )
        argv = [sys.executable, "-I", "-c", boot, json.dumps(spec)]
        if self.mechanism.namespaces and self.mechanism.unshare:
            argv = [self.mechanism.unshare, *UNSHARE_FLAGS, "--", *argv]
        with open(self.dir / "stderr.log", "wb") as log:
            self.proc = subprocess.Popen(  # fixed argv, no shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=[child_sock.fileno()],
                env=dict(_ENV),
                cwd=self.work,
                start_new_session=True,
            )
        child_sock.close()
        self.sock = parent_sock

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Block until the worker has isolated itself and preloaded the libraries.

        Raises:
            SandboxError: the worker failed to start; its log says why.
        """
        assert self.sock is not None
        self.sock.settimeout(timeout)
        try:
            message, _ = protocol.recv(self.sock)
        except (OSError, protocol.ProtocolError) as exc:
            log = self._log_tail()
            self.kill()
            msg = f"sandbox worker failed to start: {type(exc).__name__}: {exc}\n{log}"
            raise SandboxError(msg) from exc
        if not message.get("ready"):
            self.kill()
            msg = f"sandbox worker failed to isolate itself: {message.get('error')}"
            raise SandboxError(msg)
        self.ready_seconds = time.perf_counter() - self.started

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.dir / "stderr.log").read_text(errors="replace")[-2000:]
        return ""

    def call(self, code: str, frames: list[tuple[str, int]], wall_seconds: float) -> dict[str, Any]:
        """Run one snippet; raises ``WorkerFailure`` (after killing it) if the worker fails."""
        assert self.sock is not None
        self.calls += 1
        self.last_used = time.monotonic()
        request = {"op": "run", "code": code, "frames": [name for name, _ in frames]}
        try:
            self.sock.settimeout(wall_seconds)
            protocol.send(self.sock, request, [fd for _, fd in frames])
            reply, _ = protocol.recv(self.sock)
        except TimeoutError as exc:
            self.kill()
            msg = (
                f"wall time limit of {wall_seconds:g}s exceeded; the run was stopped / "
                "超出运行时间限制，已终止"
            )
            raise WorkerFailure(msg) from exc
        except (OSError, protocol.ProtocolError) as exc:
            code_ = self.kill()
            msg = (
                f"the sandbox process died ({_signal_name(code_)}), e.g. a memory, CPU or "
                "process limit or a signal; a fresh one replaces it / 沙箱进程异常退出，已重启"
            )
            raise WorkerFailure(msg) from exc
        return reply

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> int:
        """Kill the worker and everything it started; returns the exit code."""
        code = 0
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        shutil.rmtree(self.dir, ignore_errors=True)
        return code


class SandboxPool:
    """Warm workers, bound one per thread; runs snippets over the thread's frames."""

    def __init__(
        self, config: SandboxConfig, datalayer: Datalayer, mechanism: Mechanism | None = None
    ) -> None:
        self.config = config
        self.datalayer = datalayer
        self.mechanism = mechanism or detect_mechanism(config.mechanism)
        self.artifacts = config.home / "artifacts"
        self._idle: list[WorkerProcess] = []
        self._bound: OrderedDict[str, WorkerProcess] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._warming = 0
        self._closed = False
        self._last_expiry = 0.0
        self.cold_starts: list[float] = []

    def start(self) -> None:
        """Warm ``pool_size`` workers in the background."""
        self._refill()

    def _refill(self) -> None:
        with self._lock:
            missing = self.config.pool_size - len(self._idle) - self._warming
            if self._closed or missing <= 0:
                return
            self._warming += missing
        for _ in range(missing):
            threading.Thread(target=self._warm_one, daemon=True, name="sandbox-warm").start()

    def _warm_one(self) -> None:
        worker: WorkerProcess | None = None
        try:
            worker = self._spawn()
        except SandboxError:
            worker = None
        finally:
            with self._lock:
                self._warming -= 1
                if worker is not None and not self._closed:
                    self._idle.append(worker)
                    worker = None
        if worker is not None:
            worker.kill()

    def _spawn(self) -> WorkerProcess:
        worker = WorkerProcess(self.config, self.mechanism)
        worker.spawn()
        worker.wait_ready()
        self.cold_starts.append(worker.ready_seconds)
        return worker

    def _thread_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def _acquire(self, key: str) -> WorkerProcess:
        """The thread's worker: its bound one, else a warm idle one, else a new one."""
        retired: list[WorkerProcess] = []
        with self._lock:
            worker = self._bound.get(key)
            if worker is not None and not worker.alive():
                del self._bound[key]
                retired.append(worker)
                worker = None
            if worker is None:
                while self._idle and worker is None:
                    candidate = self._idle.pop(0)
                    if candidate.alive():
                        worker = candidate
                    else:
                        retired.append(candidate)
            if worker is not None:
                self._bind(key, worker, retired)
        for old in retired:
            old.kill()
        if worker is None:
            worker = self._spawn()
            with self._lock:
                self._bind(key, worker, retired)
            for old in retired:
                old.kill()
        self._refill()
        return worker

    def _bind(self, key: str, worker: WorkerProcess, retired: list[WorkerProcess]) -> None:
        worker.thread = key
        self._bound[key] = worker
        self._bound.move_to_end(key)
        while len(self._bound) > self.config.max_workers:
            _key, old = self._bound.popitem(last=False)
            retired.append(old)

    def _discard(self, key: str, worker: WorkerProcess) -> None:
        with self._lock:
            if self._bound.get(key) is worker:
                del self._bound[key]
        worker.kill()

    def run(self, thread: str, code: str) -> PythonResult:
        """Run a snippet for a thread with its frames; never raises for user errors.

        Raises:
            SandboxError: no worker can be started on this machine.
        """
        started = time.perf_counter()
        key = thread_key(thread)
        self._maybe_expire()
        with self._thread_lock(key):
            worker = self._acquire(key)
            names = sorted(set(_IDENT.findall(code)))[: protocol.MAX_FDS]
            fds = self.datalayer.open_fds(thread, names)
            try:
                reply = worker.call(code, fds, self.config.wall_seconds)
            except WorkerFailure as exc:
                self._discard(key, worker)
                self._refill()
                return PythonResult(
                    ok=False,
                    error=str(exc),
                    elapsed=round(time.perf_counter() - started, 4),
                    mechanism=self.mechanism.name,
                )
            finally:
                for _, fd in fds:
                    os.close(fd)
            result = self._collect(thread, worker, reply)
            if worker.calls >= self.config.max_calls or float(reply.get("cpu") or 0) > (
                self.config.cpu_seconds * 10
            ):
                self._discard(key, worker)
        result.elapsed = round(time.perf_counter() - started, 4)
        return result

    def _collect(self, thread: str, worker: WorkerProcess, reply: dict[str, Any]) -> PythonResult:
        """Turn a reply into a result: adopt frames, read figures, keep warnings."""
        limit = self.config.output_chars + 200
        result = PythonResult(
            ok=bool(reply.get("ok")),
            stdout=str(reply.get("stdout") or "")[:limit],
            stderr=str(reply.get("stderr") or "")[:limit],
            value=None if reply.get("value") is None else str(reply["value"])[:limit],
            error=None if reply.get("error") is None else str(reply["error"])[: limit * 2],
            warnings=[str(w)[:500] for w in list(reply.get("warnings") or [])[:50]],
            mechanism=self.mechanism.name,
        )
        for name in list(reply.get("frames") or [])[:50]:
            try:
                info = self.datalayer.adopt_file(thread, str(name), worker.out_dir, f"{name}.arrow")
            except (DatalayerError, OSError) as exc:
                result.warnings.append(f"frame {name} not kept: {exc}")
                continue
            result.frames.append(info)
        for filename in list(reply.get("figures") or [])[:20]:
            figure = self._figure(thread, worker.out_dir, str(filename))
            if figure is None:
                result.warnings.append(f"figure {filename} was not a PNG and was dropped")
            else:
                result.figures.append(figure)
        return result

    def _figure(self, thread: str, out_dir: Path, filename: str) -> Figure | None:
        """Copy one PNG out of the worker's folder, refusing links and non-PNGs."""
        if not re.fullmatch(r"figure_\d+_\d+\.png", filename):
            return None
        dir_fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fd = os.open(filename, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        except OSError:
            return None
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_FIGURE_BYTES + 1)
        if len(data) > MAX_FIGURE_BYTES or not data.startswith(PNG_MAGIC):
            return None
        folder = self.artifacts / thread_key(thread)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}.png"
        path.write_bytes(data)
        return Figure(path, base64.b64encode(data).decode())

    def _maybe_expire(self) -> None:
        now = time.monotonic()
        if now - self._last_expiry > 60:
            self._last_expiry = now
            self.datalayer.expire()

    def stats(self) -> dict[str, int]:
        """Idle, warming and bound worker counts (for tests and ``doctor``)."""
        with self._lock:
            return {
                "idle": len(self._idle),
                "warming": self._warming,
                "bound": len(self._bound),
            }

    def close(self) -> None:
        """Kill every worker; the pool cannot be used afterwards."""
        with self._lock:
            self._closed = True
            workers = [*self._idle, *self._bound.values()]
            self._idle.clear()
            self._bound.clear()
        for worker in workers:
            worker.kill()


_pools: dict[tuple[str, SandboxConfig], SandboxPool] = {}
_pools_lock = threading.Lock()


def get_pool(settings: Settings) -> SandboxPool:
    """The process-wide pool for these settings, started (warming) on first use."""
    config = SandboxConfig.from_settings(settings)
    key = (str(settings.home), config)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = SandboxPool(config, Datalayer.from_settings(settings))
            pool.start()
            _pools[key] = pool
        return pool


@atexit.register
def close_pools() -> None:
    """Kill every pool's workers (process exit, tests)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
