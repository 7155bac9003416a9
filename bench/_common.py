"""Shared helpers for the benchmarks: statistics, a text table, an isolated environment.

Every bench script imports this module as ``_common`` (the script's folder is
on ``sys.path`` when it runs as ``python bench/bench_x.py``). Nothing here
asserts a timing: benchmarks report, they never fail on a slow machine.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The source checkout."""

TODAY = "2026-11-29"
"""The anchor date every benchmark runs at, so relative periods resolve the same way."""

QUESTION = "星海远征上个月流水多少？"
"""The lookup question the end-to-end benchmarks ask."""

_FOREIGN_ENV = (
    "DATASEER_WAREHOUSE",
    "DATASEER_DATABASE_URL",
    "DATASEER_KNOWLEDGE_DIR",
    "DATASEER_PROMPTS_DIR",
    "DATASEER_MODEL",
    "DATASEER_MODEL_ROUTER",
    "DATASEER_MODEL_ANALYST",
    "DATASEER_MODEL_SUMMARIZER",
    "DATASEER_BASE_URL",
    "DATASEER_API_KEY",
    "DATASEER_MAX_STEPS",
    "DATASEER_DEEP",
)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks."""
    if not values:
        msg = "percentile of an empty sample"
        raise ValueError(msg)
    if not 0 <= q <= 100:
        msg = f"percentile must be within 0..100, got {q}"
        raise ValueError(msg)
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Stats:
    """Summary of one timing sample, in seconds."""

    n: int
    mean: float
    p50: float
    p95: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        """Summarise a non-empty sample."""
        return cls(
            n=len(values),
            mean=sum(values) / len(values),
            p50=percentile(values, 50),
            p95=percentile(values, 95),
            min=min(values),
            max=max(values),
        )


def ms(seconds: float) -> str:
    """Seconds as milliseconds, with precision that suits the magnitude."""
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def ratio(value: float, base: float) -> str:
    """``value / base`` as ``12.3x`` (``n/a`` for a zero baseline)."""
    if base <= 0:
        return "n/a"
    return f"{value / base:,.1f}x" if value / base >= 10 else f"{value / base:.2f}x"


def share(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole``."""
    return "n/a" if whole <= 0 else f"{100 * part / whole:.1f}%"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print an aligned text table: first column left-aligned, the rest right-aligned."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    print(f"\n{title}")
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    sys.stdout.flush()


def bench_env(home: Path, scale: float) -> dict[str, str]:
    """An environment for a bench run: a temporary home, the sample, fixed date, offline.

    Settings that could point the run at a real warehouse, database, model or
    tracing backend are removed, so a benchmark never touches the user's cache
    or the network.
    """
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    env.update(
        {
            "DATASEER_HOME": str(home),
            "DATASEER_SAMPLE_SCALE": f"{scale:g}",
            "DATASEER_TODAY": TODAY,
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGFUSE_PUBLIC_KEY": "",
            "LANGFUSE_SECRET_KEY": "",
        }
    )
    return {k: v for k, v in env.items() if v != ""}


def use_env(env: dict[str, str]) -> None:
    """Make ``env`` this process's environment (before dataseer reads its settings)."""
    os.environ.clear()
    os.environ.update(env)


def timed_process(
    args: Sequence[str], env: dict[str, str], *, cwd: Path = ROOT
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run a command to completion; return its wall time and its captured output.

    Raises:
        RuntimeError: the command failed (a benchmark of a broken run means nothing).
    """
    start = time.perf_counter()
    done = subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        msg = (
            f"command failed ({done.returncode}): {' '.join(args)}\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
        raise RuntimeError(msg)
    return elapsed, done
