"""What the stream's messages change (``executor.exchange.stream.orders``), without a socket.

A real :class:`Reconciler` follows one resting good_till_canceled order; its rows and the risk
gate's fills go to lists. The messages are parsed from the published shapes (what the fake
sends, built by ``executor.fake.stream_messages``), so the parser is exercised too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.stream.messages import (
    OtherMessage,
    StreamFill,
    StreamMessageError,
    StreamOrder,
    Subscribed,
    parse_stream_message,
    subscribe_command,
)
from executor.exchange.stream.orders import StreamedOrders, filled_row
from executor.fake.book.orders import BookOrder
from executor.fake.stream_messages import fill_message, user_order_message
from executor.recording.rows import LatencyRow, OrderRow, OrderStatus, Stage
from tests.support.asyncapi import validate_command, validate_server_message
from tests.support.rows import order_row

CLIENT_ORDER_ID = "c" * 32
ORDER_ID = "ee587a1c-8b87-4dcf-b721-9f6f790619fa"
NOW_MS = 1_800_000_000_000


@dataclass
class Sinks:
    """Rows, latency rows and fills, kept; a reader that must not be asked."""

    rows: list[OrderRow] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    fills: list[float] = field(default_factory=list)
    lookups: int = 0

    async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
        self.rows.append(row)

    def record(self, row: LatencyRow) -> None:
        self.latency.append(row)

    def record_fill(
        self, ticker: str, fill_count: float, now_ms: int, correlation_group: str
    ) -> None:
        self.fills.append(fill_count)

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        self.lookups += 1
        return {"orders": [], "cursor": ""}


def resting_row() -> OrderRow:
    """The row of a three-contract good_till_canceled order resting with nothing filled."""
    return order_row(
        client_order_id=CLIENT_ORDER_ID,
        kalshi_order_id=ORDER_ID,
        ticker="KXTEST-26JAN01-T1",
        time_in_force="good_till_canceled",
        post_only=1,
        status=OrderStatus.ACCEPTED,
        fill_count="0.00",
        remaining_count="3.00",
    )


def book_order(filled: str, status: str = "resting", updated_ms: int = NOW_MS) -> BookOrder:
    """The fake's record of that order with ``filled`` contracts filled as a maker."""
    done = Decimal(filled)
    return BookOrder(
        order_id=ORDER_ID,
        client_order_id=CLIENT_ORDER_ID,
        ticker="KXTEST-26JAN01-T1",
        book_side="bid",
        yes_price=Decimal("0.42"),
        initial=Decimal(3),
        filled=done,
        status=status,  # type: ignore[arg-type]
        taker_cost=Decimal(0),
        maker_cost=done * Decimal("0.42"),
        taker_fees=Decimal(0),
        maker_fees=Decimal(0),
        created_ms=NOW_MS - 1000,
        updated_ms=updated_ms,
        self_trade_prevention_type="taker_at_cross",
        exchange_index=0,
    )


def wire(message: dict[str, Any]) -> bytes:
    """``message`` as the fake sends it (a sid added), validated against the published API."""
    sent = {"type": message["type"], "sid": 7, **message}
    validate_server_message(sent)
    return orjson.dumps(sent)


def maker_fill(contracts: str, ts_ms: int) -> Any:
    """A parsed maker fill of ``contracts`` at ``ts_ms``."""
    order = book_order(contracts)
    return parse_stream_message(
        wire(fill_message(order, Decimal(contracts), is_taker=False, post_position=1, ts_ms=ts_ms))
    )


def order_update(filled: str, status: str = "resting", updated_ms: int = NOW_MS) -> Any:
    """A parsed ``user_order`` message of the order with ``filled`` contracts filled."""
    return parse_stream_message(wire(user_order_message(book_order(filled, status, updated_ms))))


@pytest.fixture
def sinks() -> Sinks:
    """Fresh sinks per test."""
    return Sinks()


async def streamed(sinks: Sinks, *, trusted: bool = True) -> StreamedOrders:
    """A stream applier over a reconciler following the resting row, trusted since long ago."""
    reconciler = Reconciler(sinks, sinks, fills=sinks)
    reconciler.follow(resting_row())
    orders = StreamedOrders(reconciler, sinks, clock_ms=lambda: NOW_MS + 5.5)
    if trusted:
        orders.trusted = True  # as after a reconciliation long before these messages
    return orders


def test_the_subscribe_command_is_the_published_one() -> None:
    """fill, user_orders and order_group_updates for every market, in the published command's
    shape."""
    command = subscribe_command(1)
    validate_command(command)
    channels = ["fill", "user_orders", "order_group_updates"]
    assert orjson.loads(command)["params"] == {"channels": channels}


def test_messages_parse_into_plain_values_and_bad_ones_raise() -> None:
    """A fill, a user_order and a subscribed reply parse; a fill without its count raises."""
    fill = maker_fill("1", NOW_MS)
    assert isinstance(fill, StreamFill) and fill.contracts == Decimal(1) and not fill.is_taker
    update = order_update("2")
    assert isinstance(update, StreamOrder) and update.order.fill_count == "2.00"
    assert update.ts_ms == NOW_MS
    reply = b'{"id":1,"type":"subscribed","msg":{"channel":"fill","sid":3}}'
    assert parse_stream_message(reply) == Subscribed("fill", 3)
    assert parse_stream_message(b'{"type":"ticker","sid":1,"msg":{}}') == OtherMessage("ticker")
    broken = orjson.loads(
        wire(
            fill_message(book_order("1"), Decimal(1), is_taker=False, post_position=1, ts_ms=NOW_MS)
        )
    )
    del broken["msg"]["count_fp"]
    with pytest.raises(StreamMessageError, match="count_fp"):
        parse_stream_message(orjson.dumps(broken))


async def test_a_maker_fill_moves_the_row_and_the_risk_gate_at_once(sinks: Sinks) -> None:
    """One contract filled: the row is filled 1 of 3, still followed, the gate told of 1, and
    a stream_row lag row is written from the exchange's ts_ms."""
    orders = await streamed(sinks)
    await orders.apply(maker_fill("1", NOW_MS))
    (row,) = sinks.rows
    assert (row.status, row.fill_count, row.remaining_count) == (OrderStatus.FILLED, "1.00", "2.00")
    assert row.average_fill_price == "0.4200"
    assert sinks.fills == [1.0]
    assert CLIENT_ORDER_ID in orders.reconciler.followed
    (lag,) = sinks.latency
    assert (lag.stage, lag.started_at_ms, lag.duration_ms) == (Stage.STREAM_ROW, NOW_MS, 5.5)
    assert orders.fills_applied == 1 and sinks.lookups == 0


async def test_the_lag_ends_when_the_row_is_queued_not_after_what_follows(
    sinks: Sinks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream_row lag is read when the filled row has been queued: the log line and the lag
    row's own making come after it and are not in it (a clock that jumps 40 ms once the log line
    is written)."""
    reconciler = Reconciler(sinks, sinks, fills=sinks)
    reconciler.follow(resting_row())
    clock = [float(NOW_MS + 3)]

    class LateLog:
        def info(self, *args: Any, **kwargs: Any) -> None:
            clock[0] += 40  # everything after the log line reads a later clock

    monkeypatch.setattr("executor.exchange.stream.orders.log", LateLog())
    orders = StreamedOrders(reconciler, sinks, clock_ms=lambda: clock[0])
    orders.trusted = True
    await orders.apply(maker_fill("1", NOW_MS))
    (lag,) = sinks.latency
    assert clock[0] == NOW_MS + 43  # the log line was written, after the lag was read
    assert lag.duration_ms == 3.0 and orders.last_lag_ms == 3.0


async def test_a_fill_then_its_order_total_counts_once(sinks: Sinks) -> None:
    """The fill applied first, the user_order total that includes it changes nothing more."""
    orders = await streamed(sinks)
    await orders.apply(maker_fill("1", NOW_MS))
    await orders.apply(order_update("1", updated_ms=NOW_MS))
    assert sinks.fills == [1.0]
    assert [row.fill_count for row in sinks.rows] == ["1.00"]


async def test_an_order_total_then_its_fill_counts_once(sinks: Sinks) -> None:
    """The total applied first, the fill it includes (no later than the total) is skipped."""
    orders = await streamed(sinks)
    await orders.apply(order_update("1", updated_ms=NOW_MS))
    await orders.apply(maker_fill("1", NOW_MS))
    assert sinks.fills == [1.0]
    assert orders.fills_applied == 0 and orders.orders_applied == 1


async def test_a_later_fill_after_a_total_still_counts(sinks: Sinks) -> None:
    """The negative twin: a fill later than the last total is new and is added."""
    orders = await streamed(sinks)
    await orders.apply(order_update("1", updated_ms=NOW_MS))
    await orders.apply(maker_fill("1", NOW_MS + 1))
    assert sinks.fills == [1.0, 1.0]
    assert sinks.rows[-1].fill_count == "2.00"


async def test_taker_fills_and_fills_before_the_stream_is_trusted_change_nothing(
    sinks: Sinks,
) -> None:
    """A taker fill is in the order's response; an untrusted stream counts no fill."""
    orders = await streamed(sinks)
    order = book_order("1")
    taker = parse_stream_message(
        wire(fill_message(order, Decimal(1), is_taker=True, post_position=1, ts_ms=NOW_MS))
    )
    await orders.apply(taker)
    orders.untrust()
    await orders.apply(maker_fill("1", NOW_MS))
    assert sinks.rows == [] and sinks.fills == []
    assert orders.fill_messages == 2


async def test_an_older_total_never_takes_a_row_back(sinks: Sinks) -> None:
    """A total of 1 after one of 2 (an older message) leaves the row at 2."""
    orders = await streamed(sinks)
    await orders.apply(order_update("2"))
    await orders.apply(order_update("1"))
    assert [row.fill_count for row in sinks.rows] == ["2.00"]
    assert sinks.fills == [2.0]


async def test_a_final_total_ends_the_following(sinks: Sinks) -> None:
    """Cancelled with one filled: the row says so and the order is no longer followed."""
    orders = await streamed(sinks)
    await orders.apply(order_update("1", status="canceled"))
    assert sinks.rows[-1].status is OrderStatus.FILLED
    assert sinks.rows[-1].remaining_count == "0.00"
    assert CLIENT_ORDER_ID not in orders.reconciler.followed


async def test_a_total_for_an_order_not_followed_is_kept_for_a_lookup(sinks: Sinks) -> None:
    """An unfollowed order's message answers known() and wakes a waiting lookup; forgotten
    when the stream drops."""
    orders = await streamed(sinks)
    orders.reconciler.followed.clear()
    assert orders.known(CLIENT_ORDER_ID) is None
    async with trio.open_nursery() as nursery:
        woke = trio.Event()

        async def waiter() -> None:
            await orders.wait([CLIENT_ORDER_ID], 3600)
            woke.set()

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        await orders.apply(order_update("0"))
        await woke.wait()
    known = orders.known(CLIENT_ORDER_ID)
    assert known is not None and known.resting
    orders.untrust()
    assert orders.known(CLIENT_ORDER_ID) is None


async def test_an_order_followed_after_its_message_is_caught_up(sinks: Sinks) -> None:
    """A total kept before the order was followed is applied once it is."""
    orders = await streamed(sinks)
    orders.reconciler.followed.clear()
    await orders.apply(order_update("1"))
    orders.reconciler.follow(resting_row())
    await orders.catch_up()
    assert sinks.fills == [1.0] and sinks.rows[-1].fill_count == "1.00"


def test_a_fill_reweights_the_averages() -> None:
    """Two contracts at 0.40 then one at 0.46: average 0.42; fees per contract likewise."""
    row = dataclasses.replace(
        resting_row(),
        fill_count="2.00",
        remaining_count="1.00",
        average_fill_price="0.4000",
        average_fee_paid="0.0000",
    )
    fill = StreamFill(
        "t",
        ORDER_ID,
        None,
        "KXTEST-26JAN01-T1",
        Decimal(1),
        Decimal("0.46"),
        Decimal("0.03"),
        False,
        NOW_MS,
    )
    after = filled_row(row, fill)
    assert (after.fill_count, after.remaining_count) == ("3.00", "0.00")
    assert (after.average_fill_price, after.average_fee_paid) == ("0.4200", "0.0100")
