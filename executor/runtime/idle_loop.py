"""Waiting for an idle event loop: work that only measures or prepares goes after everything else.

Two kinds of work on the fire path can wait without costing an order anything: signing a shadow
order (``executor.exchange.orders.shadow_lane``) and making a spare signature ahead
(``executor.exchange.orders.presign``). Both run in a worker process, so neither holds the loop; but
on a machine with two cores the worker's RSA work (~1 ms a signature) takes the CPU the connection
tasks, the client and a real order need, and during a burst of wakes that is exactly when they need
it (measured: a spare refilled after each shadow's take kept the worker busy for a whole burst,
docs/performance/notebook/ 2026-12-02). So that work waits until every task of the loop has been
blocked for ``IDLE_CUSHION_S``, which a burst never allows, within a bound its caller sets.

Trio's ``wait_all_tasks_blocked`` is the scheduler's own "idle" signal; it lives in
``trio.testing`` because tests are its usual caller, and it is public API. Importing
``trio.testing`` pulls in pytest where it is installed (~0.15 s), so a task that will wait here
calls :func:`load_idle_signal` as it starts (before the socket is reachable), never on first use.

Cancellation: :func:`until_the_loop_is_idle` checkpoints; a cancelled wait ends the caller's task
like any other cancellation.
"""

from __future__ import annotations

from typing import Final

import trio

IDLE_CUSHION_S: Final = 0.0002
"""How long every task must have been blocked before deferred work starts (seconds). Frames of a
burst arrive every few tens of microseconds, so a burst never leaves the loop idle this long. In
practice the wait is at least 1 ms: Trio waits for the cushion in ``epoll_wait``, whose timeout
CPython rounds up to whole milliseconds, and a timer of any task expiring in that millisecond
(a task sleeping 1 ms at a time) counts as activity. A quiet executor pays ~1 ms on the deferred
work (measured: 1.3 ms on an otherwise idle loop). A guess."""


def load_idle_signal() -> None:
    """Import ``trio.testing`` now, so the first wait for an idle loop does not pay for it."""
    import trio.testing  # noqa: F401


async def until_the_loop_is_idle(limit_s: float) -> None:
    """Wait until every other task has been blocked for ``IDLE_CUSHION_S``, at most ``limit_s``.

    A limit of zero or less returns after one checkpoint.
    """
    from trio.testing import wait_all_tasks_blocked  # loaded by load_idle_signal

    if limit_s <= 0:
        await trio.lowlevel.checkpoint()
        return
    with trio.move_on_after(limit_s):
        await wait_all_tasks_blocked(IDLE_CUSHION_S)
