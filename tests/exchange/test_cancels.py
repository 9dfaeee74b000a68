"""Cancels that reach the book and the order group's trigger and reset, over TLS on the fake."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from structlog.testing import capture_logs

from executor.exchange.book.cancels import CANCELED_BY_PREFIX, cancel_resting, canceled_row
from executor.exchange.book.order_group import OrderGroup, create_order_group
from executor.exchange.follow.reconcile_terms import CollectedRows
from executor.exchange.messages import BATCH_CANCEL_PATH, ExchangeError, OrderStamps, order_body
from executor.exchange.orders.transport import ExchangeClient
from executor.exchange.rate_limits import ApiLimits, BucketLimit
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from tests.support.orders import TICKER, spec, transport


def accepted_row(client_order_id: str, kalshi_order_id: str | None, count: int = 3) -> OrderRow:
    """The row of a good_till_canceled order that rests, as the dispatcher writes it."""
    return OrderRow(
        kind=OrderRowKind.RESOLUTION,
        correlation_id=f"c-{client_order_id[:4]}",
        client_order_id=client_order_id,
        kalshi_order_id=kalshi_order_id,
        ticker=TICKER,
        correlation_group=None,
        outcome_side="yes",
        count=f"{count}.00",
        price_dollars="0.4200",
        time_in_force="good_till_canceled",
        self_trade_prevention_type="taker_at_cross",
        post_only=1,
        status=OrderStatus.ACCEPTED,
        error_message=None,
        fill_count="0.00",
        remaining_count=f"{count}.00",
        average_fill_price=None,
        average_fee_paid=None,
        requested_at_ms=1_700_000_000_000,
        submitted_at_ms=1_700_000_000_001,
        acknowledged_at_ms=1_700_000_000_050,
    )


async def rest(client: ExchangeClient, name: str, group: str | None = None) -> OrderRow:
    """Place a resting three-contract order and return its row."""
    body = order_body(spec(name * 32, time_in_force="good_till_canceled", order_group_id=group))
    answer = await client.place_order(body, OrderStamps(), dry_run=False)
    return accepted_row(name * 32, answer["order_id"])


def batch_cancels(exchange: FakeExchange) -> int:
    """Batch cancel requests the fake received."""
    return sum(request.path == BATCH_CANCEL_PATH for request in exchange.received)


async def test_three_resting_orders_are_cancelled_and_their_rows_say_canceled(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """One batch: none rests on the fake any more, and each row is canceled with the fill the
    exchange gives (0 filled, 0 remaining) and why."""
    async with transport(fake_exchange, fake_credentials) as client:
        rows = [await rest(client, name) for name in "abc"]
        sink = CollectedRows()
        report = await cancel_resting(client.rest, rows, sink, reason="kill switch engaged: test")
    assert (report.sent, report.canceled, report.failed) == (3, 3, 0)
    assert batch_cancels(fake_exchange) == 1
    assert {order.status for order in fake_exchange.book.values()} == {"canceled"}
    assert [(row.status, row.fill_count, row.remaining_count) for row in sink.rows] == [
        (OrderStatus.CANCELED, "0.00", "0.00")
    ] * 3
    assert sink.rows[0].error_message == CANCELED_BY_PREFIX + "kill switch engaged: test"


async def test_an_unseen_partial_fill_is_taken_from_the_exchange(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """One of three contracts filled without the row knowing: the row says filled, 1.00, with
    the exchange's average price (looked up, not left stale or guessed)."""
    async with transport(fake_exchange, fake_credentials) as client:
        row = await rest(client, "p")
        fake_exchange.fill_resting(row.client_order_id, "1")
        sink = CollectedRows()
        await cancel_resting(client.rest, [row], sink, reason="r")
    (written,) = sink.rows
    assert (written.status, written.fill_count, written.remaining_count) == (
        OrderStatus.FILLED,
        "1.00",
        "0.00",
    )
    assert written.average_fill_price == "0.4200"


async def test_an_order_the_exchange_does_not_cancel_keeps_its_row(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Already cancelled on the exchange: the answer's error leaves the row as it was (its
    follower learns the end), counted failed; a row without an exchange id is not sent."""
    async with transport(fake_exchange, fake_credentials) as client:
        gone = await rest(client, "g")
        fake_exchange.cancel_resting(gone.client_order_id)
        live = await rest(client, "l")
        unnamed = accepted_row("u" * 32, None)
        sink = CollectedRows()
        with capture_logs():
            report = await cancel_resting(client.rest, [gone, live, unnamed], sink, reason="r")
    assert (report.sent, report.canceled, report.failed, report.unnamed) == (2, 1, 1, 1)
    assert [row.client_order_id for row in sink.rows] == [live.client_order_id]


async def test_batches_fit_the_write_bucket(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A write bucket of 4 tokens and a cost of 2 an order: three cancels go in two batches."""
    async with transport(fake_exchange, fake_credentials) as client:
        rows = [await rest(client, name) for name in "xyz"]
        limits = ApiLimits(
            "tiny", BucketLimit(200, 200), BucketLimit(400, 4), costs={("DELETE", BATCHED): 2}
        )
        client.use_limits(limits)
        report = await cancel_resting(client.rest, rows, CollectedRows(), reason="r")
    assert (report.canceled, batch_cancels(fake_exchange)) == (3, 2)


BATCHED = "/portfolio/events/orders/batched"


def test_a_cancel_answer_that_cannot_be_right_is_refused() -> None:
    """reduced_by above the order's count, or not a number, is an error, not a row."""
    row = accepted_row("a" * 32, "o")
    assert canceled_row(row, "3.00", "r").status is OrderStatus.CANCELED
    for bad in ("4.00", "x", "-1"):
        with pytest.raises(ExchangeError):
            canceled_row(row, bad, "r")


async def test_a_triggered_group_refuses_its_orders_until_reset(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Created with a limit, an order rests in it; the trigger cancels it and refuses the next
    order (a definite 400, never retried), the reset lets one through again."""
    async with transport(fake_exchange, fake_credentials) as client:
        group_id = await create_order_group(client.rest, 25)
        assert fake_exchange.order_groups.groups[group_id].contracts_limit == Decimal(25)
        group = OrderGroup(client.rest, group_id, 25)
        resting = await rest(client, "r", group_id)
        assert await group.trigger("test") and group.triggered
        assert fake_exchange.book[resting.client_order_id].status == "canceled"
        stamps = OrderStamps()
        refused = order_body(spec("n" * 32, order_group_id=group_id))
        with pytest.raises(ExchangeError, match="order_group_triggered"):
            await client.place_order(refused, stamps, dry_run=False)
        assert stamps.attempts == 1
        assert await group.reset("test") and not group.triggered
        answer = await client.place_order(refused, OrderStamps(), dry_run=False)
    assert answer["fill_count"] == "3.00"
    assert (group.triggers, group.resets, group.failures) == (1, 1, 0)


async def test_a_group_the_exchange_does_not_know_is_a_counted_failure_not_an_exception(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A trigger the exchange refuses (404) returns False, is counted and logged at ERROR, and
    leaves the group as not triggered (the guard asks again)."""
    async with transport(fake_exchange, fake_credentials) as client:
        group = OrderGroup(client.rest, "no-such-group", 5)
        with capture_logs() as logs:
            assert not await group.trigger("test")
    assert (group.triggered, group.failures) == (False, 1)
    assert [entry["log_level"] for entry in logs] == ["error"]


def test_rows_are_replaced_whole_by_the_exchange_columns() -> None:
    """canceled_row keeps every column but the status, the fill columns and the message."""
    row = accepted_row("k" * 32, "o")
    written = canceled_row(row, "3.00", "why")
    unchanged = {field.name for field in dataclasses.fields(OrderRow)} - {
        "status",
        "error_message",
        "remaining_count",
    }
    assert all(getattr(written, name) == getattr(row, name) for name in unchanged)
