"""How long ``executor stats`` takes on a large telemetry file.

    python -m bench.experiments.stats_scale [--rows 1000000] [--repeat 3] [--keep FILE]

Builds a database of ``--rows`` rows with the executor's own schema (wake_recv rows, a quarter of
them shadow, started over the last 24 h, lognormal durations; 1 % ``sign`` rows), then runs
the report ``--repeat`` times for each of: the full report, ``--since 1h``, ``--stage wake_recv``
and ``--stage sign``, both in-process (the reads and the percentiles) and as a separate
``python -m executor stats`` process (adding interpreter start and imports), and prints the min
and median of each with the load average. The figure in docs/performance/notebook/ comes from here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from executor.recording.database import open_database
from executor.stats.command import build_report, open_read_only, parse_since

DAY_MS: Final = 86_400_000
SEED: Final = 20261130
"""Fixed, so every build of the file holds the same durations."""

QUERIES: Final[tuple[tuple[str, list[str]], ...]] = (
    ("full report", []),
    ("--since 1h", ["--since", "1h"]),
    ("--stage wake_recv", ["--stage", "wake_recv"]),
    ("--stage sign (1 % of rows)", ["--stage", "sign"]),
)


def build(path: Path, rows: int) -> None:
    """Write ``rows`` latency rows (and their correlations) in one transaction."""
    connection, _ = open_database(path)
    connection.close()
    rng = random.Random(SEED)
    now_ms = time.time_ns() // 1_000_000
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("BEGIN")
        db.executemany("INSERT INTO correlations VALUES (?, 0)", ((f"c-{i}",) for i in range(rows)))
        db.executemany(
            "INSERT INTO latency_events (correlation_id, stage, started_at_ms, ended_at_ms,"
            " duration_ms, metadata_json) VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    f"c-{i}",
                    "sign" if i % 100 == 0 else "wake_recv",
                    now_ms - DAY_MS + i * DAY_MS // rows,
                    now_ms - DAY_MS + i * DAY_MS // rows,
                    rng.lognormvariate(-3.0, 0.5),
                    '{"dry_run": true}' if i % 4 == 0 else '{"dry_run": false}',
                )
                for i in range(rows)
            ),
        )
        db.execute("COMMIT")


def time_stats(path: Path, extra: list[str], repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` runs of ``python -m executor stats --telemetry-db PATH EXTRA``."""
    command = [sys.executable, "-m", "executor", "stats", "--telemetry-db", str(path), *extra]
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        seconds.append(time.perf_counter() - started)
    return seconds


def time_report(path: Path, extra: list[str], repeat: int) -> list[float]:
    """Seconds of ``repeat`` in-process reports (open, read, percentiles; no process start)."""
    since_ms = stage = None
    now_ms = time.time_ns() // 1_000_000
    if extra[:1] == ["--since"]:
        since_ms = parse_since(extra[1], now_ms)
    if extra[:1] == ["--stage"]:
        stage = extra[1]
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        with contextlib.closing(open_read_only(path)) as connection:
            build_report(connection, path, now_ms=now_ms, since_ms=since_ms, stage=stage)
        seconds.append(time.perf_counter() - started)
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Build the file, time the queries, print one line per query."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.stats_scale", description=__doc__
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows (1000000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per query (3)")
    parser.add_argument("--keep", type=Path, help="build here and keep the file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stats-scale-") as scratch:
        path = args.keep or Path(scratch) / "telemetry.db"
        if not path.exists():
            started = time.perf_counter()
            build(path, args.rows)
            print(f"built {args.rows} rows in {time.perf_counter() - started:.1f} s: {path}")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for label, extra in QUERIES:
            report = time_report(path, extra, args.repeat)
            process = time_stats(path, extra, args.repeat)
            print(
                f"{label:<28} report min {min(report):.2f} s median {statistics.median(report):.2f}"
                f" s | whole process min {min(process):.2f} s median "
                f"{statistics.median(process):.2f} s ({args.repeat} runs each)"
            )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
