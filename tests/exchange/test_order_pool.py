"""The order pool's upkeep, with stand-in connections on a virtual clock: exactly its size, stale
connections retired only once stale, and a connection returned after the pool closed is closed.

The stand-ins have what the pool reads of an ``OrderConnection`` (``closed``, ``idle_since``,
``idle_is_dead()``, ``close()``), so no TLS is involved and the clock can be jumped freely.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from executor.exchange.orders.pool import CHECK_INTERVAL_S, REFRESH_AFTER_IDLE_S, OrderPool

SIZE = 3


class StandInConnection:
    """A connection that is alive until closed."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False
        self.idle_since = trio.current_time()

    def idle_is_dead(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class Opened:
    """Every stand-in the pool opened, in order."""

    def __init__(self) -> None:
        self.connections: list[StandInConnection] = []

    async def __call__(self, number: int) -> Any:
        await trio.lowlevel.checkpoint()
        connection = StandInConnection(number)
        self.connections.append(connection)
        return connection

    @property
    def open(self) -> list[StandInConnection]:
        return [connection for connection in self.connections if not connection.closed]


@asynccontextmanager
async def maintained_pool() -> AsyncIterator[tuple[OrderPool, Opened]]:
    """A filled pool of ``SIZE`` with its upkeep task running."""
    opened = Opened()
    pool = OrderPool(opened, size=SIZE)
    await pool.fill()
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.maintain)
        yield pool, opened
        pool.close()


async def order(pool: OrderPool, holding_s: float) -> None:
    """One order: check a connection out, hold it for ``holding_s``, check it back in as a
    successful order leaves it (idle from now)."""
    connection: Any = await pool.checkout()
    await trio.sleep(holding_s)
    connection.idle_since = trio.current_time()
    pool.checkin(connection)


async def test_orders_one_after_another_leave_exactly_the_pools_size(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ten orders in a row, each held while the upkeep task looks at the pool, leave 3
    connections open (not one more per order) and open none beyond the first 3."""
    async with maintained_pool() as (pool, opened):
        for _ in range(10):
            await order(pool, holding_s=CHECK_INTERVAL_S * 1.5)
        await trio.sleep(CHECK_INTERVAL_S * 2)
        assert (pool.idle, len(opened.open), len(opened.connections)) == (SIZE, SIZE, SIZE)


async def test_a_connection_an_order_discarded_is_replaced_to_the_size(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The negative twin: an order that closes its connection leaves 3 open again after the
    upkeep ran (one replacement opened), so the size is kept from below as well as above."""
    async with maintained_pool() as (pool, opened):
        connection: Any = await pool.checkout()
        connection.close()
        pool.checkin(connection)
        await trio.sleep(CHECK_INTERVAL_S * 2)
        assert (pool.idle, len(opened.open), len(opened.connections)) == (SIZE, SIZE, SIZE + 1)


async def test_an_idle_connection_is_retired_only_past_its_refresh_age(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An idle connection survives until it has been idle longer than the refresh age, then is
    closed and replaced (the pool stays at its size throughout)."""
    async with maintained_pool() as (pool, opened):
        first = list(opened.connections)
        await trio.sleep(REFRESH_AFTER_IDLE_S - 2 * CHECK_INTERVAL_S)
        assert not any(connection.closed for connection in first)
        assert len(opened.connections) == SIZE
        await trio.sleep(4 * CHECK_INTERVAL_S)
        assert all(connection.closed for connection in first)
        assert (pool.idle, len(opened.open)) == (SIZE, SIZE)


async def test_a_connection_in_use_past_the_refresh_age_is_judged_by_its_idle_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A connection whose order just ended is idle from then: it is kept although it was opened
    longer than the refresh age ago."""
    async with maintained_pool() as (pool, _opened):
        connection: Any = await pool.checkout()
        await trio.sleep(REFRESH_AFTER_IDLE_S + 5 * CHECK_INTERVAL_S)
        connection.idle_since = trio.current_time()
        pool.checkin(connection)
        await trio.sleep(2 * CHECK_INTERVAL_S)
        assert not connection.closed
        assert pool.idle == SIZE


async def test_a_connection_checked_in_after_the_pool_closed_is_closed() -> None:
    """An order that ends after shutdown closed the pool gives back a connection that is closed,
    not kept idle in a closed pool."""
    opened = Opened()
    pool = OrderPool(opened, size=SIZE)
    await pool.fill()
    connection: Any = await pool.checkout()
    pool.close()
    assert not connection.closed
    pool.checkin(connection)
    assert connection.closed
    assert pool.idle == 0
