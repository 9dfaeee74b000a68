"""What a benchmark invocation leaves behind: CSVs, history, machine facts, printed lines, a PNG."""

from __future__ import annotations

import csv
import importlib
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from bench.harness.placement import trio_reference
from bench.harness.runner import Series
from bench.reports.stats import percentile

PERCENTILES: Final = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
SUMMARY_HEADER: Final = (
    "run",
    "executor",
    "client",
    "span",
    "n",
    "warmup",
    "p50_us",
    "p90_us",
    "p99_us",
)
SAMPLES_HEADER: Final = ("run", "executor", "client", "span", "index", "duration_us")
HISTORY_SPANS: Final = ("wake_recv", "roundtrip", "wake_send", "decode", "encode_ack", "sign")
HISTORY_HEADER: Final = (
    "utc_timestamp",
    "platform",
    "executor",
    "client",
    "warmup",
    "n",
    *(f"{span}_{name}_us" for span in HISTORY_SPANS for name, _ in PERCENTILES),
)
RATIO_HEADER: Final = "ratios of median p50 to the trio executor's (same client, same invocation):"
PACKAGES: Final = (
    "trio",
    "uvloop",
    "msgspec",
    "orjson",
    "cryptography",
    "structlog",
    "httpx",
    "h11",
    "aiohttp",
    "trio-executor",
)


def platform_tag() -> str:
    """OS, architecture and Python, with no host name: ``Linux-x86_64-CPython-3.11.7``."""
    return "-".join(
        (
            platform.system(),
            platform.machine(),
            platform.python_implementation(),
            platform.python_version(),
        )
    )


def percentiles_of(samples: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99 of one series, each from ``bench.reports.stats.percentile``."""
    return {name: percentile(samples, p) for name, p in PERCENTILES}


def write_summary(path: Path, series: Iterable[Series]) -> None:
    """``summary.csv``: one row per run x executor x client x span."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(SUMMARY_HEADER)
        for item in series:
            values = percentiles_of(item.samples_us)
            out.writerow(
                [
                    item.run,
                    item.executor,
                    item.client,
                    item.span,
                    len(item.samples_us),
                    item.warmup,
                    *(repr(values[name]) for name, _ in PERCENTILES),
                ]
            )


def write_samples(path: Path, series: Iterable[Series]) -> None:
    """``samples.csv``: one row per kept sample, so every percentile can be recomputed."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(SAMPLES_HEADER)
        for item in series:
            for index, value in enumerate(item.samples_us):
                out.writerow([item.run, item.executor, item.client, item.span, index, repr(value)])


def append_history(path: Path, series: Sequence[Series], stamp: datetime) -> int:
    """Append one row per run x configuration to the history (header only on a new file)."""
    grouped: dict[tuple[int, str, str], dict[str, Series]] = {}
    for item in series:
        grouped.setdefault((item.run, item.executor, item.client), {})[item.span] = item
    new_file = not path.exists() or path.stat().st_size == 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        if new_file:
            out.writerow(HISTORY_HEADER)
        for (_, executor, client), spans in grouped.items():
            first = next(iter(spans.values()))
            row: list[object] = [
                stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                platform_tag(),
                executor,
                client,
                first.warmup,
                len(first.samples_us),
            ]
            for span in HISTORY_SPANS:
                values = percentiles_of(spans[span].samples_us) if span in spans else {}
                row += [f"{values[name]:.3f}" if values else "" for name, _ in PERCENTILES]
            out.writerow(row)
    return len(grouped)


def machine_facts(
    load_start: tuple[float, float, float], argv: Sequence[str], background: str = "none"
) -> str:
    """The text of ``machine.txt`` (read load average at the end when this is called).

    ``background`` names the background load every run competed with (``--background-load``).
    """
    cpu_model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    lines = [
        f"platform: {platform_tag()}",
        f"python: {sys.version.split()[0]}",
        f"cpu_model: {cpu_model}",
        f"cpu_count: {os.cpu_count()}",
        "loadavg_start: {:.2f} {:.2f} {:.2f}".format(*load_start),
        "loadavg_end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()),
        f"command: {' '.join(argv)}",
        f"git_commit: {_git_commit()}",
    ]
    for package in PACKAGES:
        try:
            lines.append(f"package {package}: {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"package {package}: not installed")
    lines.append(f"background_load: {background}")
    return "\n".join(lines) + "\n"


def _git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def summary_lines(series: Sequence[Series]) -> list[str]:
    """One line per configuration and span, then the ratios to the ``trio`` executor."""
    grouped: dict[tuple[str, str, str], list[Series]] = {}
    for item in series:
        grouped.setdefault((item.executor, item.client, item.span), []).append(item)
    lines = ["latency in microseconds; value = median across runs of each run's percentile"]
    medians: dict[tuple[str, str, str], float] = {}
    for (executor, client, span), items in grouped.items():
        per_run = [percentiles_of(item.samples_us) for item in items]
        parts = []
        for name, _ in PERCENTILES:
            values = [run[name] for run in per_run]
            parts.append(
                f"{name} {statistics.median(values):9.1f} us "
                f"[{min(values):.1f}/{statistics.median(values):.1f}/{max(values):.1f}]"
            )
        medians[(executor, client, span)] = statistics.median(run["p50"] for run in per_run)
        lines.append(
            f"{executor:>10} x {client:<8} {span:<10} "
            + "  ".join(parts)
            + f"  n={len(items[0].samples_us)} warmup={items[0].warmup} runs={len(items)}"
        )
    lines.append("  ([min/median/max] across runs of each percentile)")
    lines += ratio_lines(medians)
    return lines


def ratio_lines(medians: dict[tuple[str, str, str], float]) -> list[str]:
    """Each executor's median ``wake_recv`` and ``roundtrip`` p50 over trio's, same client."""
    lines = [RATIO_HEADER]
    found = False
    for (executor, client, span), value in medians.items():
        trio = trio_reference(executor)
        if executor == trio or span not in ("wake_recv", "roundtrip"):
            continue
        reference = medians.get((trio, client, span))
        if reference:
            found = True
            lines.append(
                f"  {executor} / {trio}  {span:<10} (client {client}): {value / reference:.3f}x"
            )
    if not found:
        lines.append("  (no ratio: the trio executor was not in this invocation)")
    return lines


def _short_name(executor: str) -> str:
    """A ``cmd:`` executor named by its program (and flags), without its directory."""
    if not executor.startswith("cmd:"):
        return executor
    words = executor[len("cmd:") :].split()
    if len(words) >= 4 and words[1:3] == ["-m", "bench.experiments.variants"]:
        return f"trio [{words[3]}]"
    if len(words) >= 3 and words[1:3] == ["-m", "executor"]:
        return "trio " + " ".join(words[4:]) if len(words) > 4 else "trio"
    return "cmd:" + " ".join([Path(words[0]).name, *words[1:]]) if words else executor


EXECUTOR_COLOURS: Final = {
    "trio": "tab:orange",
    "uvloop": "tab:blue",
    "asyncio": "tab:green",
    "in-process": "tab:gray",
}
"""One colour per executor in every panel of every picture (others take OTHER_COLOURS in turn)."""
OTHER_COLOURS: Final = ("tab:purple", "tab:red", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
CLIENT_STYLES: Final = ("-", "--", ":", "-.")
"""Line styles told apart by client (or fire kind), in sorted order, the same in every panel."""


def plot_styles(series: Sequence[Series]) -> tuple[dict[str, str], dict[str, str]]:
    """(executor -> colour, client -> line style), fixed for the whole picture."""
    colours: dict[str, str] = {}
    others = iter(OTHER_COLOURS * (1 + len(series)))
    for executor in sorted({item.executor for item in series}):
        colours[executor] = EXECUTOR_COLOURS.get(executor) or next(others)
    clients = sorted({item.client for item in series})
    styles = {client: CLIENT_STYLES[i % len(CLIENT_STYLES)] for i, client in enumerate(clients)}
    return colours, styles


def _log_ticks(axes: Any, ticker: Any, lowest: float, highest: float) -> None:
    """Plain-number ticks that never overlap: decades, or 1-2-5 within a narrow range."""
    narrow = highest <= lowest * 30
    subs = (1.0, 2.0, 5.0) if narrow else (1.0,)
    axes.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    axes.xaxis.set_minor_formatter(ticker.NullFormatter())
    axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axes.tick_params(axis="x", labelsize=8)


def write_plot(path: Path, series: Sequence[Series], span_order: Sequence[str] = ()) -> str:
    """A log-x CDF per configuration and span, if matplotlib imports; returns what happened.

    Panels follow ``span_order`` (spans it does not name come after, alphabetically).
    """
    try:
        # Imported by name: matplotlib is optional and has no stubs in this environment.
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
        ticker: Any = importlib.import_module("matplotlib.ticker")
    except ImportError:
        return "plot skipped: matplotlib is not installed"
    # One panel per span, one CDF per executor x client in it: pooled over runs.
    colours, styles = plot_styles(series)
    by_span: dict[str, dict[tuple[str, str], list[float]]] = {}
    for item in series:
        key = (item.executor, item.client)
        by_span.setdefault(item.span, {}).setdefault(key, []).extend(item.samples_us)
    rank = {span: index for index, span in enumerate(span_order)}
    spans = sorted(by_span, key=lambda span: (rank.get(span, len(rank)), span))
    columns = min(3, len(spans))
    rows = (len(spans) + columns - 1) // columns
    figure, panels = plt.subplots(rows, columns, figsize=(6 * columns, 4.5 * rows), squeeze=False)
    for index, span in enumerate(spans):
        axes = panels[index // columns][index % columns]
        for (executor, client), values in sorted(by_span[span].items()):
            ordered = sorted(values)
            axes.plot(
                ordered,
                [(i + 1) / len(ordered) for i in range(len(ordered))],
                label=f"{_short_name(executor)} x {client}",
                color=colours[executor],
                linestyle=styles[client],
                marker="o" if len(ordered) < 30 else None,
                markersize=3,
            )
        axes.set_xscale("log")
        everything = [v for values in by_span[span].values() for v in values if v > 0]
        if everything:
            _log_ticks(axes, ticker, min(everything), max(everything))
        axes.set_title(span)
        axes.set_xlabel("duration (µs, log scale)")
        axes.set_ylabel("fraction of samples (runs pooled)")
        axes.grid(True, which="both", alpha=0.3)
    for index in range(len(spans), rows * columns):
        panels[index // columns][index % columns].set_visible(False)
    # One legend for the whole picture: a colour per executor, a line style per client or kind.
    lines: Any = importlib.import_module("matplotlib.lines")
    handles = [
        lines.Line2D([], [], color=colour, label=_short_name(executor))
        for executor, colour in colours.items()
    ] + [
        lines.Line2D([], [], color="black", linestyle=style, label=client)
        for client, style in styles.items()
    ]
    legend_rows = (len(handles) + 5) // 6
    figure.legend(handles=handles, loc="lower center", ncol=6, fontsize="small", frameon=False)
    figure.tight_layout(rect=(0.0, 0.04 * legend_rows / rows, 1.0, 1.0))
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"plot written: {path}"
