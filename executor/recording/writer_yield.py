"""The telemetry writer thread gives way to the event loop while its backlog is small (issue 34;
``executor serve --writer-priority yield``, the default).

On a CPU the loop's thread shares with the writer thread, the kernel lets the writer keep the CPU
for up to a scheduler tick (4 ms at ``HZ=250``) after the loop wakes: measured in the reference
burst, the loop sat runnable behind the writer for 1-5 ms with frames waiting
(docs/performance/notebook/ 2026-12-06). Lowering the writer's priority (``low``, ``idle``)
removes that, but for good: flat out, the writer then gets too little of the CPU and rows are
dropped, and an unprivileged thread cannot raise itself back.

So the writer does it itself. While a batch's rows are written in slices of
``YIELD_SLICE_ROWS`` (a few hundred microseconds of SQLite's work each), before each slice it looks
at the loop's thread (:class:`~executor.runtime.loop_watch.LoopWatch`): while that thread is
runnable, the writer sleeps ``YIELD_NAP_S`` at a time, so the loop has the CPU. It does so only
while the rows queued behind the batch are fewer than a quarter of the channel (a burst fits;
flat out the backlog grows past it and the writer writes as before, in whole batches), and for at
most ``YIELD_BUDGET_S`` a batch. Rows wait, none is lost to it: the channel's bound is what
counts drops, and yielding stops well before it.

A runnable loop thread on another CPU (it is running there) is given way to as well: the writer
cannot tell the two apart cheaply, and the price is only rows landing later while the backlog is
small.

Measured (docs/performance/notebook/ 2026-12-06, third pass): in the reference burst the loop
read without a pause over 1 ms in 58 of 60 bursts, both placements (44 of 60 paused before), and
a pipelining poller's ``wake_send`` p99 fell from ~1 ms to half the C++ port's; one connection
flat out kept 0.95-1.01x of its rows/s, and a real order's ``detect_wire`` p50 moved by at most
4%.

Cancellation: nothing here awaits; everything runs in the writer thread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final, Protocol

YIELD_SLICE_ROWS: Final = 64
"""Latency rows per pair of statements while yielding: ~0.4 ms of the writer's work at ~6.5 µs a
row, the longest the loop waits on the writer's CPU for the writer to look."""

YIELD_NAP_S: Final = 0.0003
"""One sleep of the writer while the loop's thread is runnable (seconds): each look at the loop
costs the writer ~1.3 µs, and the loop's CPU a wake-up when they share one."""

YIELD_BUDGET_S: Final = 0.05
"""The most a batch waits on the loop in all (seconds): a loop busy for longer than a burst
shares the CPU with the writer as it did before, so its rows are still written."""

YIELD_BELOW_SHARE: Final = 4
"""The writer yields only while the rows queued in the channel are fewer than its capacity over
this: a quarter of 8,192, far enough from the bound that a burst arriving while it yields is
not dropped."""

YIELD_BELOW_UNBOUNDED_ROWS: Final = 2048
"""The same bound for an unbounded channel (rows): a quarter of the service's 8,192."""


def yield_below(capacity: float) -> int:
    """The backlog (rows) from which the writer stops yielding: a share of a bounded channel's
    capacity; ``YIELD_BELOW_UNBOUNDED_ROWS`` for an unbounded one."""
    if math.isinf(capacity):
        return YIELD_BELOW_UNBOUNDED_ROWS
    return max(1, int(capacity) // YIELD_BELOW_SHARE)


class ThreadWatch(Protocol):
    """What the writer needs of :class:`~executor.runtime.loop_watch.LoopWatch`."""

    def runnable(self) -> bool: ...


class BatchYield:
    """Called by the writer thread before each slice of one batch: returns once the loop's thread
    is not runnable, the backlog has grown to ``below`` rows, or the batch's budget is spent."""

    def __init__(
        self,
        watch: ThreadWatch,
        backlog: Callable[[], int],
        below: int,
        *,
        budget_s: float = YIELD_BUDGET_S,
        nap_s: float = YIELD_NAP_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._watch = watch
        self._backlog = backlog
        self._below = below
        self._budget_s = budget_s
        self._nap_s = nap_s
        self._clock = clock
        self._sleep = sleep
        self._deadline: float | None = None

    def worth_slicing(self) -> bool:
        """True while the backlog is small enough to yield: a batch written when it is not goes
        in whole, as it would without yielding."""
        return self._backlog() < self._below

    def __call__(self) -> None:
        while self._backlog() < self._below and self._watch.runnable():
            now = self._clock()
            if self._deadline is None:
                self._deadline = now + self._budget_s
            elif now >= self._deadline:
                return
            self._sleep(self._nap_s)


__all__ = [
    "YIELD_BELOW_SHARE",
    "YIELD_BELOW_UNBOUNDED_ROWS",
    "YIELD_BUDGET_S",
    "YIELD_NAP_S",
    "YIELD_SLICE_ROWS",
    "BatchYield",
    "ThreadWatch",
    "yield_below",
]
