"""A token bucket with first-come-first-served waiters, on Trio's clock (DISPATCH.md §5)."""

from __future__ import annotations

from typing import Final

import trio

BUCKET_CAPACITY: Final = 100.0
"""Rate-limit tokens the bucket holds when full (DISPATCH.md §5)."""
BUCKET_REFILL_PER_S: Final = 100.0
"""Tokens added per second (DISPATCH.md §5): ten orders a second sustained, a burst of ten."""


class TokenBucket:
    """A token bucket with FIFO waiters, on Trio's clock.

    Waiters queue on a ``trio.Lock``, which is fair (first come, first served); the holder sleeps
    until enough tokens have accrued. When nobody waits and tokens suffice, ``acquire`` takes them
    without a checkpoint, so an uncontended order does not yield the loop to other tasks.

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

    def available(self) -> float:
        """Tokens in the bucket now (after refilling for the time elapsed)."""
        now = trio.current_time()
        if self._updated is not None:
            elapsed = now - self._updated
            self._tokens = min(self.capacity, self._tokens + elapsed * self.refill_per_s)
        self._updated = now
        return self._tokens

    def try_acquire(self, tokens: float) -> bool:
        """Take ``tokens`` now if nobody waits and they are there; False (nothing taken) if not.

        Raises:
            ValueError: more tokens than the bucket holds, or none.
        """
        if not 0 < tokens <= self.capacity:
            raise ValueError(f"cannot take {tokens} tokens from a bucket of {self.capacity}")
        if not self._lock.locked() and self.available() >= tokens:
            self._tokens -= tokens
            return True
        return False

    async def acquire(self, tokens: float) -> None:
        """Take ``tokens``, waiting in line behind earlier callers until they have accrued."""
        if not 0 < tokens <= self.capacity:
            raise ValueError(f"cannot take {tokens} tokens from a bucket of {self.capacity}")
        if self.try_acquire(tokens):
            return
        async with self._lock:
            missing = tokens - self.available()
            if missing > 0:
                await trio.sleep(missing / self.refill_per_s)
                # Credit the wait; float rounding may leave a hair short, which is taken anyway.
                self.available()
            self._tokens -= tokens
