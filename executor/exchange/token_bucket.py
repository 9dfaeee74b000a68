"""A token bucket with first-come-first-served waiters, on Trio's clock (DISPATCH.md §5).

Two ways in. :meth:`TokenBucket.acquire` is the order's: FIFO among orders, and without a
checkpoint when nobody waits and the tokens are there. :meth:`TokenBucket.acquire_behind` is for
everything else that draws on the same bucket (cancels, order-group calls): it queues behind
every order waiting, so a real order never waits behind a cancel or a lookup.
"""

from __future__ import annotations

from typing import Final

import trio
from trio.lowlevel import ParkingLot

BUCKET_CAPACITY: Final = 100.0
"""Rate-limit tokens the bucket holds when full (DISPATCH.md §5; Kalshi's Basic write tier)."""
BUCKET_REFILL_PER_S: Final = 100.0
"""Tokens added per second (DISPATCH.md §5): ten orders a second sustained, a burst of ten."""


class TokenBucket:
    """A token bucket with FIFO waiters, on Trio's clock.

    Orders queue on a ``trio.Lock``, which is fair (first come, first served); the holder sleeps
    until enough tokens have accrued. When nobody waits and tokens suffice, ``acquire`` takes them
    without a checkpoint, so an uncontended order does not yield the loop to other tasks.

    Attributes:
        waits: times a caller (of either kind) had to wait: for tokens, or behind an order.
        waited_s: seconds spent in those waits, added up.

    Cancellation: a cancelled waiter leaves the queue without taking anything.
    """

    def __init__(
        self, capacity: float = BUCKET_CAPACITY, refill_per_s: float = BUCKET_REFILL_PER_S
    ) -> None:
        if capacity <= 0 or refill_per_s <= 0:
            raise ValueError("token bucket capacity and refill rate must be positive")
        self.capacity = capacity
        self.refill_per_s = refill_per_s
        self._tokens = capacity
        self._updated: float | None = None
        self._lock = trio.Lock()
        self._behind = trio.Lock()
        self._orders_done = ParkingLot()
        self.waits = 0
        self.waited_s = 0.0

    @property
    def waiting(self) -> int:
        """Callers waiting for tokens now (orders and the rest)."""
        orders = self._lock.statistics()
        behind = self._behind.statistics()
        return orders.tasks_waiting + int(orders.locked) + behind.tasks_waiting + int(behind.locked)

    def available(self) -> float:
        """Tokens in the bucket now (after refilling for the time elapsed)."""
        now = trio.current_time()
        if self._updated is not None:
            elapsed = now - self._updated
            self._tokens = min(self.capacity, self._tokens + elapsed * self.refill_per_s)
        self._updated = now
        return self._tokens

    def try_acquire(self, tokens: float) -> bool:
        """Take ``tokens`` now if no order waits and they are there; False (nothing taken) if not.

        Raises:
            ValueError: more tokens than the bucket holds, or none.
        """
        self._check(tokens)
        if not self._lock.locked() and self.available() >= tokens:
            self._tokens -= tokens
            return True
        return False

    async def acquire(self, tokens: float) -> None:
        """Take ``tokens``, waiting in line behind earlier orders until they have accrued."""
        if self.try_acquire(tokens):
            return
        try:
            async with self._lock:
                missing = tokens - self.available()
                if missing > 0:
                    await self._sleep(missing / self.refill_per_s)
                    # Credit the wait; float rounding may leave a hair short, taken anyway.
                    self.available()
                self._tokens -= tokens
        finally:
            self._orders_done.unpark_all()

    async def acquire_behind(self, tokens: float) -> None:
        """Take ``tokens`` once no order is waiting and they have accrued (FIFO among these).

        Cancellation: a cancelled waiter leaves the queue without taking anything.
        """
        self._check(tokens)
        async with self._behind:
            while True:
                if self._lock.locked():
                    started = trio.current_time()
                    await self._orders_done.park()
                    self._count_wait(trio.current_time() - started)
                    continue
                missing = tokens - self.available()
                if missing <= 0:
                    self._tokens -= tokens
                    return
                await self._sleep(missing / self.refill_per_s)
                if not self._lock.locked():
                    self.available()
                    self._tokens -= tokens
                    return

    def _check(self, tokens: float) -> None:
        if not 0 < tokens <= self.capacity:
            raise ValueError(f"cannot take {tokens} tokens from a bucket of {self.capacity}")

    async def _sleep(self, seconds: float) -> None:
        started = trio.current_time()
        try:
            await trio.sleep(seconds)
        finally:
            self._count_wait(trio.current_time() - started)

    def _count_wait(self, seconds: float) -> None:
        self.waits += 1
        self.waited_s += seconds
