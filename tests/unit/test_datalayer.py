"""The datalayer on its own: names, exact round trips, limits, TTL, untrusted files."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dataseer.config import Settings
from dataseer.data.datalayer import (
    Datalayer,
    DatalayerError,
    FrameLimitError,
    frame_name,
    thread_key,
)


def mixed_frame() -> pd.DataFrame:
    """Every kind of column a warehouse hands back, with nulls in each."""
    return pd.DataFrame(
        {
            "game": pd.Series(["星海远征", "幻境物语", None, "龍之谷 ✨"], dtype="str"),
            "ds": pd.to_datetime(["2026-10-01", "2026-10-02", None, "2026-10-04"]),
            "ts_utc": pd.to_datetime(
                ["2026-10-01 08:00:00.123456", None, "2026-10-03 23:59:59", "2026-10-04"],
                format="ISO8601",
            ).tz_localize("Asia/Shanghai"),
            "dau": pd.array([1200, None, 3, 2**40], dtype="Int64"),
            "users": np.array([1, 2, 3, 4], dtype="int32"),
            "revenue": [Decimal("12345.67"), None, Decimal("-0.01"), Decimal("99999999.99")],
            "rate": [0.1, float("nan"), 1e-12, -3.5],
            "paid": pd.array([True, None, False, True], dtype="boolean"),
            "flag": [True, False, True, False],
        }
    )


def test_frame_names_are_identifiers_from_purpose_or_columns() -> None:
    assert frame_name(3, "Monthly revenue by game") == "df_3_monthly_revenue_by_game"
    assert frame_name(4, "上月流水", ["ds", "revenue"]) == "df_4_ds_revenue"
    assert frame_name(5, "同比") == "df_5"
    assert frame_name(6, "DAU 7日趋势 trend") == "df_6_dau_trend"
    assert frame_name(7, "x" * 200).isidentifier()
    with pytest.raises(ValueError, match="task_id"):
        frame_name(-1)


def test_thread_keys_never_escape_the_frames_folder() -> None:
    assert thread_key("thread-1_a") == "thread-1_a"
    for hostile in ("../etc", "/abs/path", "a/../../b", "..", "-rf"):
        key = thread_key(hostile)
        assert "/" not in key and key not in {".", ".."} and not key.startswith("-")
    assert thread_key("a/b") != thread_key("a_b")
    with pytest.raises(ValueError, match="empty"):
        thread_key("")


def test_round_trip_is_exact(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path)
    frame = mixed_frame()
    info = layer.put("t1", "df_1_mixed", frame, task_id=1)
    back = layer.get("t1", "df_1_mixed")
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    assert list(back.dtypes) == list(frame.dtypes)
    assert back["revenue"].tolist()[0] == Decimal("12345.67")
    assert back["revenue"].isna().tolist() == [False, True, False, False]
    assert str(back["ts_utc"].dt.tz) == "Asia/Shanghai"
    assert back["ts_utc"].iloc[0].microsecond == 123456
    assert info.rows == 4 and info.columns == tuple(frame.columns)
    assert info.task_id == 1 and info.source == "sql"
    assert info.path == tmp_path / "t1" / "df_1_mixed.arrow"
    assert "df_1_mixed (4 rows × 9 cols)" in info.describe()


def test_frames_are_memory_mapped_arrow_files(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path)
    frame = pd.DataFrame({"x": np.arange(200_000, dtype="int64")})
    layer.put("t1", "big", frame)
    before = pa.total_allocated_bytes()
    table = layer.table("t1", "big")
    # the column buffers point into the map, so reading allocates nothing
    assert pa.total_allocated_bytes() - before < 10_000
    assert table.column("x").to_numpy()[-1] == 199_999
    with pa.memory_map(str(layer.path("t1", "big"))) as source:
        assert pa.ipc.open_file(source).num_record_batches == 1


def test_named_index_survives(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path)
    frame = pd.DataFrame({"v": [1.5, 2.5]}, index=pd.Index(["a", "b"], name="k"))
    layer.put("t1", "indexed", frame)
    pd.testing.assert_frame_equal(layer.get("t1", "indexed"), frame)
    assert layer.info("t1", "indexed").columns == ("v",)


def test_threads_are_separate(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path)
    layer.put("a", "df_1", pd.DataFrame({"x": [1]}))
    layer.put("b", "df_1", pd.DataFrame({"x": [2]}))
    assert layer.get("a", "df_1")["x"].tolist() == [1]
    assert layer.get("b", "df_1")["x"].tolist() == [2]
    assert [f.name for f in layer.frames("a")] == ["df_1"]
    with pytest.raises(DatalayerError, match=r"no frame named 'df_9'.*frames: df_1"):
        layer.info("a", "df_9")
    layer.drop_thread("a")
    assert layer.frames("a") == [] and len(layer.frames("b")) == 1


def test_bad_names_are_refused(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path)
    for bad in ("../x", "1abc", "a-b", "名字", "", "a" * 65):
        with pytest.raises(DatalayerError, match="invalid frame name"):
            layer.put("t", bad, pd.DataFrame({"x": [1]}))


def test_frame_limit_has_a_clear_message(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path, max_frame_bytes=50_000)
    layer.put("t", "small", pd.DataFrame({"x": np.arange(100)}))
    with pytest.raises(FrameLimitError, match=r"'huge' is \d+\.\d MB, over the per-frame limit"):
        layer.put("t", "huge", pd.DataFrame({"x": np.arange(100_000)}))
    assert [f.name for f in layer.frames("t")] == ["small"]
    assert not list((tmp_path / "t").glob(".*"))


def test_thread_limits_have_clear_messages(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path, max_thread_bytes=30_000, max_frames=3)
    piece = pd.DataFrame({"x": np.arange(1000)})
    layer.put("t", "a", piece)
    layer.put("t", "b", piece)
    with pytest.raises(FrameLimitError, match="over the per-thread limit"):
        layer.put("t", "c", pd.DataFrame({"x": np.arange(3000)}))
    layer.put("t", "a", piece)  # replacing a frame does not count twice
    layer.put("t", "c", pd.DataFrame({"x": [1]}))
    with pytest.raises(FrameLimitError, match="already holds 3 frames, the limit is 3"):
        layer.put("t", "d", pd.DataFrame({"x": [1]}))
    layer.put("other", "d", pd.DataFrame({"x": [1]}))  # limits are per thread


def test_ttl_expiry(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path, ttl_seconds=3600)
    layer.put("t", "old", pd.DataFrame({"x": [1]}))
    layer.put("t", "new", pd.DataFrame({"x": [2]}))
    past = time.time() - 7200
    os.utime(layer.path("t", "old"), (past, past))
    assert [f.name for f in layer.frames("t")] == ["new"]  # expired frames are invisible at once
    assert layer.expire() == 1
    assert not layer.path("t", "old").exists() and layer.path("t", "new").exists()
    assert layer.expire(now=time.time() + 7200) == 1
    assert not (tmp_path / "t").exists()


def test_use_restarts_the_ttl(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path, ttl_seconds=3600)
    layer.put("t", "kept", pd.DataFrame({"x": [1]}))
    past = time.time() - 3000
    os.utime(layer.path("t", "kept"), (past, past))
    layer.get("t", "kept")
    assert layer.expire(now=time.time() + 1000) == 0


def test_adopt_refuses_links_and_garbage(tmp_path: Path) -> None:
    layer = Datalayer(tmp_path / "frames")
    out = tmp_path / "out"
    out.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (out / "link.arrow").symlink_to(secret)
    with pytest.raises(OSError, match=r"Too many levels of symbolic links|symbolic"):
        layer.adopt_file("t", "link", out, "link.arrow")
    (out / "junk.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(DatalayerError, match="not a valid Arrow IPC file"):
        layer.adopt_file("t", "junk", out, "junk.arrow")
    table = pa.table({"x": [1, 2]})
    with pa.OSFile(str(out / "good.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    info = layer.adopt_file("t", "good", out, "good.arrow")
    assert info.source == "python" and info.rows == 2
    assert not (out / "good.arrow").exists()
    assert [f.name for f in layer.frames("t")] == ["good"]


def test_from_settings_uses_home_and_limits(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, frame_max_mb=1.5, frame_ttl_hours=2, thread_max_frames=7)
    layer = Datalayer.from_settings(settings)
    assert layer.root == tmp_path / "frames"
    assert layer.max_frame_bytes == 1_500_000
    assert layer.ttl_seconds == 7200 and layer.max_frames == 7
    with pytest.raises(ValueError, match="must be positive"):
        Datalayer(tmp_path, ttl_seconds=0)
    assert datetime.now(UTC).year >= 2024
