"""The order-state vocabulary of ``orders_fired``: which rows are still open, and the words the
writers put in ``error_message``, defined once for every writer and reader.

The dispatcher (``executor.exchange.orders.dispatcher``) writes :data:`OUTCOME_UNKNOWN_PREFIX`
and :data:`CANCELLED_AT_SHUTDOWN`; reconciliation (``executor.exchange.follow.reconcile``)
:data:`RECONCILED_PREFIX` and :data:`NO_SUCH_ORDER_PREFIX`; adoption :data:`ADOPTED_MESSAGE`.
Start-up, the account poll, the stream, the offline kill and ``executor stats`` read them back
(:func:`is_open`, :func:`rests`, :func:`startup_cause` on one row; :data:`OPEN_ROWS_WHERE` the same
rule as SQL, built from the same constants). Pure: no I/O.

A row is open while the exchange has still to say how its order ended: ``pending`` (the run died
between sending and the resolution), ``submitted`` (an answer without a fill count), ``accepted``
(resting on the book; likewise a good_till_canceled ``filled`` row with contracts remaining), or
``error`` with an outcome the dispatcher could not know (the outcome-unknown marker, or the
shutdown text: a dispatch cut while its request may have been on the wire). Every other
``error`` (a 4xx, a connect failure) was a definite refusal.
"""

from __future__ import annotations

import enum
from decimal import Decimal, InvalidOperation
from typing import Final

from executor.recording.rows import OrderRow, OrderStatus

OUTCOME_UNKNOWN_PREFIX: Final = "outcome unknown: "
"""How the dispatcher's ``error`` row begins when the order may have been placed: the marker a
later start-up looks for (the cause follows it)."""

CANCELLED_AT_SHUTDOWN: Final = "cancelled at shutdown"
"""The dispatcher's ``error_message`` for a dispatch cut by shutdown (DISPATCH.md §4 step 7;
[ours]: the reference leaves it NULL)."""

RECONCILED_PREFIX: Final = "reconciled with the exchange after: "
"""How a row the exchange's answer corrected begins its ``error_message`` (the cause follows)."""

NO_SUCH_ORDER_PREFIX: Final = "the exchange has no such order after: "
"""How an ``error`` row begins when the exchange, asked, did not have the order."""

ADOPTED_MESSAGE: Final = "adopted from the exchange: no local record"
"""The ``error_message`` of a row written for an order found on the exchange with this
installation's prefix and no row (``executor.exchange.follow.adoption``)."""

GOOD_TILL_CANCELED: Final = "good_till_canceled"
"""The one time in force whose orders rest on the book, so it is ``post_only`` and an unfilled
answer means ``accepted`` rather than ``canceled``."""

OPEN_STATUSES: Final = frozenset({OrderStatus.PENDING, OrderStatus.SUBMITTED, OrderStatus.ACCEPTED})
"""Statuses whose order the exchange has not finished with, whatever the row's other columns."""

RESTING_STATUSES: Final = frozenset({OrderStatus.ACCEPTED, OrderStatus.FILLED})
"""Statuses of a good_till_canceled order that may still rest on the book (contracts remaining)."""

OPEN_ROWS_WHERE: Final = (
    f"(status IN ({', '.join(repr(status.value) for status in sorted(OPEN_STATUSES))})"
    f" OR (status = '{OrderStatus.FILLED.value}' AND time_in_force = '{GOOD_TILL_CANCELED}'"
    "     AND CAST(remaining_count AS REAL) > 0)"
    f" OR (status = '{OrderStatus.ERROR.value}' AND kalshi_order_id IS NULL"
    "     AND (substr(error_message, 1, ?) = ? OR error_message = ?)))"
)
"""The open rows as SQL (:data:`OPEN_ROWS_PARAMS` fill it): :func:`is_open`'s rule, what the
account poll follows and start-up asks about (``executor stats`` counts them)."""

OPEN_ROWS_PARAMS: Final = (
    len(OUTCOME_UNKNOWN_PREFIX),
    OUTCOME_UNKNOWN_PREFIX,
    CANCELLED_AT_SHUTDOWN,
)
"""The parameters of :data:`OPEN_ROWS_WHERE`, in its order."""


def outcome_unknown(row: OrderRow) -> bool:
    """Whether ``row`` is an ``error`` whose order may have been placed (no exchange id; the
    outcome-unknown marker or the shutdown text)."""
    if row.status is not OrderStatus.ERROR or row.kalshi_order_id is not None:
        return False
    message = row.error_message or ""
    return message.startswith(OUTCOME_UNKNOWN_PREFIX) or message == CANCELLED_AT_SHUTDOWN


def rests(row: OrderRow) -> bool:
    """Whether a row's order may still be on the book: good_till_canceled, contracts remaining."""
    if row.time_in_force != GOOD_TILL_CANCELED or row.status not in RESTING_STATUSES:
        return False
    try:
        return float(row.remaining_count or "0") > 0
    except ValueError:
        return False


def is_open(row: OrderRow) -> bool:
    """Whether the exchange has still to say how ``row``'s order ended (:data:`OPEN_ROWS_WHERE`
    on one row): pending, submitted, accepted, resting partly filled, or an unknown outcome."""
    if row.status in OPEN_STATUSES:
        return True
    if row.status is OrderStatus.FILLED:
        return rests(row)
    return outcome_unknown(row)


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


class Rank(enum.IntEnum):
    """How far an order has gone by its row; the order ledger and the journal's replay merge
    forward only by it (``pending`` -> ``error`` of unknown outcome or not listed ->
    ``submitted`` -> on the book -> final)."""

    PENDING = 0
    UNKNOWN = 1
    """``error`` whose outcome only the exchange knows (or that it did not list)."""
    SUBMITTED = 2
    ON_BOOK = 3
    """``accepted``, or ``filled`` with contracts still resting."""
    FINAL = 4
    """``filled`` off the book, ``canceled``, ``rejected``, or an ``error`` that was a refusal."""


def decimal_of(text: str | None) -> Decimal:
    """A fixed-point column as a number (NULL or unreadable: 0)."""
    try:
        value = Decimal(text or "0")
    except InvalidOperation:
        return Decimal(0)
    return value if value.is_finite() else Decimal(0)


def resolvable(row: OrderRow) -> bool:
    """Whether ``row`` is an ``error`` a later truth may still resolve: its outcome unknown
    (:func:`outcome_unknown`), or the exchange did not list the order when asked."""
    if outcome_unknown(row):
        return True
    message = row.error_message or ""
    return (
        row.status is OrderStatus.ERROR
        and row.kalshi_order_id is None
        and message.startswith(NO_SUCH_ORDER_PREFIX)
    )


def rank_of(row: OrderRow) -> Rank:
    """How far ``row``'s order has gone (a merge never lowers it)."""
    status = row.status
    if status is OrderStatus.PENDING:
        return Rank.PENDING
    if status is OrderStatus.ERROR:
        return Rank.UNKNOWN if resolvable(row) else Rank.FINAL
    if status is OrderStatus.SUBMITTED:
        return Rank.SUBMITTED
    if status is OrderStatus.ACCEPTED or (status is OrderStatus.FILLED and rests(row)):
        return Rank.ON_BOOK
    return Rank.FINAL


def further_along(row: OrderRow, than: OrderRow) -> bool:
    """Whether ``row`` says more of its order than ``than``: a higher rank, or the same open
    rank with more filled."""
    rank, other = rank_of(row), rank_of(than)
    if rank != other:
        return rank > other
    return rank != Rank.FINAL and decimal_of(row.fill_count) > decimal_of(than.fill_count)


__all__ = [
    "ADOPTED_MESSAGE",
    "CANCELLED_AT_SHUTDOWN",
    "GOOD_TILL_CANCELED",
    "NO_SUCH_ORDER_PREFIX",
    "OPEN_ROWS_PARAMS",
    "OPEN_ROWS_WHERE",
    "OPEN_STATUSES",
    "OUTCOME_UNKNOWN_PREFIX",
    "RECONCILED_PREFIX",
    "RESTING_STATUSES",
    "Rank",
    "decimal_of",
    "further_along",
    "is_open",
    "outcome_unknown",
    "rank_of",
    "resolvable",
    "rests",
    "startup_cause",
]
