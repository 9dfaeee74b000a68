"""The ``orders_fired`` rows whose outcome is still to be learned, and reconciliation's words.

At start-up, before the socket is published, the executor asks the exchange about every order of
the last :data:`LIVE_WINDOW_MS` that did not reach a final state
(``executor.exchange.follow.reconcile``). This module finds them: rows whose status is ``pending``
(the run died between sending and the resolution), ``submitted`` (an answer without a fill count),
``accepted`` (resting on the book when the run ended; likewise a good_till_canceled ``filled`` row
with contracts remaining), or ``error`` with an outcome the dispatcher could not know (its
``error_message`` starts with :data:`OUTCOME_UNKNOWN_PREFIX`, or is the shutdown text: a dispatch
cut while its request may have been on the wire). An ``error`` row the exchange was found not to
have (:data:`NO_SUCH_ORDER_PREFIX`) is read again too: within the live window "absent" is never the
last word (an exchange that listed late once fooled four lookups). Every other ``error`` (a 4xx, a
connect failure) was a definite refusal and is left alone. :func:`is_open` is the same rule on one
row; :func:`startup_cause` says why a row is unresolved; :func:`rests` whether its order may still
be on the book.

The ``error_message`` prefixes reconciliation writes live here too, beside the query that reads
them (and ``executor stats``, which counts them): one vocabulary for the writer and the readers.
The file is read in a worker thread (blocking).

The rows come back whole, as :class:`~executor.recording.rows.OrderRow` values of kind
``RESOLUTION``, so a correction is the same row with the exchange's columns replaced;
:func:`write_corrections` commits the corrections (the writer's upsert) before the risk gate's
warm start reads the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from executor.recording.database import close_database, open_database, read_orders_fired
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from executor.recording.sqlite_writer import BatchOutcome, write_batch

OUTCOME_UNKNOWN_PREFIX: Final = "outcome unknown: "
"""How the dispatcher's ``error`` row begins when the order may have been placed: the marker a
later start-up looks for (the cause follows it)."""

CANCELLED_AT_SHUTDOWN: Final = "cancelled at shutdown"
"""The dispatcher's text for a dispatch cut by shutdown (DISPATCH.md §4 step 7)."""

RECONCILED_PREFIX: Final = "reconciled with the exchange after: "
"""How a row the exchange's answer corrected begins its ``error_message`` (the cause follows)."""

NO_SUCH_ORDER_PREFIX: Final = "the exchange has no such order after: "
"""How an ``error`` row begins when the exchange, asked, did not have the order."""

LIVE_WINDOW_MS: Final = 30 * 24 * 3600 * 1000
"""How far back (ms) the exchange's live ``GET /portfolio/orders`` is taken to list every order,
so start-up asks again about rows this young and a lookup may conclude "absent" for them. Kalshi
targets 3 months for its live tier and moves the cutoff forward in steps it does not publish
(getting_started_historical_data.md); a month sits well inside that whatever the step. A guess
at the step, not a published figure; older rows would need ``GET /historical/orders``."""
ADOPTED_MESSAGE: Final = "adopted from the exchange: no local record"
"""The ``error_message`` of a row written for an order found on the exchange with this
installation's prefix and no row (``executor.exchange.follow.adoption``)."""

_COLUMNS: Final = (
    "correlation_id, client_order_id, kalshi_order_id, ticker, correlation_group, outcome_side,"
    " count, price_dollars, time_in_force, self_trade_prevention_type, post_only, status,"
    " error_message, fill_count, remaining_count, average_fill_price, average_fee_paid,"
    " requested_at_ms, submitted_at_ms, acknowledged_at_ms"
)

OPEN_ROWS_WHERE: Final = (
    "(status IN ('pending', 'submitted', 'accepted')"
    " OR (status = 'filled' AND time_in_force = 'good_till_canceled'"
    "     AND CAST(remaining_count AS REAL) > 0)"
    " OR (status = 'error' AND kalshi_order_id IS NULL"
    "     AND (substr(error_message, 1, ?) = ? OR error_message = ?)))"
)
"""The rows whose outcome is still to be learned, as SQL (:data:`OPEN_ROWS_PARAMS` fill it):
what the account poll follows and start-up asks about (``executor stats`` counts them)."""
OPEN_ROWS_PARAMS: Final = (
    len(OUTCOME_UNKNOWN_PREFIX),
    OUTCOME_UNKNOWN_PREFIX,
    CANCELLED_AT_SHUTDOWN,
)

_OPEN_ORDERS_SQL: Final = (
    f"SELECT {_COLUMNS} FROM orders_fired WHERE requested_at_ms > ? AND ({OPEN_ROWS_WHERE}"
    " OR (status = 'error' AND kalshi_order_id IS NULL AND substr(error_message, 1, ?) = ?))"
    " ORDER BY requested_at_ms, id"
)


GOOD_TILL_CANCELED: Final = "good_till_canceled"
"""The time in force whose orders rest on the book."""


def startup_cause(row: OrderRow) -> str | None:
    """Why an earlier run's row is unresolved (None for a resting order, which is followed); an
    ``error`` row's cause without the marker it carries (outcome unknown, or no such order)."""
    message = row.error_message or ""
    if row.status is OrderStatus.ERROR:
        cause = message.removeprefix(OUTCOME_UNKNOWN_PREFIX).removeprefix(NO_SUCH_ORDER_PREFIX)
        return cause or CANCELLED_AT_SHUTDOWN
    if row.status in (OrderStatus.PENDING, OrderStatus.SUBMITTED):
        return f"left {row.status} by an earlier run"
    return None


def rests(row: OrderRow) -> bool:
    """Whether a row's order may still be on the book: good_till_canceled, contracts remaining."""
    if row.time_in_force != GOOD_TILL_CANCELED or row.status not in (
        OrderStatus.ACCEPTED,
        OrderStatus.FILLED,
    ):
        return False
    try:
        return float(row.remaining_count or "0") > 0
    except ValueError:
        return False


def is_open(row: OrderRow) -> bool:
    """Whether the exchange has still to say how ``row``'s order ended (:data:`OPEN_ROWS_WHERE`
    on one row): pending, submitted, accepted, resting partly filled, or an unknown outcome."""
    if row.status in (OrderStatus.PENDING, OrderStatus.SUBMITTED, OrderStatus.ACCEPTED):
        return True
    if row.status is OrderStatus.FILLED:
        return rests(row)
    if row.status is OrderStatus.ERROR and row.kalshi_order_id is None:
        message = row.error_message or ""
        return message.startswith(OUTCOME_UNKNOWN_PREFIX) or message == CANCELLED_AT_SHUTDOWN
    return False


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


__all__ = [
    "ADOPTED_MESSAGE",
    "CANCELLED_AT_SHUTDOWN",
    "LIVE_WINDOW_MS",
    "NO_SUCH_ORDER_PREFIX",
    "OPEN_ROWS_PARAMS",
    "OPEN_ROWS_WHERE",
    "OUTCOME_UNKNOWN_PREFIX",
    "RECONCILED_PREFIX",
    "is_open",
    "load_open_orders",
    "rests",
    "startup_cause",
    "write_corrections",
]
