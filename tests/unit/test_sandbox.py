"""The sandbox as a Python runner: results, frames in and out, figures, the pool."""

from __future__ import annotations

import base64
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from test_datalayer import mixed_frame

from dataseer.data.datalayer import Datalayer
from dataseer.sandbox import SandboxConfig, SandboxPool, detect_mechanism
from dataseer.sandbox.pool import PNG_MAGIC


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxPool]:
    home = tmp_path_factory.mktemp("sandbox-home")
    pool = SandboxPool(
        SandboxConfig(home=home, pool_size=2, output_chars=500), Datalayer(home / "frames")
    )
    pool.start()
    yield pool
    pool.close()


def test_value_stdout_and_stderr(pool: SandboxPool) -> None:
    result = pool.run("t", "import sys\nprint('你好')\nprint('warn', file=sys.stderr)\n6 * 7")
    assert result.ok, result.error
    assert (result.stdout, result.stderr, result.value) == ("你好\n", "warn\n", "42")
    assert result.mechanism == detect_mechanism().name
    none = pool.run("t", "x = 1")
    assert none.ok and none.value is None


def test_output_is_truncated(pool: SandboxPool) -> None:
    result = pool.run("t", "print('x' * 5000)\n'y' * 5000")
    assert result.ok
    assert result.stdout.startswith("x" * 500) and "truncated" in result.stdout
    assert len(result.stdout) < 600
    assert result.value and "truncated" in result.value and len(result.value) < 600


def test_traceback_is_trimmed_to_user_code(pool: SandboxPool) -> None:
    code = (
        "import pandas as pd\ndef f(df):\n    return df.loc['missing']\n\n"
        "f(pd.DataFrame({'a': [1]}))"
    )
    result = pool.run("t", code)
    assert not result.ok and result.error
    assert result.error.startswith("Traceback (most recent call last):")
    assert 'File "<code>", line 5, in <module>' in result.error
    assert 'File "<code>", line 3, in f' in result.error and "df.loc['missing']" in result.error
    assert "site-packages" not in result.error and "pandas/core" not in result.error
    assert result.error.rstrip().endswith("KeyError: 'missing'")
    syntax = pool.run("t", "def broken(:\n    pass")
    assert not syntax.ok and syntax.error and "SyntaxError" in syntax.error
    assert "line 1" in syntax.error


def test_frames_are_preloaded_and_round_trip_exactly(pool: SandboxPool) -> None:
    frame = mixed_frame()
    pool.datalayer.put("rt", "df_1_mixed", frame, task_id=1)
    result = pool.run(
        "rt",
        "seen = [str(t) for t in df_1_mixed.dtypes]\n"
        "copy_of_mixed = df_1_mixed.copy()\n"
        "(seen, df_1_mixed.loc[0, 'game'], str(df_1_mixed.loc[0, 'revenue']))",
    )
    assert result.ok, result.error
    seen, game, revenue = eval(result.value or "")  # our own repr
    assert seen == [str(t) for t in frame.dtypes]
    assert (game, revenue) == ("星海远征", "12345.67")
    assert [f.name for f in result.frames] == ["copy_of_mixed"]
    back = pool.datalayer.get("rt", "copy_of_mixed")
    pd.testing.assert_frame_equal(back, frame, check_exact=True)


def test_new_and_changed_frames_are_registered_unchanged_ones_not(pool: SandboxPool) -> None:
    pool.datalayer.put(
        "fr", "df_1_rev", pd.DataFrame({"day": [1, 2, 3], "rev": [10.0, 20.0, 30.0]})
    )
    pool.datalayer.put("fr", "df_2_dau", pd.DataFrame({"day": [1, 2, 3], "dau": [5, 6, 7]}))
    untouched = pool.run("fr", "df_1_rev.rev.sum() + df_2_dau.dau.sum()")
    assert untouched.ok and untouched.frames == []
    alias = pool.run("fr", "same = df_1_rev")
    assert alias.ok and alias.frames == []
    result = pool.run(
        "fr",
        "df_1_rev['rev'] = df_1_rev['rev'] * 2\n"
        "merged = df_1_rev.merge(df_2_dau, on='day')\n"
        "by_day = merged.set_index('day')\n"
        "_private = merged\n"
        "len(merged)",
    )
    assert result.ok, result.error
    assert sorted(f.name for f in result.frames) == ["by_day", "df_1_rev", "merged"]
    assert pool.datalayer.get("fr", "df_1_rev")["rev"].tolist() == [20.0, 40.0, 60.0]
    assert pool.datalayer.info("fr", "merged").source == "python"
    assert pool.datalayer.get("fr", "by_day").index.name == "day"
    later = pool.run("fr", "list(merged.columns), float(by_day.loc[2, 'rev'])")
    assert later.ok and later.value == "(['day', 'rev', 'dau'], 40.0)"


def test_calls_do_not_share_variables(pool: SandboxPool) -> None:
    assert pool.run("vars", "leftover = 123").ok
    result = pool.run("vars", "leftover")
    assert not result.ok and result.error and "NameError" in result.error


def test_worker_state_never_crosses_threads(pool: SandboxPool) -> None:
    assert pool.run("thread-a", "import builtins; builtins.smuggled = 'from a'").ok
    assert pool.run("thread-a", "import builtins; builtins.smuggled").value == "'from a'"
    other = pool.run("thread-b", "import builtins; hasattr(builtins, 'smuggled')")
    assert other.ok and other.value == "False"
    files = pool.run("thread-b", "import os; sorted(os.listdir('/sandbox'))")
    assert pool.run("thread-a", "open('/sandbox/a.txt', 'w').write('a')").ok
    again = pool.run("thread-b", "import os; sorted(os.listdir('/sandbox'))")
    assert files.value == again.value and "a.txt" not in (again.value or "")


def test_chart_comes_back_as_png(pool: SandboxPool) -> None:
    pool.datalayer.put(
        "chart", "df_1_trend", pd.DataFrame({"day": range(1, 8), "rev": [3, 5, 4, 8, 9, 7, 12]})
    )
    result = pool.run(
        "chart",
        "fig, ax = plt.subplots(figsize=(5, 3))\n"
        "ax.plot(df_1_trend.day, df_1_trend.rev, marker='o')\n"
        "ax.set_title('revenue by day')\n"
        "plt.figure(); plt.bar(['a', 'b'], [1, 2])\n"
        "'drawn'",
    )
    assert result.ok, result.error
    assert len(result.figures) == 2
    for figure in result.figures:
        data = figure.path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 2000
        assert base64.b64decode(figure.png_base64) == data
        assert figure.path.parent == pool.artifacts / "chart"
    assert pool.run("chart", "len(plt.get_fignums())").value == "0"


def test_crashed_worker_is_replaced(pool: SandboxPool) -> None:
    crash = pool.run("crash", "import os; os._exit(3)")
    assert not crash.ok and crash.error and "process died (exit 3)" in crash.error
    assert pool.run("crash", "1 + 1").value == "2"


def test_pool_keeps_warm_workers_and_warm_calls_are_fast(pool: SandboxPool) -> None:
    deadline = time.monotonic() + 60
    while pool.stats()["idle"] < pool.config.pool_size and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pool.stats()["idle"] == pool.config.pool_size
    first = pool.run("fresh-thread", "1")
    assert first.ok and first.elapsed < 1.0  # a warm worker, not a cold start
    timings = []
    for _ in range(20):
        started = time.perf_counter()
        assert pool.run("fresh-thread", "1 + 1").value == "2"
        timings.append(time.perf_counter() - started)
    assert statistics.median(timings) < 0.05
    assert pool.cold_starts and all(c > statistics.median(timings) for c in pool.cold_starts)


def test_bound_workers_are_capped(tmp_path: Path) -> None:
    pool = SandboxPool(
        SandboxConfig(home=tmp_path, pool_size=0, max_workers=1), Datalayer(tmp_path / "f")
    )
    try:
        assert pool.run("one", "import builtins; builtins.mark = 1").ok
        assert pool.run("two", "2").ok
        assert pool.stats()["bound"] == 1
        assert pool.run("one", "import builtins; hasattr(builtins, 'mark')").value == "False"
    finally:
        pool.close()


def test_config_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid sandbox sizes"):
        SandboxConfig(home=tmp_path, wall_seconds=0)
    with pytest.raises(ValueError, match="memory_mb=10"):
        SandboxConfig(home=tmp_path, memory_mb=10)
    with pytest.raises(ValueError, match="unknown sandbox mechanism"):
        detect_mechanism("docker")
