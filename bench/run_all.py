"""Run every benchmark, each in its own process, and print their reports.

``make bench`` runs this file; ``--quick`` is passed through to every script
(smaller scales, fewer runs). The exit status is non-zero when any script
fails; the others still run. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "bench_sample.py",
    "bench_ask.py",
    "bench_loop.py",
    "bench_context.py",
    "bench_guard.py",
    "bench_sandbox.py",
    "bench_knowledge.py",
    "bench_server.py",
    "bench_integrations.py",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every script")
    parser.add_argument("only", nargs="*", help=f"run only these scripts (of {', '.join(SCRIPTS)})")
    args = parser.parse_args()
    unknown = [name for name in args.only if name not in SCRIPTS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    failed: list[str] = []
    for script in args.only or SCRIPTS:
        command = [sys.executable, str(HERE / script), *(["--quick"] if args.quick else [])]
        print(f"\n=== {script}{' --quick' if args.quick else ''} ===", flush=True)
        start = time.perf_counter()
        code = subprocess.run(command, cwd=HERE.parent, check=False).returncode
        elapsed = time.perf_counter() - start
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        print(f"=== {script}: {status} in {elapsed:.1f} s ===", flush=True)
        if code != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
