"""Behaviours of the lookups and of the stream's orders that no test guarded before issue 35: each
test here was seen failing with its behaviour broken on purpose.

Lookups run under Trio's virtual clock (no worker thread): their waits are the code's, not the
test's. The stream's messages are parsed from the published shapes, as in
tests/exchange/test_stream_orders.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from executor.clock import wall_ms
from executor.exchange.follow.reconcile import (
    RECONCILE_DELAYS_S,
    RECONCILE_TRIES,
    Reconciler,
    Verdict,
)
from executor.exchange.messages import USER_DATA_TIMESTAMP_PATH, ExchangeError
from executor.exchange.stream.client import poll_unless_streaming
from executor.exchange.stream.messages import StreamFill
from executor.exchange.stream.orders import StreamedOrders, StreamFeed
from executor.fake.book.orders import iso_time
from executor.recording.orders.terms import OUTCOME_UNKNOWN_PREFIX
from executor.recording.rows import OrderRowKind, OrderStatus
from tests.exchange.test_stream_orders import (
    CLIENT_ORDER_ID,
    NOW_MS,
    Sinks,
    book_order,
    maker_fill,
    order_update,
    resting_row,
    streamed,
)


@dataclass
class LateListing:
    """A reader that lists the order only ``late_s`` after it was made (Trio's clock), and
    notes the time of every listing it is asked for."""

    listed: dict[str, Any]
    late_s: float
    made_at: float = field(default_factory=trio.current_time)
    listings_at: list[float] = field(default_factory=list)
    failing: bool = False

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        if path == USER_DATA_TIMESTAMP_PATH:
            return {"as_of_time": iso_time(wall_ms())}
        if self.failing:
            raise ExchangeError("503 service_unavailable: busy", status=503)
        self.listings_at.append(trio.current_time() - self.made_at)
        late = trio.current_time() - self.made_at < self.late_s
        return {"orders": [] if late else [self.listed], "cursor": ""}


@pytest.fixture
def sinks() -> Sinks:
    """Fresh sinks per test."""
    return Sinks()


def unknown_row() -> Any:
    """The followed order's row as an unknown outcome (its answer timed out), sent just now."""
    return dataclasses.replace(
        resting_row(),
        kind=OrderRowKind.RESOLUTION,
        kalshi_order_id=None,
        status=OrderStatus.ERROR,
        error_message=f"{OUTCOME_UNKNOWN_PREFIX}read timed out",
        fill_count=None,
        remaining_count=None,
        requested_at_ms=wall_ms(),
        submitted_at_ms=wall_ms(),
    )


# ---------------------------------------------------------------- lookups


async def test_with_a_silent_stream_the_lookups_still_wait_and_find_a_late_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A stream is attached and reports nothing: the fire's lookups still wait between tries,
    so an order the exchange lists 1 s late is found (no waits: four tries at once, unknown)."""
    reader = LateListing(book_order("0").as_published(), late_s=1.0)
    sink = Sinks()
    reconciler = Reconciler(reader, sink, feed=StreamFeed())
    resolution = await reconciler.resolve(unknown_row(), "read timed out")
    assert resolution.verdict is Verdict.FOUND
    assert resolution.row.status is OrderStatus.ACCEPTED


async def test_the_fires_lookups_are_four_tries_over_three_and_a_half_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Never listed: the fire asks RECONCILE_TRIES (4) times, at 0, 0.5, 1.5 and 3.5 s."""
    reader = LateListing(book_order("0").as_published(), late_s=3600.0)
    reconciler = Reconciler(reader, Sinks(), feed=StreamFeed())
    resolution = await reconciler.resolve(unknown_row(), "read timed out")
    assert resolution.verdict is Verdict.UNKNOWN
    assert RECONCILE_TRIES == 4 and RECONCILE_DELAYS_S == (0.5, 1.0, 2.0)
    assert reader.listings_at == [0.0, 0.5, 1.5, 3.5]


# ---------------------------------------------------------------- the stream's orders


async def test_an_older_total_after_a_newer_one_never_lowers_the_fill_fence(
    sinks: Sinks,
) -> None:
    """The newer total (2 filled, at t+200) then an older one (1 filled, at t+100): a fill
    message at t+150 is inside the newer total and is not counted again (the gate hears of 2)."""
    orders = await streamed(sinks)
    await orders.apply(order_update("2", updated_ms=NOW_MS + 200))
    await orders.apply(order_update("1", updated_ms=NOW_MS + 100))
    await orders.apply(maker_fill("1", NOW_MS + 150))
    assert sum(sinks.fills) == 2.0
    assert sinks.rows[-1].fill_count == "2.00"


async def test_a_fill_naming_only_the_exchanges_order_id_is_matched(sinks: Sinks) -> None:
    """A fill message without our client_order_id is matched to its order by the exchange's
    order_id: the row and the gate move."""
    orders = await streamed(sinks)
    fill: StreamFill = maker_fill("1", NOW_MS + 10)
    await orders.apply(dataclasses.replace(fill, client_order_id=None))
    assert sinks.fills == [1.0]
    assert sinks.rows[-1].client_order_id == CLIENT_ORDER_ID
    assert sinks.rows[-1].fill_count == "1.00"


async def test_a_fill_on_an_order_of_unknown_outcome_is_counted_once_by_its_lookup(
    sinks: Sinks,
) -> None:
    """The stream's fill of an order whose answer was lost is left to the order's lookup, which
    tells the gate of the whole fill once (2 contracts, not 3)."""
    reader = LateListing(book_order("2").as_published(), late_s=0.0)
    reconciler = Reconciler(reader, sinks, fills=sinks)
    reconciler.follow(unknown_row())
    orders = StreamedOrders(reconciler, sinks)
    orders.trusted = True
    await orders.apply(maker_fill("1", NOW_MS + 10))
    await reconciler.poll_resting()
    assert sinks.fills == [2.0]
    assert sinks.rows[-1].fill_count == "2.00"


async def test_the_stream_is_trusted_only_when_its_reconciliation_answered_for_every_order(
    sinks: Sinks,
) -> None:
    """A reconnect's lookups that cannot ask the exchange leave the stream untrusted (the poll
    keeps following resting orders); the negative twin: answered, it is trusted."""
    reader = LateListing(book_order("0").as_published(), late_s=0.0, failing=True)
    reconciler = Reconciler(reader, sinks, fills=sinks)
    reconciler.follow(resting_row())
    orders = StreamedOrders(reconciler, sinks)
    assert not await orders.reconcile_followed()
    assert not orders.trusted
    reader.failing = False
    assert await orders.reconcile_followed()
    assert orders.trusted


async def test_while_the_stream_is_down_the_account_poll_follows_resting_orders(
    sinks: Sinks,
) -> None:
    """Untrusted, the poll asks about the resting order; trusted, it leaves it to the stream
    (the negative twin)."""
    reader = LateListing(book_order("1").as_published(), late_s=0.0)
    reconciler = Reconciler(reader, sinks, fills=sinks)
    reconciler.follow(resting_row())
    orders = StreamedOrders(reconciler, sinks)
    follow_resting = poll_unless_streaming(orders, reconciler)
    orders.trusted = True
    await follow_resting()
    assert reader.listings_at == []
    orders.untrust()
    await follow_resting()
    assert len(reader.listings_at) == 1 and sinks.fills == [1.0]


async def test_a_fill_dated_before_the_reconnects_reconciliation_changes_nothing(
    sinks: Sinks,
) -> None:
    """A maker fill dated after the reconnect's lookup of the order was read but before the
    reconciliation ended is taken as covered by it: no row change, the gate not told. The
    negative twin: a fill dated after the reconciliation is applied."""
    looked_ms = wall_ms() - 60_000  # the lookup's own fence: its word is as of this time
    reader = LateListing(book_order("0").as_published(), late_s=0.0)
    reconciler = Reconciler(reader, sinks, fills=sinks, clock=lambda: looked_ms)
    reconciler.follow(resting_row())
    orders = StreamedOrders(reconciler, sinks)
    assert await orders.reconcile_followed()
    rows_before = list(sinks.rows)
    await orders.apply(maker_fill("1", looked_ms + 30_000))
    assert (sinks.fills, sinks.rows, orders.fills_applied) == ([], rows_before, 0)
    assert reconciler.followed.get(CLIENT_ORDER_ID) == resting_row()
    await orders.apply(maker_fill("1", wall_ms() + 1_000))
    assert sinks.fills == [1.0] and orders.fills_applied == 1
    assert sinks.rows[-1].fill_count == "1.00"
