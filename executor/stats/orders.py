"""``executor orders``: the recent orders of a telemetry database, newest first, read-only.

Every real order the executor placed or refused has an ``orders_fired`` row (a ``pending`` row
upserted by its resolution, or a ``rejected`` row). This command lists them without SQL: a table
for a terminal, or ``--json`` for a script. The file is opened the way ``executor stats`` opens it
(``executor.stats.queries.open_read_only``), so it is safe beside a running executor.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from executor.recording.rows import OrderStatus
from executor.recording.schema import default_telemetry_db
from executor.runtime.exit_codes import EXIT_OK, EXIT_USAGE
from executor.runtime.usage import OneLineParser, positive_int
from executor.stats.command import (
    add_telemetry_db_argument,
    parse_since,
)
from executor.stats.output import write_report
from executor.stats.queries import StatsError, open_read_only

SCHEMA_ID: Final = "trio-executor.orders/1"
"""The ``--json`` document's ``schema`` value; bumped on any incompatible change."""

DEFAULT_LIMIT: Final = 20
"""Rows shown without ``--limit``: a screenful."""

STATUSES: Final = tuple(status.value for status in OrderStatus)
"""``orders_fired.status`` values (the table's CHECK), in the order the table lists them."""


COLUMNS: Final = (
    "id",
    "correlation_id",
    "client_order_id",
    "kalshi_order_id",
    "ticker",
    "correlation_group",
    "outcome_side",
    "count",
    "price_dollars",
    "time_in_force",
    "status",
    "error_message",
    "fill_count",
    "remaining_count",
    "average_fill_price",
    "average_fee_paid",
    "requested_at_ms",
    "submitted_at_ms",
    "acknowledged_at_ms",
)
"""The columns read and put in the JSON document, in the table's order."""


@dataclass(frozen=True)
class OrderQuery:
    """Which orders to list."""

    since_ms: int | None = None
    statuses: tuple[str, ...] = ()
    ticker: str | None = None
    limit: int = DEFAULT_LIMIT


def read_orders(connection: sqlite3.Connection, query: OrderQuery) -> list[dict[str, Any]] | None:
    """The matching rows, newest first; None when the file has no ``orders_fired`` table."""
    (present,) = connection.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'orders_fired'"
    ).fetchone()
    if not present:
        return None
    clauses: list[str] = []
    params: list[Any] = []
    if query.since_ms is not None:
        clauses.append("requested_at_ms >= ?")
        params.append(query.since_ms)
    if query.statuses:
        clauses.append(f"status IN ({', '.join('?' for _ in query.statuses)})")
        params.extend(query.statuses)
    if query.ticker is not None:
        clauses.append("ticker = ?")
        params.append(query.ticker)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    cursor = connection.execute(
        f"SELECT {', '.join(COLUMNS)} FROM orders_fired{where}"
        " ORDER BY requested_at_ms DESC, id DESC LIMIT ?",
        [*params, query.limit],
    )
    return [dict(zip(COLUMNS, row, strict=True)) for row in cursor]


def render_table(orders: Sequence[dict[str, Any]]) -> str:
    """The orders as aligned columns, one line each (times in UTC)."""
    headers: tuple[str, ...] = ("requested (UTC)", "ticker", "side", "count", "price", "status")
    headers += ("filled", "exchange order id", "error")
    lines = [
        (
            _time(order["requested_at_ms"]),
            order["ticker"],
            order["outcome_side"],
            _text(order["count"]),
            _text(order["price_dollars"]),
            order["status"],
            _text(order["fill_count"]),
            _text(order["kalshi_order_id"]),
            _message(order["error_message"]),
        )
        for order in orders
    ]
    widths = [max(len(row[index]) for row in [headers, *lines]) for index in range(len(headers))]
    numeric = {3, 4, 6}  # right-aligned: count, price, filled
    rendered = []
    for row in [headers, *lines]:
        cells = [
            cell.rjust(width) if index in numeric else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        rendered.append("  ".join(cells).rstrip())
    return "\n".join(rendered)


def render_text(database: Path, query: OrderQuery, orders: list[dict[str, Any]] | None) -> str:
    """The whole text report: a title line and the table (or why there is none)."""
    window = "all rows" if query.since_ms is None else "since " + _time(query.since_ms)
    filters = [f"status {','.join(query.statuses)}"] if query.statuses else []
    if query.ticker is not None:
        filters.append(f"ticker {query.ticker}")
    title = f"{database} ({', '.join([window, *filters])}; newest first, at most {query.limit})"
    if orders is None:
        return (
            f"{title}\norders_fired: no such table"
            " (not a file trio-executor wrote: it always creates one)"
        )
    if not orders:
        return f"{title}\nno orders"
    return f"{title}\n{render_table(orders)}"


def to_json(
    database: Path, query: OrderQuery, orders: list[dict[str, Any]] | None, now_ms: int
) -> dict[str, Any]:
    """The ``--json`` document (docs/operations/monitoring.md gives its schema)."""
    return {
        "schema": SCHEMA_ID,
        "database": str(database),
        "generated_at_ms": now_ms,
        "since_ms": query.since_ms,
        "statuses": list(query.statuses) or None,
        "ticker": query.ticker,
        "limit": query.limit,
        "orders": orders,
    }


def _time(epoch_ms: int) -> str:
    moment = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def _message(value: str | None) -> str:
    """The error on one line, whole: it is the last column, so its length misaligns nothing,
    and its end is often the part to act on ("... reset it to place orders")."""
    return " ".join(value.split()) if value else ""


def _statuses(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in STATUSES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"expected one or more of {', '.join(STATUSES)} (comma-separated), got {text!r}"
        )
    return names


def build_parser() -> argparse.ArgumentParser:
    """The ``executor orders`` argument parser."""
    parser = OneLineParser(
        prog="executor orders",
        description="List the recent orders of a telemetry database (orders_fired), newest "
        "first, without disturbing its writers.",
    )
    add_telemetry_db_argument(parser)
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only orders requested in this window: a duration back from now (15m, 24h, 7d, 90s) "
        "or an ISO time (2026-11-30T14:00:00Z; UTC when no zone is given)",
    )
    parser.add_argument(
        "--status",
        type=_statuses,
        default=(),
        metavar="STATUS[,STATUS]",
        help=f"only these statuses ({', '.join(STATUSES)})",
    )
    parser.add_argument("--ticker", help="only this market ticker (exact)")
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"at most N orders (default {DEFAULT_LIMIT})",
    )
    parser.add_argument(
        "--json", action="store_true", help=f"print one JSON document (schema {SCHEMA_ID})"
    )
    return parser


def orders_main(argv: list[str]) -> int:
    """``executor orders [--telemetry-db PATH] [--since WHEN] [--status S] [--ticker T] ...``.

    Returns:
        0 on success (a closed stdout included); 2 with one line on stderr for bad input.
    """
    args = build_parser().parse_args(argv)
    if args.telemetry_db is None:
        args.telemetry_db = default_telemetry_db()
    now_ms = time.time_ns() // 1_000_000
    try:
        since_ms = parse_since(args.since, now_ms) if args.since is not None else None
        query = OrderQuery(since_ms, args.status, args.ticker, args.limit)
        connection = open_read_only(args.telemetry_db)
        try:
            orders = read_orders(connection, query)
        except sqlite3.DatabaseError as error:
            raise StatsError(f"{args.telemetry_db}: cannot read: {error}") from None
        finally:
            connection.close()
    except StatsError as error:
        print(f"executor orders: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        document = to_json(args.telemetry_db, query, orders, now_ms)
        write_report(json.dumps(document, indent=2))
    else:
        write_report(render_text(args.telemetry_db, query, orders))
    return EXIT_OK


__all__ = ["SCHEMA_ID", "OrderQuery", "orders_main", "read_orders", "render_table"]
