"""What a source tells the order ledger: an :class:`Observation` of one order, who made it
(:class:`Source`), and what merging it changed (:class:`Change`).

Plain values, no I/O: the order's answer, the lookups, the stream, the cancels and start-up each
build observations (:func:`observed_row` turns a whole row a source built into one) and hand them
to the ledger (``executor.exchange.follow.ledger``), which merges them forward only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from decimal import Decimal

from executor.recording.rows import OrderRow, OrderStatus


class Source(enum.StrEnum):
    """Who saw what an observation says (for the log line and the tests)."""

    ANSWER = "answer"
    LOOKUP = "lookup"
    STREAM_FILL = "stream_fill"
    STREAM_ORDER = "stream_order"
    CANCEL = "cancel"
    JOURNAL = "journal"
    ADOPTION = "adoption"


@dataclass(frozen=True, slots=True)
class Observation:
    """What one source says of one order.

    Attributes:
        client_order_id: the order.
        source: who says it.
        status: the row status it implies.
        fill_count: the order's total filled, as a fixed-point string (None: not said).
        remaining_count: contracts left on the book (None: not said).
        kalshi_order_id: the exchange's id, when known.
        average_fill_price / average_fee_paid: with ``fill_count``, when known.
        exchange_ts_ms: when the exchange said it (its clock; for a lookup, when it was read).
        error_message: the source's note for the row (None: keep the row's).
        trade_id / fill_added / fill_price / fill_fee: a single fill (a ``fill`` message)
            instead of a total; ``fill_fee`` is the fill's whole fee.
        counted: the risk gate learns this fill another way (start-up's corrected rows).
        row: the whole row the source built (the answer, a cancel): its other columns (times)
            are taken when its word is taken.
    """

    client_order_id: str
    source: Source
    status: OrderStatus
    fill_count: str | None = None
    remaining_count: str | None = None
    kalshi_order_id: str | None = None
    average_fill_price: str | None = None
    average_fee_paid: str | None = None
    exchange_ts_ms: int | None = None
    error_message: str | None = None
    trade_id: str | None = None
    fill_added: Decimal | None = None
    fill_price: Decimal | None = None
    fill_fee: Decimal | None = None
    counted: bool = False
    row: OrderRow | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """What one observation changed.

    Attributes:
        row: the order's row to write (None: nothing changed, or the order is not known).
        new_fill: contracts of fill to tell the risk gate now (0: none).
        final: the order reached a final state (it is no longer followed).
        known: the ledger knows the order (False: the observation was for nobody).
    """

    row: OrderRow | None = None
    new_fill: Decimal = Decimal(0)
    final: bool = False
    known: bool = True


def observed_row(row: OrderRow, source: Source = Source.ANSWER) -> Observation:
    """A whole row a source built (the answer, a cancel, the journal) as an observation."""
    return Observation(
        client_order_id=row.client_order_id,
        source=source,
        status=row.status,
        fill_count=row.fill_count,
        remaining_count=row.remaining_count,
        kalshi_order_id=row.kalshi_order_id,
        average_fill_price=row.average_fill_price,
        average_fee_paid=row.average_fee_paid,
        error_message=row.error_message,
        row=row,
    )


__all__ = ["Change", "Observation", "Source", "observed_row"]
