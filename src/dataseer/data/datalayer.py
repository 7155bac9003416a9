"""The datalayer: every query result of a thread as a named, memory-mapped Arrow frame.

The model works with *names* (``df_3_monthly_revenue``), shapes and columns;
the rows stay on disk as Arrow IPC files in ``DATASEER_HOME/frames/<thread>/``.
The IPC *file* format (uncompressed) is used because it can be memory-mapped:
the sandbox receives an open file descriptor and maps it, so a frame reaches
the analysis code without being serialised or copied through a pipe.

Frames outlive a run (the checkpointed state keeps names and paths, the data
stays here) and expire by a TTL counted from their last write or use. Limits
per frame and per thread keep one conversation from filling the disk; when a
limit is hit the error says which one and by how much, because the message
goes back to the model, which can aggregate further and try again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from dataseer.config import Settings
from dataseer.errors import DataseerError

SUFFIX = ".arrow"
META_KEY = b"dataseer"
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
"""A frame name is a Python identifier (ASCII, at most 64 characters)."""
_SLUG_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
SLUG_WORDS = 4


class DatalayerError(DataseerError):
    """A frame is unknown, badly named or could not be stored."""


class FrameLimitError(DatalayerError):
    """A frame, or a thread's frames together, would exceed a configured limit."""


@dataclass(frozen=True)
class FrameInfo:
    """What the model (and state) is told about one frame: never the rows."""

    name: str
    thread: str
    path: Path
    rows: int
    columns: tuple[str, ...]
    dtypes: tuple[str, ...]
    nbytes: int
    source: str
    task_id: int | None
    modified: float

    def describe(self) -> str:
        """One line for a prompt or an observation: name, shape and columns."""
        cols = ", ".join(f"{c}:{t}" for c, t in zip(self.columns, self.dtypes, strict=True))
        return f"{self.name} ({self.rows} rows × {len(self.columns)} cols): {cols}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe record for state, stream events and tool artifacts."""
        return {
            "name": self.name,
            "path": str(self.path),
            "rows": self.rows,
            "columns": list(self.columns),
            "dtypes": list(self.dtypes),
            "nbytes": self.nbytes,
            "source": self.source,
            "task_id": self.task_id,
        }


def frame_name(task_id: int, purpose: str = "", columns: list[str] | None = None) -> str:
    """The variable name of a query result: ``df_<task>_<slug>``.

    The slug comes from the ASCII words of the purpose, else of the column
    names, so a Chinese purpose still yields a readable ASCII identifier the
    model can type back without mistakes.

    >>> frame_name(3, "Monthly revenue by game")
    'df_3_monthly_revenue_by_game'
    >>> frame_name(4, "上月流水", ["ds", "revenue"])
    'df_4_ds_revenue'
    >>> frame_name(5, "同比")
    'df_5'
    """
    if task_id < 0:
        msg = f"task_id must be >= 0, got {task_id}"
        raise ValueError(msg)
    words = [w.lower() for w in _SLUG_WORD.findall(purpose)][:SLUG_WORDS]
    if not words and columns:
        words = [w.lower() for c in columns for w in _SLUG_WORD.findall(str(c))][:2]
    slug = "_".join(words)[:40].rstrip("_")
    return f"df_{task_id}_{slug}" if slug else f"df_{task_id}"


def thread_key(thread: str) -> str:
    """A folder name for a thread id: safe characters only, never a path.

    Ids made only of safe characters are kept as they are (readable
    folders); anything else is replaced and suffixed with a hash so two
    different ids can never share a folder.
    """
    if not thread:
        msg = "thread id must not be empty"
        raise ValueError(msg)
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", thread)[:64]
    if safe == thread and not thread.startswith("-"):
        return thread
    digest = hashlib.sha256(thread.encode()).hexdigest()[:12]
    return f"{safe.lstrip('-') or 't'}-{digest}"


def _check_name(name: str) -> None:
    if not NAME_RE.match(name):
        msg = (
            f"invalid frame name {name!r}: use a Python identifier of ASCII letters, "
            "digits and underscores (at most 64 characters) / 变量名须为 ASCII 标识符"
        )
        raise DatalayerError(msg)


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f} MB"


class Datalayer:
    """Named Arrow frames per thread, on disk, memory-mapped on read.

    Safe to share between the threads of one server process; several
    processes may share a root too, since every write is an atomic rename.
    """

    def __init__(
        self,
        root: Path,
        *,
        ttl_seconds: float = 72 * 3600.0,
        max_frame_bytes: int = 256_000_000,
        max_thread_bytes: int = 1_000_000_000,
        max_frames: int = 200,
    ) -> None:
        if ttl_seconds <= 0 or max_frame_bytes <= 0 or max_thread_bytes <= 0 or max_frames <= 0:
            msg = (
                f"datalayer limits must be positive: ttl={ttl_seconds}, "
                f"frame={max_frame_bytes}, thread={max_thread_bytes}, frames={max_frames}"
            )
            raise ValueError(msg)
        self.root = Path(root)
        self.ttl_seconds = ttl_seconds
        self.max_frame_bytes = max_frame_bytes
        self.max_thread_bytes = max_thread_bytes
        self.max_frames = max_frames
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Datalayer:
        """The datalayer under ``DATASEER_HOME/frames`` with the configured limits."""
        return cls(
            settings.home / "frames",
            ttl_seconds=settings.frame_ttl_hours * 3600.0,
            max_frame_bytes=int(settings.frame_max_mb * 1e6),
            max_thread_bytes=int(settings.thread_frames_max_mb * 1e6),
            max_frames=settings.thread_max_frames,
        )

    def thread_dir(self, thread: str) -> Path:
        """The folder of one thread's frames (not created)."""
        return self.root / thread_key(thread)

    def path(self, thread: str, name: str) -> Path:
        """Where a frame lives (whether or not it exists)."""
        _check_name(name)
        return self.thread_dir(thread) / f"{name}{SUFFIX}"

    def put(
        self,
        thread: str,
        name: str,
        frame: pd.DataFrame | pa.Table,
        *,
        source: str = "sql",
        task_id: int | None = None,
    ) -> FrameInfo:
        """Store a frame under ``name`` (replacing one of that name) and describe it.

        Raises:
            FrameLimitError: the frame or the thread would exceed a limit.
            DatalayerError: the name is not an identifier.
        """
        _check_name(name)
        table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame)
        meta = dict(table.schema.metadata or {})
        meta[META_KEY] = json.dumps({"source": source, "task_id": task_id}).encode()
        table = table.replace_schema_metadata(meta)
        folder = self.thread_dir(thread)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            return self._adopt(thread, name, tmp)
        finally:
            tmp.unlink(missing_ok=True)

    def adopt_file(self, thread: str, name: str, source_dir: Path, filename: str) -> FrameInfo:
        """Move an Arrow IPC file written by the sandbox into the thread's frames.

        The file comes from untrusted code, so it is opened without following
        symlinks (nor a swapped folder), must be a regular file, and the
        moved entry must still be the inode that was checked.

        Raises:
            FrameLimitError: the frame or the thread would exceed a limit.
            DatalayerError: the file is not a regular Arrow IPC file.
        """
        _check_name(name)
        folder = self.thread_dir(thread)
        folder.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(source_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fd = os.open(filename, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            if not stat.S_ISREG(st.st_mode):
                msg = f"frame {name!r}: the sandbox output is not a regular file"
                raise DatalayerError(msg)
            tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
            os.rename(filename, tmp, src_dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        try:
            moved = os.lstat(tmp)
            if (moved.st_ino, moved.st_dev) != (st.st_ino, st.st_dev):
                msg = f"frame {name!r}: the sandbox output changed while it was stored"
                raise DatalayerError(msg)
            return self._adopt(thread, name, tmp)
        finally:
            tmp.unlink(missing_ok=True)

    def _adopt(self, thread: str, name: str, tmp: Path) -> FrameInfo:
        """Check limits for a finished temporary file and rename it into place."""
        size = tmp.stat().st_size
        if size > self.max_frame_bytes:
            msg = (
                f"frame {name!r} is {_mb(size)}, over the per-frame limit of "
                f"{_mb(self.max_frame_bytes)}; aggregate or filter further / "
                "结果过大，请在 SQL 或代码中进一步聚合或筛选"
            )
            raise FrameLimitError(msg)
        try:
            info = self._read_info(thread, name, tmp)
        except (pa.ArrowInvalid, OSError) as exc:
            msg = f"frame {name!r} is not a valid Arrow IPC file: {type(exc).__name__}"
            raise DatalayerError(msg) from exc
        target = self.path(thread, name)
        with self._lock:
            others = [f for f in self.frames(thread) if f.name != name]
            used = sum(f.nbytes for f in others)
            if used + size > self.max_thread_bytes:
                msg = (
                    f"storing {name!r} ({_mb(size)}) would bring this thread's frames to "
                    f"{_mb(used + size)}, over the per-thread limit of "
                    f"{_mb(self.max_thread_bytes)}; reuse or aggregate existing frames / "
                    "本会话数据已达上限"
                )
                raise FrameLimitError(msg)
            if len(others) + 1 > self.max_frames:
                msg = (
                    f"this thread already holds {len(others)} frames, the limit is "
                    f"{self.max_frames}; reuse existing frames / 本会话数据帧数量已达上限"
                )
                raise FrameLimitError(msg)
            os.replace(tmp, target)
        return FrameInfo(**{**info.__dict__, "path": target})

    def _read_info(self, thread: str, name: str, path: Path) -> FrameInfo:
        with pa.memory_map(str(path), "r") as source:
            reader = pa.ipc.open_file(source)
            schema = reader.schema
            rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        meta = json.loads((schema.metadata or {}).get(META_KEY, b"{}"))
        columns, dtypes = _columns_and_dtypes(schema)
        st = path.stat()
        return FrameInfo(
            name=name,
            thread=thread,
            path=path,
            rows=rows,
            columns=columns,
            dtypes=dtypes,
            nbytes=st.st_size,
            source=str(meta.get("source", "python")),
            task_id=meta.get("task_id"),
            modified=st.st_mtime,
        )

    def info(self, thread: str, name: str) -> FrameInfo:
        """Describe one frame without reading its rows.

        Raises:
            DatalayerError: no such frame in this thread (or it expired).
        """
        path = self.path(thread, name)
        if not path.is_file():
            known = ", ".join(f.name for f in self.frames(thread)) or "none"
            msg = f"no frame named {name!r} in this thread (expired?); frames: {known}"
            raise DatalayerError(msg)
        return self._read_info(thread, name, path)

    def table(self, thread: str, name: str) -> pa.Table:
        """A frame as an Arrow table backed by a memory map (no copy).

        Reading counts as use: the frame's TTL starts again.
        """
        path = self.info(thread, name).path
        os.utime(path)
        with pa.memory_map(str(path), "r") as source:
            return pa.ipc.open_file(source).read_all()

    def get(self, thread: str, name: str) -> pd.DataFrame:
        """A frame as a pandas DataFrame, with the dtypes it was stored with."""
        return self.table(thread, name).to_pandas()

    def frames(self, thread: str) -> list[FrameInfo]:
        """Every live frame of a thread, oldest first."""
        folder = self.thread_dir(thread)
        if not folder.is_dir():
            return []
        now = time.time()
        found = []
        for path in folder.glob(f"*{SUFFIX}"):
            name = path.name[: -len(SUFFIX)]
            if not NAME_RE.match(name):
                continue
            try:
                info = self._read_info(thread, name, path)
            except (OSError, pa.ArrowInvalid):
                continue
            if now - info.modified <= self.ttl_seconds:
                found.append(info)
        return sorted(found, key=lambda f: (f.modified, f.name))

    def open_fds(self, thread: str, names: list[str]) -> list[tuple[str, int]]:
        """Read-only file descriptors of some frames, for handing to the sandbox.

        Unknown names are skipped (the code may mention a name that is not a
        frame). The caller closes the descriptors.
        """
        out: list[tuple[str, int]] = []
        for name in names:
            if not NAME_RE.match(name):
                continue
            path = self.path(thread, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            os.utime(fd)
            out.append((name, fd))
        return out

    def expire(self, now: float | None = None) -> int:
        """Delete frames unused for longer than the TTL; returns how many went.

        Empty thread folders are removed too.
        """
        now = time.time() if now is None else now
        removed = 0
        if not self.root.is_dir():
            return 0
        for folder in self.root.iterdir():
            if not folder.is_dir():
                continue
            for path in folder.glob(f"*{SUFFIX}"):
                try:
                    if now - path.stat().st_mtime > self.ttl_seconds:
                        path.unlink()
                        removed += 1
                except FileNotFoundError:
                    continue
            for stale in folder.glob(".*.tmp"):
                if now - stale.stat().st_mtime > 3600:
                    stale.unlink(missing_ok=True)
            if not any(folder.iterdir()):
                folder.rmdir()
        return removed

    def drop_thread(self, thread: str) -> None:
        """Forget every frame of a thread (a deleted conversation)."""
        shutil.rmtree(self.thread_dir(thread), ignore_errors=True)


def _columns_and_dtypes(schema: pa.Schema) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Column names and pandas dtypes as the frame will load, index columns excluded."""
    pandas_meta = schema.pandas_metadata or {}
    index_cols = {c for c in pandas_meta.get("index_columns", []) if isinstance(c, str)}
    by_field = {c.get("field_name"): c for c in pandas_meta.get("columns", [])}
    names: list[str] = []
    dtypes: list[str] = []
    for field in schema:
        if field.name in index_cols:
            continue
        col = by_field.get(field.name)
        names.append(str(col.get("name")) if col and col.get("name") is not None else field.name)
        dtypes.append(str(col.get("numpy_type")) if col else str(field.type))
    return tuple(names), tuple(dtypes)
