"""The sandbox worker: one process that runs analysis snippets for one thread.

Started by the pool (``python -I -c "...worker.main()" <config>``) inside the
namespaces ``unshare`` created, it imports numpy, pandas and matplotlib
once (the expensive part of start-up), isolates itself (private root,
no capabilities, rlimits, seccomp), tells the parent it is ready and then
serves requests until the channel closes.

Each call gets fresh globals holding the frames the parent handed over (as
memory-mapped Arrow files), so a call sees the thread's frames and nothing a
previous call left behind in its variables. A worker is bound to one thread
for its whole life, so whatever else lingers in the process (imported
modules, files in ``/sandbox``) never crosses threads.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import keyword
import linecache
import math
import mmap
import os
import re
import resource
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

CODE_NAME = "<code>"
OUT_DIR = "/sandbox/out"
MAX_FRAMES_OUT = 20
MAX_FIGURES = 10
PRELOADED = ("pd", "np", "plt")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class CpuLimitExceeded(Exception):  # noqa: N818  # named for the message the user reads
    """Raised in user code when its CPU-time budget (soft RLIMIT_CPU) is spent."""


class _Bounded(io.TextIOBase):
    """A text sink that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - self.size
        if room > 0:
            self.parts.append(text[:room])
            self.size += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def text(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += f"\n… [{self.dropped} more characters truncated / 输出已截断]"
        return out


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters truncated / 输出已截断]"


def _on_xcpu(signum: int, frame: Any) -> None:
    raise CpuLimitExceeded("CPU time limit of this call exceeded / 超出 CPU 时间限制")


def _preload(mpl_cache: str) -> dict[str, Any]:
    """Import the analysis stack once; the font cache is built in a shared folder."""
    os.environ["MPLCONFIGDIR"] = mpl_cache
    os.environ["MPLBACKEND"] = "Agg"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.font_manager
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.ipc

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    pd.set_option("display.max_rows", 30)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)
    fig = plt.figure()
    fig.savefig(io.BytesIO(), format="png")
    plt.close("all")
    pd.DataFrame({"a": [1]}).groupby("a").sum().to_string()
    return {"pd": pd, "np": np, "plt": plt, "pa": pa, "ipc": pyarrow.ipc}


class Worker:
    """The request loop and the execution of one snippet."""

    def __init__(self, sock: socket.socket, config: dict[str, Any], libs: dict[str, Any]) -> None:
        self.sock = sock
        self.config = config
        self.libs = libs
        self.pid = os.getpid()
        self.output_chars = int(config["output_chars"])
        self.cpu_seconds = int(config["cpu_seconds"])
        self.calls = 0
        self._tables: dict[str, tuple[tuple[int, int, int], Any]] = {}

    def serve(self) -> None:
        """Answer requests until the parent closes the channel."""
        from dataseer.sandbox import protocol

        while True:
            try:
                request, fds = protocol.recv(self.sock, max_fds=protocol.MAX_FDS)
            except protocol.ProtocolError:
                return
            if request.get("op") != "run":
                for fd in fds:
                    os.close(fd)
                continue
            reply = self.run(request, fds)
            if os.getpid() != self.pid:
                os._exit(0)
            protocol.send(self.sock, reply)

    def _table(self, name: str, fd: int) -> Any:
        """The Arrow table of a handed-over frame, memory-mapped (cached per file version)."""
        st = os.fstat(fd)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._tables.get(name)
        if cached and cached[0] == key:
            return cached[1]
        pa, ipc = self.libs["pa"], self.libs["ipc"]
        mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        table = ipc.open_file(pa.BufferReader(pa.py_buffer(mapped))).read_all()
        self._tables[name] = (key, table)
        return table

    def run(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """Run one snippet; every failure becomes a reply, never a dead worker."""
        started = time.perf_counter()
        self.calls += 1
        pd, plt = self.libs["pd"], self.libs["plt"]
        names = [str(n) for n in request.get("frames", [])]
        loaded: dict[str, tuple[Any, Any]] = {}
        stdout, stderr = _Bounded(self.output_chars), _Bounded(self.output_chars)
        reply: dict[str, Any] = {"ok": False, "value": None, "error": None}
        try:
            for name, fd in zip(names, fds, strict=False):
                frame = self._table(name, fd).to_pandas(split_blocks=True)
                loaded[name] = (frame, frame.copy(deep=False))
        except Exception as exc:  # a bad frame is reported, not fatal
            reply["error"] = f"could not load frame: {type(exc).__name__}: {exc}"
        finally:
            for fd in fds:
                os.close(fd)
        self._reset_out()
        plt.close("all")
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        namespace.update({k: self.libs[k] for k in PRELOADED})
        namespace.update({name: pair[0] for name, pair in loaded.items()})
        if reply["error"] is None:
            code = str(request.get("code", ""))
            self._limit_cpu()
            try:
                with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                    value = self._execute(code, namespace)
                reply["ok"] = True
                if value is not None:
                    reply["value"] = _truncate(_render(value, pd), self.output_chars)
            except BaseException as exc:  # user code may raise anything
                if os.getpid() != self.pid:
                    os._exit(1)
                reply["error"] = _user_traceback(exc)
            finally:
                if os.getpid() != self.pid:
                    os._exit(0)
                self._unlimit_cpu()
        warnings: list[str] = []
        reply["frames"] = self._frames_out(namespace, loaded, warnings) if reply["ok"] else []
        reply["figures"] = self._figures_out(warnings)
        reply["stdout"] = stdout.text()
        reply["stderr"] = stderr.text()
        reply["warnings"] = warnings
        reply["elapsed"] = round(time.perf_counter() - started, 4)
        reply["cpu"] = round(_cpu_used(), 3)
        return reply

    def _execute(self, code: str, namespace: dict[str, Any]) -> Any:
        """Exec the snippet; the value of a final expression statement is returned."""
        linecache.cache[CODE_NAME] = (len(code), None, code.splitlines(True), CODE_NAME)
        tree = ast.parse(code, CODE_NAME, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body[-1].value)
            tree.body.pop()
        exec(compile(tree, CODE_NAME, "exec"), namespace)  # the sandbox's purpose
        if last is None:
            return None
        return eval(compile(last, CODE_NAME, "eval"), namespace)  # same

    def _limit_cpu(self) -> None:
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        budget = math.ceil(_cpu_used()) + self.cpu_seconds
        resource.setrlimit(resource.RLIMIT_CPU, (min(budget, hard), hard))

    def _unlimit_cpu(self) -> None:
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))

    def _reset_out(self) -> None:
        os.makedirs(OUT_DIR, exist_ok=True)
        for entry in os.listdir(OUT_DIR):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(OUT_DIR, entry))

    def _frames_out(
        self, namespace: dict[str, Any], loaded: dict[str, tuple[Any, Any]], warnings: list[str]
    ) -> list[str]:
        """Write new or changed DataFrames as Arrow files for the parent to register."""
        pd, pa, ipc = self.libs["pd"], self.libs["pa"], self.libs["ipc"]
        originals = [pair[0] for pair in loaded.values()]
        written: list[str] = []
        for name, obj in list(namespace.items()):
            if not isinstance(obj, pd.DataFrame) or name in PRELOADED or keyword.iskeyword(name):
                continue
            if not _NAME.match(name):
                continue
            if name in loaded:
                first, snapshot = loaded[name]
                if obj is first and _same(obj, snapshot):
                    continue
            elif any(obj is o for o in originals):
                continue
            if len(written) >= MAX_FRAMES_OUT:
                warnings.append(f"more than {MAX_FRAMES_OUT} new frames; {name} not kept")
                continue
            try:
                table = pa.Table.from_pandas(obj)
                path = os.path.join(OUT_DIR, f"{name}.arrow")
                with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table)
            except Exception as exc:  # one unstorable frame is a warning
                warnings.append(f"frame {name} not kept: {type(exc).__name__}: {exc}")
                continue
            written.append(name)
        return written

    def _figures_out(self, warnings: list[str]) -> list[str]:
        plt = self.libs["plt"]
        files: list[str] = []
        for i, num in enumerate(plt.get_fignums()):
            if i >= MAX_FIGURES:
                warnings.append(f"only the first {MAX_FIGURES} figures are returned")
                break
            name = f"figure_{self.calls}_{i + 1}.png"
            try:
                plt.figure(num).savefig(os.path.join(OUT_DIR, name), format="png", dpi=100)
            except Exception as exc:  # a broken figure is a warning
                warnings.append(f"figure {i + 1} not saved: {type(exc).__name__}: {exc}")
                continue
            files.append(name)
        plt.close("all")
        return files


def _same(frame: Any, snapshot: Any) -> bool:
    """Whether a loaded frame is unchanged (copy-on-write keeps the snapshot intact).

    Under copy-on-write an edited column gets a new buffer, so a column still
    backed by the very buffer it was loaded with (the memory map, for
    numeric columns) is unchanged without comparing a single value; other
    columns are compared.
    """
    if list(frame.columns) != list(snapshot.columns) or frame.shape != snapshot.shape:
        return False
    if list(map(str, frame.dtypes)) != list(map(str, snapshot.dtypes)):
        return False
    for i in range(frame.shape[1]):
        left, right = frame.iloc[:, i], snapshot.iloc[:, i]
        if _buffer(left) is not None and _buffer(left) == _buffer(right):
            continue
        if not left.equals(right):
            return False
    return bool(frame.index.equals(snapshot.index))


def _buffer(column: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
    """Where a numpy-backed column's data lives (address, shape, strides), else None."""
    values = column.array
    array = getattr(values, "_ndarray", None)
    if array is None:
        return None
    face = array.__array_interface__
    return (face["data"][0], array.shape, array.strides)


def _render(value: Any, pd: Any) -> str:
    if isinstance(value, pd.DataFrame | pd.Series):
        return str(value.to_string(max_rows=30, max_cols=30))
    return repr(value)


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _user_traceback(exc: BaseException) -> str:
    """The traceback trimmed to the user's code: library frames are dropped."""
    if isinstance(exc, SyntaxError) and exc.filename == CODE_NAME:
        return "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == CODE_NAME]
    head = "Traceback (most recent call last):\n" if frames else ""
    body = "".join(traceback.format_list(frames))
    tail = "".join(traceback.format_exception_only(type(exc), exc))
    if isinstance(exc, MemoryError):
        tail = tail.rstrip() + " (memory limit of the sandbox reached / 超出内存限制)\n"
    return (head + body + tail).rstrip()


def _isolate(config: dict[str, Any]) -> None:
    from dataseer.sandbox import _isolate as iso

    if config["namespaces"]:
        iso.build_root(
            Path(config["root"]),
            read_only=[Path(p) for p in config["read_only"]],
            work=Path(config["work"]),
        )
        iso.drop_capabilities()
    else:
        os.chdir(config["work"])
        with contextlib.suppress(OSError):
            iso.drop_capabilities()
    iso.set_limits(
        memory_bytes=int(config["memory_mb"]) * 1024 * 1024,
        cpu_seconds=int(config["lifetime_cpu_seconds"]),
        processes=int(config["max_processes"]),
        file_bytes=int(config["file_mb"]) * 1024 * 1024,
    )
    if config["seccomp"]:
        iso.install_seccomp()
    else:
        iso.set_no_new_privs()


def main() -> None:
    """Entry point inside the sandbox; the config is ``sys.argv[1]`` (JSON)."""
    config = json.loads(sys.argv[1])
    sock = socket.socket(fileno=int(config["fd"]))
    from dataseer.sandbox import _isolate as iso
    from dataseer.sandbox import protocol

    iso._libc.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    with contextlib.suppress(OSError):
        os.setsid()
    try:
        libs = _preload(config["mpl_cache"])
        _isolate(config)
    except Exception as exc:  # reported to the parent, then exit
        protocol.send(sock, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(3) from exc
    os.environ.clear()
    private_tmp = "/tmp"  # the sandbox's own tmpfs, not the host's
    os.environ.update(
        {"HOME": "/sandbox", "TMPDIR": private_tmp, "LANG": "C.UTF-8", "MPLBACKEND": "Agg"}
    )
    os.environ["MPLCONFIGDIR"] = "/tmp/mpl"  # the sandbox's private tmpfs
    signal.signal(signal.SIGXCPU, _on_xcpu)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    protocol.send(sock, {"ready": True, "pid": os.getpid()})
    Worker(sock, config, libs).serve()
