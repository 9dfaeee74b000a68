"""The order connections: opened and TLS-handshaken at start-up, kept warm, replaced when dead.

An order checks a connection out for exactly one request and response and checks it back in; a
connection that failed or was cancelled mid-order is closed by itself
(:class:`~executor.exchange.orders.connection.OrderConnection`) and never comes back. A background
task (:meth:`OrderPool.maintain`) keeps ``size`` connections open or in use: it replaces one as
soon as an order discarded it, looks at the idle ones every ``CHECK_INTERVAL_S`` (one ``poll`` each)
and retires one that has been idle longer than ``REFRESH_AFTER_IDLE_S``, so the next order finds a
live connection without paying for a handshake.

An order still checks the connection it takes (the same non-blocking ``poll``, a few µs): a
connection the exchange closed between two orders is found dead *before* anything is written on
it, and the order goes out on another, or on a fresh one opened within the connect budget. Never
after: once a byte is written, a broken connection is an ambiguous order, not a retry.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Final

import structlog
import trio

from executor.exchange.messages import ExchangeError, ExchangeTimeout
from executor.exchange.orders.connection import OrderConnection
from executor.exchange.orders.template import OrderTemplate

log = structlog.get_logger()

ORDER_CONNECTIONS: Final = 3
"""Connections kept for orders: the risk gate's default in-flight limit (2 dispatches) plus one,
so a connection being replaced never leaves an order without a warm one. An order that finds
none idle opens one more within its connect budget (counted as ``opened_on_demand``)."""
MAX_ORDER_CONNECTIONS: Final = 8
"""Most connections kept warm, whatever the in-flight limit (each costs a handshake at start-up
and every ``REFRESH_AFTER_IDLE_S``); orders beyond it open one on demand."""
CONNECT_TIMEOUT_S: Final = 1.0
"""Budget for opening a connection an order needs now (DISPATCH.md §5's connect budget)."""
BACKGROUND_CONNECT_TIMEOUT_S: Final = 3.0
"""Budget for a replacement opened in the background (the account poll's connect budget)."""
CHECK_INTERVAL_S: Final = 1.0
"""How often idle connections are looked at (seconds): one ``poll`` each, negligible."""
REFRESH_AFTER_IDLE_S: Final = 45.0
"""An idle connection older than this is replaced (seconds): a load balancer may drop idle
connections silently, and a fresh handshake in the background beats an order written into a
dead one. 45 s: under the common 60 s idle timeouts (a guess, as for the httpx pool)."""

Opener = Callable[[int], Awaitable[OrderConnection]]
"""Opens connection number ``n`` (TLS handshake done)."""


class OrderPool:
    """Warm order connections to one exchange.

    Args:
        opener: opens a connection (see :func:`tls_opener`).
        size: connections kept open or in use.

    Attributes:
        opened: connections opened in all; ``opened_on_demand`` of them by an order that found
            none idle; ``found_dead`` idle connections found closed or broken.
    """

    def __init__(self, opener: Opener, *, size: int = ORDER_CONNECTIONS) -> None:
        if size < 1:
            raise ValueError(f"order pool size must be >= 1, got {size}")
        self._opener = opener
        self.size = size
        self._idle: list[OrderConnection] = []  # most recently used last
        self._in_use = 0
        self._wake = trio.Event()
        self._closed = False
        self.opened = 0
        self.opened_on_demand = 0
        self.found_dead = 0

    @property
    def idle(self) -> int:
        """Connections open and waiting for an order."""
        return len(self._idle)

    async def fill(self) -> None:
        """Open connections until ``size`` are open (start-up: before the first order).

        Raises:
            OSError, ssl.SSLError, trio.TooSlowError: a connection could not be opened.
        """
        while not self._closed and len(self._idle) + self._in_use < self.size:
            with trio.fail_after(BACKGROUND_CONNECT_TIMEOUT_S):
                self._idle.append(await self._open())

    async def checkout(self) -> OrderConnection:
        """A live connection for one order: the most recently used idle one, else a new one.

        Raises:
            ExchangeTimeout: no idle connection was alive and a new one did not open within
                ``CONNECT_TIMEOUT_S`` (nothing was sent; not retried, nothing to reconcile).
            ExchangeError: no idle connection was alive and a new one failed to open (nothing
                was sent; retryable).

        Cancellation: nothing is checked out.
        """
        if self._closed:
            raise ExchangeError("the order connections are closed")
        connection = self.checkout_now()
        if connection is not None:
            return connection
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                connection = await self._open()
        except trio.TooSlowError:
            # A timeout, so never retried (DISPATCH.md §5; a fire already a second late is worse
            # than none), but a definite one: nothing was written, so nothing to reconcile.
            raise ExchangeTimeout(
                f"connect timed out after {CONNECT_TIMEOUT_S:g} s", maybe_placed=False
            ) from None
        except (OSError, ssl.SSLError) as error:
            raise ExchangeError(
                f"connection error: connect failed: {type(error).__name__}: {error}",
                maybe_placed=False,
            ) from None
        self.opened_on_demand += 1
        self._in_use += 1
        self._wake.set()
        return connection

    def checkout_now(self) -> OrderConnection | None:
        """The most recently used idle connection that is alive, or None (closed pool, none idle
        and alive): :meth:`checkout` without opening one. Cancellation: never checkpoints."""
        if self._closed:
            return None
        while self._idle:
            connection = self._idle.pop()
            if connection.idle_is_dead():
                self.found_dead += 1
                self._wake.set()
                continue
            self._in_use += 1
            return connection
        return None

    def checkin(self, connection: OrderConnection) -> None:
        """Give back a connection after its order; a closed one is replaced in the background."""
        self._in_use -= 1
        if self._closed:
            connection.close()
        elif connection.closed:
            self._wake.set()
        else:
            self._idle.append(connection)

    async def maintain(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep ``size`` connections, replacing dead and stale ones, until :meth:`close`.

        A replacement that cannot be opened is logged and tried again at the next interval; this
        task never raises for it.

        Cancellation: returns; :meth:`close` closes what is open.
        """
        task_status.started()
        while not self._closed:
            with trio.move_on_after(CHECK_INTERVAL_S):
                await self._wake.wait()
            self._wake = trio.Event()
            if self._closed:
                return
            self._retire_dead_and_stale()
            try:
                await self.fill()
            except (OSError, ssl.SSLError, trio.TooSlowError) as error:
                log.warning("order connection could not be replaced", error=repr(error))

    def _retire_dead_and_stale(self) -> None:
        now = trio.current_time()
        keep = []
        for connection in self._idle:
            if connection.idle_is_dead():
                self.found_dead += 1
            elif now - connection.idle_since > REFRESH_AFTER_IDLE_S:
                connection.close()
            else:
                keep.append(connection)
        self._idle = keep

    async def _open(self) -> OrderConnection:
        self.opened += 1
        return await self._opener(self.opened)

    def close(self) -> None:
        """Close every idle connection and stop :meth:`maintain` (those in use close when their
        order ends: :meth:`checkin` of a closed pool closes the connection)."""
        self._closed = True
        self._wake.set()
        for connection in self._idle:
            connection.close()
        self._idle.clear()


def tls_opener(host: str, port: int, context: ssl.SSLContext, template: OrderTemplate) -> Opener:
    """An :data:`Opener` of verified TLS connections to ``host:port``."""

    async def open_one(number: int) -> OrderConnection:
        return await OrderConnection.open(host, port, context, template, number)

    return open_one
