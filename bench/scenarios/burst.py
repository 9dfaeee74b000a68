"""The burst scenario's own outputs: ``burst.csv``, one-connection throughput, printed lines.

The burst clients' samples go to ``summary.csv`` / ``samples.csv`` like every span (client names
``burst-asyncio`` and ``burst-uvloop``); this module adds what only a burst has (the tail's max,
the deepest queue, the burst's frame rate, and for the reference-policy clients the wakes their
queue dropped) and the one-connection flat-out throughput that goes
with it (docs/performance/plan/, addendum 2026-11-30).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from bench.clients.reference_burst import REFERENCE_KINDS
from bench.harness.placement import trio_reference
from bench.harness.processes import ExecutorSpec
from bench.harness.runner import BURST_CLIENTS, Series
from bench.reports.output import percentiles_of
from bench.scenarios.throughput import ThroughputResult, run_rate

BURST_HEADER: Final = (
    "run",
    "executor",
    "client",
    "n",
    "warmup",
    "p50_us",
    "p90_us",
    "p99_us",
    "max_us",
    "deepest_queue",
    "frames_per_s",
    "lost",
)
THROUGHPUT_HEADER: Final = (
    "run",
    "executor",
    "connections",
    "seconds",
    "sent",
    "acked",
    "rows_written",
    "drops",
    "accepted_per_s",
)


def burst_series(series: Sequence[Series]) -> list[Series]:
    """The ``wake_send`` series the burst clients measured, in run order."""
    return [s for s in series if s.client in BURST_CLIENTS and s.span == "wake_send"]


def burst_row(item: Series) -> list[object]:
    """One ``burst.csv`` row for one burst client's ``wake_send`` series."""
    values = percentiles_of(item.samples_us)
    figures = dict(item.figures)
    return [
        item.run,
        item.executor,
        item.client,
        len(item.samples_us),
        item.warmup,
        repr(values["p50"]),
        repr(values["p90"]),
        repr(values["p99"]),
        repr(max(item.samples_us)),
        int(figures.get("deepest_queue", -1)),
        repr(figures.get("frames_per_s", 0.0)),
        int(figures.get("lost", 0)),  # the burst-* clients block rather than drop: always 0
    ]


def write_burst(path: Path, series: Sequence[Series]) -> int:
    """``burst.csv``: one row per run x executor x burst client; returns the rows written."""
    rows = [burst_row(item) for item in burst_series(series)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(BURST_HEADER)
        out.writerows(rows)
    return len(rows)


def burst_lines(series: Sequence[Series]) -> list[str]:
    """Per executor x burst client: medians across runs of p50/p90/p99/max, queue and rate."""
    grouped: dict[tuple[str, str], list[Series]] = {}
    for item in burst_series(series):
        grouped.setdefault((item.executor, item.client), []).append(item)
    if not grouped:
        return []
    lines = [
        "burst wake_send (enqueue -> drain returned), microseconds; median across runs"
        " [min/max of each run's value]"
    ]
    for (executor, client), items in grouped.items():
        per_run = [percentiles_of(item.samples_us) for item in items]
        parts = []
        for name in ("p50", "p90", "p99"):
            values = [run[name] for run in per_run]
            parts.append(_triple(name, values))
        parts.append(_triple("max", [max(item.samples_us) for item in items]))
        queues = [dict(item.figures).get("deepest_queue", -1.0) for item in items]
        rates = [dict(item.figures).get("frames_per_s", 0.0) for item in items]
        lines.append(
            f"{executor:>10} x {client:<13} "
            + "  ".join(parts)
            + f"  deepest_queue {statistics.median(queues):.0f}"
            + f" [{min(queues):.0f}/{max(queues):.0f}]"
            + f"  {statistics.median(rates):.0f} frames/s  n={len(items[0].samples_us)}"
            + f" runs={len(items)}"
            + _lost_text(client, items)
        )
    return lines


def _lost_text(client: str, items: Sequence[Series]) -> str:
    """``lost`` over every run of a reference client (whose queue drops), with its offer."""
    if client not in REFERENCE_KINDS:
        return ""
    lost = [int(dict(item.figures).get("lost", 0)) for item in items]
    offered = sum(item.warmup + len(item.samples_us) for item in items) + sum(lost)
    return f"  lost {sum(lost)} of {offered} wakes offered (per run {'/'.join(map(str, lost))})"


def _triple(name: str, values: Sequence[float]) -> str:
    return f"{name} {statistics.median(values):8.1f} [{min(values):.1f}/{max(values):.1f}]"


def single_connection_throughput(
    executors: Sequence[ExecutorSpec],
    runs: int,
    seconds: float,
    progress: Callable[[str], None],
) -> list[tuple[int, ThroughputResult]]:
    """One flat-out flood connection per executor, ``runs`` times interleaved: (run, result)."""
    results = []
    for run in range(1, runs + 1):
        for spec in executors:
            progress(f"throughput run {run}/{runs}: {spec.name}, one connection flat out")
            results.append((run, run_rate(spec, 1, seconds, 0.0)))
    return results


def write_throughput(path: Path, results: Sequence[tuple[int, ThroughputResult]]) -> None:
    """``throughput.csv``: one row per run x executor."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(THROUGHPUT_HEADER)
        for run, result in results:
            out.writerow(
                [
                    run,
                    result.executor,
                    result.connections,
                    repr(result.seconds),
                    result.sent,
                    result.acked,
                    result.rows_written,
                    result.drops,
                    repr(result.accepted_per_s),
                ]
            )


def throughput_lines(results: Sequence[tuple[int, ThroughputResult]]) -> list[str]:
    """Median and range of accepted frames/s per executor, and the ratio to trio's median."""
    grouped: dict[str, list[ThroughputResult]] = {}
    for _, result in results:
        grouped.setdefault(result.executor, []).append(result)
    if not grouped:
        return []
    medians = {}
    for name, items in grouped.items():
        medians[name] = statistics.median(r.accepted_per_s for r in items)
    lines = ["one connection, flat out: acked frames/s, median [min/max] across runs"]
    for name, items in grouped.items():
        rates = [r.accepted_per_s for r in items]
        drops = sum(r.drops for r in items)
        ratio = ""
        trio = trio_reference(name)
        if medians.get(trio) and name != trio:
            ratio = f"  {name} / {trio} {medians[name] / medians[trio]:.3f}x"
        lines.append(
            f"{name:>10}: {medians[name]:9.0f} [{min(rates):.0f}/{max(rates):.0f}] frames/s"
            f"  drops={drops} runs={len(items)}{ratio}"
        )
    return lines
