"""How far an order has gone, from its row: the one order the ledger and the journal's replay
merge by (forward only).

``pending`` -> ``error`` of unknown outcome (or not listed) -> ``submitted`` -> on the book
(``accepted``, or ``filled`` with contracts still resting) -> final (``filled`` off the book,
``canceled``, ``rejected``, or an ``error`` that was a definite refusal). Within one rank the fill
count says which row is further along. Pure: the order ledger
(``executor.exchange.follow.ledger``) and start-up's journal replay
(``executor.recording.journal_replay``) both rank rows with it.
"""

from __future__ import annotations

import enum
from decimal import Decimal, InvalidOperation

from executor.recording.order_terms import (
    CANCELLED_AT_SHUTDOWN,
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    rests,
)
from executor.recording.rows import OrderRow, OrderStatus


class Rank(enum.IntEnum):
    """How far an order has gone; a row never moves to a lower rank."""

    PENDING = 0
    UNKNOWN = 1
    """``error`` whose outcome only the exchange knows (or that it did not list)."""
    SUBMITTED = 2
    ON_BOOK = 3
    FINAL = 4


def decimal_of(text: str | None) -> Decimal:
    """A fixed-point column as a number (NULL or unreadable: 0)."""
    try:
        value = Decimal(text or "0")
    except InvalidOperation:
        return Decimal(0)
    return value if value.is_finite() else Decimal(0)


def unknown_outcome(row: OrderRow) -> bool:
    """Whether an ``error`` row is one only the exchange can settle (later truth resolves it)."""
    if row.status is not OrderStatus.ERROR or row.kalshi_order_id is not None:
        return False
    message = row.error_message or ""
    return (
        message.startswith(OUTCOME_UNKNOWN_PREFIX)
        or message.startswith(NO_SUCH_ORDER_PREFIX)
        or message == CANCELLED_AT_SHUTDOWN
    )


def rank_of(row: OrderRow) -> Rank:
    """How far ``row``'s order has gone (a merge never lowers it)."""
    status = row.status
    if status is OrderStatus.PENDING:
        return Rank.PENDING
    if status is OrderStatus.ERROR:
        return Rank.UNKNOWN if unknown_outcome(row) else Rank.FINAL
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


__all__ = ["Rank", "decimal_of", "further_along", "rank_of", "unknown_outcome"]
