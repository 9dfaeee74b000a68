"""``executor stats --plot``: a latency CDF per stage and per-minute p50/p99 over the window.

matplotlib is an optional extra (``trio-executor[plot]``); ``executor.stats.command`` checks it is
installed before calling into this module (importing the module itself does not import it). It is
imported by name because the executor itself must not depend on it.

When every row falls in one minute the per-minute panel would hold one point per stage on an axis
whose ticks all read the same minute; the figure then has the CDF panel alone.
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

MAX_TIME_TICKS: Final = 8
"""Most tick labels on the per-minute axis: "HH:MM" labels fit eight across a 6.5-inch panel."""

TICK_STEPS_MINUTES: Final = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080)
"""Tick spacings the per-minute axis may use (minutes): round clock steps, the smallest that keeps
at most ``MAX_TIME_TICKS`` labels wins."""

PLOT_SUFFIXES: Final = (".png", ".svg", ".pdf")
"""File types ``--plot`` writes (by the name's suffix): formats matplotlib's Agg backend saves
without further libraries."""


def check_plot_path(path: Path) -> None:
    """Refuse, before any work, a ``--plot`` file whose type cannot be written.

    Raises:
        StatsError: the suffix is not one of ``PLOT_SUFFIXES``.
    """
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise StatsError(
            f"--plot {path}: cannot write a {path.suffix or 'suffix-less'} file; "
            f"name it {', '.join('FILE' + suffix for suffix in PLOT_SUFFIXES)}"
        )


def minutes_spanned(series: dict[str, list[tuple[int, float]]]) -> int:
    """How many distinct minutes the rows of every stage fall in."""
    return len(
        {started - started % MINUTE_MS for samples in series.values() for started, _ in samples}
    )


def per_minute(samples: list[tuple[int, float]]) -> list[tuple[int, float, float]]:
    """``(minute start ms, p50, p99)`` per minute that has rows, in time order."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for started_at_ms, duration in samples:
        buckets[started_at_ms - started_at_ms % MINUTE_MS].append(duration)
    return [
        (minute, percentile(values, 0.5), percentile(values, 0.99))
        for minute, values in sorted(buckets.items())
    ]


def tick_step_minutes(first_minute_ms: int, last_minute_ms: int) -> int:
    """The spacing of the per-minute axis's ticks (minutes): whole minutes only, so no two
    ticks share an ``HH:MM`` label, and at most ``MAX_TIME_TICKS`` of them."""
    span = (last_minute_ms - first_minute_ms) // MINUTE_MS
    for step in TICK_STEPS_MINUTES:
        if span // step + 1 <= MAX_TIME_TICKS:
            return step
    return TICK_STEPS_MINUTES[-1]


def _time_axis(axes: Any, first_minute_ms: int, last_minute_ms: int) -> None:
    """Ticks on whole minutes every :func:`tick_step_minutes`, labelled by minute (and by day
    when the rows span more than one)."""
    dates: Any = importlib.import_module("matplotlib.dates")
    step = tick_step_minutes(first_minute_ms, last_minute_ms)
    if step < 60:
        locator = dates.MinuteLocator(byminute=range(0, 60, step))
    elif step < 1440:
        locator = dates.HourLocator(byhour=range(0, 24, step // 60))
    else:
        locator = dates.DayLocator(interval=step // 1440)
    one_day = last_minute_ms // (1440 * MINUTE_MS) == first_minute_ms // (1440 * MINUTE_MS)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(dates.DateFormatter("%H:%M" if one_day else "%m-%d %H:%M"))


def plot_report(report: Report, path: Path) -> None:
    """Write the figure of ``report.series`` to ``path`` (its type from the suffix).

    Raises:
        StatsError: the file cannot be written.
    """
    plt: Any = importlib.import_module("matplotlib.pyplot")
    figure = build_figure(report)
    try:
        figure.savefig(path, dpi=110)
    except OSError as error:
        raise StatsError(f"cannot write the plot to {path}: {error.strerror or error}") from None
    finally:
        plt.close(figure)


def build_figure(report: Report) -> Any:
    """The latency CDF panel, and the per-minute panel when the rows span two minutes or more."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    import datetime as dt

    series = report.series
    with_time_panel = minutes_spanned(series) >= 2
    if with_time_panel:
        figure, (cdf_axes, time_axes) = plt.subplots(1, 2, figsize=(13, 5))
    else:
        figure, cdf_axes = plt.subplots(1, 1, figsize=(7, 5))
        time_axes = None
    for stage, samples in sorted(series.items()):
        ordered = sorted(duration for _, duration in samples)
        if not ordered:
            continue
        fractions = [(index + 1) / len(ordered) for index in range(len(ordered))]
        cdf_axes.step(ordered, fractions, where="post", label=f"{stage} (n={len(ordered)})")
        if time_axes is None:
            continue
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
    cdf_axes.set_xlabel("duration (ms)")
    cdf_axes.set_ylabel("fraction of rows")
    cdf_axes.set_title("latency CDF per stage")
    panels = [cdf_axes]
    if time_axes is not None:
        if positive:
            time_axes.set_yscale("log")
        time_axes.set_xlabel("minute (UTC)")
        time_axes.set_ylabel("duration (ms)")
        time_axes.set_title("per-minute p50 (solid) and p99 (dashed)")
        minutes = [started - started % MINUTE_MS for rows in series.values() for started, _ in rows]
        _time_axis(time_axes, min(minutes), max(minutes))
        panels.append(time_axes)
    for axes in panels:
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize="small")
    title = report.database
    if time_axes is None:
        title += " (rows within one minute: no per-minute panel)"
    figure.suptitle(title)
    figure.tight_layout()
    return figure
