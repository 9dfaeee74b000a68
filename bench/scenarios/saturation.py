"""The saturation scenario: clients pipelining 64-frame writes; acks/s, rows/s and drops.

Two loads per executor and run (docs/performance/plan/, addendum 2026-12-01): one connection flat
out, and four connections at ``RELIABILITY_RATE`` frames/s in all (or the rate asked for:
``--saturation-rate``; issue 24's contention target offers 20,000 under two CPU hogs). The figure
that matters is whether the telemetry kept up: rows committed per second, and acked frames that
ended without a row (drops, counted by the executor and checked against the table by ``run_rate``).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from bench.harness.processes import ExecutorSpec
from bench.scenarios.throughput import ThroughputResult, run_rate

PIPELINE_FRAMES: Final = 64
"""Frames per client write (frames): the issue's pipelining client."""

RELIABILITY_CONNECTIONS: Final = 4
RELIABILITY_RATE: Final = 40_000.0
"""Frames/s offered in all by the four connections by default (issue 17's zero-drop target)."""

SATURATION_HEADER: Final = (
    "run",
    "executor",
    "load",
    "connections",
    "offered_per_s",
    "seconds",
    "sent",
    "acked",
    "rows_written",
    "drops",
    "accepted_per_s",
    "rows_per_s",
    "wake_recv_p50_us",
    "wake_recv_p99_us",
)


def saturation_loads(rate: float = RELIABILITY_RATE) -> tuple[tuple[str, int, float], ...]:
    """(name, connections, total offered frames/s; 0 = flat out): one connection flat out, and
    the four connections at ``rate`` (named ``four-at-40k`` for 40,000)."""
    return (
        ("one-flat-out", 1, 0.0),
        (f"four-at-{rate / 1000:g}k", RELIABILITY_CONNECTIONS, rate),
    )


def run_saturation(
    executors: Sequence[ExecutorSpec],
    runs: int,
    seconds: float,
    progress: Callable[[str], None],
    rate: float = RELIABILITY_RATE,
) -> list[tuple[int, str, ThroughputResult]]:
    """Every load against every executor, ``runs`` times, interleaved: (run, load, result)."""
    results = []
    for run in range(1, runs + 1):
        for load, connections, offered in saturation_loads(rate):
            for spec in executors:
                progress(f"saturation run {run}/{runs}: {spec.name}, {load}")
                result = run_rate(spec, connections, seconds, offered, PIPELINE_FRAMES)
                results.append((run, load, result))
    return results


def write_saturation(path: Path, results: Sequence[tuple[int, str, ThroughputResult]]) -> None:
    """``saturation.csv``: one row per run x load x executor."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(SATURATION_HEADER)
        for run, load, result in results:
            out.writerow(
                [
                    run,
                    result.executor,
                    load,
                    result.connections,
                    repr(result.offered_rate),
                    repr(result.seconds),
                    result.sent,
                    result.acked,
                    result.rows_written,
                    result.drops,
                    repr(result.accepted_per_s),
                    repr(result.rows_per_s),
                    repr(result.wake_recv_p50_us),
                    repr(result.wake_recv_p99_us),
                ]
            )


def saturation_lines(results: Sequence[tuple[int, str, ThroughputResult]]) -> list[str]:
    """Per load and executor: median [min/max] acked/s and rows/s, total drops."""
    grouped: dict[tuple[str, str], list[ThroughputResult]] = {}
    for _, load, result in results:
        grouped.setdefault((load, result.executor), []).append(result)
    if not grouped:
        return []
    lines = [f"saturation ({PIPELINE_FRAMES} frames per write): median [min/max] across runs"]
    for (load, executor), items in grouped.items():
        acked = [item.accepted_per_s for item in items]
        rows = [item.rows_per_s for item in items]
        p50 = statistics.median(item.wake_recv_p50_us for item in items)
        p99 = statistics.median(item.wake_recv_p99_us for item in items)
        lines.append(
            f"{load:>12} {executor:>10}: acked {statistics.median(acked):8.0f}"
            f" [{min(acked):.0f}/{max(acked):.0f}]/s  rows {statistics.median(rows):8.0f}"
            f" [{min(rows):.0f}/{max(rows):.0f}]/s  drops {sum(i.drops for i in items)}"
            f" of {sum(i.acked for i in items)} acked  wake_recv p50 {p50:.1f} p99 {p99:.1f} us"
            f"  runs={len(items)}"
        )
    return lines
