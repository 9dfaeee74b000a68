"""Why this executor cancelled an order stays on its row, whichever source reports the end first.

The stream's ``user_orders`` "canceled" can overtake the batch cancel's own answer (seen under
load at an orderly shutdown with ``--cancel-resting-on-exit``): the order is final before the
cancel's row arrives, so the ledger takes no later word. The cancel's reason is noted in the
ledger before the request is sent, and the first report of the order's end carries it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from executor.exchange.book.cancels import CANCELED_BY_PREFIX, cancel_resting
from executor.exchange.follow.ledger import OrderLedger
from executor.exchange.follow.ledger_keeper import LedgerKeeper
from executor.exchange.follow.observation import Observation, Source
from executor.exchange.follow.reconcile_terms import CollectedRows
from executor.exchange.rate_limits import RateLimits
from executor.recording.rows import OrderStatus
from tests.exchange.test_book_behaviours import CountingWriter
from tests.exchange.test_cancels import accepted_row

ORDER = "a" * 32
EXCHANGE_ID = "ex-1"
NOTE = f"{CANCELED_BY_PREFIX}executor shutdown"


def _said(status: OrderStatus, fill: str, remaining: str) -> Observation:
    """The stream's ``user_orders`` total for the order, with no word of why."""
    return Observation(
        client_order_id=ORDER,
        source=Source.STREAM_ORDER,
        status=status,
        fill_count=fill,
        remaining_count=remaining,
        kalshi_order_id=EXCHANGE_ID,
        exchange_ts_ms=1,
    )


def _resting_ledger() -> OrderLedger:
    ledger = OrderLedger()
    ledger.track(accepted_row(ORDER, EXCHANGE_ID), follow=True)
    return ledger


def test_a_noted_cancel_names_itself_on_the_streams_canceled_row() -> None:
    """A cancel noted before the stream's "canceled" arrives: the final row says who cancelled."""
    ledger = _resting_ledger()
    ledger.note_cancel(ORDER, NOTE)
    change = ledger.observe(_said(OrderStatus.CANCELED, "0.00", "0.00"))
    assert change.row is not None and change.final
    assert (change.row.status, change.row.error_message) == (OrderStatus.CANCELED, NOTE)


def test_a_partly_filled_order_ended_by_the_cancel_carries_the_note() -> None:
    """Two of three filled, then cancelled: ``filled`` with nothing left, and the cancel named."""
    ledger = _resting_ledger()
    ledger.note_cancel(ORDER, NOTE)
    change = ledger.observe(_said(OrderStatus.FILLED, "2.00", "0.00"))
    assert change.row is not None
    assert (change.row.fill_count, change.row.error_message) == ("2.00", NOTE)


def test_an_order_filled_whole_before_the_cancel_does_not_say_it_was_cancelled() -> None:
    """Negative twin: a note on an order that then filled whole leaves its row without it."""
    ledger = _resting_ledger()
    ledger.note_cancel(ORDER, NOTE)
    change = ledger.observe(_said(OrderStatus.FILLED, "3.00", "0.00"))
    assert change.row is not None
    assert change.row.error_message is None


def test_without_a_note_the_streams_canceled_row_says_nothing_of_why() -> None:
    """Negative twin: with no note, the stream's "canceled" is written as it came."""
    change = _resting_ledger().observe(_said(OrderStatus.CANCELED, "0.00", "0.00"))
    assert change.row is not None
    assert change.row.error_message is None


class _OvertakenWriter(CountingWriter):
    """A book writer whose batch cancel is overtaken by the stream: the order's "canceled"
    reaches the ledger while the request is out, then the batch answers as done."""

    def __init__(self, keeper: LedgerKeeper) -> None:
        super().__init__(RateLimits())
        self.keeper = keeper

    async def send_json(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        items: int = 1,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        await self.keeper.observe(_said(OrderStatus.CANCELED, "0.00", "0.00"))
        return await super().send_json(method, path, body, items=items, params=params)


async def test_the_cancels_note_their_reason_before_the_request_is_sent() -> None:
    """The stream's "canceled" overtaking the batch's answer: the one row written names the
    executor's cancel and its reason."""
    written = CollectedRows()
    keeper = LedgerKeeper(written)
    row = accepted_row(ORDER, EXCHANGE_ID)
    keeper.track(row, follow=True)
    writer = _OvertakenWriter(keeper)
    await cancel_resting(writer, [row], keeper.source(Source.CANCEL), reason="executor shutdown")
    assert [(r.status, r.error_message) for r in written.rows] == [(OrderStatus.CANCELED, NOTE)]
