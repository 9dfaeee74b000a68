"""``executor stats``: what a telemetry database says, read without disturbing its writers.

The command line, the ``--since`` parser and the text report; the reading itself (read-only
access, the queries, the percentiles) is ``executor.stats.queries``, the PNG
``executor.stats.plot``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Final

from executor.recording.rows import Stage
from executor.recording.schema import default_telemetry_db
from executor.runtime.exit_codes import EXIT_OK, EXIT_USAGE
from executor.runtime.usage import OneLineParser
from executor.stats.output import write_report
from executor.stats.plot import check_plot_path
from executor.stats.queries import (
    SCHEMA_ID,
    LatencySummary,
    Report,
    StatsError,
    build_report,
    open_read_only,
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNIT_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str, now_ms: int) -> int:
    """``15m``, ``24h``, ``90s``, ``7d`` (ago) or an ISO 8601 time (UTC if no zone) -> epoch ms.

    Raises:
        StatsError: the text is neither.
    """
    match = _DURATION.match(text)
    if match:
        return now_ms - int(float(match.group(1)) * _UNIT_S[match.group(2)] * 1000)
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise StatsError(
            f"--since {text!r} is neither a duration (15m, 24h, 7d, 90s) nor an ISO time "
            "(2026-11-30T14:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


CROSS_CLOCK_STAGES: Final = frozenset({Stage.WIRE_ENGINE, Stage.ENGINE_ACK, Stage.STREAM_ROW})
"""Stages that start on one clock and end on another (the exchange's ``ts_ms`` and this host's):
each carries the offset between the two clocks, so it may be negative."""


def cross_clock_note(stages: set[str]) -> str:
    """Why the ``stages`` (cross-clock, with a negative percentile) can be below zero."""
    names = ", ".join(sorted(stages))
    return (
        f"note: {names} below 0: these spans start or end on the exchange's clock (the "
        "order's or update's ts_ms, whole ms), so they carry that clock's offset from this "
        "host's and its 1 ms rounding; negative means the exchange's clock is behind, not time "
        "running backwards (wire_engine + engine_ack is the true wire-to-ack round trip)"
    )


def render_text(report: Report) -> str:
    """The human-readable report."""
    window = "all rows" if report.since_ms is None else "since " + _iso(report.since_ms)
    lines = [f"{report.database} ({window})", ""]
    if report.latency:
        lines.append(
            f"{'stage':<16}{'mode':<8}{'n':>10}{'p50 ms':>12}{'p90 ms':>12}{'p99 ms':>12}"
            f"{'max ms':>12}"
        )
        for row in report.latency:
            lines.append(
                f"{row.stage:<16}{row.mode:<8}{row.n:>10}{row.p50_ms:>12.4f}{row.p90_ms:>12.4f}"
                f"{row.p99_ms:>12.4f}{row.max_ms:>12.4f}"
            )
        negative = {
            row.stage
            for row in report.latency
            if row.stage in CROSS_CLOCK_STAGES and row.p50_ms < 0  # p50 is the lowest shown
        }
        if negative:
            lines.append(cross_clock_note(negative))
    else:
        lines.append(
            "latency_events: no rows" + (f" for stage {report.stage}" if report.stage else "")
        )
    lines.append("")
    if report.orders_fired is None:
        lines.append("orders_fired: no such table")
    else:
        orders = report.orders_fired
        statuses = ", ".join(f"{name}={count}" for name, count in orders["by_status"].items())
        lines.append(f"orders_fired: {orders['total']} ({statuses or 'none'})")
        reconciliation = orders.get("reconciliation") or {}
        if any(reconciliation.values()):
            lines.append(
                "  reconciliation: "
                + " ".join(f"{name}={count}" for name, count in reconciliation.items())
            )
        halts = orders.get("exchange_halts") or {}
        if halts.get("last_refused_at_ms") is not None:
            lines.append(
                f"  exchange halts: refused_order_group={halts['refused_order_group']} "
                f"refused_paused={halts['refused_paused']} "
                f"(last {_iso(halts['last_refused_at_ms'])})"
            )
        for error in orders["top_errors"]:
            lines.append(f"  {error['count']:>8}  {error['error_message']}")
    if report.heartbeats is None:
        lines.append("heartbeats: no such table")
    else:
        lines.append(f"heartbeats: {len(report.heartbeats)}")
        for beat in report.heartbeats:
            unknown = beat.get("lookups_unknown")
            lines.append(
                f"  {beat['process']:<16} pid={beat['pid']} age={beat['age_s']:.1f}s "
                f"queue_depth={beat['queue_depth']} dropped_rows={beat['dropped_rows']}"
                + ("" if unknown is None else f" lookups_unknown={unknown}")
            )
    return "\n".join(lines)


def _iso(epoch_ms: int) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC).isoformat(timespec="seconds")


def add_telemetry_db_argument(parser: argparse.ArgumentParser) -> None:
    """``--telemetry-db PATH``, defaulting (None) to the executor's own file."""
    parser.add_argument(
        "--telemetry-db",
        type=Path,
        default=None,
        help="the SQLite file to read (default: the executor's, "
        "$XDG_STATE_HOME/trio-executor/telemetry.db)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``executor stats`` argument parser."""
    parser = OneLineParser(
        prog="executor stats",
        description="Summarise a telemetry database without disturbing its writers: latency "
        "percentiles per stage (shadow and real apart), orders by status, and heartbeats.",
    )
    add_telemetry_db_argument(parser)
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only rows from this window: a duration back from now (15m, 24h, 7d, 90s) or an ISO "
        "time (2026-11-30T14:00:00Z; UTC when no zone is given)",
    )
    parser.add_argument("--stage", help="only this latency stage (e.g. wake_recv)")
    parser.add_argument(
        "--json", action="store_true", help=f"print one JSON document (schema {SCHEMA_ID})"
    )
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="also draw a latency CDF per stage and per-minute p50/p99 to FILE (.png, .svg or "
        ".pdf; needs trio-executor[plot])",
    )
    return parser


def stats_main(argv: list[str]) -> int:
    """``executor stats [--telemetry-db PATH] [--since WHEN] [--stage S] [--json] [--plot F]``.

    Returns:
        0 on success; 2 with one line on stderr for bad input.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.telemetry_db is None:
        args.telemetry_db = default_telemetry_db()
    now_ms = time.time_ns() // 1_000_000
    try:
        if args.plot is not None:
            check_plot_path(args.plot)  # before any work: a report then a refusal helps nobody
        since_ms = parse_since(args.since, now_ms) if args.since is not None else None
        plotter = _load_plotter() if args.plot is not None else None
        connection = open_read_only(args.telemetry_db)
        try:
            report = build_report(
                connection,
                args.telemetry_db,
                now_ms=now_ms,
                since_ms=since_ms,
                stage=args.stage,
                with_series=plotter is not None,
            )
        except sqlite3.DatabaseError as error:
            raise StatsError(f"{args.telemetry_db}: cannot read: {error}") from None
        finally:
            connection.close()
        if plotter is not None:
            plotter(report, args.plot)
    except StatsError as error:
        print(f"executor stats: {error}", file=sys.stderr)
        return EXIT_USAGE
    # A reader that stops early (| head -1) is a normal end, not an error.
    if args.json:
        write_report(json.dumps(report.to_json(), indent=2, sort_keys=False))
    else:
        write_report(render_text(report))
    return EXIT_OK


def _load_plotter() -> Any:
    """The plotting function, or a one-line error when matplotlib is not installed."""
    if importlib.util.find_spec("matplotlib") is None:
        raise StatsError(
            "--plot needs matplotlib, which is not installed: pip install 'trio-executor[plot]'"
        )
    from executor.stats.plot import plot_report

    return plot_report


__all__ = [
    "SCHEMA_ID",
    "LatencySummary",
    "Report",
    "StatsError",
    "build_report",
    "open_read_only",
    "parse_since",
    "stats_main",
]
