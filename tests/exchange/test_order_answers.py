"""What an order's answer means (DISPATCH.md §4 step 6 as amended for issue 21).

A good_till_canceled answer with nothing filled and nothing remaining was cancelled at placement;
a 2xx answer without an order object says nothing of the order, so it is looked up, never taken
for a fill. The fire path runs with in-test stand-ins (``tests.support.order_fakes``) and a
reconciler over a scripted reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
import pytest
import trio

from executor.clock import wall_ms
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.messages import USER_DATA_TIMESTAMP_PATH
from executor.exchange.orders.dispatcher import OrderPolicy, order_status
from executor.fake.book.orders import iso_time
from executor.fire.path import FireOutcome
from executor.recording.orders.terms import (
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
)
from executor.recording.rows import OrderRow, OrderStatus
from tests.exchange.test_lookups import LISTED_FILL
from tests.exchange.test_order_path import order_rows, wake
from tests.support.order_fakes import FakePlacer, order_harness

GTC = "good_till_canceled"
NO_ORDER = {"code": "deprecated_v1_order_endpoint", "message": "switch", "fill_count": "1.00"}
"""A 2xx body without an order (Kalshi has answered so); its fill count is not an order's."""


class ListingReader:
    """A reader whose data timestamp is a minute ahead of now (it covers every send) and whose
    listing is what ``listed()`` returns when asked."""

    def __init__(self, listed: Callable[[], list[dict[str, Any]]]) -> None:
        self._listed = listed

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        if path == USER_DATA_TIMESTAMP_PATH:
            return {"as_of_time": iso_time(wall_ms() + 60_000)}
        return {"orders": self._listed(), "cursor": ""}


def sent_id(placer: FakePlacer) -> str:
    """The client_order_id of the last order the placer was sent."""
    return str(orjson.loads(placer.bodies[-1])["client_order_id"])


@pytest.mark.parametrize(
    ("remaining", "status"),
    [("0.00", OrderStatus.CANCELED), ("3.00", OrderStatus.ACCEPTED), (None, OrderStatus.ACCEPTED)],
)
def test_a_gtc_answer_with_nothing_filled_or_remaining_is_canceled(
    remaining: str | None, status: OrderStatus
) -> None:
    """Issue 21 item 2: fill 0 and remaining 0 on a good_till_canceled order is ``canceled``
    (cancelled at placement); contracts remaining, or not said, is ``accepted``."""
    response: dict[str, Any] = {"order_id": "o", "fill_count": "0.00"}
    if remaining is not None:
        response["remaining_count"] = remaining
    assert order_status(response, GTC) is status


@pytest.mark.parametrize(("remaining", "followed"), [("0.00", 0), ("3.00", 1)])
async def test_a_gtc_order_cancelled_at_placement_is_final_and_not_followed(
    remaining: str, followed: int
) -> None:
    """Issue 21 item 2 through the fire: the row says ``canceled`` and the poll does not follow
    it; its twin (3 contracts remaining) is ``accepted`` and followed."""
    response = {"order_id": "o-1", "fill_count": "0.00", "remaining_count": remaining}
    placer = FakePlacer([], response=response)
    async with order_harness(placer=placer, policy=OrderPolicy(time_in_force=GTC)) as harness:
        reconciler = Reconciler(ListingReader(list), harness.sink)
        harness.orders.dispatcher.reconciler = reconciler
        await harness.fire_path.fire(wake())
    _, resolution = order_rows(harness.sink.orders)
    expected = OrderStatus.CANCELED if followed == 0 else OrderStatus.ACCEPTED
    assert resolution.status is expected
    assert reconciler.orders_open == followed


async def test_a_2xx_without_an_order_is_looked_up_and_corrected_never_filled_by_it() -> None:
    """A 201 carrying an error object (and a bogus fill count): the row is first "outcome
    unknown", then the exchange's truth (filled, its id and fill); the fire is no dispatch
    error."""
    placer = FakePlacer([], response=NO_ORDER)
    async with order_harness(placer=placer) as harness:
        listing = ListingReader(lambda: [{**LISTED_FILL, "client_order_id": sent_id(placer)}])
        harness.orders.dispatcher.reconciler = Reconciler(listing, harness.sink)
        outcome = await harness.fire_path.fire(wake())
    assert outcome is FireOutcome.FIRED
    _, unknown, corrected = order_rows(harness.sink.orders)
    assert unknown.status is OrderStatus.ERROR and unknown.fill_count is None
    assert unknown.error_message is not None
    assert unknown.error_message.startswith(OUTCOME_UNKNOWN_PREFIX + "answered without an order")
    assert (corrected.status, corrected.kalshi_order_id) == (OrderStatus.FILLED, "k-1")
    assert corrected.fill_count == "3.00"
    assert corrected.error_message is not None
    assert corrected.error_message.startswith(RECONCILED_PREFIX + "answered without an order")


async def test_a_2xx_without_an_order_the_exchange_lacks_is_an_error_not_a_fill() -> None:
    """The twin: the exchange does not have the order, so the row ends ``error`` "no such
    order", with no fill from the answer, and the fire counts a dispatch error."""
    placer = FakePlacer([], response=NO_ORDER)
    async with order_harness(placer=placer) as harness:
        harness.orders.dispatcher.reconciler = Reconciler(ListingReader(list), harness.sink)
        outcome = await harness.fire_path.fire(wake())
    assert outcome is FireOutcome.DISPATCH_ERROR
    rows: list[OrderRow] = order_rows(harness.sink.orders)
    assert all(row.status is not OrderStatus.FILLED and row.fill_count is None for row in rows)
    assert rows[-1].error_message is not None
    assert rows[-1].error_message.startswith(NO_SUCH_ORDER_PREFIX + "answered without an order")
