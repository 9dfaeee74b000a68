"""Cancels that reach the book: this installation's resting orders cancelled with the V2 batch.

``DELETE /trade-api/v2/portfolio/events/orders/batched`` (``batch-cancel-orders-v2.yaml``) names
orders by the exchange's ``order_id`` (our rows' ``kalshi_order_id``); a row without one (an
order still in flight, or answered without an id) cannot be named and is left to the order
group's trigger. Each batch is sized so its whole cost fits the write bucket at once (the
published rule: a batch that does not fit is refused whole), at most ``MAX_BATCH_CANCEL`` orders,
and takes its tokens behind every waiting order (``RateLimits.take``).

What each answer makes of the order's row (:func:`canceled_row`): ``reduced_by`` is what was
left when the exchange cancelled it, so the fill is the order's count less that; the row becomes
``canceled`` (``filled`` when some of it had filled, as ``GET /portfolio/orders`` would say),
``remaining_count`` ``0.00``, ``fill_count`` the exchange's figure, and ``error_message`` says
why it was cancelled. When that fill differs from the row's (a fill the executor had not heard
of), the averages are not in the cancel's answer: the order is looked up
(``executor.exchange.follow.lookup``) and its row takes the exchange's columns whole; if the
lookup fails, the averages are NULL rather than wrong. An entry with an ``error`` (already
cancelled, already filled, unknown) leaves the row as it was: whoever follows the order learns
its end from the exchange.

Knows nothing of telemetry: each batch's corrected rows go to an ``OrderRowSink`` as the batch
answers (the order ledger's keeper in the executor, which merges them forward only).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Protocol

import orjson
import structlog

from executor.exchange.follow.lookup import ExchangeOrder, find_orders
from executor.exchange.follow.reconcile import MIN_TS_MARGIN_S
from executor.exchange.follow.reconcile_terms import CancelNotes, OrderRowSink
from executor.exchange.messages import BATCH_CANCEL_PATH, ExchangeError
from executor.exchange.rate_limits import RateLimits
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus

log = structlog.get_logger()

MAX_BATCH_CANCEL: Final = 20
"""Most orders named in one batch cancel. The published text says the maximum "scales with your
tier's write budget" without a number; 20 was Kalshi's long-standing batch limit (a guess that it
still holds everywhere), and the bucket may make it smaller (``RateLimits.items_per_batch``)."""

CANCELED_BY_PREFIX: Final = "canceled by this executor: "
"""How a row this executor cancelled begins its ``error_message`` (the reason follows)."""


class BookWriter(Protocol):
    """The part of ``executor.exchange.rest.RestClient`` (``ExchangeClient.rest``) cancels use."""

    @property
    def limits(self) -> RateLimits: ...

    async def send_json(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        items: int = 1,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]: ...

    async def get_json(
        self, path: str, params: Mapping[str, str] | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class CancelReport:
    """What one round of cancels did.

    Attributes:
        sent: orders named in a batch cancel.
        canceled: rows the exchange's answer ended (their corrected rows were queued).
        failed: orders the exchange did not cancel (an error entry, or a batch that failed).
        unnamed: rows without a ``kalshi_order_id``, which no cancel can name.
        rows: the corrected rows, as queued.
    """

    sent: int = 0
    canceled: int = 0
    failed: int = 0
    unnamed: int = 0
    rows: tuple[OrderRow, ...] = ()


def _decimal(text: object) -> Decimal | None:
    if not isinstance(text, str):
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def canceled_row(row: OrderRow, reduced_by: str, reason: str) -> OrderRow:
    """``row`` after the exchange cancelled its order with ``reduced_by`` contracts left.

    Raises:
        ExchangeError: ``reduced_by`` is not a number, or more than the order's count.
    """
    left, count = _decimal(reduced_by), _decimal(row.count)
    if left is None or count is None or not 0 <= left <= count:
        raise ExchangeError(f"batch cancel: reduced_by {reduced_by!r:.30} for a {row.count} order")
    filled = count - left
    known = _decimal(row.fill_count) or Decimal(0)
    same_fill = filled == known
    return dataclasses.replace(
        row,
        kind=OrderRowKind.RESOLUTION,
        status=OrderStatus.FILLED if filled > 0 else OrderStatus.CANCELED,
        error_message=f"{CANCELED_BY_PREFIX}{reason}",
        fill_count=f"{filled:.2f}",
        remaining_count="0.00",
        average_fill_price=row.average_fill_price if same_fill else None,
        average_fee_paid=row.average_fee_paid if same_fill else None,
    )


def _with_exchange_columns(row: OrderRow, order: ExchangeOrder) -> OrderRow:
    return dataclasses.replace(
        row,
        status=order.status,
        fill_count=order.fill_count,
        remaining_count=order.remaining_count,
        average_fill_price=order.average_fill_price,
        average_fee_paid=order.average_fee_paid,
    )


async def cancel_resting(
    writer: BookWriter, rows: Sequence[OrderRow], sink: OrderRowSink, *, reason: str
) -> CancelReport:
    """Cancel the orders of ``rows`` on the exchange and queue each cancelled one's row.

    Never raises for the exchange's sake: a batch that fails is logged and counted in ``failed``.

    Cancellation: the rows of every batch answered are written; a batch cut short may have
    reached the exchange, and its rows are left as they were, for whoever follows the orders to
    learn their end.
    """
    named = [row for row in rows if row.kalshi_order_id]
    unnamed = len(rows) - len(named)
    size = writer.limits.items_per_batch("DELETE", BATCH_CANCEL_PATH, MAX_BATCH_CANCEL)
    sent = failed = 0
    corrected: list[OrderRow] = []
    for start in range(0, len(named), size):
        batch = named[start : start + size]
        sent += len(batch)
        if isinstance(sink, CancelNotes):
            # Before the request: the stream's "canceled" can overtake the batch's answer.
            for row in batch:
                sink.note_cancel(row.client_order_id, f"{CANCELED_BY_PREFIX}{reason}")
        try:
            answers = await _cancel_batch(writer, batch)
        except ExchangeError as error:
            failed += len(batch)
            log.error("batch cancel failed", orders=len(batch), error=str(error))
            continue
        ended: list[OrderRow] = []
        for row in batch:
            answer = answers.get(row.kalshi_order_id or "")
            outcome = _outcome(row, answer, reason)
            if outcome is None:
                failed += 1
            else:
                ended.append(outcome)
        # Each batch's rows are written as it answers: a cut later (the exit's budget) leaves
        # no order cancelled on the exchange with an open row.
        for row in await _complete_fills(writer, ended):
            await sink.record_order(row)
            corrected.append(row)
    if rows:
        log.warning(
            "resting orders cancelled",
            reason=reason,
            orders=len(rows),
            sent=sent,
            canceled=len(corrected),
            failed=failed,
            without_order_id=unnamed,
        )
    return CancelReport(sent, len(corrected), failed, unnamed, tuple(corrected))


async def _cancel_batch(writer: BookWriter, batch: Sequence[OrderRow]) -> dict[str, Any]:
    """The answers of one batch cancel, by ``order_id``."""
    body = orjson.dumps({"orders": [{"order_id": row.kalshi_order_id} for row in batch]})
    payload = await writer.send_json("DELETE", BATCH_CANCEL_PATH, body, items=len(batch))
    entries = payload.get("orders")
    if not isinstance(entries, list):
        raise ExchangeError("batch cancel response: 'orders' is not a list")
    return {
        str(entry.get("order_id")): entry
        for entry in entries
        if isinstance(entry, dict) and entry.get("order_id") is not None
    }


def _outcome(row: OrderRow, answer: object, reason: str) -> OrderRow | None:
    """The row the exchange's answer for it makes, or None when the order was not cancelled."""
    fields = {"client_order_id": row.client_order_id, "kalshi_order_id": row.kalshi_order_id}
    if not isinstance(answer, dict):
        log.warning("batch cancel: no answer for the order", **fields)
        return None
    if answer.get("error") is not None:
        log.warning("batch cancel: the exchange did not cancel it", error=answer["error"], **fields)
        return None
    try:
        return canceled_row(row, str(answer.get("reduced_by")), reason)
    except ExchangeError as error:
        log.error("batch cancel: unreadable answer", error=str(error), **fields)
        return None


async def _complete_fills(writer: BookWriter, rows: list[OrderRow]) -> list[OrderRow]:
    """Rows whose fill moved unseen get the exchange's columns from one lookup per ticker."""
    unknown = [row for row in rows if row.fill_count != "0.00" and row.average_fill_price is None]
    by_ticker: dict[str, list[OrderRow]] = {}
    for row in unknown:
        by_ticker.setdefault(row.ticker, []).append(row)
    found: dict[str, ExchangeOrder] = {}
    for ticker, group in by_ticker.items():
        sent_s = min(row.submitted_at_ms or row.requested_at_ms for row in group) // 1000
        try:
            found.update(
                await find_orders(
                    writer, ticker, sent_s - MIN_TS_MARGIN_S, [row.client_order_id for row in group]
                )
            )
        except ExchangeError as error:
            log.warning("cancelled order lookup failed: averages left NULL", error=str(error))
    return [
        _with_exchange_columns(row, found[row.client_order_id])
        if row.client_order_id in found
        else row
        for row in rows
    ]


__all__ = [
    "CANCELED_BY_PREFIX",
    "MAX_BATCH_CANCEL",
    "BookWriter",
    "CancelReport",
    "cancel_resting",
    "canceled_row",
]
