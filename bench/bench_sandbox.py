"""Sandbox benchmark: frames in and out of run_python, warm latency, cold start.

Measured in one run, so the ratios compare like with like:

* a 1M-row × 10-column frame handed to the sandbox and a derived frame
  handed back (datalayer Arrow file, memory-mapped in the worker, written
  back and adopted by rename), against
* a pickle baseline: the same DataFrame pickled through a pipe to a warm
  plain subprocess and pickled back (what multiprocessing would do), and
* the physical floor: two plain memory copies of the same bytes.

Then the warm ``run_python`` latency for a trivial snippet (goal: p50 ≤ 50 ms)
and the cold start of a sandbox worker. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from dataseer.data.datalayer import Datalayer
from dataseer.sandbox import SandboxConfig, SandboxPool, detect_mechanism
from dataseer.sandbox.pool import WorkerProcess

ECHO = r"""
import pickle, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    head = inp.read(8)
    if len(head) < 8:
        break
    frame = pickle.loads(inp.read(struct.unpack('!Q', head)[0]))
    body = pickle.dumps(frame.copy(), protocol=5)
    out.write(struct.pack('!Q', len(body)) + body)
    out.flush()
"""


def big_frame(rows: int) -> pd.DataFrame:
    """Ten numeric columns: the bytes are unambiguous, so the memcpy floor is exact."""
    rng = np.random.default_rng(7)
    data: dict[str, np.ndarray] = {}
    for i in range(7):
        data[f"f{i}"] = rng.standard_normal(rows)
    for i in range(3):
        data[f"i{i}"] = rng.integers(0, 1_000_000, rows, dtype="int64")
    return pd.DataFrame(data)


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round((len(ordered) - 1) * q / 100))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    mechanism = detect_mechanism()
    print(f"sandbox mechanism: {mechanism.describe()}")
    frame = big_frame(args.rows)
    nbytes = int(frame.memory_usage(index=False).sum())
    print(f"frame: {args.rows:,} rows × {frame.shape[1]} cols, {nbytes / 1e6:.1f} MB")

    with tempfile.TemporaryDirectory(prefix="dataseer-bench-") as tmp:
        home = Path(tmp)
        layer = Datalayer(home / "frames", max_frame_bytes=2_000_000_000)
        start = time.perf_counter()
        layer.put("bench", "df_big", frame)
        store = time.perf_counter() - start
        pool = SandboxPool(
            SandboxConfig(home=home, pool_size=1, wall_seconds=120, file_mb=2048), layer
        )
        try:
            pool.run("bench", "1")  # bind a warm worker to the thread
            load_only = timed(lambda: pool.run("bench", "df_big.shape"), repeat)
            trivial = timed(lambda: pool.run("bench", "1 + 1"), 50 if not args.quick else 20)

            def round_trip() -> None:
                result = pool.run("bench", "df_back = df_big[list(df_big.columns)]")
                assert result.ok and [f.name for f in result.frames] == ["df_back"], result
                assert result.frames[0].rows == args.rows

            both_ways = timed(round_trip, repeat)
            back = layer.get("bench", "df_back")
            pd.testing.assert_frame_equal(back, frame)
        finally:
            pool.close()

        cold = []
        for _ in range(2 if args.quick else 3):
            worker = WorkerProcess(SandboxConfig(home=home, pool_size=0), mechanism)
            start = time.perf_counter()
            worker.spawn()
            worker.wait_ready()
            cold.append(time.perf_counter() - start)
            worker.kill()

    echo = subprocess.Popen(  # our own interpreter, fixed script
        [sys.executable, "-c", ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert echo.stdin is not None and echo.stdout is not None

    def pickle_round_trip() -> None:
        body = pickle.dumps(frame, protocol=5)
        echo.stdin.write(struct.pack("!Q", len(body)) + body)  # type: ignore[union-attr]
        echo.stdin.flush()  # type: ignore[union-attr]
        size = struct.unpack("!Q", echo.stdout.read(8))[0]  # type: ignore[union-attr]
        returned = pickle.loads(echo.stdout.read(size))  # our own subprocess
        assert returned.shape == frame.shape

    pickle_round_trip()
    pickled = timed(pickle_round_trip, repeat)
    echo.stdin.close()
    echo.wait()

    source = np.frombuffer(np.random.default_rng(1).bytes(nbytes), dtype=np.uint8)
    target = np.empty_like(source)
    back_buf = np.empty_like(source)

    def two_copies() -> None:
        np.copyto(target, source)
        np.copyto(back_buf, target)

    two_copies()
    memcpy = timed(two_copies, repeat)

    floor = statistics.median(memcpy)
    rows = [
        ("memory copy ×2 (floor)", floor),
        ("sandbox in + back (Arrow mmap)", statistics.median(both_ways)),
        ("sandbox in only (load + shape)", statistics.median(load_only)),
        ("pickle through a pipe, both ways", statistics.median(pickled)),
    ]
    print(f"\ndatalayer store (once, at query time): {store * 1000:.1f} ms")
    print(f"\n{'transfer of the frame':<36} {'median':>10} {'× floor':>9}")
    for label, value in rows:
        print(f"{label:<36} {value * 1000:>8.1f}ms {value / floor:>8.1f}×")
    ratio = statistics.median(pickled) / statistics.median(both_ways)
    print(f"pickle / sandbox: {ratio:.2f}×")
    print(
        f"\nwarm run_python '1 + 1': p50 {p(trivial, 50) * 1000:.1f} ms, "
        f"p90 {p(trivial, 90) * 1000:.1f} ms (goal p50 ≤ 50 ms)"
    )
    print(
        f"cold start of a worker: median {statistics.median(cold):.2f} s "
        f"(min {min(cold):.2f}, max {max(cold):.2f}); {len(cold)} starts"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
