"""The ``orders_fired`` rows whose outcome is still to be learned, read for start-up.

At start-up, before the socket is published, the executor asks the exchange about every order of
the last :data:`LIVE_WINDOW_MS` that did not reach a final state
(``executor.exchange.follow.reconcile``). :func:`load_open_orders` finds them: the open rows
(``executor.recording.orders.terms``, which says which rows are open and holds the
``error_message`` words), and also the ``error`` rows the exchange was found not to have
(:data:`~executor.recording.orders.terms.NO_SUCH_ORDER_PREFIX`): within the live window "absent" is
never the last word (an exchange that listed late once fooled four lookups). The file is read in
a worker thread (blocking).

The rows come back whole, as :class:`~executor.recording.rows.OrderRow` values of kind
``RESOLUTION``, so a correction is the same row with the exchange's columns replaced;
:func:`write_corrections` commits the corrections (the writer's upsert) before the risk gate's
warm start reads the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from executor.recording.database import close_database, open_database, read_orders_fired
from executor.recording.orders.terms import NO_SUCH_ORDER_PREFIX, OPEN_ROWS_PARAMS, OPEN_ROWS_WHERE
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from executor.recording.sqlite_writer import BatchOutcome, write_batch

LIVE_WINDOW_MS: Final = 30 * 24 * 3600 * 1000
"""How far back (ms) the exchange's live ``GET /portfolio/orders`` is taken to list every order,
so start-up asks again about rows this young and a lookup may conclude "absent" for them. Kalshi
targets 3 months for its live tier and moves the cutoff forward in steps it does not publish
(getting_started_historical_data.md); a month sits well inside that whatever the step. A guess
at the step, not a published figure; older rows would need ``GET /historical/orders``."""

_COLUMNS: Final = (
    "correlation_id, client_order_id, kalshi_order_id, ticker, correlation_group, outcome_side,"
    " count, price_dollars, time_in_force, self_trade_prevention_type, post_only, status,"
    " error_message, fill_count, remaining_count, average_fill_price, average_fee_paid,"
    " requested_at_ms, submitted_at_ms, acknowledged_at_ms"
)

_OPEN_ORDERS_SQL: Final = (
    f"SELECT {_COLUMNS} FROM orders_fired WHERE requested_at_ms > ? AND ({OPEN_ROWS_WHERE}"
    " OR (status = 'error' AND kalshi_order_id IS NULL AND substr(error_message, 1, ?) = ?))"
    " ORDER BY requested_at_ms, id"
)


def load_open_orders(db_path: Path, since_ms: int) -> list[OrderRow]:
    """The rows requested after ``since_ms`` whose outcome is still to be learned, and those the
    exchange was found not to have, oldest first (start-up passes now less
    :data:`LIVE_WINDOW_MS`).

    The file is opened read-only; a missing file or one without ``orders_fired`` gives ``[]``.

    Raises:
        sqlite3.Error: the file exists but cannot be read.
    """
    rows = read_orders_fired(
        db_path,
        _OPEN_ORDERS_SQL,
        (since_ms, *OPEN_ROWS_PARAMS, len(NO_SUCH_ORDER_PREFIX), NO_SUCH_ORDER_PREFIX),
    )
    names = [name.strip() for name in _COLUMNS.split(",")]
    opened: list[OrderRow] = []
    for values in rows:
        columns: dict[str, Any] = dict(zip(names, values, strict=True))
        columns["status"] = OrderStatus(columns["status"])
        opened.append(OrderRow(kind=OrderRowKind.RESOLUTION, **columns))
    return opened


def write_corrections(db_path: Path, rows: list[OrderRow]) -> BatchOutcome:
    """Commit start-up's corrected rows before the warm start reads the table (blocking).

    A connection of its own, for this one transaction: start-up runs before any fire, so the
    telemetry writer has nothing of the order path to write beside it, and the warm start must
    read these rows committed (WAL and ``busy_timeout`` cover a reference poller writing too).

    Raises:
        TelemetryOpenError: the file cannot be opened for writing.
    """
    connection, _ = open_database(db_path)
    try:
        return write_batch(connection, list(rows))
    finally:
        close_database(connection, db_path)


__all__ = ["LIVE_WINDOW_MS", "load_open_orders", "write_corrections"]
