"""``executor stats --plot``: a latency CDF per stage and per-minute p50/p99 over the window.

matplotlib is an optional extra (``trio-executor[plot]``); ``executor.stats.command`` checks it is
installed before importing this module. It is imported by name because the executor itself must
not depend on it.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Final

from executor.stats.percentile import percentile
from executor.stats.queries import Report, StatsError

MINUTE_MS: Final = 60_000
"""Width of one bucket of the time series (ms)."""


def per_minute(samples: list[tuple[int, float]]) -> list[tuple[int, float, float]]:
    """``(minute start ms, p50, p99)`` per minute that has rows, in time order."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for started_at_ms, duration in samples:
        buckets[started_at_ms - started_at_ms % MINUTE_MS].append(duration)
    return [
        (minute, percentile(values, 0.5), percentile(values, 0.99))
        for minute, values in sorted(buckets.items())
    ]


def plot_report(report: Report, path: Path) -> None:
    """Write the two-panel PNG of ``report.series`` to ``path``.

    Raises:
        StatsError: the file cannot be written.
    """
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    dates: Any = importlib.import_module("matplotlib.dates")
    import datetime as dt

    series = report.series
    figure, (cdf_axes, time_axes) = plt.subplots(1, 2, figsize=(13, 5))
    for stage, samples in sorted(series.items()):
        ordered = sorted(duration for _, duration in samples)
        if not ordered:
            continue
        fractions = [(index + 1) / len(ordered) for index in range(len(ordered))]
        cdf_axes.step(ordered, fractions, where="post", label=f"{stage} (n={len(ordered)})")
        buckets = per_minute(samples)
        times = [dt.datetime.fromtimestamp(minute / 1000, tz=dt.UTC) for minute, _, _ in buckets]
        (line,) = time_axes.plot(times, [p50 for _, p50, _ in buckets], label=f"{stage} p50")
        time_axes.plot(
            times,
            [p99 for _, _, p99 in buckets],
            linestyle="--",
            color=line.get_color(),
            label=f"{stage} p99",
        )
    positive = any(duration > 0 for samples in series.values() for _, duration in samples)
    if positive:
        cdf_axes.set_xscale("log")
        time_axes.set_yscale("log")
    cdf_axes.set_xlabel("duration (ms)")
    cdf_axes.set_ylabel("fraction of rows")
    cdf_axes.set_title("latency CDF per stage")
    time_axes.set_xlabel("minute (UTC)")
    time_axes.set_ylabel("duration (ms)")
    time_axes.set_title("per-minute p50 (solid) and p99 (dashed)")
    time_axes.xaxis.set_major_formatter(dates.DateFormatter("%H:%M"))
    for axes in (cdf_axes, time_axes):
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize="small")
    figure.suptitle(f"{report.database}")
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as error:
        raise StatsError(f"cannot write the plot to {path}: {error.strerror or error}") from None
    finally:
        plt.close(figure)
